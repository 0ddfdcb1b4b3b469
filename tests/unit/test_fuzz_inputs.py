"""1000 damaged inputs (tests/fuzz_corpus.py, seeded) through the readers and every analyzer:
each gives findings or one DiagError line, never another exception. A few go through the real
CLI too, for the exit code and the one line on stderr.

Parsed in this process (a subprocess each would take minutes on a loaded 2-core machine); the
Kineto cache is off (`--kineto` reads never write one), so each input is parsed afresh.
"""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from diag.errors import DiagError
from diag.findings.analysis import analyze
from diag.trace.inputs import input_warnings, open_input
from tests.fuzz_corpus import KINETO, THIRD_PARTY, Damaged, damaged_inputs

pytestmark = pytest.mark.skipif(not THIRD_PARTY.is_dir(), reason="tests/data/third_party is absent")

SEED = 20261201
COUNT = 1000


def _write(folder: Path, item: Damaged) -> Path:
    path = folder / f"{item.name}{item.suffix}"
    path.write_bytes(item.data)
    return path


def _read(item: Damaged, path: Path) -> str:
    """'ok', or 'error' after a one-line DiagError; anything else is raised."""
    try:
        if item.reader == KINETO:
            trace = open_input(kineto=path)
        else:
            trace = open_input(torch_trace=path)
        findings = analyze(trace)
    except DiagError as exc:
        assert exc.message and "\n" not in exc.message, (item.name, exc.message)
        return "error"
    for finding in findings:
        assert finding.title and "\n" not in finding.title, (item.name, finding.title)
    assert all("\n" not in w for w in input_warnings(trace)), item.name
    return "ok"


@pytest.mark.slow
def test_a_thousand_damaged_inputs_give_findings_or_one_line(tmp_path: Path) -> None:
    failures: list[str] = []
    outcomes = {"ok": 0, "error": 0}
    for item in damaged_inputs(SEED, COUNT):
        path = _write(tmp_path, item)
        try:
            outcomes[_read(item, path)] += 1
        except Exception:  # the point of the test: report every input that raised
            failures.append(f"{item.name}: {traceback.format_exc(limit=-3)}")
        finally:
            path.unlink()
    assert not failures, f"{len(failures)} input(s) raised:\n" + "\n".join(failures[:10])
    assert sum(outcomes.values()) == COUNT
    # Both kinds occur: damage that is refused, and damage that is read around.
    assert outcomes["ok"] > 50 and outcomes["error"] > 50, outcomes


@pytest.mark.parametrize("label", ["kineto", "torch-trace"])
def test_refused_inputs_exit_2_with_one_line(tmp_path: Path, label: str) -> None:
    """Three refused inputs per reader through `python -m diag analyze`."""
    refused = []
    for item in damaged_inputs(SEED, COUNT):
        if item.reader != label or "gzip" not in item.name:
            continue
        path = _write(tmp_path, item)
        try:
            _read(item, path)
        except Exception:
            continue  # the in-process test reports it
        if _read(item, path) == "error":
            refused.append(path)
        if len(refused) == 3:
            break
    assert len(refused) == 3
    option = "--kineto" if label == KINETO else "--torch-trace"
    for path in refused:
        proc = subprocess.run(
            [sys.executable, "-m", "diag", "analyze", option, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, (path.name, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("diag: error: "), proc.stderr
        assert "Traceback" not in proc.stderr
