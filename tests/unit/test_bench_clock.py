"""The program's own clock: LightX2V's `infer_main cost` lines, tied to diag's steps.

On real recordings of ModelTC/LightX2V (tests/data/lightx2v: its events and its own log lines,
kept by bench/lightx2v_real.py); the captured log goes where `diag bench` keeps it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diag.benchmark.program_clock import CLOCK_PROGRAM, align, parse_infer_main
from diag.benchmark.trial import load_trial

DATA = Path(__file__).resolve().parents[1] / "data" / "lightx2v"
COLOURED = (
    "\x1b[32m2026-12-01 10:44:23.022\x1b[0m | \x1b[1mINFO    \x1b[0m | "
    "lightx2v.models.runners.default_runner:run_segment:243 - \x1b[1m==> step_index: 1 / 3\x1b[0m\n"
    "\x1b[32m2026-12-01 10:44:24.131\x1b[0m | \x1b[1mINFO    \x1b[0m | "
    "lightx2v.utils.profiler:__exit__:165 - \x1b[1m[Profile] Single GPU - Level1_Log "
    "🚀 infer_main cost 1.108443 seconds\x1b[0m\n"
)


def _with_log(tmp_path: Path, case: str, log: str) -> Path:
    trace = tmp_path / case
    shutil.copytree(DATA / case, trace)
    (trace / "runs" / "compiled" / "stderr.log").write_text(log)
    return trace


def test_parses_lightx2v_lines_with_their_step_index() -> None:
    logged = parse_infer_main((DATA / "warm-width" / "lightx2v.log").read_text())
    assert [(item.seconds, item.index, item.rank) for item in logged] == [
        (1.108443, 0, None),
        (1.119260, 1, None),
        (1.127522, 2, None),
    ]
    coloured = parse_infer_main(COLOURED)
    assert [(item.seconds, item.index) for item in coloured] == [(1.108443, 0)]
    ranked = parse_infer_main("[Profile] Rank 1 - Level1_Log 🚀 infer_main cost 0.25 seconds")
    assert [(item.seconds, item.index, item.rank) for item in ranked] == [(0.25, None, 1)]
    # Other profiled scopes are not steps.
    assert (
        parse_infer_main("[Profile] Single GPU - Level1_Log step_pre cost 0.000325 seconds") == []
    )


def test_a_real_recording_reads_lightx2vs_own_times(tmp_path: Path) -> None:
    log = (DATA / "warm-width" / "lightx2v.log").read_text()
    trace = _with_log(tmp_path, "warm-width", log)
    trial = load_trial("lx", 1, trace)
    assert trial.usable and trial.program_clock.aligned
    times = [(s.index, s.program_s) for s in trial.steps]
    assert times == [(0, 1.108443), (1, 1.119260), (2, 1.127522)]
    # diag's own step clock agrees with LightX2V's to within a few ms on this recording.
    for step in trial.steps:
        assert step.wall_s is not None and step.program_s is not None
        assert abs(step.wall_s - step.program_s) < 0.05
    proc = subprocess.run(
        [sys.executable, "-m", "diag", "bench", "--config", f"lx={trace}", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["clock"]["name"] == CLOCK_PROGRAM
    (row,) = data["steady_state"]
    assert row["step0_mean_s"] == pytest.approx(1.108443)
    assert row["windows"]["3"]["no_steps_in_window"] == [1]  # 3-step requests: no step 3


def test_lines_that_do_not_pair_with_steps_fall_back_and_say_why(tmp_path: Path) -> None:
    lines = (DATA / "warm-width" / "lightx2v.log").read_text().splitlines()
    short = "\n".join(line for line in lines if "1.119260" not in line) + "\n"
    trial = load_trial("lx", 1, _with_log(tmp_path, "warm-width", short))
    assert not trial.program_clock.aligned
    assert trial.program_clock.reason == (
        "2 infer_main line(s) against 3 live step(s) (5 in all): cannot pair them"
    )
    assert all(step.program_s is None for step in trial.steps)
    # A logged index that is not the step's: refused, not shifted.
    wrong = "\n".join(line.replace("step_index: 2 / 3", "step_index: 3 / 3") for line in lines)
    trial = load_trial("lx", 1, _with_log(tmp_path / "w", "warm-width", wrong))
    assert trial.program_clock.reason == "the logged step indices do not match diag's steps"


def test_no_lines_is_not_an_alignment() -> None:
    assert align([], []).reason == "the program logged no infer_main times"
