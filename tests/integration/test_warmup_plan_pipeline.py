"""warmup-plan on a real diffusers pipeline served at several resolutions with CFG on and off,
against torch's own record (issue 38).

The program: diffusers' PixArtAlphaPipeline (a DiT) from the tiny config of diffusers' own
tests, its transformer `compile()`d (aot_eager, dynamic=None), prompt embeddings passed in (no
text encoder). Warmup 16x16 and 24x16 (the height varies), live 16x16, 16x24 (a width warmup
never served), 24x32, then 16x16 with `guidance_scale=1.0`: CFG off, so the pipeline sends
batch 1 where CFG on batches cond and uncond as 2. Torch's record (a
`torch._dynamo.callback.on_compile_start` callback in the program, with the request and step
it started in): 0/0 and 0/1 in warmup, then 0/2 at live request 1 step 0 and 0/3 at live
request 3 step 0. diag's plan: 16x16, then 24x32 (height and width change together, and the
token count), then 16x16 again *with guidance_scale=1.0* on its own (Dynamo specialises sizes
0 and 1, so no dynamic batch covers it). Replayed through diag.api.warmup_requests() and
live_requests(), which hand the program each request's call arguments: torch compiles three
times, all in warmup, and nothing live.

Needs `transformers` (diffusers' PixArt pipeline imports it; nothing of it runs) and skips
without it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.warmup.forms import render
from diag.warmup.plan import GENERALISE, SPECIALISE, VARIANT, plan_warmup

from .support import PYTHON, diag_record

PROGRAM = """import json

import torch
import torch._dynamo.callback
from diffusers import AutoencoderKL, DDIMScheduler, PixArtAlphaPipeline, PixArtTransformer2DModel

import diag.api as diag

WARMUP = [((16, 16), {}), ((24, 16), {})]
LIVE = [((16, 16), {}), ((16, 24), {}), ((24, 32), {}), ((16, 16), {"guidance_scale": 1.0})]
COMMON = {"num_inference_steps": 2, "guidance_scale": 4.5}

torch.manual_seed(0)
transformer = PixArtTransformer2DModel(
    sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=3,
    caption_channels=32, in_channels=4, cross_attention_dim=24, out_channels=8,
    attention_bias=True, activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
    norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
).eval()
vae = AutoencoderKL(
    sample_size=16, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
    latent_channels=4, norm_num_groups=1, down_block_types=("DownEncoderBlock2D",),
    up_block_types=("UpDecoderBlock2D",),
).eval()
pipe = PixArtAlphaPipeline(
    tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=DDIMScheduler()
)
pipe.set_progress_bar_config(disable=True)
pipe.transformer.compile(backend="aot_eager", dynamic=None)

# Torch's own record: every compile Dynamo starts, with the request and step it started in.
where = {"phase": "warmup", "request": None, "step": 0}
record = []


@torch._dynamo.callback.on_compile_start
def _compile_started(args):
    record.append({"compile_id": str(args.compile_id), **where})


prompt = torch.randn(1, 8, 32)
negative = torch.randn(1, 8, 32)
mask = torch.ones(1, 8)


def serve(index, shape, params, phase):
    where.update(phase=phase, request=index, step=0)

    def step_done(step, timestep, latents):
        where["step"] = step + 1

    arguments = {
        "prompt_embeds": prompt, "prompt_attention_mask": mask, "negative_prompt": None,
        "negative_prompt_embeds": negative, "negative_prompt_attention_mask": mask,
        "output_type": "pt", "use_resolution_binning": False, "callback": step_done,
        "callback_steps": 1, "generator": torch.Generator().manual_seed(0), **COMMON,
    }
    arguments.update(params)  # the recorded call's own numbers (guidance_scale=1.0: CFG off)
    images = pipe(height=shape[0], width=shape[1], **arguments).images
    print(phase, index, shape, params, tuple(images.shape), flush=True)


with torch.no_grad():
    with diag.phase("warmup"):
        for index, (shape, params) in enumerate(diag.warmup_requests(WARMUP)):
            serve(index, shape, params, "warmup")
    for index, (shape, params) in enumerate(diag.live_requests(LIVE)):
        serve(index, shape, params, "live")
with open("torch_record.json", "w") as out:
    json.dump(record, out)
"""


def _torch_record(folder: Path) -> list[dict[str, object]]:
    record: list[dict[str, object]] = json.loads((folder / "torch_record.json").read_text())
    return record


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace, list[dict[str, object]]]:
    pytest.importorskip("diffusers")
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("pixart")
    (folder / "serve.py").write_text(PROGRAM)
    proc = diag_record(folder / "t", PYTHON, "serve.py", options=("--profile", "none"), cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder, load_trace(folder / "t"), _torch_record(folder)


def test_torch_record_compiles_live_for_the_width_and_for_cfg_off(
    served: tuple[Path, Trace, list[dict[str, object]]],
) -> None:
    _, trace, torch_record = served
    assert [(c["compile_id"], c["phase"], c["request"], c["step"]) for c in torch_record] == [
        ("0/0", "warmup", 0, 0),
        ("0/1", "warmup", 1, 0),
        ("0/2", "live", 1, 0),
        ("0/3", "live", 3, 0),
    ]
    run = trace.compiled
    assert run is not None
    # diag's record holds the same compiles, where torch says they were.
    assert [(c.compile_id, c.phase, c.step) for c in run.compiles] == [
        ("0/0", "warmup", 0),
        ("0/1", "warmup", 0),
        ("0/2", "live", 0),
        ("0/3", "live", 0),
    ]
    live = {r.request_id: r for r in run.requests if r.phase == "live"}
    assert [(live[c.request_id].shape, (live[c.request_id].params or {}).get("guidance_scale"))
            for c in run.compiles if c.live] == [([16, 24], 4.5), ([16, 16], 1.0)]  # fmt: skip
    raws = [" ".join(g.raw for g in c.guards) for c in run.compiles if c.live]
    assert "size mismatch at index 3. expected 16, actual 24" in raws[0]
    assert "expected 2, actual 1" in raws[1]


def test_plan_gives_cfg_off_its_own_request(
    served: tuple[Path, Trace, list[dict[str, object]]],
) -> None:
    _, trace, _ = served
    plan = plan_warmup([trace])
    assert plan.dims == ["height", "width"]
    assert [(r.shape, r.role) for r in plan.requests] == [
        ([16, 16], SPECIALISE),
        ([24, 32], GENERALISE),
        ([16, 16], VARIANT),
    ]
    assert [r.params["guidance_scale"] for r in plan.requests if r.params] == [4.5, 4.5, 1.0]
    assert [c.covered_by for c in plan.live_compiles] == [1, 2]
    assert plan.unpreventable == []
    assert "(guidance_scale=1.0)" in (plan.requests[2].like or "")
    form = render(plan, "diffusers")
    assert form.startswith("WARMUP_SHAPES = [(16, 16), (24, 32)]")
    assert "guidance_scale=1.0" in form


def test_verify_replays_cfg_off_in_warmup_and_nothing_compiles_live(
    served: tuple[Path, Trace, list[dict[str, object]]],
) -> None:
    folder, trace, _ = served
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "warmup-plan", str(trace.path), "-o", str(folder / "replay"),
         "--verify", "--", PYTHON, "serve.py"],
        capture_output=True, text=True, timeout=600, cwd=folder, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "live compiles: 0 (0 expected)" in proc.stdout
    assert "16x16 (guidance_scale=1.0): every request of the plan" in proc.stdout
    # Torch's record of the replay: three compiles, all in warmup, the third for CFG off.
    assert [(c["compile_id"], c["phase"], c["request"]) for c in _torch_record(folder)] == [
        ("0/0", "warmup", 0),
        ("0/1", "warmup", 1),
        ("0/2", "warmup", 2),
    ]
    replay = load_trace(folder / "replay").compiled
    assert replay is not None
    assert [c for c in replay.compiles if c.live] == []
    assert [(r.shape, (r.params or {}).get("guidance_scale")) for r in replay.requests] == [
        ([16, 16], 4.5),
        ([24, 32], 4.5),
        ([16, 16], 1.0),
        ([16, 16], 4.5),
        ([16, 24], 4.5),
        ([24, 32], 4.5),
        ([16, 16], 1.0),
    ]
