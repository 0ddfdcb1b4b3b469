"""`diag analyze` and `diag demo` as a user runs them (subprocesses, real recordings)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .support import PYTHON, diag_record


def test_demo_records_and_prints_findings(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "[live-compile]" in proc.stdout and "[guard-churn]" in proc.stdout
    assert "freqs_w" in proc.stdout and "block.state.config" in proc.stdout
    assert (tmp_path / "diag-demo" / "manifest.json").exists()
    again = subprocess.run(
        [PYTHON, "-m", "diag", "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert again.returncode == 0, "a second demo replaces the first"


def test_analyze_json_and_only(tmp_path: Path) -> None:
    trace = tmp_path / "t"
    fixture = [PYTHON, "-m", "diag.fixtures", "--compile", "--plant", "unwarmed-shape", "-q"]
    assert diag_record(trace, *fixture, options=("--profile", "none")).returncode == 0
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
