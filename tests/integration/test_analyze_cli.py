"""`diag analyze` and `diag demo` as a user runs them (subprocesses, real recordings)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.conftest import RecordFixture
from tests.notebook.support import demo_trace

from .support import PYTHON, manifest


def test_demo_records_and_prints_findings(record_fixture: RecordFixture, tmp_path: Path) -> None:
    # An earlier demo's trace is already there (the session's shared recording of the demo's
    # plants, copied): the demo replaces it, as a second `diag demo` replaces the first.
    earlier = tmp_path / "diag-demo"
    shutil.copytree(demo_trace(record_fixture).path, earlier)
    before = _launch(earlier)
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "[live-compile]" in proc.stdout and "[guard-churn]" in proc.stdout
    assert "freqs_w" in proc.stdout and "block.state.config" in proc.stdout
    assert (earlier / "manifest.json").exists()
    assert _launch(earlier) != before, "the demo replaces an earlier demo's trace"


def _launch(trace: Path) -> tuple[str, int]:
    """When and by which launcher the trace was recorded."""
    m = manifest(trace)
    return m["started"], m["launcher_pid"]


def test_analyze_json_and_only(record_fixture: RecordFixture) -> None:
    # `diag record --profile none -- python -m diag.fixtures --compile --plant unwarmed-shape`,
    # the session's shared recording.
    trace = record_fixture("unwarmed-shape").path
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(proc.stdout)
    assert (doc["format"], doc["version"]) == ("diag-findings", 1)
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert [f["id"] for f in errors] == ["live-compile:wan_block_forward:r1"]
    assert doc["counts"]["error"] == 1
    only = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--only", "guard-churn"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "No findings" in only.stdout
    bad = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--only", "nope"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "unknown analyzer 'nope'" in bad.stderr
    listed = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "guard-churn" in listed.stdout.split()
