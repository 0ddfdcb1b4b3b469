"""`diag analyze` and `diag check`, as a user runs them, on the MagiCompiler recordings made on an
H200 (tests/data/h200/magi-*, bench/magi_session.sh): a clean magi run is quiet with and without
its eager baseline, each plant gets its one finding, and the record summary no longer calls
magi's compiles invisible."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from diag.fixtures.ground_truth import magi_expectation
from diag.record.summary import summarize_run

from .support import PYTHON

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
TOKENS = 4 * 24 * 48


def _analyze(tmp_path: Path, name: str) -> dict[str, Any]:
    trace = tmp_path / name
    shutil.copytree(DATA / name, trace)  # analyze writes its Kineto cache beside the trace
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--json"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _loud(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (f["severity"], f["id"])
        for f in result["findings"]
        if f["severity"] in ("error", "warning")
    ]


@pytest.mark.parametrize("name", ["magi-clean", "magi-clean-baseline", "magi-newshape"])
def test_clean_magi_runs_have_no_warning_or_error(tmp_path: Path, name: str) -> None:
    result = _analyze(tmp_path, name)
    assert result["status"]["complete"] is True
    assert _loud(result) == []
    magi = [f for f in result["findings"] if f["analyzer"] == "magi-compile"]
    assert [f["id"] for f in magi] == ["magi-compile:summary"]


@pytest.mark.parametrize(
    ("name", "plant"),
    [
        ("magi-specialized-dim", "magi-specialized-dim"),
        ("magi-guard-bypass", "magi-guard-bypass"),
        ("magi-unsplit-baseline", "magi-unsplit-attention"),
    ],
)
def test_each_plant_gets_its_magi_finding(tmp_path: Path, name: str, plant: str) -> None:
    truth = magi_expectation(plant, TOKENS)
    result = _analyze(tmp_path, name)
    magi = [(sev, fid) for sev, fid in _loud(result) if fid.startswith("magi-compile:")]
    assert magi == [(truth.severity, truth.finding)]


def test_specialised_dim_has_one_headline_across_analyzers(tmp_path: Path) -> None:
    """compile-failure and crash leave magi's failed first compile (and the crash it caused) to
    magi-compile: one error for one cause."""
    result = _analyze(tmp_path, "magi-specialized-dim")
    assert _loud(result) == [("error", "magi-compile:specialized-dim:wan_block_forward")]
    assert result["status"]["complete"] is False


def test_clean_magi_run_passes_check() -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "check", str(DATA / "magi-clean")],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_record_summary_counts_magis_compiles() -> None:
    text = "\n".join(summarize_run(DATA / "magi-guard-bypass" / "runs" / "compiled").lines())
    assert "4 magi compile(s) recorded" in text
    assert "invisible" not in text
    clean = "\n".join(summarize_run(DATA / "magi-clean" / "runs" / "compiled").lines())
    assert "0 guard check(s) failed" in clean
