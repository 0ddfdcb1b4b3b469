"""Kineto windows cut into steps, on a real H200 recording: the steady window holds two steps,
each of which must get its own 24 compiled-region calls and its own kernels."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from diag.profiles import step_profiles
from diag.run import load_trace
from tests.h200data import h200_trace


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
