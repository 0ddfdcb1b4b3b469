"""bench/compat.py's logic without its venvs: which releases it picks, what it reads off a
program's output (a real run of the 5-line loop through the probe), and when a row fails."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]


compat = load_bench("compat")


@pytest.fixture(scope="module")
def loop_stdout() -> str:
    """The probe running the compat loop, as the smoke runs it (plain)."""
    proc = subprocess.run(
        [sys.executable, "bench/compat_probe.py", "bench/compat_loop.py"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert compat.TRACEBACK not in proc.stderr
    return proc.stdout


def test_releases_newest_patch_per_minor_from_the_bound() -> None:
    listed = (
        "torch (2.15.0)\n"
        "Available versions: 2.15.0, 2.13.0+cpu, 2.13.0, 2.7.1, 2.7.0, 2.6.0, 2.5.1, 2.16.0rc1\n"
    )
    versions = compat.parse_index_versions(listed)
    assert versions[:3] == ["2.15.0", "2.13.0+cpu", "2.13.0"]
    releases = compat.newest_patches(versions, (2, 6))
    assert releases == ["2.6.0", "2.7.1", "2.13.0", "2.15.0"]
    assert compat.select(releases, "oldest,newest") == ["2.6.0", "2.15.0"]
    assert compat.select(releases, "2.7,2.13,newest") == ["2.7.1", "2.13.0", "2.15.0"]
    assert compat.select(releases, "all") == releases
    with pytest.raises(SystemExit):
        compat.select(releases, "2.9")
    assert compat.parse_index_versions("ERROR: no matching distribution") == []


def test_lower_bound_is_pyprojects() -> None:
    text = (REPO / "pyproject.toml").read_text()
    major, minor = compat.lower_bound()
    assert f'"torch>={major}.{minor}"' in text


def test_probe_prints_the_programs_checksum_lines_and_dynamo_counters(loop_stdout: str) -> None:
    program = compat.PROGRAMS["loop"]
    lines = [ln for ln in loop_stdout.splitlines() if ln.startswith("loop ")]
    assert [ln.split()[1] for ln in lines] == ["4", "4", "8"]
    assert len(compat.checksum(loop_stdout, program.checksum)) == 12
    counters = compat.parse_counters(loop_stdout)
    assert counters is not None
    # One frame, compiled at size 4 and again at size 8: what Dynamo itself counted.
    assert counters["stats"]["unique_graphs"] == 2
    assert compat.parse_counters("loop 4 1.0\n") is None


def test_a_row_fails_on_any_difference(loop_stdout: str) -> None:
    program = compat.PROGRAMS["loop"]
    run = compat.Run(
        0, compat.checksum(loop_stdout, program.checksum), compat.parse_counters(loop_stdout),
        False, 1.0,
    )  # fmt: skip
    analyze = (
        "ERROR   [live-compile] <lambda> recompiled during live request r2 at step 0 (1.10 s of "
        "compile): tensor 'x' size mismatch at index 0. expected 4, actual 8\n"
    )

    def row(recorded: Any, analyze_out: str = analyze, check_rc: int = 1) -> Any:
        r = compat.Row("2.13.0", "loop", 0.0, run, recorded, analyze_rc=0, check_rc=check_rc)
        return compat.judge(r, analyze_out, program.recompile)

    assert row(run).failures == []
    assert "loop | exit 0, 1 s | exit 0, 1 s | yes" in compat.format_table([row(run)])
    other_sum = compat.checksum(loop_stdout.replace("loop 8", "loop 9"), program.checksum)
    cases = {
        "recorded run exit 1": dataclasses.replace(run, rc=1),
        "checksums differ": dataclasses.replace(run, checksum=other_sum),
        "Dynamo counters differ: stats.unique_graphs 2 vs 3": dataclasses.replace(
            run, counters={**run.counters, "stats": {**run.counters["stats"], "unique_graphs": 3}}
        ),
        "traceback on the recorded run": dataclasses.replace(run, traceback=True),
    }
    for expected, recorded in cases.items():
        failures = row(recorded).failures
        assert len(failures) == 1 and failures[0].startswith(expected), (expected, failures)
    assert row(run, analyze_out="").failures == ["diag analyze does not name the planted recompile"]
    assert row(run, check_rc=3).failures == ["diag check exit 3"]
    assert "FAIL: diag check exit 3" in compat.format_table([row(run, check_rc=3)])
