"""bench/agreement.py on two third-party inputs: it agrees with tlparse on a failed compile and
explains why HTA counts fewer kernels (GPU work without a launch record)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]
THIRD_PARTY = REPO / "tests" / "data" / "third_party"


def _bench() -> ModuleType:
    return load_bench("agreement")


def test_agreement_rows(tmp_path: Path) -> None:
    pytest.importorskip("hta")
    if not Path(sys.executable).with_name("tlparse").is_file():
        pytest.skip("tlparse is not installed beside this Python")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(THIRD_PARTY / "tlparse" / "comp_failure.log.gz", corpus)
    shutil.copy(THIRD_PARTY / "hta" / "trace_compare_base.json.gz", corpus)
    bench = _bench()
    rows = {p.name: bench._measure(corpus, kind, p) for _, kind, p in bench._files([corpus])}
    log = rows["comp_failure.log.gz"]
    assert log.ours["failures"] == log.theirs["failures"] == 1 and not log.notes
    trace = rows["trace_compare_base.json.gz"]
    assert (trace.ours["kernels"], trace.theirs["kernels"]) == (6, 2)
    assert bench._verdict(trace) == "explained"
    assert "no launch record" in trace.notes[0]
    assert bench.main([str(tmp_path / "missing")]) == 2
