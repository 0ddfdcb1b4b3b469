"""`diag record --warmup-requests N`: the first N requests of each process are warmup, whoever
reports them, with no change to the program.

The main case is a diffusers pipeline built from dummy components (diffusers' own tiny Wan2.1
test configs, prompt embeddings passed in, no text encoder) with
`transformer.compile_repeated_blocks()`, warmed by two pipeline calls before serving, as a
serving script is written. WanPipeline itself needs `transformers` for its text encoder, which
this project does not install; the pipeline here is a DiffusionPipeline with WanPipeline's
denoising loop over the same components.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .support import PYTHON, diag_record, events, manifest, of

WAN_SERVICE = """
import torch
from diffusers import (
    AutoencoderKLWan, DiffusionPipeline, FlowMatchEulerDiscreteScheduler, WanTransformer3DModel,
)


class WanT2V(DiffusionPipeline):
    def __init__(self, transformer, vae, scheduler):
        super().__init__()
        self.register_modules(transformer=transformer, vae=vae, scheduler=scheduler)

    @torch.no_grad()
    def __call__(self, prompt_embeds, height=32, width=32, num_frames=5, num_inference_steps=2,
                 generator=None):
        frames = (num_frames - 1) // 4 + 1
        latents = torch.randn(1, 16, frames, height // 8, width // 8, generator=generator)
        self.scheduler.set_timesteps(num_inference_steps)
        self.scheduler.set_begin_index(0)
        with self.progress_bar(total=num_inference_steps) as progress_bar:
            for t in self.scheduler.timesteps:
                noise = self.transformer(hidden_states=latents, timestep=t.expand(1),
                                         encoder_hidden_states=prompt_embeds, return_dict=False)[0]
                latents = self.scheduler.step(noise, t, latents, return_dict=False)[0]
                progress_bar.update()
        return self.vae.decode(latents, return_dict=False)[0]


torch.manual_seed(0)
vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                       temperal_downsample=[False, True, True])
torch.manual_seed(0)
transformer = WanTransformer3DModel(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16,
    out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
)
pipe = WanT2V(transformer, vae, FlowMatchEulerDiscreteScheduler(shift=7.0))
pipe.set_progress_bar_config(disable=True)
pipe.transformer.compile_repeated_blocks(backend="aot_eager", dynamic=None)
embeds = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(0))


def call(height, width):
    video = pipe(embeds, height=height, width=width, generator=torch.Generator().manual_seed(0))
    print("video", tuple(video.shape), round(float(video.double().sum()), 4), flush=True)


call(32, 32)  # warmup at two heights: the width stays static
call(48, 32)
call(32, 32)  # live: a warmed shape
call(32, 48)  # live: a width warmup never varied
"""

API_SERVICE = """
import torch
import diag.api as diag

f = torch.compile(lambda x: x.sin() * 2, backend="aot_eager")
with diag.phase("warmup"):
    with diag.request(shape=[4]):
        with diag.step():
            f(torch.ones(4))
for n in (4, 4, 6):
    with diag.request(shape=[n]):
        with diag.step():
            f(torch.ones(n))
print("done", flush=True)
"""


def _analyze(trace: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--json"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.skipif(
    importlib.util.find_spec("diffusers") is None, reason="diffusers is not installed (dev extra)"
)
def test_two_warmup_pipeline_calls_leave_one_live_compile_error(tmp_path: Path) -> None:
    app = tmp_path / "serve.py"
    app.write_text(textwrap.dedent(WAN_SERVICE))
    trace = tmp_path / "t"
    proc = diag_record(
        trace, PYTHON, str(app), options=("--warmup-requests", "2", "--profile", "none")
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("video (1, 3, 5, ") == 4
    assert manifest(trace)["options"]["warmup_requests"] == 2
    starts = of("request_start", events(trace))
    assert [(e["phase"], e["shape"]) for e in starts] == [
        ("warmup", [5, 32, 32]),
        ("warmup", [5, 48, 32]),
        ("live", [5, 32, 32]),
        ("live", [5, 32, 48]),
    ]
    assert "after warmup: 1 compile(s), 1 recompile(s)" in proc.stderr

    document = _analyze(trace)
    assert document["notices"] == []
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert len(errors) == 1, [f["title"] for f in errors]
    (error,) = errors
    assert error["analyzer"] == "live-compile"
    live_id = starts[3]["request_id"]
    assert error["data"].get("request_id", live_id) == live_id
    assert live_id in error["title"]
    text = error["title"] + " ".join(error["evidence"])
    assert "rotary_emb[0]._base.stride()[0]" in text
    assert "width" in error["fix"]


def test_warmup_requests_counts_every_reporter_and_explicit_warmup(tmp_path: Path) -> None:
    """diag.api's own warmup request is one of the N; the next request is the second."""
    app = tmp_path / "serve.py"
    app.write_text(textwrap.dedent(API_SERVICE))
    trace = tmp_path / "t"
    proc = diag_record(trace, PYTHON, str(app), options=("--warmup-requests", "2"))
    assert proc.returncode == 0, proc.stderr
    evs = events(trace)
    assert [e["phase"] for e in of("request_start", evs)] == ["warmup", "warmup", "live", "live"]
    # `phase` events are the program's own phase; a counted warmup request is one in its
    # request_start (the count is per request, in whichever thread serves it).
    assert [e["phase"] for e in of("phase", evs)] == ["warmup", "live"]
    live_compiles = [e for e in of("compile_end", evs) if e["phase"] == "live"]
    assert len(live_compiles) == 1  # n=6, the shape warmup never served
    assert live_compiles[0]["request_id"] == of("request_start", evs)[3]["request_id"]


def test_warmup_requests_rejects_what_is_not_a_count(tmp_path: Path) -> None:
    for bad in ("0", "-1", "two"):
        proc = diag_record(tmp_path / "t", PYTHON, "-c", "pass", options=("--warmup-requests", bad))
        assert proc.returncode == 2
        assert "--warmup-requests" in proc.stderr and "Traceback" not in proc.stderr
