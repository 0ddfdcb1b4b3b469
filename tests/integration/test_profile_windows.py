"""Default profile windows on short requests (LightX2V serves 3-step requests): each window
closes with its request, and step0-spike still judges (or says it cannot).

Recorded for real: the reference service with `--requests 8x8:3,8x12:3,8x8:2` (the second
request at a width warmup never saw, so its step 0 recompiles), default `--profile`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diag.analyzers.step0_spike import analyze as step0_spike
from diag.trace.load import load_trace

from .support import PYTHON, diag_record, events, of

FIXTURE = (PYTHON, "-m", "diag.fixtures", "--compile", "--backend", "aot_eager", "-q")


@pytest.fixture(scope="module")
def short_requests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("rec") / "trace"
    proc = diag_record(trace, *FIXTURE, "--requests", "8x8:3,8x12:3,8x8:2")
    assert proc.returncode == 0, proc.stderr
    return trace


def _window_steps(evs: list[dict[str, Any]]) -> dict[str, list[tuple[str, int]]]:
    """Window name -> the (request, step) of every step that started while it was open."""
    open_window: str | None = None
    steps: dict[str, list[tuple[str, int]]] = {}
    for event in evs:
        if event["ev"] == "profile_window_start":
            open_window = event["window"]
            steps[open_window] = []
        elif event["ev"] == "profile_window_end":
            open_window = None
        elif event["ev"] == "step_start" and open_window is not None:
            steps[open_window].append((event["request_id"], event["step"]))
        elif event["ev"] == "request_start" and open_window is not None:
            raise AssertionError(f"window {open_window} still open at {event['request_id']}")
    return steps


def test_windows_close_with_their_request(short_requests: Path) -> None:
    """r0's steady window gets the one step r0 has left (step 2) and closes at r0's end, not in
    r1's new-shape compile step; r1 profiles the second steady step from its own step 2; r2
    (2 steps) has no third step. No window is open when the next request starts."""
    evs = [e for e in events(short_requests) if e.get("phase") != "warmup"]
    assert _window_steps(evs) == {
        "r0-s0-new-shape": [("r0", 0)],
        "r0-s2-steady": [("r0", 2)],
        "r1-s0-new-shape": [("r1", 0)],
        "r1-s2-steady": [("r1", 2)],
    }
    ends = {e["window"]: e["steps"] for e in of("profile_window_end", evs)}
    assert set(ends.values()) == {1}
    # The service declares each request's step count: a window closes after the last step,
    # before the request's own end (where LightX2V decodes and saves the video).
    request_end = {e["request_id"]: e["t"] for e in of("request_end", evs)}
    for end in of("profile_window_end", evs):
        assert end["t"] < request_end[end["window"].split("-")[0]], end["window"]
    profiled = [(e["request_id"], e["step"]) for e in of("step_end", evs) if e["profiled"]]
    assert profiled == [("r0", 0), ("r0", 2), ("r1", 0), ("r1", 2)]
    assert all(isinstance(e["cpu_s"], float) and e["cpu_s"] >= 0 for e in of("step_end", evs))


def test_step0_spike_judges_short_requests(short_requests: Path) -> None:
    """r1's recompile is found against steps 1 and 2 (one unprofiled step left, so profiled
    step 2 joins the baseline); so is r0 judged; r2 (2 steps) cannot be judged, and an INFO
    says so."""
    findings = {f.id: f for f in step0_spike(load_trace(short_requests))}
    r1 = findings["step0-spike:r1"]
    assert (r1.severity, r1.data["cause"]) == ("warning", "compile")
    assert r1.data["baseline_steps"] == [1, 2]
    assert r1.data["profiled_in_baseline"] == [2]
    unjudged = findings["step0-spike:unjudged"]
    assert unjudged.severity == "info"
    assert unjudged.title.startswith("step 0 of request r2 could not be judged")
    r0 = findings.get("step0-spike:r0")
    if r0 is not None:  # its profiled step 0 may or may not spike
        assert r0.data["profiled_in_baseline"] == [2]
        # Never a warning without a cause: r0 compiled nothing live, and being profiled is no
        # cause. On a loaded host its step 0 can pay a first-use cost the trace names (the
        # allocator growing inside it, a collection): a warning then says so.
        assert r0.severity == "info" or r0.data["cause"] not in ("unknown", "compile"), (
            r0.title,
            r0.evidence,
        )
    assert set(findings) <= {"step0-spike:r0", "step0-spike:r1", "step0-spike:unjudged"}
