"""The compiled-calls fallback: a hand-written loop over torch-compiled code, with no adapter and
no configuration, gets steps (each outermost call into compiled code, or the eager module call
around compiled blocks) and requests (a new input shape starts one); it changes no graph and no
guard; and a program that annotates itself with diag.api keeps its own steps.

Real runs: `torch.compile(module)`, `block.compile()` inside an eager module, and a function
decorated with `@torch.compile`, all on the aot_eager backend, each run plainly and under
`diag record` in subprocesses.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from diag.evidence.status import assess
from diag.trace.load import load_trace

from .support import PYTHON, diag_record, events, of

APP = """
import json, sys
import torch

mode, state_file = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.tanh(self.proj(x))


class Denoiser(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


model = Denoiser().eval()
if mode == "module":
    denoise = torch.compile(model, backend="aot_eager")
elif mode == "blocks":
    for block in model.blocks:
        block.compile(backend="aot_eager")
    denoise = model
elif mode == "function":
    @torch.compile(backend="aot_eager")
    def denoise(x):
        return model(x)
else:
    import diag.api as diag
    denoise = torch.compile(model, backend="aot_eager")


@torch.no_grad()
def generate(tokens, steps):
    x = torch.randn(1, tokens, 8, generator=torch.Generator().manual_seed(0))
    for _ in range(steps):
        x = x - 0.1 * denoise(x)
    return x


if mode == "api":
    with diag.phase("warmup"):
        generate(16, steps=1)
    with diag.request("mine", shape=[24]):
        with diag.step():
            out = generate(24, steps=2)
    print("request", round(float(out.double().sum()), 4), flush=True)
else:
    for tokens, steps in ((16, 3), (24, 2), (16, 2), (32, 2)):
        print("request", tokens, round(float(generate(tokens, steps).double().sum()), 4),
              flush=True)

from compile_state import compile_state

with open(state_file, "w") as f:
    json.dump(compile_state(), f)
"""

REQUESTS = [("r1", [1, 16, 8]), ("r2", [1, 24, 8]), ("r3", [1, 16, 8]), ("r4", [1, 32, 8])]
STEPS = [("r1", 0), ("r1", 1), ("r1", 2)] + [(r, s) for r in ("r2", "r3", "r4") for s in (0, 1)]


def _run(tmp: Path, mode: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The events of a recorded run, and the compile state of a plain run and of that one."""
    app = tmp / "app.py"
    app.write_text(textwrap.dedent(APP))
    shutil.copy(Path(__file__).with_name("compile_state.py"), tmp / "compile_state.py")
    plain = subprocess.run(
        [PYTHON, str(app), mode, str(tmp / "plain.json")],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    proc = diag_record(tmp / "trace", PYTHON, str(app), mode, str(tmp / "recorded.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(plain.stdout)  # the program's output, unchanged
    state = [json.loads((tmp / f"{name}.json").read_text()) for name in ("plain", "recorded")]
    return events(tmp / "trace"), state[0], state[1]


@pytest.mark.parametrize("mode", ["module", "blocks", "function"])
def test_outermost_compiled_calls_are_steps_and_new_shapes_requests(
    tmp_path: Path, mode: str
) -> None:
    evs, plain, recorded = _run(tmp_path, mode)
    assert [(e["name"], e.get("inferred")) for e in of("adapter", evs)] == [
        ("compiled-calls (inferred)", True)
    ]
    assert [(e["request_id"], e["shape"]) for e in of("request_start", evs)] == REQUESTS
    assert [(e["request_id"], e["step"]) for e in of("step_end", evs)] == STEPS
    shapes = dict(REQUESTS)
    assert [e["shape"] for e in of("step_start", evs)] == [shapes[r] for r, _ in STEPS]
    # The first compile lands in r1's step 0 and the recompile (tokens 24) in r2's step 0.
    assert [(e["request_id"], e["step"]) for e in of("compile_end", evs)] == [("r1", 0), ("r2", 0)]
    assert not of("collector_error", evs)
    # diag added no compile, no cache entry and no guard (blocks: the eager Denoiser got hooks).
    assert recorded == plain
    assert sum(c["entries"] for c in plain["codes"]) == 2
    # The analysis says the boundaries were inferred, and what that cannot tell apart.
    (notice,) = [
        n for n in assess(load_trace(tmp_path / "trace")).notices if n.kind == "steps-inferred"
    ]
    assert "compiled-calls (inferred)" in notice.message
    assert "back to back" in notice.message and "--request-fn" in notice.how


def test_a_program_with_diag_api_keeps_its_own_steps(tmp_path: Path) -> None:
    evs, plain, recorded = _run(tmp_path, "api")
    assert [e["name"] for e in of("adapter", evs)] == ["diag.api"]
    # The warmup call and the request's two compiled calls are no steps of the fallback.
    assert [(e["request_id"], e["shape"]) for e in of("request_start", evs)] == [("mine", [24])]
    assert [(e["request_id"], e["step"]) for e in of("step_end", evs)] == [("mine", 0)]
    assert not of("collector_error", evs)
    assert recorded == plain
    assert "steps-inferred" not in [n.kind for n in assess(load_trace(tmp_path / "trace")).notices]


LOOP = """
import sys
import torch

torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.tanh(self.lin(x))


blocks = [torch.compile(Block(), backend="aot_eager") for _ in range(3)]


@torch.compile(backend="aot_eager")
def combine(cond, uncond, scale):
    return uncond + scale * (cond - uncond)


def model(x):
    for block in blocks:
        x = block(x)
    return x


@torch.no_grad()
def serve(tokens, steps):
    x = torch.randn(1, tokens, 8, generator=torch.Generator().manual_seed(0))
    for _ in range(steps):
        cond = model(x)
        uncond = model(x * 0.5)
        x = x - 0.1 * combine(cond, uncond, 4.0)
    print("request", tokens, steps, round(float(x.double().sum()), 4), flush=True)


serve(16, 3)
serve(24, 4)
"""


def test_a_loop_over_compiled_blocks_makes_denoising_steps(tmp_path: Path) -> None:
    """A hand-written denoising loop (no adapter) that calls three compiled blocks for the cond
    pass, again for the uncond pass, then a compiled guidance helper: 7 outermost compiled calls
    per iteration. The steps are its iterations (3, then 4 at the new shape), not one per call;
    the helper's compile lands in the step it ran in."""
    app = tmp_path / "loop.py"
    app.write_text(LOOP)
    proc = diag_record(tmp_path / "trace", PYTHON, str(app))
    assert proc.returncode == 0, proc.stderr
    evs = events(tmp_path / "trace")
    assert [e["name"] for e in of("adapter", evs)] == ["compiled-calls (inferred)"]
    assert [(e["request_id"], e["shape"]) for e in of("request_start", evs)] == [
        ("r1", [1, 16, 8]),
        ("r2", [1, 24, 8]),
    ]
    steps = [(e["request_id"], e["step"]) for e in of("step_end", evs)]
    assert steps == [("r1", s) for s in range(3)] + [("r2", s) for s in range(4)]
    frames = [(e["frame"]["name"], e["request_id"], e["step"]) for e in of("compile_end", evs)]
    assert ("combine", "r1", 0) in frames and ("forward", "r1", 0) in frames
    assert all(step is not None for _, _, step in frames)
