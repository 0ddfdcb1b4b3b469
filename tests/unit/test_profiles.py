"""Kineto windows cut into steps, on a real H200 recording: the steady window holds two steps,
each of which must get its own 24 compiled-region calls and its own kernels."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from diag.trace.kineto import read_kineto
from diag.trace.load import load_trace
from diag.trace.profiles import profiles_from_kineto, step_number, step_profiles
from tests.h200data import h200_trace

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"


def test_steady_window_is_cut_into_its_two_steps(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    assert trace.compiled is not None
    profiles = step_profiles(trace.compiled)
    steady = [p for p in profiles if p.window.endswith("r0-s2-steady.json.gz")]
    assert [(p.request_id, p.step) for p in steady] == [("r0", 2), ("r0", 3)]
    counts = [Counter(k.name for k in p.kernels) for p in steady]
    # Identical steps launch identical kernels: nothing leaked across the boundary.
    assert counts[0] == counts[1]
    for profile in steady:
        regions = {k.region for k in profile.kernels if k.region}
        assert regions == {f"wan_block_forward#{n}" for n in range(24)}
        assert profile.start_ts < profile.end_ts
        assert 0 < profile.span_s < 1


def test_every_profiled_step_gets_a_profile(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    for run in (trace.compiled, trace.eager):
        assert run is not None
        profiled = {(s.request_id, s.index) for s in run.steps if s.profiled}
        profiles = step_profiles(run)
        assert {(p.request_id, p.step) for p in profiles} == profiled
        assert all(p.platform == "cuda" and p.kernels for p in profiles)


def test_second_open_reads_the_cache(tmp_path: Path) -> None:
    folder = h200_trace("record-wan-routing", tmp_path)
    first = load_trace(folder)
    assert first.compiled is not None
    before = step_profiles(first.compiled)
    cached = sorted((folder / ".diag-cache").rglob("*.msgpack"))
    assert len(cached) == 3  # one per window of the compiled run
    again = load_trace(folder)
    assert again.compiled is not None
    after = step_profiles(again.compiled)
    assert [len(p.activities) for p in after] == [len(p.activities) for p in before]


def _renamed_steps(tmp_path: Path, names: list[str]) -> Path:
    """The real H200 eager trace with its ProfilerStep annotations renamed (hand-edited and
    foreign traces carry such names; torch never writes them)."""
    with gzip.open(H200 / "wan-eager.json.gz", "rb") as handle:
        document = json.loads(handle.read())
    marks = [
        e for e in document["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    assert len(marks) >= len(names)
    for event, name in zip(marks, names, strict=False):
        event["name"] = name
    out = tmp_path / "renamed.json"
    out.write_text(json.dumps(document))
    return out


@pytest.mark.parametrize(
    "suffix",
    ["abc", "1.5", "9" * 5000, "", "-3", "\u0663"],
    ids=["abc", "1.5", "5000-digits", "empty", "-3", "arabic-3"],
)
def test_a_step_suffix_that_is_not_an_integer_gives_its_ordinal(
    tmp_path: Path, suffix: str
) -> None:
    path = _renamed_steps(tmp_path, [f"ProfilerStep#{suffix}"])
    profiles = profiles_from_kineto("compiled", read_kineto(path))
    steps = [p.step for p in profiles]
    assert steps == [0]
    assert profiles[0].kernels


def test_step_number_reads_only_plain_integers() -> None:
    assert step_number("ProfilerStep#12", 0) == 12
    assert step_number("ProfilerStep#12x", 4) == 4
    assert step_number("ProfilerStep#" + "1" * 19, 5) == 5


def _shift_process_anchor(folder: Path, seconds: int, window_anchors: bool) -> None:
    """Move the process_start anchor by `seconds` (the drift between unix time and the event
    clock since the process started, as an NTP step makes it), giving each window start the
    true anchor of its instant when `window_anchors` (what the collector now records)."""
    [events] = (folder / "runs" / "compiled").glob("*/events.jsonl")
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    start = lines[0]
    assert start["ev"] == "process_start"
    true_offset = start["wall_ns"] - start["t"]
    start["wall_ns"] += seconds * 10**9
    for line in lines:
        if line["ev"] == "profile_window_start" and window_anchors:
            line["wall_ns"] = line["t"] + true_offset
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_window_is_cut_on_its_own_clock_anchor(tmp_path: Path) -> None:
    """The anchor a window records at its start decides its step cuts: steps stay exactly
    where they were when the process's own anchor has drifted by seconds since."""
    truth = load_trace(h200_trace("record-wan-routing", tmp_path / "a")).compiled
    moved = h200_trace("record-wan-routing", tmp_path / "b")
    _shift_process_anchor(moved, 3, window_anchors=True)
    drifted = h200_trace("record-wan-routing", tmp_path / "c")
    _shift_process_anchor(drifted, 3, window_anchors=False)
    assert truth is not None
    expected = [(p.step, p.start_ts, len(p.kernels)) for p in step_profiles(truth)]
    anchored = load_trace(moved).compiled
    assert anchored is not None
    assert [(p.step, p.start_ts, len(p.kernels)) for p in step_profiles(anchored)] == expected
    # Without window anchors the 3 s drift misplaces the steps: the cut falls back to the
    # region markers, whose bounds differ.
    stale = load_trace(drifted).compiled
    assert stale is not None
    assert [(p.step, p.start_ts, len(p.kernels)) for p in step_profiles(stale)] != expected
