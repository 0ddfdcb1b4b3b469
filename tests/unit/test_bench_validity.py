"""Validity on CUDA recordings, and the interval arithmetic the tables rest on.

The offload-reload check reads the allocator figures only CUDA runs record: the H200 recordings
in tests/data/h200 are real ones. None of them reloads weights inside a steady step, so the
planted reload is that real recording with one window step's allocator figures raised by what a
reload of 512 MiB of weights would add (a CPU run cannot produce the figures at all; said so
here, as the project's rule on synthetic inputs asks).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.benchmark.trial import load_trial
from diag.benchmark.validity import OFFLOAD_RELOAD, flaws, unchecked
from diag.evidence.stats import mean_interval, reduction_interval, t_975

H200 = Path(__file__).resolve().parents[1] / "data" / "h200" / "record-wan-offload-unwarmed"
RELOAD = 512 << 20


def test_a_clean_cuda_recording_is_checked_and_holds() -> None:
    trial = load_trial("x", 1, H200)
    assert trial.usable and trial.has_memory and trial.has_gpu_times
    assert unchecked(trial) == []  # the offload check ran: CUDA figures are there
    assert flaws(trial, 3) == [] and flaws(trial, 6) == []


def _raise_reserved(source: Path, target: Path, request: str, step: int) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.json.gz"))
    (events,) = list((target / "runs" / "compiled").glob("*/events.jsonl"))
    lines = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if (
            event.get("ev") == "step_end"
            and event.get("request_id") == request
            and isinstance(event.get("step"), int)
            and event["step"] >= step
        ):
            event["memory"]["reserved"] += RELOAD
            event["memory"]["allocated"] += RELOAD
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n")


def test_an_offload_reload_in_a_window_step_is_flagged(tmp_path: Path) -> None:
    _raise_reserved(H200, tmp_path / "t", "r1", 3)
    trial = load_trial("x", 1, tmp_path / "t")
    found = flaws(trial, 3)
    assert [f.kind for f in found] == [OFFLOAD_RELOAD]
    assert found[0].text.startswith("the allocator reserved 512 MiB more in r1 step 3")
    # The step-6 window has no steps in 4-step requests: nothing to spoil there.
    assert flaws(trial, 6) == []


def test_a_reload_at_step_0_is_outside_the_windows(tmp_path: Path) -> None:
    _raise_reserved(H200, tmp_path / "t", "r1", 0)
    assert flaws(load_trial("x", 1, tmp_path / "t"), 3) == []


def test_intervals() -> None:
    assert t_975(1) == 12.706 and t_975(2) == 4.303 and t_975(1000) == 1.96
    interval = mean_interval([1.0, 2.0, 3.0])
    assert interval is not None and interval.mean == 2.0
    assert interval.low == pytest.approx(2.0 - 4.303 / 3**0.5)
    one = mean_interval([5.0])
    assert one is not None and not one.known and one.spans(0.0)
    floored = mean_interval([0.001, 0.1], floor=0.0)
    assert floored is not None and floored.low == 0.0
    # (reference - other) / reference: the warmup post's steady-state latency reduction.
    same = reduction_interval([10.0, 10.2, 9.8], [10.1, 9.9, 10.0])
    assert same is not None and same.spans(0.0)
    faster = reduction_interval([10.0, 10.2, 9.8], [5.0, 5.1, 4.9])
    assert faster is not None and faster.mean == pytest.approx(0.5)
    assert faster.low is not None and faster.low > 0.45 and not faster.spans(0.0)
    assert reduction_interval([], [1.0]) is None
