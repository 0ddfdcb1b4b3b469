"""diag's own pauses of the program: the time a profiler window's stop and trace write held the
program's thread (`profile_window_end.export_s`, collectors/profiling.py), and the step that
paid for it.

A window stops right after its last step's end is written (`after_step`), so the pause is in no
step's time on diag's own clocks (wall, CPU, GPU events). A program that times its steps itself
may see it, in one of two steps: the step that ended, when diag's hook ends steps inside the
program's timed call (LightX2V's `model.infer` wrapper, inside `infer_main`; the fixture's
step timer), or the next step of the request, when steps are inferred (the next call ends the
previous step, inside that call's time). Both are said to have `paid` (the H200 runs of issue 34:
a 309 ms step where the program saw 21 ms); a stop inside a step (a fork, a thread's end) is
paid by that step. Bench figures leave paid steps out (diag/benchmark/validity.py), as they
leave profiled ones.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from diag.trace.run import RunData, Step

#: A step: (pid, request id, step index).
StepKey = tuple[int, str, int]


@dataclass(frozen=True)
class WindowPause:
    pid: int
    window: str
    t: int  # the profiler stopped (event clock, ns); its JSON write followed
    began: int  # the stop began: the program's thread waited from then for export_s
    export_s: float  # what the program's thread waited (stop + JSON write)
    after: StepKey | None  # the last step that began before the pause
    paid_by: tuple[StepKey, ...]  # the steps whose program-side time may hold the pause


def window_pauses(run: RunData) -> list[WindowPause]:
    """Every written window's pause on the program's thread, in time order."""
    ends = [
        e for e in run.of("profile_window_end") if isinstance(e.data.get("export_s"), (int, float))
    ]
    if not ends:
        return []
    by_pid: dict[int, list[Step]] = {}
    for step in run.steps:
        by_pid.setdefault(step.pid, []).append(step)
    starts: dict[int, list[int]] = {}
    for pid, steps in by_pid.items():
        steps.sort(key=lambda s: s.start_t)
        starts[pid] = [s.start_t for s in steps]
    pauses: list[WindowPause] = []
    for event in sorted(ends, key=lambda e: (e.pid, e.t)):
        export_s = float(event.data["export_s"])
        steps = by_pid.get(event.pid, [])
        stop_s = event.data.get("stop_s")
        # `t` is the end of the stop (the write came after it); without stop_s, the whole pause
        # is taken to end at `t`.
        began = event.t - int((stop_s if isinstance(stop_s, (int, float)) else export_s) * 1e9)
        # The last step that began at or before the pause began, and the first one after it.
        i = bisect.bisect_right(starts.get(event.pid, []), began)
        before = steps[i - 1] if i > 0 else None
        following = steps[i] if i < len(steps) else None
        paid: list[Step] = [] if before is None else [before]
        if (
            before is not None
            and before.end_t is not None
            and before.end_t <= began
            and following is not None
            and following.request_id == before.request_id
        ):
            paid.append(following)  # inferred steps: the next call, which ended `before`
        pauses.append(
            WindowPause(
                pid=event.pid,
                window=str(event.data.get("window") or "window"),
                t=event.t,
                began=began,
                export_s=export_s,
                after=_key(before),
                paid_by=tuple(k for k in map(_key, paid) if k is not None),
            )
        )
    return sorted(pauses, key=lambda p: p.t)


def paid_steps(run: RunData) -> dict[StepKey, float]:
    """Seconds of diag's pauses each paying step holds (a step may pay for more than one)."""
    paid: dict[StepKey, float] = {}
    for pause in window_pauses(run):
        for key in pause.paid_by:
            paid[key] = paid.get(key, 0.0) + pause.export_s
    return paid


def _key(step: Step | None) -> StepKey | None:
    return None if step is None else (step.pid, step.request_id, step.index)
