"""Causes in the program's terms, checked against torch's own record (issue 35).

Each program is written the way users write them (diffusers models from the tiny configs of
diffusers' own tests, aot_eager, hand loops), recorded once per module. Torch's record, written
down before these tests from TORCH_LOGS=recompiles on the same programs:

1. DiT pipeline, warmup under torch.inference_mode(), live under no_grad: `0/0: tensor 'timestep'
   dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect), actual
   DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)`. Then a live request at
   guidance_scale=1.0 (no CFG batch): `tensor 'timestep' size mismatch at index 0. expected 2,
   actual 1`. Fixes tried on the program: warmup under no_grad (or serving under inference_mode)
   leaves no live recompile; warming up a guidance_scale=1.0 request too leaves none either.
2. A TeaCache-style wrapper compiled around a DiT transformer (`self.cnt` bumped each step,
   `self.num_steps` set per request): at each live step the entry compiled for that step in
   warmup fails on `self.num_steps == 2` (the request asked for 3); the others on `self.cnt`.
   Fix tried: compiling the wrapped transformer instead leaves no recompile;
   allow_unspec_int_on_nn_module=True still recompiles live (the code branches on the value).
3. A Flux transformer compiled whole (its forward is diffusers' functools.wraps decorator:
   Dynamo compiles `wrapper(self, *args, **kwargs)`) with `dynamic=False` and the program's
   `torch._dynamo.config.recompile_limit = 2`: `hit config.recompile_limit (2)` at the third
   size; a later request at the first size runs the entry compiled for it (a counting backend,
   torch's own record of which calls ran compiled graphs, says so).
4. Flux blocks compiled one by one, warmup at one resolution, live at another: both block classes
   recompile at the live request's step 0, each on `tensor 'hidden_states' size mismatch at
   index 1. expected 16, actual 36`: one root cause.
5. A hand loop over a DiT transformer, warmup under no_grad; one live request forgets no_grad,
   another runs under torch.autocast("cpu"): `0/1: GLOBAL_STATE changed: grad_mode` at the first
   (then, at its step 1, `0/1: tensor 'hidden_states' requires_grad mismatch` beside `0/0:
   GLOBAL_STATE changed: grad_mode`), and at the autocast request `0/3` with `0/2` and `0/1`
   failing on `grad_mode autocast(cpu)_enabled` and `0/0` on `autocast(cpu)_enabled` alone: the
   no_grad entry is nearest the call, autocast is what changed. Fix tried on the program: serving
   under no_grad and without autocast, as warmup ran, leaves no live recompile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.analyzers import run_analyzers
from diag.findings.grouping import group_findings
from diag.findings.model import Finding
from diag.trace.load import load_trace

from .support import PYTHON, diag_record

pytest.importorskip("diffusers")

DIT = """
import torch
import diag.api as diag
from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline
from diffusers.models import DiTTransformer2DModel

torch.manual_seed(0)
transformer = DiTTransformer2DModel(
    sample_size=8, num_layers=1, patch_size=2, attention_head_dim=8,
    num_attention_heads=2, in_channels=4, out_channels=8, num_embeds_ada_norm=1000,
)
vae = AutoencoderKL(
    sample_size=16, in_channels=3, out_channels=3, block_out_channels=(4,),
    layers_per_block=1, latent_channels=4, norm_num_groups=1,
    down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
)
pipe = DiTPipeline(transformer=transformer, vae=vae, scheduler=DDIMScheduler())
pipe.set_progress_bar_config(disable=True)
pipe.transformer.compile(backend="aot_eager")


def serve(scale):
    with diag.request(shape=[1, 4, 8, 8]):
        out = pipe(class_labels=[1], num_inference_steps=2, guidance_scale=scale,
                   output_type="pt", generator=torch.Generator().manual_seed(0))
    print(scale, round(float(torch.as_tensor(out.images).double().sum()), 4), flush=True)


with diag.phase("warmup"), torch.inference_mode():
    serve(4.0)
with torch.no_grad():
    serve(4.0)  # recompiles: inference tensors in warmup, normal ones here
    serve(1.0)  # recompiles: no CFG, the batch is 1
"""

TEACACHE = """
import torch
import diag.api as diag
from diffusers.models import DiTTransformer2DModel

torch.manual_seed(0)
model = DiTTransformer2DModel(
    sample_size=4, num_layers=1, patch_size=2, attention_head_dim=8,
    num_attention_heads=1, in_channels=4, out_channels=8, num_embeds_ada_norm=1000,
).eval()


class TeaCache(torch.nn.Module):
    def __init__(self, transformer):
        super().__init__()
        self.transformer = transformer
        self.cnt = 0
        self.num_steps = 0

    def forward(self, x, t, labels):
        out = self.transformer(x, timestep=t, class_labels=labels).sample
        if self.cnt == 0 or self.cnt == self.num_steps - 1:
            out = out * 1.0
        self.cnt += 1
        if self.cnt == self.num_steps:
            self.cnt = 0
        return out


tea = TeaCache(model)
tea.compile(backend="aot_eager")
labels = torch.tensor([1])


def serve(num_steps, steps):
    tea.num_steps = num_steps
    x = torch.randn(1, 4, 4, 4)
    with diag.request(shape=[1, 4, 4, 4]), torch.no_grad():
        for i in range(steps):
            with diag.step():
                x = x - 0.01 * tea(x, torch.tensor([999 - i]), labels)[:, :4]


with diag.phase("warmup"):
    serve(2, 2)
serve(3, 2)
"""

FLUX = """
import json, sys
import torch
import diag.api as diag
from diffusers import FluxTransformer2DModel
from torch._dynamo.backends.registry import lookup_backend

MODE = sys.argv[1]
torch.manual_seed(0)
model = FluxTransformer2DModel(
    patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
    num_attention_heads=1, joint_attention_dim=16, pooled_projection_dim=16,
    axes_dims_rope=[2, 2, 4],
).eval()
RAN = []  # torch's record: the requests whose calls ran a compiled graph
WHERE = [None]
aot = lookup_backend("aot_eager")


def counting(gm, example_inputs):
    compiled = aot(gm, example_inputs)

    def run(*args):
        RAN.append(WHERE[0])
        return compiled(*args)

    run._boxed_call = getattr(compiled, "_boxed_call", False)
    return run


if MODE == "limit":
    torch._dynamo.config.recompile_limit = 2
    model.compile(backend=counting, dynamic=False)
else:
    for block in [*model.transformer_blocks, *model.single_transformer_blocks]:
        block.compile(backend="aot_eager")
text, pooled, txt_ids = torch.randn(1, 4, 16), torch.randn(1, 16), torch.zeros(4, 3)


def serve(name, side):
    WHERE[0] = name
    x = torch.randn(1, side * side, 4)
    img_ids = torch.zeros(side * side, 3)
    with diag.request(shape=[1, side * side, 4]), torch.no_grad(), diag.step():
        model(hidden_states=x, encoder_hidden_states=text, pooled_projections=pooled,
              timestep=torch.tensor([1.0]), img_ids=img_ids, txt_ids=txt_ids, return_dict=False)


if MODE == "limit":
    with diag.phase("warmup"):
        serve("w1", 4)
    for name, side in (("r2", 6), ("r3", 8), ("r4", 4)):
        serve(name, side)
else:
    with diag.phase("warmup"):
        serve("w1", 4)
    serve("r2", 6)
print(json.dumps(sorted(set(RAN))), flush=True)
"""


GLOBAL_STATE = """
import sys
import torch
import diag.api as diag
from diffusers.models import DiTTransformer2DModel

torch.manual_seed(0)
model = DiTTransformer2DModel(
    sample_size=8, num_layers=1, patch_size=2, attention_head_dim=8,
    num_attention_heads=2, in_channels=4, out_channels=8, num_embeds_ada_norm=1000,
).eval()
model.compile(backend="aot_eager")
FIXED = sys.argv[1:] == ["fixed"]


def serve(grad, autocast=False):
    if FIXED:
        grad, autocast = False, False
    with diag.request(shape=[1, 4, 8, 8]):
        x = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1))
        for i in range(2):
            with diag.step(), torch.set_grad_enabled(grad), torch.autocast("cpu", enabled=autocast):
                t = torch.tensor([500 - 100 * i])
                out = model(x, timestep=t, class_labels=torch.tensor([1])).sample
                x = x - 0.1 * out[:, :4].float()
    print(round(float(x.detach().double().sum()), 4), flush=True)


with diag.phase("warmup"):
    serve(False)
serve(False)
serve(True)  # the serving path forgot no_grad
serve(False, autocast=True)  # a request under autocast
"""


def _record(tmp: Path, name: str, source: str, *args: str) -> tuple[Path, str]:
    program = tmp / f"{name}.py"
    program.write_text(source)
    out = tmp / f"trace-{name}"
    result = diag_record(out, PYTHON, str(program), *args, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result.stdout


def _findings(trace_dir: Path) -> list[Finding]:
    return group_findings(run_analyzers(load_trace(trace_dir)))


@pytest.fixture(scope="module")
def dit(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return _findings(_record(tmp_path_factory.mktemp("dit"), "dit", DIT)[0])


@pytest.fixture(scope="module")
def teacache(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return _findings(_record(tmp_path_factory.mktemp("tea"), "tea", TEACACHE)[0])


@pytest.fixture(scope="module")
def flux_limit(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Finding], list[str]]:
    out, stdout = _record(tmp_path_factory.mktemp("flux"), "flux", FLUX, "limit")
    ran = json.loads(stdout.strip().splitlines()[-1])
    return _findings(out), ran


@pytest.fixture(scope="module")
def flux_blocks(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return _findings(_record(tmp_path_factory.mktemp("blocks"), "blocks", FLUX, "blocks")[0])


@pytest.fixture(scope="module")
def global_state(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return _findings(_record(tmp_path_factory.mktemp("gs"), "gs", GLOBAL_STATE)[0])


def _live(findings: list[Finding], request: str) -> Finding:
    return next(
        f for f in findings if f.analyzer == "live-compile" and f.data.get("request_id") == request
    )


def test_inference_mode_warmup_is_named(dit: list[Finding]) -> None:
    found = _live(dit, "r2")
    assert "warmup ran under torch.inference_mode(); serving runs under no_grad" in found.title
    assert "`timestep` has ADInplaceOrView, AutogradCPU" in found.title
    # torch's record stays quoted in the evidence
    assert any("dispatch key set mismatch" in line for line in found.evidence)
    # the fix tried on this program, not "make the varying input dynamic"
    assert found.fix.startswith("Warm up the way live requests run: under torch.no_grad()")
    assert "dynamic" not in found.fix


def test_cfg_off_halves_the_batch(dit: list[Finding]) -> None:
    found = _live(dit, "r3")
    assert "the batch went from 2 to 1 (`timestep` dim 0)" in found.title
    assert "CFG's uncond pass" in found.title
    # never mark_dynamic for a 0/1 size, never "warm up the shape" warmup served
    assert "mark_dynamic(" not in found.fix
    assert "Warm up the shape" not in found.fix
    assert "Warm up a call where `timestep` has size 1 at dim 0" in found.fix


def test_module_int_attribute_names_the_entry_of_the_step(teacache: list[Finding]) -> None:
    found = _live(teacache, "r2")
    assert "cause undecided" not in found.title
    assert (
        "the entry compiled for step 0 (warmup w1) failed on self.num_steps (2 there, 3 in "
        "this call)" in found.title
    )
    step1 = next(line for line in found.evidence if line.startswith("step 1:"))
    assert "the entry compiled for step 1 (warmup w1) failed on self.num_steps" in step1
    assert "compile the module(s) forward calls instead of forward itself" in found.fix


def test_lowered_limit_and_wrapped_forward(flux_limit: tuple[list[Finding], list[str]]) -> None:
    findings, ran = flux_limit
    limit = next(f for f in findings if f.analyzer == "recompile-limit")
    assert (
        "the program lowered torch._dynamo.config.recompile_limit to 2 (torch's default: 8)"
        in limit.title
    )
    assert limit.data["recompile_limit"] == 2
    # torch's record: r4 (the warmup size again) ran compiled graphs, r3 (the hit) did not
    assert "r4" in ran and "r3" not in ran
    assert limit.data["eager_calls"] == 1
    assert limit.data["compiled_calls"] == 1
    assert any(
        "passed an existing entry's guards and ran compiled: r4" in e for e in limit.evidence
    )


def test_two_block_classes_one_new_shape_one_headline(flux_blocks: list[Finding]) -> None:
    live = [f for f in flux_blocks if f.analyzer == "live-compile" and f.severity == "error"]
    assert len(live) == 2
    heads = [f for f in live if f.related]
    assert len(heads) == 1
    other = next(f for f in live if f is not heads[0])
    assert other.group == heads[0].id
    assert all("expected 16, actual 36" in f.title for f in live)


def test_global_state_nearest_entry_names_autocast(global_state: list[Finding]) -> None:
    r4 = _live(global_state, "r4")
    assert "cause undecided" not in r4.title
    assert "GLOBAL_STATE changed: autocast(cpu)_enabled" in r4.title
    assert "grad_mode" not in r4.title
    # the vocabulary's fix, not "make the varying input dynamic" or "pass it as a tensor"
    assert r4.fix.startswith("forward recompiled because autocast differs")
    assert "same torch.autocast context" in r4.fix
    assert "dynamic" not in r4.fix and "tensor" not in r4.fix
    r3 = _live(global_state, "r3")
    assert "GLOBAL_STATE changed: grad_mode" in r3.title
    assert "same grad mode (both inside torch.no_grad())" in r3.fix
    (cause,) = [c["cause"] for c in r4.claims if c["kind"] == "recompile"]
    assert cause["entry"] == "0/0"  # the no_grad entry, as torch's record reads
    assert cause["why"] == "nearest-global-state" and cause["decided"] is True
    assert cause["guard_check"] == "autocast" and cause["fix_verified"] is True


def test_global_state_fix_removes_the_recompiles(tmp_path: Path) -> None:
    """The fix printed above, applied to the program: no live compile is left."""
    findings = _findings(_record(tmp_path, "gs-fixed", GLOBAL_STATE, "fixed")[0])
    assert not [f for f in findings if f.analyzer == "live-compile" and f.severity == "error"]
