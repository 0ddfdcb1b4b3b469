"""diag.trace.parallel: per-process reading in worker processes gives the Run model and the
step profiles a serial read gives, writes the Kineto cache, and a window diag refuses still
raises its one-line error. Inputs: 64 ranks replicated from the real H200 NCCL recording
(tests/ranks64.py) and the committed H200 Kineto windows (tests/data/h200)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from diag.trace import parallel
from diag.trace.kinetocache import cache_path
from diag.trace.load import load_trace
from diag.trace.profiles import StepProfile, step_profiles, window_files
from diag.trace.run import RunData
from tests.h200data import h200_trace
from tests.ranks64 import make_ranks


def _model(run: RunData) -> dict[str, Any]:
    """What a run holds, as plain values (the per-process parts a parallel read merges)."""
    return {
        "processes": [dataclasses.astuple(p) for p in run.processes],
        "requests": [(r.request_id, r.pid, r.start_t, r.end_t, len(r.steps)) for r in run.requests],
        "steps": [s.values() for s in run.steps],
        "compiles": [
            (c.pid, c.compile_id, c.t, c.frame, [g.raw for g in c.guards]) for c in run.compiles
        ],
        "events": [(e.kind, e.t, e.pid, e.data) for e in run.events],
        "cache_final": run.cache_final,
        "cache_history": run.cache_history,
        "collector_errors": run.collector_errors,
    }


def test_event_files_of_64_ranks_read_in_workers_match_a_serial_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_ranks(tmp_path / "t")
    serial = load_trace(folder).compiled
    assert serial is not None and len(serial.processes) == 65  # 64 ranks and torchrun's launcher
    paths = sorted((folder / "runs" / "compiled").glob("*/events.jsonl"))
    assert not parallel.should_read_events_in_parallel(paths)  # 64 small files: serial
    monkeypatch.setattr(parallel, "EVENTS_PARALLEL_BYTES", 0)
    assert parallel.should_read_events_in_parallel(paths) == (parallel.worker_count(2) >= 2)
    part = RunData("compiled", folder / "runs" / "compiled", serial.status)
    assert parallel.read_event_files(part, paths)
    whole = load_trace(folder).compiled  # through load_trace, now in workers
    assert whole is not None
    assert _model(whole) == _model(serial)
    part.requests.sort(key=lambda r: r.start_t)
    part.compiles.sort(key=lambda c: c.t)
    part.events.sort(key=lambda e: e.t)
    assert _model(part) == _model(serial)


def _profile(p: StepProfile) -> tuple[Any, ...]:
    return (
        p.key,
        p.window,
        p.start_ts,
        p.end_ts,
        p.gpu_from_ts,
        p.activities,
        p.cpu_ops,
        p.annotations,
        p.syncs,
    )


def _profiles(run: RunData) -> list[tuple[Any, ...]]:
    return [_profile(p) for p in step_profiles(run)]


def test_kineto_windows_parsed_in_workers_match_a_serial_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three real H200 windows (1.9 MB): parsed in workers (the threshold lowered to reach
    them), the profiles equal a serial parse's and each window's cache file is written."""
    serial_run = load_trace(h200_trace("record-wan-offload-unwarmed", tmp_path / "a")).compiled
    assert serial_run is not None
    serial_run.cache_dir = None
    expected = _profiles(serial_run)
    assert len(expected) >= 3 and any(p[5] for p in expected)  # GPU kernels were cut in

    monkeypatch.setattr(parallel, "KINETO_PARALLEL_BYTES", 0)
    if parallel.worker_count(3) < 2:
        pytest.skip("one CPU: the pool is never used")
    folder = h200_trace("record-wan-offload-unwarmed", tmp_path / "b")
    run = load_trace(folder).compiled
    assert run is not None and run.cache_dir is not None
    jobs = [
        (p, w, path, steps, run.cache_dir / p.folder.name)
        for p, w, path, steps in window_files(run)
    ]
    cut = parallel.profile_windows("compiled", jobs)
    assert sorted(cut) == sorted(job[2] for job in jobs)
    for _, _, path, _, cache in jobs:
        assert cache_path(path, cache).is_file()
    assert [_profile(p) for job in jobs for p in cut[job[2]]] == expected
    # Cached now: nothing is left to parse in workers; the serial open reads the caches.
    assert parallel.profile_windows("compiled", jobs) == {}
    run.profiles = None
    assert _profiles(run) == expected


def test_a_refused_window_is_skipped_with_its_one_line_through_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One window the Kineto reader refuses: the others are read (in workers), and the run
    carries the reader's line, as a serial read gives it (issue 22: every command alike)."""
    folder = h200_trace("record-wan-offload-unwarmed", tmp_path)
    [(_, _, broken, _), *_] = window_files(load_trace(folder).compiled)  # type: ignore[arg-type]
    broken.write_bytes(b"\x1f\x8b not really gzip")
    serial = load_trace(folder).compiled
    assert serial is not None
    serial_steps = len(step_profiles(serial))
    monkeypatch.setattr(parallel, "KINETO_PARALLEL_BYTES", 0)
    run = load_trace(folder).compiled
    assert run is not None
    assert len(step_profiles(run)) == serial_steps > 0
    assert run.warnings == serial.warnings
    assert len(run.warnings) == 1 and broken.name in run.warnings[0], run.warnings
    assert run.warnings[0].endswith("; skipped")


def test_a_pool_that_cannot_start_falls_back_to_the_serial_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawning workers under Textual's headless driver raised `ValueError: bad value(s) in
    fds_to_keep` (seen in a Pilot run on 64 ranks); the reader must then read serially. The
    pool's failure is simulated (a real one needs that driver); the windows are real."""
    monkeypatch.setattr(parallel, "KINETO_PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel, "EVENTS_PARALLEL_BYTES", 0)

    def no_pool(workers: int) -> Any:
        raise ValueError("bad value(s) in fds_to_keep")

    monkeypatch.setattr(parallel, "_pool", no_pool)
    folder = h200_trace("record-wan-offload-unwarmed", tmp_path)
    run = load_trace(folder).compiled
    assert run is not None and run.processes
    assert len(step_profiles(run)) >= 3
