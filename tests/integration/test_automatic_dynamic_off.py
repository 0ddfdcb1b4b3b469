"""`torch._dynamo.config.automatic_dynamic_shapes = False`: each fix diag prints under it, run
against torch's own record (issue 35), and no "warm up two values" advice where it cannot work.

One block (aot_eager, torch's default limit) under the setting, in four programs:

- sizes: warmup serves 16 and 24 tokens, live 32..80 (one request each). Torch: `tensor 'x'
  size mismatch at index 1` per new size, `hit config.recompile_limit (8)` at 80; frames 9
  total, 8 compiled, 2 of them in warmup.
- one-size: warmup 16, live 32 (one live recompile: no repeated dimension, the plain fix path).
- scalar: a Python int argument per step (2, 3, then 2..7 live). Torch: `step == 2`, `step ==
  3`... one entry per value; frames 6, 2 in warmup.
- bloat: one request shape whose steps vary batch (2, 3) and tokens (16, 24) in warmup and
  live alike. Torch: 4 entries, none live.

Each fix diag prints was run without diag (torch's counters): dropping the setting, mark_dynamic,
every size warmed with the limit raised to hold them, the argument as a 0-d tensor. Each left no
compile in live traffic (and, for the bloat, fewer entries). "Warm up two values" cannot work
here (the programs' warmups served two), so no finding prints it.
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

MODE, FIX, LIMIT = sys.argv[1], sys.argv[2], int(sys.argv[3])
if LIMIT:
    torch._dynamo.config.recompile_limit = LIMIT
if FIX != "setting-on":
    torch._dynamo.config.automatic_dynamic_shapes = False


class Block(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 32), torch.nn.GELU(), torch.nn.Linear(32, dim)
        )

    def forward(self, x, step=100):
        return x + self.mlp(self.norm(x)) * (step / 100)


torch.manual_seed(0)
model = Block().eval()
model.compile(backend="aot_eager")


def call(batch, tokens, step=100):
    x = torch.randn(batch, tokens, 16)
    if FIX == "mark":
        torch._dynamo.mark_dynamic(x, [0, 1] if MODE == "bloat" else 1)
    return model(x, torch.tensor(float(step)) if FIX == "tensor" else step)


def serve(n):
    with diag.request(shape=[n]), torch.no_grad():
        if MODE in ("sizes", "one-size"):
            with diag.step():
                call(1, n)
        elif MODE == "scalar":
            for i in range(n):
                with diag.step():
                    call(1, 16, i + 2)
        else:  # bloat: the steps vary the batch and the tokens
            for batch, tokens in ((2, 16), (3, 16), (2, 24), (3, 24)):
                with diag.step():
                    call(batch, tokens)


WARM, LIVE = {
    "sizes": ([16, 24], [32, 40, 48, 56, 64, 72, 80]),
    "one-size": ([16], [32]),
    "scalar": ([2], [4, 6]),
    "bloat": ([1], [1]),
}[MODE]
if FIX == "warm-all":
    WARM = WARM + [n for n in LIVE if n not in WARM]
with diag.phase("warmup"):
    for shape in diag.warmup_shapes([(n,) for n in WARM]):
        serve(*shape)
print("warm", json.dumps(dict(counters["frames"])), flush=True)
for shape in diag.live_shapes([(n,) for n in LIVE]):
    serve(*shape)
print("frames", json.dumps(dict(counters["frames"])), flush=True)
"""

#: The advice diag printed under the setting before: each needs automatic dynamic.
TWO_VALUES = (
    "so automatic dynamic marks it",  # live-compile, recompile-limit
    "serve at least two values of it in warmup",  # live-compile's coverage
    "warm up two values of each so automatic dynamic",  # cache-bloat
    "should be dynamic already",  # live-compile's evidence
    "find what keeps it static",  # guard-churn: the setting it did not name
)


def _counters(log: str, tag: str) -> dict[str, int]:
    found: dict[str, int] = json.loads(log.split(f"\n{tag} ", 1)[1].splitlines()[0])
    return found


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("autodyn") / "serve.py"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(scope="module")
def recorded(program: Path) -> dict[str, tuple[list[Finding], str]]:
    """Each program recorded once under the setting; torch's own log in its stderr."""
    found = {}
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    for mode in ("sizes", "one-size", "scalar", "bloat"):
        out = program.parent / mode
        result = diag_record(out, PYTHON, str(program), mode, "none", "0", timeout=300, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        log = "\n" + result.stdout + result.stderr
        found[mode] = (run_analyzers(load_trace(out)), log)
    return found


def _of(findings: list[Finding], analyzer: str) -> list[Finding]:
    return [f for f in findings if f.analyzer == analyzer]


def test_torch_record(recorded: dict[str, tuple[list[Finding], str]]) -> None:
    sizes = recorded["sizes"][1]
    assert "tensor 'x' size mismatch at index 1. expected 72, actual 80" in sizes
    assert "hit config.recompile_limit (8)" in sizes
    assert _counters(sizes, "warm") == {"total": 2, "ok": 2}
    assert _counters(sizes, "frames") == {"total": 9, "ok": 8}
    assert _counters(recorded["one-size"][1], "frames") == {"total": 2, "ok": 2}
    scalar = recorded["scalar"][1]
    assert "step == 2" in scalar and "step == 3" in scalar
    assert _counters(scalar, "warm") == {"total": 2, "ok": 2}
    assert _counters(scalar, "frames") == {"total": 6, "ok": 6}
    bloat = recorded["bloat"][1]
    assert _counters(bloat, "warm") == _counters(bloat, "frames") == {"total": 4, "ok": 4}


def test_no_two_values_advice(recorded: dict[str, tuple[list[Finding], str]]) -> None:
    """Warmup served two values in every program here and nothing became dynamic."""
    for mode, (findings, _) in recorded.items():
        for found in findings:
            text = " ".join([found.fix, *found.evidence])
            assert not any(t in text for t in TWO_VALUES), (mode, found.id, found.fix)


def test_size_fixes_name_the_setting(recorded: dict[str, tuple[list[Finding], str]]) -> None:
    setting = "torch._dynamo.config.automatic_dynamic_shapes = False"
    findings = recorded["sizes"][0]
    (limit,) = _of(findings, "recompile-limit")
    live = [f for f in _of(findings, "live-compile") if f.id.startswith("live-compile:forward:")]
    (one,) = [
        f
        for f in _of(recorded["one-size"][0], "live-compile")
        if f.id.startswith("live-compile:forward:")
    ]
    for found in [limit, *live, one]:
        assert found.fix.startswith(f"forward was compiled under {setting}"), found.fix
        assert "Drop that setting (torch's default is True)" in found.fix
        assert "torch._dynamo.mark_dynamic(tensor, 1) on the input behind `x`" in found.fix
    assert "raise torch._dynamo.config.recompile_limit to at least their number (9 here" in (
        limit.fix
    )
    (coverage,) = [f for f in findings if f.id == "live-compile:warmup-coverage"]
    assert coverage.title.startswith("Warmup covered 0 of 7 live shape(s)")
    assert coverage.fix.startswith(f"Under {setting} every size is an entry of its own")
    assert any(f"covered only when warmup served it: {setting}" in e for e in coverage.evidence)


def test_scalar_fix_names_the_setting(recorded: dict[str, tuple[list[Finding], str]]) -> None:
    (churn,) = _of(recorded["scalar"][0], "guard-churn")
    assert churn.fix == (
        "`step` is a Python number argument and the frame was compiled under "
        "torch._dynamo.config.automatic_dynamic_shapes = False, so every new value is a new "
        "entry. Drop that setting (torch's default is True) (under the default the second value "
        "makes it dynamic), or pass it as a 0-d tensor."
    )


def test_bloat_fix_names_the_setting(recorded: dict[str, tuple[list[Finding], str]]) -> None:
    (bloat,) = _of(recorded["bloat"][0], "cache-bloat")
    assert bloat.title.startswith("forward holds 4 cache entries for 1 distinct shape(s)")
    assert bloat.fix.startswith(
        "The entries differ only in tensor guards, and forward was compiled under "
        "torch._dynamo.config.automatic_dynamic_shapes = False"
    )
    assert "mark the dimensions that vary dynamic (torch._dynamo.mark_dynamic)" in bloat.fix


@pytest.mark.parametrize(
    ("mode", "fix", "limit", "warm", "final"),
    [
        ("sizes", "setting-on", "0", {"total": 2, "ok": 2}, {"total": 2, "ok": 2}),
        ("sizes", "mark", "0", {"total": 1, "ok": 1}, {"total": 1, "ok": 1}),
        ("sizes", "warm-all", "10", {"total": 9, "ok": 9}, {"total": 9, "ok": 9}),
        ("scalar", "setting-on", "0", {"total": 2, "ok": 2}, {"total": 2, "ok": 2}),
        ("scalar", "tensor", "0", {"total": 1, "ok": 1}, {"total": 1, "ok": 1}),
        ("bloat", "setting-on", "0", {"total": 3, "ok": 3}, {"total": 3, "ok": 3}),
        ("bloat", "mark", "0", {"total": 1, "ok": 1}, {"total": 1, "ok": 1}),
    ],
)
def test_each_printed_fix_works(
    program: Path,
    mode: str,
    fix: str,
    limit: str,
    warm: dict[str, int],
    final: dict[str, int],
) -> None:
    """Run without diag: torch's counters after warmup and at exit are the record (equal: no
    compile in live traffic; compiled equals total: no compile refused)."""
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    result = subprocess.run(
        [PYTHON, str(program), mode, fix, limit],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = "\n" + result.stdout
    assert _counters(log, "warm") == warm
    assert _counters(log, "frames") == final
    assert "hit config.recompile_limit" not in result.stderr


def test_the_warmup_plan_warms_each_size_apart(
    program: Path, recorded: dict[str, tuple[list[Finding], str]]
) -> None:
    """Under the setting a second size makes nothing dynamic: the plan has no generalising
    request, and each size a live request recompiled for is a request of its own (torch's
    record: one entry per size, 32 to 72, before the limit refused 80)."""
    from diag.warmup.plan import GENERALISE, plan_warmup

    plan = plan_warmup([load_trace(program.parent / "sizes")])
    assert GENERALISE not in [r.role for r in plan.requests]
    assert sorted(r.shape for r in plan.requests) == [[n] for n in (32, 40, 48, 56, 64, 72)]
    assert any("keep sizes static" in note for note in plan.notes)
    covered = sorted(
        plan.requests[c.covered_by].shape[0] for c in plan.live_compiles if c.covered_by is not None
    )
    assert covered == [32, 40, 48, 56, 64, 72]
    (hit,) = plan.unpreventable  # the size the default limit refused: no warmup request helps
    assert "recompile limit" in hit.cannot  # type: ignore[operator]
