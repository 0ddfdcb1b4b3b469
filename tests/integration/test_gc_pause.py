"""A step-0 spike that is Python's garbage collector: a full collection after warmup.

The program keeps 1.5 M small lists from warmup (what a served model's warmup leaves: compiled
graphs, guards, caches), collects once by hand, then in step 0 of its first live request makes
1.2 M more that survive: CPython runs a full collection (generation 2) there, which scans
every one of them, and no compile, kernel or allocator event shows for it. The program's own
record is its `gc.callbacks` entry, registered beside diag's; diag's `gc_pause` events and the
spike's cause are asserted against it. The explicit `gc.collect()` is the program's call
(`gc_collect`), not a pause.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from diag.analyzers import run_analyzers
from diag.trace.load import load_trace

from .support import PYTHON, diag_record, events, of

PROGRAM = """
import gc, json, sys, time
import torch
from diag import api

own = []
started = [0]

def mine(phase, info):
    if phase == "start":
        started[0] = time.monotonic_ns()
    elif info["generation"] == 2:
        own.append({"t": started[0], "ns": time.monotonic_ns() - started[0]})

gc.callbacks.append(mine)

@torch.compile(backend="aot_eager")
def denoise(x):
    return torch.tanh(x) * 0.5 + x

x = torch.randn(32, 32)
with api.phase("warmup"):
    with api.request():
        for _ in range(3):
            with api.step():
                x = denoise(x)
kept = [[i] for i in range(1_500_000)]
gc.collect()
own.clear()  # the program's own collection is no pause
for r in range(2):
    with api.request():
        for i in range(6):
            with api.step():
                x = denoise(x)
                if r == 0 and i == 0:
                    fresh = [[j] for j in range(1_200_000)]
json.dump(own, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, int]]]:
    tmp = tmp_path_factory.mktemp("gc")
    (tmp / "program.py").write_text(textwrap.dedent(PROGRAM))
    proc = diag_record(
        tmp / "trace",
        PYTHON,
        str(tmp / "program.py"),
        str(tmp / "own.json"),
        options=("--profile", "none"),
    )
    assert proc.returncode == 0, proc.stderr
    return tmp / "trace", json.loads((tmp / "own.json").read_text())


def test_full_collections_are_recorded_as_python_ran_them(
    recorded: tuple[Path, list[dict[str, int]]],
) -> None:
    trace, own = recorded
    evs = events(trace)
    # The program records from its gc.collect() on (start-up and compiling ran full
    # collections of their own before it, and Dynamo called gc.collect() after compiling:
    # diag has those too).
    (collect,) = [e for e in of("gc_collect", evs) if e["caller"]["file"].endswith("program.py")]
    pauses = [e for e in of("gc_pause", evs) if e["generation"] == 2 and e["t"] > collect["t"]]
    # Python's record: at least one full collection, in r0's step 0. diag's: the same ones,
    # started within a millisecond and as long within a millisecond (two callbacks, one
    # collection).
    assert own, "the program's allocations ran no full collection"
    assert len(pauses) == len(own)
    for mine, theirs in zip(own, pauses, strict=True):
        assert abs(theirs["t"] - mine["t"]) < 1_000_000
        assert abs(theirs["duration_s"] * 1e9 - mine["ns"]) < 1_000_000
    first_live = next(e["request_id"] for e in of("request_start", evs) if e["phase"] == "live")
    assert {(e["request_id"], e["step"]) for e in pauses} == {(first_live, 0)}


def test_the_spike_is_named_as_the_collector(recorded: tuple[Path, list[dict[str, int]]]) -> None:
    trace, own = recorded
    loaded = load_trace(trace)
    first_live = next(r.request_id for r in loaded.compiled.requests if r.phase == "live")
    findings = run_analyzers(loaded, ["step0-spike"])
    (spike,) = [f for f in findings if f.id == f"step0-spike:{first_live}"]
    assert spike.severity == "warning"
    assert spike.data["cause"] == "gc"
    assert "garbage collector" in spike.title
    assert "gc.freeze()" in spike.fix
    paused_ms = sum(p["ns"] for p in own) / 1e6
    assert any(
        "paused the program" in line and "full collection" in line for line in spike.evidence
    )
    assert paused_ms >= 0.5 * spike.data["excess_s"] * 1e3


def test_the_perfetto_timeline_draws_each_pause_where_python_ran_it(
    recorded: tuple[Path, list[dict[str, int]]],
) -> None:
    """Pauses and gc.collect() calls are stamped at their start: the slice runs from there for
    their duration (it used to end where the call began)."""
    from diag.perfetto.timeline import build_timeline, step_name

    trace, own = recorded
    timeline = build_timeline(load_trace(trace), kineto=False)
    slices = [
        s
        for process in timeline.processes
        for track in process.tracks.values()
        for s in track.slices
        if s.name == "garbage-collector pause"
    ]
    loaded = load_trace(trace)
    first_live = next(r.request_id for r in loaded.compiled.requests if r.phase == "live")
    (step0,) = [
        s
        for process in timeline.processes
        for track in process.tracks.values()
        for s in track.slices
        if s.name == step_name(first_live, 0)
    ]
    for mine in own:
        # The slice closest in length: a loaded host's other full collections can last within
        # a millisecond of this one.
        drawn = min(slices, key=lambda s: abs(s.end_ns - s.start_ns - mine["ns"]))
        assert abs(drawn.end_ns - drawn.start_ns - mine["ns"]) < 1_000_000
        # Inside the step that paid for it (drawn ending at its start, it began before it).
        assert step0.start_ns <= drawn.start_ns < drawn.end_ns <= step0.end_ns
    calls = [s for p in timeline.processes for t in p.tracks.values() for s in t.slices]
    assert any(s.name == "gc.collect()" for s in calls)
