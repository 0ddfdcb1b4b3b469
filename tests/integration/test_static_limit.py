"""A frame compiled with `torch.compile(dynamic=False)` whose traffic brings new sizes until the
recompile limit, against torch's own record; and `diag bench` on a run whose calls then ran
eagerly.

The program: one block (aot_eager, dynamic=False) served over sizes of its token dimension.
Recorded twice, once per module: (1) torch's default limit, warmup 16 and 24, live 32..80: torch
logs `tensor 'x' size mismatch at index 1` per new size and `hit config.recompile_limit (8)` at
80 (frames: 9 total, 8 ok); (2) the limit lowered to 2, warmup 16, 24 and 32 (the hit, in
warmup), live two requests of 16 (an entry serves them) then two of 40 (no entry: eager).

Under dynamic=False automatic dynamic is off, so "warm up two values so automatic dynamic marks
it" cannot help (warmup did serve two). Each fix diag prints instead was run: dropping
dynamic=False, mark_dynamic on the input, and every size warmed with the limit raised to hold
them; torch's counters show no refused compile and its log no limit hit after each.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from diag.analyzers import run_analyzers
from diag.findings.model import Finding
from diag.trace.load import load_trace

from .support import PYTHON, diag_record

PROGRAM = """
import json, sys
import torch
import diag.api as diag
from torch._dynamo.utils import counters

LIMIT, FIX = int(sys.argv[1]), sys.argv[2]  # LIMIT 0: torch's default
WARM = [int(n) for n in sys.argv[3].split(",")]
LIVE = [int(n) for n in sys.argv[4].split(",")]
STEPS = int(sys.argv[5])
if LIMIT:
    torch._dynamo.config.recompile_limit = LIMIT


class Block(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 32), torch.nn.GELU(), torch.nn.Linear(32, dim)
        )

    def forward(self, x):
        return x + self.mlp(self.norm(x))


torch.manual_seed(0)
model = Block().eval()
model.compile(backend="aot_eager", **({} if FIX == "nodyn" else {"dynamic": False}))
if FIX == "warmall":
    WARM = WARM + [n for n in LIVE if n not in WARM]


def serve(tokens):
    with diag.request(shape=[tokens]), torch.no_grad():
        x = torch.randn(1, tokens, 16)
        if FIX == "mark":
            torch._dynamo.mark_dynamic(x, 1)
        for _ in range(STEPS):
            with diag.step():
                x = model(x)


with diag.phase("warmup"):
    for shape in diag.warmup_shapes([(n,) for n in WARM]):
        serve(*shape)
for shape in diag.live_shapes([(n,) for n in LIVE]):
    serve(*shape)
print("frames", json.dumps(dict(counters["frames"])), flush=True)
"""

LIVE = "32,40,48,56,64,72,80"


def _frames(log: str) -> dict[str, int]:
    frames: dict[str, int] = json.loads(log.split("frames ", 1)[1].splitlines()[0])
    return frames


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("static") / "serve.py"
    path.write_text(PROGRAM)
    return path


def _record(program: Path, out: Path, *args: str) -> str:
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    result = diag_record(out, PYTHON, str(program), *args, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def at_default(program: Path) -> tuple[Path, str]:
    out = program.parent / "default"
    return out, _record(program, out, "0", "none", "16,24", LIVE, "1")


@pytest.fixture(scope="module")
def in_warmup(program: Path) -> tuple[Path, str]:
    out = program.parent / "lowered"
    return out, _record(program, out, "2", "none", "16,24,32", "16,16,40,40", "4")


def _limit(trace: Path) -> Finding:
    (found,) = [f for f in run_analyzers(load_trace(trace)) if f.analyzer == "recompile-limit"]
    return found


def test_torch_record(at_default: tuple[Path, str], in_warmup: tuple[Path, str]) -> None:
    log = at_default[1]
    assert "tensor 'x' size mismatch at index 1. expected 72, actual 80" in log
    assert "hit config.recompile_limit (8)" in log
    assert _frames(log) == {"total": 9, "ok": 8}
    assert "hit config.recompile_limit (2)" in in_warmup[1]
    assert _frames(in_warmup[1]) == {"total": 3, "ok": 2}


def test_fix_at_default_limit_says_dynamic_false(at_default: tuple[Path, str]) -> None:
    found = _limit(at_default[0])
    assert found.fix.startswith(
        "forward was compiled with torch.compile(dynamic=False): automatic dynamic is off for it, "
        "so every new size of dim 1 of `x` compiles a new entry, and warming up two sizes does "
        "not make it dynamic."
    )
    assert "torch._dynamo.mark_dynamic(tensor, 1) on the input behind `x`" in found.fix
    assert "raise torch._dynamo.config.recompile_limit to at least their number (9 here" in (
        found.fix
    )
    assert "automatic dynamic marks" not in found.fix and "only hides it" not in found.fix
    # live-compile's evidence no longer says a size varied in warmup "should be dynamic already"
    live = [f for f in run_analyzers(load_trace(at_default[0])) if f.analyzer == "live-compile"]
    assert live and not any("dynamic already" in line for f in live for line in f.evidence)
    assert any("compiled with torch.compile(dynamic=False)" in f.fix for f in live if f.fix)


def test_fix_at_lowered_limit_says_dynamic_false(in_warmup: tuple[Path, str]) -> None:
    found = _limit(in_warmup[0])
    assert "the program lowered torch._dynamo.config.recompile_limit to 2" in found.title
    assert "forward was compiled with torch.compile(dynamic=False)" in found.fix
    assert "automatic dynamic marks" not in found.fix
    assert "at least their number (3 here so far" in found.fix


@pytest.mark.parametrize(
    ("limit", "fix", "warm"),
    [("0", "nodyn", "16,24"), ("0", "mark", "16,24"), ("10", "warmall", "16,24")],
)
def test_each_printed_fix_removes_the_limit_hit(
    program: Path, limit: str, fix: str, warm: str
) -> None:
    """Run without diag: torch's own counters and log are the record."""
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    result = subprocess.run(
        [PYTHON, str(program), limit, fix, warm, LIVE, "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    frames = _frames(result.stdout)
    assert frames["total"] == frames["ok"], frames
    assert "hit config.recompile_limit" not in result.stderr


def test_bench_fails_a_phase_that_ran_eagerly(in_warmup: tuple[Path, str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "bench", "-o", str(tmp_path / "b"), "-q"]
        + ["--config", f"static={in_warmup[0]}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    shown = subprocess.run(
        [PYTHON, "-m", "diag", "bench", str(tmp_path / "b"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(shown.stdout)
    (table,) = data["variable_resolution"]
    assert table["passed"] is False and table["verdict"].startswith("fail: ")
    assert "phase 2 (40)" in table["verdict"]
    first, second = table["phases"]
    # Step 0's timing against steady steps of a fraction of a millisecond is the host's to
    # decide (a loaded one adds its own lines): what the limit did is asserted, not the clock.
    assert not [p for p in first["problems"] if "eager" in p or "recompile" in p]  # 16: compiled
    # 2 requests x 4 steps of size 40: no entry serves them, each call ran eagerly
    assert (
        "trial 1: 8 call(s) of forward ran eagerly: it hit the recompile limit (w3 step 0) and "
        "they matched none of its cache entries"
    ) in second["problems"]
