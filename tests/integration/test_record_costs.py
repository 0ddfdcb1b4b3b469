"""bench/record_costs.py in its smallest form: a real recording of the reference service
(aot_eager, small, 3 groups of 3-step requests) itemised. Structure only, no timing: every
mechanism is timed and in the table, and the counts read off the trace are the run's own
(2 step events a step, one request start a recorded request, 8 compiled calls a step).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "record_costs.py"
PAIRS, STEPS = 3, 3
#: The small wan model: 4 blocks, 2 guidance passes (cond, uncond) a step.
CALLS_PER_STEP = 8
#: Every mechanism the child times (the CUDA ones only on CUDA).
UNITS = (
    "step",
    "tracker",
    "event",
    "request",
    "cache",
    "compiled_call",
    "shapes",
    "region",
    "region_window",
    "gc",
    "gc_pause",
    "limit_check",
    "magi_check",
    "hygiene",
    "api_step",
    "chain",
)
LABELS = (
    "step boundary: adapter's model.infer hook",
    "request boundary: run_pipeline hook",
    "cache-entry snapshot at a step end",
    "compiled-call wrapper (enter/leave)",
    "call-shape sampler + limit test",
    "region marker, no window open",
    "region marker inside a window",
    "CUDA event at a call that may end a step",
    "gc callback, one collection",
    "gc pause kept (full or long collection)",
    "guard check of a call (limit_calls)",
    "magi guard check (its check_verbose)",
    "diag.api step() (a program's own markers)",
    "empty_cache / gc.collect wrapper",
    "profile window stop + JSON write",
)


@pytest.fixture(scope="module")
def itemised(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    out = tmp_path_factory.mktemp("costs") / "costs.json"
    proc = subprocess.run(
        [
            sys.executable, str(BENCH), "--pairs", str(PAIRS), "--settle", "1",
            "--steps", str(STEPS), "--repeats", "3", "--number", "20", "--samples", "10",
            "--budget-s", "60", "--json", str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_every_mechanism_is_timed(itemised: tuple[dict[str, Any], str]) -> None:
    data, _ = itemised
    units = data["units"]
    for key in UNITS:
        assert key in units, key
        for value in units[key].values():
            assert math.isfinite(value), (key, units[key])
        assert "warm" in units[key] or key == "chain", key
    assert "context_paused" in units["chain"]
    assert not units["window_opened"]


def test_counts_are_the_runs_own(itemised: tuple[dict[str, Any], str]) -> None:
    counts = itemised[0]["counts"]
    requests = counts["requests_served"] // 3  # one recorded request a group
    steps = requests * STEPS
    assert requests == PAIRS
    assert counts["step_start"] + counts["step_end"] == 2 * steps
    assert counts["step_end"] == steps
    assert counts["request_start"] == requests
    assert counts["compiled_calls"] == CALLS_PER_STEP * steps
    assert counts["collector_errors"] == 0
    assert counts["fallback_silent"]  # the fixture's adapter knows its steps
    assert not counts["regions_installed"]  # --profile none


def test_the_table_names_each_mechanism_beside_the_totals(
    itemised: tuple[dict[str, Any], str],
) -> None:
    table = itemised[1]
    for label in LABELS:
        assert label in table, label
    assert "measured recorded - paused" in table
    assert "measured paused - bare" in table
    assert "check, compiled-call hooks together" in table
    assert f"torch {itemised[0]['torch']}" in table
