"""Where a profiled step's time goes when weights stream in: copies, syncs, compute, idle.

Times are unions of intervals on the GPU (a copy overlapping a kernel counts once in each of
copy and compute, never twice in the step), so the numbers answer "how long was the GPU
copying" and "how long computing", and the step's span bounds both. Compiling only makes compute
faster: while copies take longer than compute, a step cannot go below its copy time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from diag.trace.profiles import StepProfile, step_profiles
from diag.trace.run import RunData

#: A step is offload-bound when copies take at least this share of its GPU window, or outlast
#: compute while the GPU is busy at least this share of it (a mostly idle GPU is bound by
#: something else: the CPU, launches, waiting for input).
BOUND_SHARE = 0.5


@dataclass(frozen=True)
class StepOffload:
    request_id: str
    step: int
    pid: int
    rank: int | None
    span_s: float
    kernel_s: float
    copy_s: dict[str, float]
    copy_bytes: dict[str, int]
    sync_s: float
    idle_s: float
    bound: bool
    max_gain_s: float

    @property
    def copy_total_s(self) -> float:
        return sum(self.copy_s.values())

    @property
    def copy_total_bytes(self) -> int:
        return sum(self.copy_bytes.values())


def union_s(intervals: list[tuple[float, float]]) -> float:
    """Total length (s) of the union of [start, end) intervals given in microseconds."""
    total = 0.0
    end = float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total / 1e6


def _interval(activity: Any) -> tuple[float, float]:
    return (activity.ts, activity.ts + activity.dur)


def breakdown(profile: StepProfile) -> StepOffload:
    """The copy/sync/compute/idle figures of one profiled step."""
    kernels = [_interval(a) for a in profile.activities if a.kind == "kernel"]
    copies: dict[str, list[tuple[float, float]]] = defaultdict(list)
    copy_bytes: dict[str, int] = defaultdict(int)
    for activity in profile.activities:
        if activity.kind == "memcpy":
            direction = activity.direction or "other"
            copies[direction].append(_interval(activity))
            copy_bytes[direction] += activity.bytes
    span = profile.span_s
    window = profile.gpu_span_s
    kernel_s = union_s(kernels)
    copy_s = {direction: union_s(spans) for direction, spans in copies.items()}
    copy_union = union_s([i for spans in copies.values() for i in spans])
    busy = union_s(kernels + [i for spans in copies.values() for i in spans])
    sync_s = sum(s.dur for s in profile.syncs) / 1e6
    busy_enough = busy >= BOUND_SHARE * window
    bound = (
        window > 0
        and copy_union > 0
        and (copy_union >= BOUND_SHARE * window or (copy_union >= kernel_s and busy_enough))
    )
    return StepOffload(
        request_id=profile.request_id,
        step=profile.step,
        pid=profile.pid,
        rank=profile.rank,
        span_s=span,
        kernel_s=kernel_s,
        copy_s=dict(copy_s),
        copy_bytes=dict(copy_bytes),
        sync_s=sync_s,
        idle_s=max(0.0, window - busy),
        bound=bound,
        # Compiling shrinks compute only, and the step cannot go below its copies.
        max_gain_s=max(0.0, min(kernel_s, window - copy_union)),
    )


def offload_breakdown(run: RunData) -> list[StepOffload]:
    """One row per profiled step that ran on a GPU (CPU-only traces have nothing to report)."""
    return [breakdown(p) for p in step_profiles(run) if p.platform != "cpu"]
