"""The reader's fast path for steps (diag.trace.step_builder, diag.trace.run._load_process)
builds the Run that its general path builds: each step_end and step_gpu searched in its
request's rows and applied to its row one at a time, as the events say (`fast=False`).
Compared on real recordings (committed H200 and LightX2V traces: GPU step times that come
steps late, allocator figures, warmup and live requests), on type-confused step events of a
real recording (each skipped and counted alike), and on orders diag does not write but a
trace may hold (interleaved requests, a step ended twice, a request id used again, steps
outside any request, a second process_start). The hand-made cases also check the values."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from diag.trace import lines
from diag.trace.load import _load_process, load_trace
from diag.trace.run import RunData
from tests.analyzers.support import write_trace
from tests.fuzz_corpus import _confuse, _line

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(
    path.parent
    for path in [*DATA.glob("h200/*/manifest.json"), *DATA.glob("lightx2v/*/manifest.json")]
)
WARM_WIDTH = DATA / "lightx2v" / "warm-width"
STEP_KINDS = ("step_start", "step_end", "step_gpu")


def _read(folder: Path, fast: bool) -> list[RunData]:
    """Every run's event files through one path of the reader."""
    runs = []
    for run_folder in sorted(p for p in (folder / "runs").iterdir() if p.is_dir()):
        run = RunData(run_folder.name, run_folder, None)
        for events in sorted(run_folder.glob("*/events.jsonl")):
            _load_process(run, events, fast=fast)
        runs.append(run)
    return runs


def _model(run: RunData) -> dict[str, Any]:
    return {
        "processes": [dataclasses.astuple(p) for p in run.processes],
        "requests": [
            (r.request_id, r.phase, r.shape, r.pid, r.start_t, r.end_t, r.label, r.step_count)
            for r in run.requests
        ],
        "steps": [(*s.values(), s.memory_start) for r in run.requests for s in r.steps],
        "compiles": [dataclasses.astuple(c) for c in run.compiles],
        "events": [(e.kind, e.t, e.pid, e.data) for e in run.events],
        "cache": (run.cache_final, run.cache_history),
        "errors": run.collector_errors,
        "skipped": (run.corrupt_lines, run.warnings),
    }


def _same(folder: Path) -> list[RunData]:
    fast, general = _read(folder, True), _read(folder, False)
    assert [_model(r) for r in fast] == [_model(r) for r in general]
    return fast


@pytest.mark.parametrize("folder", REAL, ids=[f"{p.parent.name}/{p.name}" for p in REAL])
def test_real_recordings_read_alike_on_both_paths(folder: Path) -> None:
    runs = _same(folder)
    assert sum(len(r.steps) for r in runs) > 0


def test_the_real_recordings_hold_what_the_fast_path_must_get_right() -> None:
    """Late GPU times and allocator figures are in the corpus above (else it proves less)."""
    late_gpu = memory = False
    for folder in REAL:
        for path in folder.glob("runs/*/*/events.jsonl"):
            latest = None
            for line in path.read_text().splitlines():
                event = json.loads(line)
                where = (event.get("request_id"), event.get("step"))
                if event["ev"] == "step_start":
                    latest = where
                late_gpu |= event["ev"] == "step_gpu" and where != latest
                memory |= event["ev"] == "step_end" and "memory" in event
    assert late_gpu and memory


def test_type_confused_step_events_are_skipped_and_counted_alike(tmp_path: Path) -> None:
    """200 copies of a real LightX2V recording, 1-3 of their step events each given a field
    of the wrong type or range (tests/fuzz_corpus.py): the line is skipped and counted on both
    paths, and the steps read are the same."""
    source = next((WARM_WIDTH / "runs" / "compiled").glob("*/events.jsonl"))
    events = [json.loads(line) for line in source.read_text().splitlines()]
    steps = [i for i, e in enumerate(events) if e["ev"] in STEP_KINDS]
    clean = _read(WARM_WIDTH, True)[0]
    rng = random.Random(3)
    skipped = 0
    for number in range(200):
        folder = tmp_path / f"c{number}"
        shutil.copytree(WARM_WIDTH, folder, ignore=shutil.ignore_patterns(".diag-cache"))
        path = next((folder / "runs" / "compiled").glob("*/events.jsonl"))
        text = [json.dumps(e, separators=(",", ":")).encode() for e in events]
        for index in rng.sample(steps, rng.randint(1, 3)):
            event, raw = _confuse(rng, json.loads(json.dumps(events[index])))
            text[index] = _line(event, raw)
        path.write_bytes(b"\n".join(text) + b"\n")
        (run,) = _same(folder)
        skipped += run.corrupt_lines
        assert len(run.steps) <= len(clean.steps)
        if run.corrupt_lines:
            assert "corrupt line(s) skipped" in run.warnings[0]
    assert skipped > 100  # most confusions are refused by the schema


def test_a_string_step_index_is_one_skipped_line_and_one_step_fewer(tmp_path: Path) -> None:
    source = next((WARM_WIDTH / "runs" / "compiled").glob("*/events.jsonl"))
    folder = tmp_path / "t"
    shutil.copytree(WARM_WIDTH, folder, ignore=shutil.ignore_patterns(".diag-cache"))
    path = next((folder / "runs" / "compiled").glob("*/events.jsonl"))
    events = [json.loads(line) for line in source.read_text().splitlines()]
    first = next(i for i, e in enumerate(events) if e["ev"] == "step_start")
    events[first]["step"] = "abc"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    (run,) = _same(folder)
    (clean,) = _read(WARM_WIDTH, True)
    assert run.corrupt_lines == 1 and len(run.steps) == len(clean.steps) - 1
    assert f"(first: line {first + 1}: step_start:" in run.warnings[0]


def _step(kind: str, t: int, rid: str | None, step: int | None, **fields: Any) -> dict[str, Any]:
    return {"t": t, "ev": kind, "request_id": rid, "step": step, "phase": "live", **fields}


def _request(t: int, rid: str | None, shape: list[int] | None = None) -> dict[str, Any]:
    return {"t": t, "ev": "request_start", "request_id": rid, "phase": "live", "shape": shape}


MEMORY = {"allocated": 10, "reserved": 20, "max_allocated": 15}

UNUSUAL: dict[str, list[dict[str, Any]]] = {
    # Two requests served side by side (threads): starts and ends interleave.
    "interleaved": [
        _request(2, "a", [1, 2]),
        _request(3, "b", [3, 4]),
        _step("step_start", 10, "a", 0, shape=[1, 2]),
        _step("step_start", 11, "b", 0, shape=[3, 4]),
        _step("step_end", 12, "a", 0, wall_s=0.5, memory=MEMORY),
        _step("step_gpu", 13, "b", 0, gpu_s=0.25),
        _step("step_end", 14, "b", 0, wall_s=0.75),
        _step("step_gpu", 15, "a", 0, gpu_s=0.125),
    ],
    # A step ended twice (the later end's times win; a profiled mark stays; figures only
    # where the end has some), a GPU time two steps late, one never measured (null).
    "ended twice": [
        _request(2, "r"),
        _step("step_start", 10, "r", 0, profiled=False),
        _step("step_end", 11, "r", 0, wall_s=1.0, profiled=True, memory=MEMORY),
        _step("step_start", 12, "r", 1),
        _step("step_end", 13, "r", 0, wall_s=2.0, cpu_s=0.5, host_load=0.25),
        _step("step_start", 14, "r", 2),
        _step("step_gpu", 15, "r", 0, gpu_s=0.5),
        _step("step_gpu", 16, "r", 1, gpu_s=None),
        _step("step_end", 17, "r", 2, wall_s=3.0, memory={"allocated": 5}),
    ],
    # A request id used again: steps go to the newest request; an end for the old request's
    # step after the new request began finds no row. Steps outside any request are not kept;
    # a step_end before its step_start finds none.
    "reused id": [
        _step("step_start", 5, "x", 0),
        _request(6, "x", [8]),
        _step("step_end", 7, "x", 0, wall_s=9.0),
        _step("step_start", 8, "x", 0, shape=[8], memory=MEMORY),
        _request(9, "x", [9]),
        _step("step_end", 10, "x", 0, wall_s=1.0),
        _step("step_start", 11, "x", 0, shape=[9]),
        _step("step_end", 12, "x", 0, wall_s=2.0),
        _step("step_start", 13, "nobody", 0),
        _step("step_end", 14, "nobody", 0, wall_s=3.0),
    ],
    # No request id (the request "None"), no step index (step 0), no phase ("live"), a
    # second process_start (a new pid from then on), and a step that never ended.
    "odd positions": [
        _request(2, None),
        {"t": 3, "ev": "step_start", "request_id": None, "step": None, "phase": None},
        {"t": 4, "ev": "step_end", "request_id": None, "step": 0, "wall_s": 0.5},
        {"t": 5, "ev": "process_start", "pid": 9, "argv": []},
        {"t": 6, "ev": "step_start", "request_id": "None", "step": 1, "phase": ""},
        {"t": 7, "ev": "step_end", "request_id": "None", "step": 1, "memory": None},
        _step("step_start", 8, "None", 2, profiled=True),
    ],
}


@pytest.mark.parametrize("name", sorted(UNUSUAL))
def test_orders_diag_does_not_write_read_alike(tmp_path: Path, name: str) -> None:
    write_trace(tmp_path, UNUSUAL[name])
    _same(tmp_path)


def _values(run: RunData) -> list[tuple[Any, ...]]:
    return [
        (s.request_id, s.index, s.end_t, s.wall_s, s.gpu_s, s.profiled, s.memory, s.pid)
        for s in run.steps
    ]


def test_the_unusual_orders_give_what_the_events_say(tmp_path: Path) -> None:
    def run_of(name: str) -> RunData:
        (tmp_path / name).mkdir()
        trace = write_trace(tmp_path / name, UNUSUAL[name])
        assert trace.compiled is not None
        return trace.compiled

    assert _values(run_of("interleaved")) == [
        ("a", 0, 12, 0.5, 0.125, False, MEMORY, 7),
        ("b", 0, 14, 0.75, 0.25, False, None, 7),
    ]
    twice = run_of("ended twice")
    assert _values(twice) == [
        ("r", 0, 13, 2.0, 0.5, True, MEMORY, 7),
        ("r", 1, None, None, None, False, None, 7),
        ("r", 2, 17, 3.0, None, False, {"allocated": 5}, 7),
    ]
    assert (twice.steps[0].cpu_s, twice.steps[0].host_load) == (0.5, 0.25)
    reused = run_of("reused id")
    assert [(r.request_id, r.shape, len(r.steps)) for r in reused.requests] == [
        ("x", [8], 1),
        ("x", [9], 1),
    ]
    assert _values(reused) == [("x", 0, None, None, None, False, None, 7)] + [
        ("x", 0, 12, 2.0, None, False, None, 7)
    ]
    assert reused.steps[0].memory_start == MEMORY
    odd = run_of("odd positions")
    assert [(s.request_id, s.index, s.phase, s.pid, s.end_t) for s in odd.steps] == [
        ("None", 0, "live", 7, 4),
        ("None", 1, "live", 9, 7),
        ("None", 2, "live", 9, None),
    ]
    assert odd.steps[2].profiled and odd.steps[2].wall_s is None
    assert [p.pid for p in odd.processes] == [7, 9]


def test_skipped_lines_are_numbered_across_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines are counted only when one is skipped (diag.trace.lines._LineCounter): its number
    is still its line in the file, in a later read, after an overlong line."""
    monkeypatch.setattr(lines, "_CHUNK", 256)
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 1000)
    events = [_request(2, "r")]
    events += [_step("step_start", 10 + i, "r", i) for i in range(40)]
    events.insert(30, {"t": 5, "ev": "graph_break", "reason": "x" * 2000})  # line 32
    events.insert(35, {"t": "late", "ev": "step_end"})  # line 37
    trace = write_trace(tmp_path, events)
    assert trace.compiled is not None
    assert trace.compiled.corrupt_lines == 2
    assert "(first: line 32: longer than 0 MiB)" in trace.compiled.warnings[0]
    (tmp_path / "b").mkdir()
    write_trace(tmp_path / "b", events[:30] + events[31:])
    again = load_trace(tmp_path / "b").compiled
    assert again is not None and "(first: line 36: step_end:" in again.warnings[0]
