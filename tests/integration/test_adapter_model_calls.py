"""A diffusers model called outside any pipeline: with no configuration, each outermost call is a
step and requests are inferred (a new latent shape, a scheduler's `set_timesteps`, a long pause);
`--warmup-requests 2` then makes the first two warmup, and the live-compile analyzer names the
one dimension warmup missed. The model's hooks change no graph and no guard, whichever way the
model is compiled (per block, `model.compile()`, `torch.compile(model)`).

Real parts only: a hand-written denoising loop over diffusers' `WanTransformer3DModel` built from
the tiny config diffusers' own tests use, blocks compiled with `compile_repeated_blocks`
(aot_eager), and a small `ModelMixin` of the program's own for the compile modes; each program
runs plainly and under `diag record` in subprocesses.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .support import PYTHON, diag_record, events, of

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("diffusers") is None, reason="diffusers is not installed (dev extra)"
)

WAN = """
import json, sys
import torch
from diffusers import FlowMatchEulerDiscreteScheduler, WanTransformer3DModel

torch.manual_seed(0)
model = WanTransformer3DModel(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
    out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
).eval()
model.compile_repeated_blocks(backend="aot_eager")
scheduler = FlowMatchEulerDiscreteScheduler()
embeds = torch.randn(1, 8, 16)


@torch.no_grad()
def generate(height, width, steps=2):
    latents = torch.randn(1, 4, 2, height, width, generator=torch.Generator().manual_seed(0))
    scheduler.set_timesteps(steps)
    for t in scheduler.timesteps:
        noise = model(hidden_states=latents, timestep=t.expand(1),
                      encoder_hidden_states=embeds, return_dict=False)[0]
        latents = scheduler.step(noise, t, latents, return_dict=False)[0]
    return latents


for height, width in [(16, 16), (24, 16)]:  # warmup: the height varies, the width does not
    generate(height, width)
for height, width in [(16, 16), (16, 24)]:  # traffic: the second request at a new width
    print("request", height, width, round(float(generate(height, width).double().sum()), 4))

from compile_state import compile_state

with open(sys.argv[1], "w") as f:
    json.dump(compile_state(), f)
"""

TINY = """
import json, sys, time
import torch
from diffusers import ConfigMixin, FlowMatchEulerDiscreteScheduler, ModelMixin
from diffusers.configuration_utils import register_to_config

mode, state_file = sys.argv[1], sys.argv[2]


class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x, t):
        return x + torch.tanh(self.proj(x)) * t


class Refiner(ModelMixin, ConfigMixin):  # a model inside the model: its calls are no steps
    @register_to_config
    def __init__(self, dim=8):
        super().__init__()
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class TinyTransformer(ModelMixin, ConfigMixin):
    _repeated_blocks = ["Block"]

    @register_to_config
    def __init__(self, dim=8):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(dim), Block(dim)])
        self.refiner = Refiner(dim)

    def forward(self, hidden_states, timestep):
        x = hidden_states.permute(0, 2, 3, 1)
        for block in self.blocks:
            x = block(x, timestep / 1000)
        return self.refiner(x).permute(0, 3, 1, 2)


torch.manual_seed(0)
model = tiny = TinyTransformer().eval()
if mode == "repeated":
    model.compile_repeated_blocks(backend="aot_eager")
elif mode == "self":
    model.compile(backend="aot_eager")
elif mode == "whole":
    model = torch.compile(model, backend="aot_eager")
elif mode == "forward":  # the older idiom: the bound forward compiled, hooks still eager
    model.forward = torch.compile(model.forward, backend="aot_eager")
elif mode == "function":  # the model called inside a compiled function: Dynamo traces its call
    model = torch.compile(lambda x, t: TinyTransformer.__call__(tiny, x, t), backend="aot_eager")
scheduler = FlowMatchEulerDiscreteScheduler()


@torch.no_grad()
def generate(height, width, steps=2):
    latents = torch.randn(1, 8, height, width, generator=torch.Generator().manual_seed(0))
    scheduler.set_timesteps(steps)
    for t in scheduler.timesteps:
        latents = scheduler.step(model(latents, t), t, latents, return_dict=False)[0]
    return latents


# A new shape, a new shape, the first shape again, the same shape with a new set_timesteps.
for height, width in [(4, 4), (6, 4), (4, 4), (4, 4)]:
    print("request", height, width, round(float(generate(height, width).double().sum()), 4))
# The same shape again after a pause, with no scheduler: two calls. A pause starts a request
# when it is over 1 s and over ten times the median step (collectors/adapters/inferred.py): a
# sleep never returns early, and this model's steps take milliseconds (ten times one is far
# under the floor even on a loaded machine). The file runs this program 12 times.
time.sleep(1.25)
with torch.no_grad():
    x = torch.randn(1, 8, 4, 4, generator=torch.Generator().manual_seed(1))
    for t in (900.0, 500.0):
        x = model(x, torch.tensor([t]))
print("after pause", round(float(x.double().sum()), 4))

from compile_state import compile_state

with open(state_file, "w") as f:
    json.dump(compile_state(), f)
"""


def _prepare(tmp: Path, name: str, text: str) -> Path:
    app = tmp / f"{name}.py"
    app.write_text(textwrap.dedent(text))
    shutil.copy(Path(__file__).with_name("compile_state.py"), tmp / "compile_state.py")
    return app


def _plain(app: Path, *args: str) -> str:
    proc = subprocess.run(
        [PYTHON, str(app), *args], capture_output=True, text=True, timeout=300, check=True
    )
    return proc.stdout


def _requests(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["request_id"], e["phase"], e["shape"]) for e in of("request_start", evs)]


def _steps(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["request_id"], e["step"]) for e in of("step_end", evs)]


@pytest.fixture(scope="module")
def wan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The Wan loop run plainly, then recorded with `--warmup-requests 2`."""
    tmp = tmp_path_factory.mktemp("wan")
    app = _prepare(tmp, "wan_loop", WAN)
    plain = _plain(app, str(tmp / "plain.json"))
    proc = diag_record(
        tmp / "trace",
        PYTHON,
        str(app),
        str(tmp / "recorded.json"),
        options=("--warmup-requests", "2"),
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr
    return tmp, plain, proc.stdout


def test_a_bare_model_loop_gets_requests_steps_and_shapes(wan: tuple[Path, str, str]) -> None:
    tmp, plain, recorded = wan
    assert recorded.startswith(plain)  # the program's output, unchanged
    evs = events(tmp / "trace")
    assert [(e["name"], e.get("inferred")) for e in of("adapter", evs)] == [
        ("diffusers model calls (inferred)", True)
    ]
    # Each set_timesteps (and each new latent shape) starts a request; frames x height x width.
    assert _requests(evs) == [
        ("w1", "warmup", [2, 16, 16]),
        ("w2", "warmup", [2, 24, 16]),
        ("r3", "live", [2, 16, 16]),
        ("r4", "live", [2, 16, 24]),
    ]
    assert _steps(evs) == [(r, s) for r in ("w1", "w2", "r3", "r4") for s in (0, 1)]
    # The first compile, the height recompile in warmup, the width recompile live: each in
    # step 0 of its request, inside the model call (blocks are called from its forward).
    assert [(e["request_id"], e["step"]) for e in of("compile_end", evs)] == [
        ("w1", 0),
        ("w2", 0),
        ("r4", 0),
    ]
    assert not of("collector_error", evs)
    state = [json.loads((tmp / f"{n}.json").read_text()) for n in ("plain", "recorded")]
    assert state[0] == state[1]  # diag changed no graph and no guard


def test_warmup_requests_leave_one_live_compile_error_on_the_width(
    wan: tuple[Path, str, str],
) -> None:
    tmp, _, _ = wan
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(tmp / "trace"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    findings = json.loads(proc.stdout)["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    assert [f["analyzer"] for f in errors] == ["live-compile"], [f["title"] for f in errors]
    text = json.dumps(errors[0])
    assert "r4" in errors[0]["title"] and "_base.stride()" in text
    assert "width" in text and "height varied" in text


@pytest.mark.parametrize("mode", ["repeated", "self", "whole", "forward", "function", "eager"])
def test_each_outermost_model_call_is_a_step_however_it_is_compiled(
    tmp_path: Path, mode: str
) -> None:
    app = _prepare(tmp_path, "tiny", TINY)
    plain = _plain(app, mode, str(tmp_path / "plain.json"))
    proc = diag_record(tmp_path / "trace", PYTHON, str(app), mode, str(tmp_path / "recorded.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(plain)
    evs = events(tmp_path / "trace")
    if mode == "function":
        # The model's hooks were taken off before Dynamo traced it: the compiled function's
        # calls are the steps (the fallback), with the whole input's shape.
        adapter, small, large = "compiled-calls (inferred)", [1, 8, 4, 4], [1, 8, 6, 4]
    else:  # compiled calls into the model are the model's steps: the fallback never speaks
        adapter, small, large = "diffusers model calls (inferred)", [4, 4], [6, 4]
    assert [e["name"] for e in of("adapter", evs)] == [adapter]
    assert _requests(evs) == [
        ("r1", "live", small),
        ("r2", "live", large),
        ("r3", "live", small),
        ("r4", "live", small),  # same shape: the scheduler's set_timesteps started it
        ("r5", "live", small),  # same shape, no scheduler: the pause started it
    ]
    # The Refiner called inside the model's forward adds no step.
    assert _steps(evs) == [(f"r{r}", s) for r in range(1, 6) for s in (0, 1)]
    assert not of("collector_error", evs)
    state = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("plain", "recorded")]
    assert state[0] == state[1]
    if mode != "eager":
        assert state[0]["codes"], "the program compiled nothing"
