"""rank-divergence on hand-written two-rank trace directories: the skew thresholds, who is the
culprit (the slow rank, or the rank that started late when the collective sits inside the step),
what happened on it, the clock of processes on different hosts, and compile divergence.

Real torchrun recordings of the reference service are in tests/integration/test_ranks.py; a CPU
run cannot produce exact step times, an empty_cache on one rank, or a second host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diag.analyzers import get_analyzer
from diag.analyzers.rank_divergence import SKEW_FLOOR_S, SKEW_RATIO, analyze
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.run import Trace

from .support import write_trace

MS = 1_000_000  # ns
FRAME = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
#: Step spans (start ms, wall ms) of one request with 4 steps 50 ms apart, 10 ms each.
EVEN = [(0.0, 10.0), (50.0, 10.0), (100.0, 10.0), (150.0, 10.0)]

Events = list[dict[str, Any]]


def write_ranks(
    folder: Path,
    per_rank: dict[int, Events],
    clock_ns: dict[int, int] | None = None,
    unix_ns: int = 1_700_000_000 * 10**9,
) -> Trace:
    """A trace directory with one process per rank (docs/FORMAT.md), loaded.

    Event times are written as given plus `clock_ns[rank]` (a process on another host has
    another monotonic clock); `wall_ns` anchors every process to the same unix time, so the
    ranks' instants agree once converted.
    """
    manifest = {
        "format": "diag-trace",
        "version": 1,
        "status": "complete",
        "runs": [{"label": "compiled", "stance": "default", "status": "complete"}],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for rank, events in per_rank.items():
        shift = (clock_ns or {}).get(rank, 0)
        pid = 100 + rank
        start = {"t": 1 + shift, "ev": "process_start", "pid": pid, "ppid": 1, "rank": rank}
        start.update(world_size=len(per_rank), argv=["serve"], wall_ns=unix_ns)
        lines = [start] + [{**e, "t": e["t"] + shift} for e in events]
        proc = folder / "runs" / "compiled" / f"rank{rank}-pid{pid}"
        proc.mkdir(parents=True)
        text = "".join(json.dumps(e) + "\n" for e in lines)
        (proc / "events.jsonl").write_text(text, encoding="utf-8")
    return load_trace(folder)


def request(rid: str, spans: list[tuple[float, float]], phase: str = "live") -> Events:
    """One request whose steps start at `spans[i][0]` ms and take `spans[i][1]` ms (wall)."""
    first = int(spans[0][0] * MS) + 100 * MS  # requests start 100 ms into the process
    events: Events = [{"t": first - 1, "ev": "request_start", "request_id": rid, "phase": phase}]
    for index, (start_ms, wall_ms) in enumerate(spans):
        where = {"request_id": rid, "step": index, "phase": phase}
        t0 = int(start_ms * MS) + 100 * MS
        events.append({"t": t0, "ev": "step_start", **where, "profiled": False})
        end = t0 + int(wall_ms * MS)
        events.append({"t": end, "ev": "step_end", **where, "wall_s": wall_ms / 1000})
    last = int((spans[-1][0] + spans[-1][1]) * MS) + 100 * MS
    events.append({"t": last + 1, "ev": "request_end", "request_id": rid, "phase": phase})
    return events


def at(ms: float) -> int:
    """The event time of `ms` on the request clock used by `request`."""
    return int(ms * MS) + 100 * MS


def call(kind: str, ms: float, seconds: float, rid: str = "r0", step: int | None = 1) -> Events:
    where = {"phase": "live", "request_id": rid, "step": step}
    return [{"t": at(ms), "ev": kind, "duration_s": seconds, **where}]


def compile_at(
    ms: float,
    seconds: float,
    rid: str,
    step: int | None,
    cid: str,
    phase: str = "live",
    guard: dict[str, Any] | None = None,
) -> Events:
    where = {"phase": phase, "request_id": rid, "step": step}
    end = at(ms)
    events: Events = []
    if guard is not None:
        events.append(
            {"t": end - 2, "ev": "recompile", "compile_id": cid, "epoch": 0, "guards": [guard]}
        )
    events.append(
        {
            "t": end,
            "ev": "compile_end",
            "compile_id": cid,
            "epoch": 0,
            "frame": FRAME,
            "result": "ok",
            "duration_s": seconds,
            "start_t": end - int(seconds * 1e9),
            **where,
        }
    )
    return events


def ids(findings: list[Finding]) -> list[str]:
    return sorted(f.id for f in findings)


def slow_step(index: int, wall_ms: float) -> list[tuple[float, float]]:
    spans = list(EVEN)
    spans[index] = (spans[index][0], wall_ms)
    return spans


def test_registered() -> None:
    assert get_analyzer("rank-divergence") is analyze


def test_one_process_or_no_ranks_gives_nothing(tmp_path: Path) -> None:
    single = write_trace(tmp_path, request("r0", slow_step(1, 400.0)))
    assert analyze(single) == []


def test_balanced_ranks_give_nothing(tmp_path: Path) -> None:
    trace = write_ranks(tmp_path, {0: request("r0", EVEN), 1: request("r0", EVEN)})
    assert analyze(trace) == []


def test_empty_cache_on_one_rank_is_a_skew_naming_it(tmp_path: Path) -> None:
    """The collective after the step: rank 1's step 1 takes 40 ms (28 of them in empty_cache),
    rank 0 ends 30 ms earlier and waits."""
    rank1 = request("r0", slow_step(1, 40.0)) + call("empty_cache", 80, 0.028)
    trace = write_ranks(tmp_path, {0: request("r0", EVEN), 1: rank1})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:skew@rank1"
    assert finding.severity == "warning"
    assert finding.title.startswith("rank 1 kept the other ranks waiting in 1 of 4 live step(s)")
    assert "r0 step 1, 40 ms against 10 ms on rank 0" in finding.title
    assert "torch.cuda.empty_cache()" in finding.title
    [step] = finding.data["steps"]
    assert (step["request_id"], step["step"], step["late_start"]) == ("r0", 1, False)
    assert step["causes"] == ["empty_cache"] and step["explained"]
    assert step["waits_s"] == {"0": pytest.approx(0.030, abs=1e-6)}
    assert "torch.cuda.empty_cache() (28 ms)" in finding.evidence[0]
    assert "empty_cache" in finding.fix and "warmup-hygiene" in finding.fix


def test_skew_only_the_profiler_explains_is_info(tmp_path: Path) -> None:
    """diag's own profiler export on one rank: reported as context, not as a warning (seen on
    two H200s, where one rank's trace export made it 11 ms slower in a profiled step)."""
    export = [
        {
            "t": at(80),
            "ev": "profile_window_end",
            "window": "r0-s1-steady",
            "export_s": 0.028,
            "phase": "live",
            "request_id": "r0",
            "step": 1,
        }
    ]
    trace = write_ranks(
        tmp_path, {0: request("r0", EVEN), 1: request("r0", slow_step(1, 40.0)) + export}
    )
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:skew@rank1"
    assert finding.data["steps"][0]["causes"] == ["profile_window_end"]
    assert finding.severity == "info"


@pytest.mark.parametrize(
    ("base_ms", "slow_ms", "reported"),
    [
        (10.0, 16.0, True),  # 1.6x and 6 ms more
        (10.0, 14.5, False),  # 1.45x: under the ratio
        (3.0, 7.0, False),  # 2.3x but only 4 ms more: under the floor
        (3.0, 8.5, True),  # 2.8x and 5.5 ms more
    ],
)
def test_skew_thresholds(tmp_path: Path, base_ms: float, slow_ms: float, reported: bool) -> None:
    assert (SKEW_RATIO, SKEW_FLOOR_S) == (1.5, 0.005)
    even = [(start, base_ms) for start, _ in EVEN]
    slow = list(even)
    slow[2] = (slow[2][0], slow_ms)
    # A gc.collect() that accounts for the whole excess, so only the thresholds decide.
    rank1 = request("r0", slow) + call("gc_collect", 101, (slow_ms - base_ms) / 1000, step=2)
    trace = write_ranks(tmp_path, {0: request("r0", even), 1: rank1})
    assert ids(analyze(trace)) == (["rank-divergence:skew@rank1"] if reported else [])


def test_one_unexplained_slow_step_is_noise_but_a_straggler_is_reported(tmp_path: Path) -> None:
    (tmp_path / "once").mkdir()
    once = {0: request("r0", EVEN), 1: request("r0", slow_step(3, 60.0))}
    assert analyze(write_ranks(tmp_path / "once", once)) == []

    spans = [(start, 25.0) for start, _ in EVEN]
    spans[0] = (0.0, 10.0)  # slow in 3 of 4 steps, nothing recorded
    (tmp_path / "often").mkdir()
    trace = write_ranks(tmp_path / "often", {0: request("r0", EVEN), 1: request("r0", spans)})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:skew@rank1"
    assert "in 3 of 4 live step(s)" in finding.title
    assert "nothing recorded explains it" in finding.title
    assert any("straggler" in line for line in finding.evidence)
    assert "share of the work" in finding.fix
    assert [s["explained"] for s in finding.data["steps"]] == [False, False, False]


def test_late_start_blames_the_rank_that_arrived_last(tmp_path: Path) -> None:
    """A collective inside the step: rank 1 calls empty_cache between steps 0 and 1 and starts
    step 1 50 ms late; rank 0, which started on time, waits inside its step (60 ms wall) and
    both end together. The slow wall is rank 0's, the culprit rank 1."""
    rank0 = [(0.0, 10.0), (50.0, 60.0), (150.0, 10.0), (200.0, 10.0)]
    rank1 = [(0.0, 10.0), (100.0, 10.0), (150.0, 10.0), (200.0, 10.0)]
    late = request("r0", rank1) + call("empty_cache", 60, 0.035, step=None)
    trace = write_ranks(tmp_path, {0: request("r0", rank0), 1: late})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:skew@rank1"
    [step] = finding.data["steps"]
    assert step["late_start"] is True
    assert step["causes"] == ["empty_cache"]
    assert step["waits_s"] == {"0": pytest.approx(0.050, abs=1e-6)}
    assert "rank 1 started the step late" in finding.evidence[0]
    assert "before the step: torch.cuda.empty_cache() (35 ms)" in finding.evidence[0]


def test_ranks_on_different_hosts_are_compared_in_unix_time(tmp_path: Path) -> None:
    """The same late start, but rank 1's monotonic clock is 1000 s ahead (another host booted
    earlier): compared as they are, its steps would look 1000 s late and rank 0 the culprit."""
    rank0 = [(0.0, 10.0), (50.0, 60.0), (150.0, 10.0), (200.0, 10.0)]
    rank1 = [(0.0, 10.0), (100.0, 10.0), (150.0, 10.0), (200.0, 10.0)]
    late = request("r0", rank1) + call("empty_cache", 60, 0.035, step=None)
    per_rank = {0: request("r0", rank0), 1: late}
    trace = write_ranks(tmp_path, per_rank, clock_ns={1: 1000 * 10**9})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:skew@rank1"
    assert finding.data["steps"][0]["late_start"] is True


def test_live_compile_on_one_rank_is_an_error_with_the_wait(tmp_path: Path) -> None:
    """Rank 0 recompiles at r0 step 1 (480 ms), rank 1 does not and waits; the step skew this
    causes is not reported a second time."""
    guard = {
        "kind": "tensor-size",
        "source": "x",
        "expected": "8",
        "actual": "12",
        "user_location": "/srv/model.py:20",
        "raw": "0/1: tensor 'x' size mismatch at index 1. expected 8, actual 12",
        "compile_id": "0/1",
    }
    spans = [(0.0, 10.0), (50.0, 10.0), (600.0, 10.0), (650.0, 10.0)]
    slow = [spans[0], (50.0, 500.0), *spans[2:]]
    rank0 = request("r0", slow) + compile_at(530, 0.48, "r0", 1, "0/2", guard=guard)
    trace = write_ranks(tmp_path, {0: rank0, 1: request("r0", spans)})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:compile:block_forward:r0@rank0"
    assert finding.severity == "error"
    assert finding.title == (
        "rank 0 recompiled block_forward at r0 step 1 and rank 1 did not (guard tensor 'x' size "
        "mismatch at index 1. expected 8, actual 12); rank 1 waited 490 ms"
    )
    assert finding.location == "/srv/model.py:20"
    assert finding.data["ranks_without"] == [1]
    assert finding.data["waits_s"] == {"1": pytest.approx(0.49, abs=1e-6)}
    assert "shape the other ranks did not" in finding.fix


def test_symmetric_compiles_are_no_divergence_but_a_slower_one_is_a_skew(tmp_path: Path) -> None:
    """Both ranks compile at r0 step 0; rank 1's compile takes 300 ms, rank 0's 8 ms."""
    spans = [(0.0, 10.0), (350.0, 10.0), (400.0, 10.0), (450.0, 10.0)]
    slow = [(0.0, 310.0), *spans[1:]]
    rank0 = request("r0", spans) + compile_at(8, 0.008, "r0", 0, "0/0")
    rank1 = request("r0", slow) + compile_at(305, 0.3, "r0", 0, "0/0")
    trace = write_ranks(tmp_path, {0: rank0, 1: rank1})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:skew@rank1"
    assert finding.data["steps"][0]["causes"] == ["compile"]
    assert "compiled longer than the others" in finding.fix


def test_warmup_compile_counts_that_differ_are_info(tmp_path: Path) -> None:
    warm0 = request("warmup0", EVEN[:2], phase="warmup")
    warm1 = request("warmup0", EVEN[:2], phase="warmup")
    warm0 += compile_at(5, 0.004, "warmup0", 0, "0/0", phase="warmup")
    warm0 += compile_at(55, 0.004, "warmup0", 1, "0/1", phase="warmup")
    warm1 += compile_at(5, 0.004, "warmup0", 0, "0/0", phase="warmup")
    trace = write_ranks(tmp_path, {0: warm0, 1: warm1})
    [finding] = analyze(trace)
    assert finding.id == "rank-divergence:warmup-compiles:block_forward"
    assert finding.severity == "info"
    assert finding.data["counts"] == {"0": 2, "1": 1}
    assert "(rank 0: 2, rank 1: 1)" in finding.title


def test_a_rank_that_never_served_the_request_is_no_divergence(tmp_path: Path) -> None:
    """Rank 1 died after r0: rank 0's compile at r1 is not one that rank 1 skipped."""
    spans = [(400.0, 10.0), (450.0, 10.0)]
    rank0 = request("r0", EVEN) + request("r1", spans) + compile_at(405, 0.004, "r1", 0, "0/0")
    trace = write_ranks(tmp_path, {0: rank0, 1: request("r0", EVEN)})
    assert analyze(trace) == []


def _with_cpu(events: Events, cpu_ms: list[float]) -> Events:
    """Give step i the process CPU time cpu_ms[i] (step_end's cpu_s)."""
    for event in events:
        if event["ev"] == "step_end":
            event["cpu_s"] = cpu_ms[event["step"]] / 1000
    return events


def test_a_descheduled_straggler_on_a_cpu_run_is_too_noisy(tmp_path: Path) -> None:
    """Rank 1 slow in 3 of 4 steps with nothing recorded: when its process ran on the CPU for
    the extra 15 ms (its CPU time grew with its wall time) it is a straggler (warning); when its
    CPU time stayed at 10 ms, another process had the CPU: INFO, too noisy to judge."""
    spans = [(start, 25.0) for start, _ in EVEN]
    spans[0] = (0.0, 10.0)
    for name, cpu, severity in (("worked", 25.0, "warning"), ("idle", 10.0, "info")):
        (tmp_path / name).mkdir()
        ranks = {
            0: _with_cpu(request("r0", EVEN), [10.0] * 4),
            1: _with_cpu(request("r0", spans), [10.0, cpu, cpu, cpu]),
        }
        [finding] = analyze(write_ranks(tmp_path / name, ranks))
        assert finding.id == "rank-divergence:skew@rank1"
        assert finding.severity == severity, finding.title
        noisy = [line for line in finding.evidence if line.startswith("too noisy to judge")]
        if severity == "info":
            assert noisy == [
                "too noisy to judge: rank 1 ran on the CPU for only 0.0 ms of its 45 ms extra "
                "wall time in these steps (0%, 50% needed); on a CPU-only run that is a "
                "descheduled process (another process had the CPU), not the program"
            ]
            assert finding.title.endswith(": too noisy to judge")
        else:
            assert noisy == []


def test_a_straggler_on_a_loaded_cpu_host_is_too_noisy(tmp_path: Path) -> None:
    """The straggler of the test above whose process was on the CPU for its extra time, on a
    host with 3 runnable tasks per CPU: INFO."""
    spans = [(start, 25.0) for start, _ in EVEN]
    spans[0] = (0.0, 10.0)
    ranks = {
        0: _with_cpu(request("r0", EVEN), [10.0] * 4),
        1: _with_cpu(request("r0", spans), [10.0, 25.0, 25.0, 25.0]),
    }
    for events in ranks.values():
        for event in events:
            if event["ev"] == "step_end":
                event["host_load"] = 3.0
    [finding] = analyze(write_ranks(tmp_path, ranks))
    assert finding.severity == "info"
    assert "the host was loaded in these steps (3.00 runnable tasks per CPU" in "\n".join(
        finding.evidence
    )
