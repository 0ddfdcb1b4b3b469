"""The export of what a CPU run of the reference service does not produce: a recompile-limit hit,
two compiles that overlap (two threads), a process killed inside a step. Hand-written event files
(docs/FORMAT.md), as tests/analyzers/support.py writes them."""

from __future__ import annotations

from pathlib import Path

from diag.perfetto import trace_events
from diag.perfetto.tracks import Slice, lanes
from tests.analyzers.support import write_trace

from .tef import as_written, check

S = 10**9  # ns


def _position(request: str, step: int) -> dict[str, object]:
    return {"phase": "live", "request_id": request, "step": step}


def test_limit_hits_overlapping_compiles_and_a_killed_step_stay_well_formed(
    tmp_path: Path,
) -> None:
    frame = {"name": "forward", "file": "/app/model.py", "line": 10}
    guard = {
        "compile_id": "0/0",
        "kind": "python-value",
        "source": "self.step",
        "expected": "0",
        "actual": "1",
        "raw": "0/0: self.step == 0",
    }
    events = [
        {"t": 2 * S, "ev": "request_start", "request_id": "r0", "phase": "live", "shape": [2]},
        {"t": 2 * S, "ev": "step_start", "request_id": "r0", "step": 0, "phase": "live"},
        {
            "t": 3 * S,
            "ev": "recompile",
            "compile_id": "0/1",
            "guards": [guard],
            **_position("r0", 0),
        },
        # Two compiles at once (another thread compiled too): they overlap without nesting.
        {
            "t": 5 * S,
            "ev": "compile_end",
            "compile_id": "0/1",
            "frame": frame,
            "result": "ok",
            "duration_s": 2.0,
            "start_t": 3 * S,
            **_position("r0", 0),
        },
        {
            "t": 6 * S,
            "ev": "compile_end",
            "compile_id": "1/0",
            "frame": {**frame, "name": "helper"},
            "result": "ok",
            "duration_s": 2.0,
            "start_t": 4 * S,
            **_position("r0", 0),
        },
        {
            "t": 7 * S,
            "ev": "recompile_limit",
            "compile_id": "0/8",
            "frame": frame,
            "reason": "hit config.recompile_limit (8)",
            **_position("r0", 0),
        },
        {"t": 8 * S, "ev": "step_end", "request_id": "r0", "step": 0, "wall_s": 6.0},
        # Killed in step 1: no step_end, no request_end.
        {"t": 9 * S, "ev": "step_start", "request_id": "r0", "step": 1, "phase": "live"},
        {"t": 10 * S, "ev": "graph_break", "reason": "print", **_position("r0", 1)},
    ]
    trace = write_trace(tmp_path, events)
    checked = check(as_written(trace_events(trace)))
    [pid] = checked.process_names
    steps = {s.name: s for s in checked.on(pid, "steps")}
    assert set(steps) == {"r0 s0", "r0 s1"}
    # The killed step runs to the process's last recorded instant.
    assert steps["r0 s1"].end - steps["r0 s1"].start == 1_000_000
    compiles = checked.on(pid, "compiles")
    assert len({c.tid for c in compiles}) == 2  # two lanes: "compiles", "compiles (2)"
    assert all(c.inside(steps["r0 s0"]) for c in compiles)
    [request] = checked.on(pid, "requests")
    assert all(s.inside(request) for s in steps.values())
    names = sorted(e["name"] for e in checked.instants)
    assert names == [
        "graph break",
        "guard failure -> recompile 0/1 forward",
        "recompile limit: forward",
    ]
    [limit] = [e for e in checked.instants if e["name"].startswith("recompile limit")]
    assert limit["args"]["reason"] == "hit config.recompile_limit (8)"
    origin = checked.document["otherData"]["diag"]
    assert "origin_t" in origin  # the hand-written process has no unix anchor


def test_lanes_keep_each_lane_a_stack() -> None:
    def at(start: int, end: int) -> Slice:
        return Slice(f"{start}-{end}", start, end, "x")

    packed = lanes([at(0, 10), at(2, 4), at(4, 12), at(12, 13), at(5, 6), at(10, 11)])
    assert [[s.name for s in lane] for lane in packed] == [
        ["0-10", "2-4", "5-6", "10-11", "12-13"],
        ["4-12"],
    ]
