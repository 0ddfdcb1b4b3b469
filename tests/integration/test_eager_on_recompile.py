"""`set_stance("eager_on_recompile")`: which calls ran eagerly, read as Dynamo checks them.

Torch's record, written down first (torch 2.13, aot_eager, the program below run plain with
TORCH_LOGS=recompiles): under the stance, a call at a size no cache entry was compiled for runs
eagerly with no compile, no guard failure in `torch._dynamo.utils.guard_failures` and no
recompile log line; Dynamo's counters show one frame compiled. The program prints its own
record at exit: which requests' calls ran through the compiled graph (a counting backend), and
the frame count; diag must name exactly the other calls, and change nothing the program prints.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from diag.analyzers import run_analyzers
from diag.findings.model import Finding
from diag.trace.load import load_trace

from .support import PYTHON, diag_record

PROGRAM = """
import json
import torch
import torch._dynamo.utils as dynamo_utils
import diag.api as diag

RAN = []
CURRENT = [None]


def counting(gm, example_inputs):
    def run(*args):
        RAN.append(CURRENT[0])
        return gm(*args)
    return run


f = torch.compile(lambda x: torch.sin(x) * 2, backend=counting)


def serve(name, n):
    CURRENT[0] = name
    total = 0.0
    with diag.request(shape=[n]):
        for _ in range(3):
            with diag.step():
                total += float(f(torch.ones(n)).sum())
    print(name, round(total, 4), flush=True)


with diag.phase("warmup"):
    serve("warmup", 4)
torch.compiler.set_stance("eager_on_recompile")
serve("same-size", 4)
serve("new-size", 8)
print(json.dumps({
    "compiled_calls": {k: RAN.count(k) for k in sorted(set(RAN))},
    "frames": dynamo_utils.counters["frames"]["total"],
    "guard_failures": len(dynamo_utils.guard_failures),
}), flush=True)
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Finding], str, str]:
    tmp = tmp_path_factory.mktemp("eor")
    program = tmp / "eor.py"
    program.write_text(PROGRAM)
    plain = subprocess.run([PYTHON, str(program)], capture_output=True, text=True, timeout=240)
    assert plain.returncode == 0, plain.stderr[-2000:]
    result = diag_record(tmp / "trace", PYTHON, str(program), options=("--profile", "none"))
    assert result.returncode == 0, result.stderr[-2000:]
    return run_analyzers(load_trace(tmp / "trace")), plain.stdout, result.stdout


def test_torchs_record_and_the_program_are_unchanged(
    recorded: tuple[list[Finding], str, str],
) -> None:
    _, plain, under_diag = recorded
    assert plain == under_diag
    record = json.loads(plain.strip().splitlines()[-1])
    # torch's own record: the new size never compiled and left no guard failure
    assert record == {
        "compiled_calls": {"same-size": 3, "warmup": 3},
        "frames": 1,
        "guard_failures": 0,
    }


def test_the_eager_calls_are_named(recorded: tuple[list[Finding], str, str]) -> None:
    findings, _, _ = recorded
    (found,) = [f for f in findings if f.id == "stances:eager-on-recompile"]
    assert found.severity == "warning"
    assert found.title.startswith("3 call(s) ran eagerly under eager_on_recompile")
    # requests are w1 (warmup), r2 (the warmed size, compiled), r3 (the new size, eager)
    assert any(
        line.startswith("<lambda>: 3 eager call(s): r3 steps 0-2") for line in found.evidence
    )
    assert found.data["eager_calls"] == {"<lambda>": 3}
