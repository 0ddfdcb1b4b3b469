"""Begins with no end (diag.trace.inflight), on hand-written event files: what a process killed
mid-compile, or one written by an older diag whose compile_start had no position, leaves.
Real recordings of the same are in tests/integration/test_server_lifecycle.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diag.evidence.causes import recompile_cause
from diag.evidence.status import assess
from diag.trace.inflight import CUT_OFF
from diag.trace.load import load_trace
from diag.trace.run import RunData

FRAME = {"name": "block", "file": "/srv/model.py", "line": 7}
WARM = {"phase": "warmup", "request_id": "w1", "step": 0}
LIVE = {"phase": "live", "request_id": "r2", "step": 0}
GUARD = {
    "compile_id": "0/0",
    "kind": "tensor-size",
    "source": "x",
    "expected": "4",
    "actual": "6",
    "user_location": None,
    "raw": "tensor 'x' size mismatch at index 0. expected 4, actual 6",
}


def _trace(tmp_path: Path, events: list[dict[str, Any]], status: str = "complete") -> RunData:
    manifest = {"format": "diag-trace", "version": 1, "status": status, "runs": []}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    folder = tmp_path / "runs" / "compiled" / "pid7"
    folder.mkdir(parents=True)
    lines = [json.dumps({"t": t, **e}) for t, e in enumerate(events, start=1)]
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    run = load_trace(tmp_path).compiled
    assert run is not None
    return run


def _served(live_start: dict[str, Any]) -> list[dict[str, Any]]:
    """Warmup compiles the frame; the live request's step 0 starts a recompile, then nothing."""
    return [
        {"ev": "process_start", "pid": 7, "ppid": 1, "argv": ["serve"]},
        {"ev": "request_start", "request_id": "w1", "phase": "warmup", "shape": [4]},
        {"ev": "step_start", **WARM, "shape": [4], "profiled": False},
        {"ev": "compile_start", "compile_id": "0/0", "epoch": 0},
        {"ev": "compile_end", "compile_id": "0/0", "epoch": 0, "frame": FRAME, "result": "ok"}
        | {"duration_s": 1.0, **WARM},
        {"ev": "step_end", **WARM, "wall_s": 1.1, "profiled": False},
        {"ev": "request_end", "request_id": "w1", "phase": "warmup"},
        {"ev": "request_start", "request_id": "r2", "phase": "live", "shape": [6]},
        {"ev": "step_start", **LIVE, "shape": [6], "profiled": False},
        {"ev": "profile_window_start", "window": "r2-s0-new-shape", "wall_ns": 5},
        {"ev": "recompile", "compile_id": "0/1", "epoch": 0, "guards": [GUARD], **LIVE},
        live_start,
        {"ev": "graph_break", "compile_id": "0/1", "epoch": 0, "reason": "x", **LIVE},
    ]


def test_a_recompile_with_no_end_is_a_cut_off_live_compile(tmp_path: Path) -> None:
    start = {"ev": "compile_start", "compile_id": "0/1", "epoch": 0, "frame": FRAME, **LIVE}
    run = _trace(tmp_path, _served(start))
    cut = [c for c in run.compiles if c.result == CUT_OFF]
    assert len(cut) == 1
    item = cut[0]
    assert (item.compile_id, item.phase, item.request_id, item.step) == ("0/1", "live", "r2", 0)
    assert item.frame is not None and item.frame.name == "block" and item.live
    assert [g.source for g in item.guards] == ["x"]
    cause = recompile_cause(run, item)
    assert cause is not None and cause.guard is not None and cause.guard.source == "x"
    assert (item.start_t, item.duration_s) == (12, 1 / 1e9)  # to the last event, t 13
    kinds = sorted((u.kind, u.name) for u in run.unfinished)
    assert kinds == [
        ("compile", "0/1"),
        ("profile-window", "r2-s0-new-shape"),
        ("request", "r2"),
        ("step", "r2 step 0"),
    ]


def test_an_older_compile_start_is_placed_by_its_recompile_and_named_by_its_frame(
    tmp_path: Path,
) -> None:
    start = {"ev": "compile_start", "compile_id": "0/1", "epoch": 0}  # no frame, no position
    run = _trace(tmp_path, _served(start))
    item = next(c for c in run.compiles if c.result == CUT_OFF)
    assert (item.phase, item.request_id, item.step) == ("live", "r2", 0)
    assert item.frame is not None and item.frame.name == "block"  # the frame of 0/0


def test_a_first_compile_cut_off_is_placed_by_the_step_open_at_its_start(tmp_path: Path) -> None:
    events = _served({"ev": "compile_start", "compile_id": "1/0", "epoch": 0})
    events = [e for e in events if e["ev"] != "recompile"]
    run = _trace(tmp_path, events)
    item = next(c for c in run.compiles if c.result == CUT_OFF)
    assert (item.compile_id, item.request_id, item.step, item.guards) == ("1/0", "r2", 0, [])
    assert item.frame is None  # nothing named frame 1 before


def test_a_process_that_reached_its_exit_hook_left_nothing_open(tmp_path: Path) -> None:
    start = {"ev": "compile_start", "compile_id": "0/1", "epoch": 0, "frame": FRAME, **LIVE}
    run = _trace(tmp_path, [*_served(start), {"ev": "process_end"}])
    assert [c.result for c in run.compiles] == ["ok"]
    assert run.unfinished == []


def test_the_notice_names_what_was_left_and_the_running_case_says_in_progress(
    tmp_path: Path,
) -> None:
    start = {"ev": "compile_start", "compile_id": "0/1", "epoch": 0, "frame": FRAME, **LIVE}
    events = _served(start)
    events.append({"ev": "cudagraph_record_start", "compile_id": "0/1", **LIVE})
    run = _trace(tmp_path, events)
    assert ("cudagraph-record", "0/1") in [(u.kind, u.name) for u in run.unfinished]
    notices = [n for n in assess(load_trace(tmp_path)).notices if n.kind == "unfinished"]
    assert len(notices) == 1
    message = notices[0].message
    assert message.startswith("process 7 of run compiled ended during live request r2 at step 0")
    assert "left unfinished: the request, step 0 (open at least" in message
    assert "recompile 0/1 (open at least" in message
    assert "profiler window r2-s0-new-shape (no Kineto trace written)" in message
    assert "the CUDA-graph recording of compile 0/1" in message


def test_a_hostile_task_id_is_printed_tame(tmp_path: Path) -> None:
    """A client chooses LightX2V's task id: control characters never reach a terminal, and a
    long one is cut."""
    from diag.evidence.request_names import request_name

    label = "\x1b[31mred\x07" + "x" * 200
    run = _trace(
        tmp_path,
        [
            {"ev": "process_start", "pid": 7, "ppid": 1, "argv": ["serve"]},
            {"ev": "request_start", "request_id": "r1", "phase": "live", "label": label},
            {"ev": "request_end", "request_id": "r1", "phase": "live"},
            {"ev": "process_end"},
        ],
    )
    name = request_name(run, 7, "r1")
    assert name.startswith("r1 (task ?[31mred?xxx") and name.endswith("…)")
    assert name.isprintable() and len(name) < 64
