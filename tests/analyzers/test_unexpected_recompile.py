"""torch's `Unexpected recompilation` in a pipeline served from two threads: no warmup is offered
for a call that fit an entry, and the compile another thread ran during that call's step is
named, with the fix that removed it.

The recording (tests/data/threads/README.md) is a real run of the threaded Wan server of
tests/integration/test_serve_diffusers_threads.py with two transformer layers, where torch
raced: the program's own record of torch (`torch.json`, written without reference to diag) is
read first, then diag's findings are checked against it. The fix diag prints (take the other
thread's live compile out of traffic) is what the test file's clean variant does, and its runs
recompile nothing live.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diag.check import run_check
from diag.check.policy import Policy
from diag.check.render import verdict_text
from diag.findings.analysis import analyze
from diag.findings.model import Finding
from diag.trace.load import load_trace
from tests.archives import unpack

DATA = Path(__file__).parents[1] / "data" / "threads" / "pipeline-race.tar.gz"
UNEXPECTED = "Unexpected recompilation: runtime guards failed even though they passed"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("race")
    unpack(DATA, folder)
    return folder / "pipeline-race"


@pytest.fixture(scope="module")
def race(folder: Path) -> tuple[dict[str, Any], list[Finding]]:
    torch_record = json.loads((folder / "torch.json").read_text(encoding="utf-8"))
    return torch_record, analyze(load_trace(folder / "trace"))


def test_torchs_record_holds_the_race(race: tuple[dict[str, Any], list[Finding]]) -> None:
    torch_record, _ = race
    placed = [
        (c["compile_id"], c["request"], c["step"], c["thread"]) for c in torch_record["compiles"]
    ]
    assert placed == [
        ("0/0", "warmup-1", 0, "MainThread"),
        ("0/1", "warmup-2", 0, "MainThread"),
        ("0/2", "live-2", 0, "pipe-worker_1"),  # the width warmup never served
        ("0/3", "live-1", 2, "pipe-worker_0"),  # a shape entry 0/0 serves: the race
        ("0/4", "live-2", 2, "pipe-worker_1"),
    ]
    reasons = [r for entry in torch_record["guard_failures"] for r in entry]
    assert sum(UNEXPECTED in r for r in reasons) == 5  # 0/3 against 3 entries, 0/4 against 2


def _finding(findings: list[Finding], request: str) -> Finding:
    (found,) = [f for f in findings if f.id == f"live-compile:wrapper:{request}"]
    return found


def test_the_raced_call_gets_no_warmup_fix_and_names_the_other_threads_compile(
    race: tuple[dict[str, Any], list[Finding]],
) -> None:
    _, findings = race
    raced = _finding(findings, "r4")  # live-1: pipe-worker_0's request
    assert "pipe-worker_0" in raced.title and "at step 2" in raced.title
    (line,) = [e for e in raced.evidence if e.startswith("step 2: compile 0/3")]
    assert "the call fit an entry" in line
    assert (
        "another thread was compiling: 0/2 (live request r3 (thread pipe-worker_1) step 0)" in line
    )
    assert raced.fix.startswith("No warmup covers this recompile: the call fit an entry")
    assert "thread pipe-worker_1 was compiling 0/2" in raced.fix
    assert "Take 0/2 out of live traffic" in raced.fix
    assert "Warm up" not in raced.fix


def test_the_width_compile_keeps_its_own_cause_and_fix(
    race: tuple[dict[str, Any], list[Finding]],
) -> None:
    _, findings = race
    width = _finding(findings, "r3")  # live-2: the width warmup never served, then the race
    assert "size mismatch at index 4. expected 4, actual 6" in width.title
    assert width.fix.startswith("Warm up the shape live traffic sends (5x32x48)")
    (line,) = [e for e in width.evidence if e.startswith("step 2: compile 0/4")]
    assert (
        "another thread was compiling: 0/3 (live request r4 (thread pipe-worker_0) step 2)" in line
    )
    assert not [f for f in findings if "Warm up every variant" in f.fix]


def test_check_words_it_the_same_way(folder: Path) -> None:
    text = verdict_text(run_check(folder / "trace", Policy()))
    (line,) = [line for line in text.splitlines() if "compile 0/3" in line]
    assert "the call fit an entry" in line
    assert (
        "another thread was compiling: 0/2 (live request r3 (thread pipe-worker_1) step 0)" in line
    )
