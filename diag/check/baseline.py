"""`--baseline DIR`: what a change added against a known-good recording of the same program.

Frames are compared by name and file (not line: edits move lines), recompile reasons by the
failing guard's kind and source expression (not its text, whose numbers change with every
shape), cache entries per frame, and steady-state step time by medians: live steps other than
each request's step 0 (which pays first-call costs) and profiled steps (which pay the
profiler's), GPU time when both recordings have it for every such step, else host wall time.
Steps are compared per request shape (a larger shape is slower by right; shapes only one side
served are left out) with diag.evidence.stats.compare: the tolerance is the least noise band,
widened
when a side's steps spread more, and a side that spreads more than ±25% around its median (a
recording made during a load spike) is not judged at all: the rule is skipped and says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diag.check.allowlist import Allowlist, Subject, compiles_subject, guard_texts
from diag.check.policy import Policy
from diag.check.text import (
    frame_key,
    frame_location,
    guard_text,
    shared_names,
    trace_cwd,
    where,
)
from diag.check.verdict import FAIL, SKIP, Allowed, RuleResult, Violation
from diag.evidence.stats import SLOWER, Comparison, compare
from diag.trace.run import Compile, Guard, RunData, Step, Trace

_NUMBER = re.compile(r"\d+")


def baseline_rules(
    trace: Trace, baseline: Trace, policy: Policy, allow: Allowlist
) -> list[RuleResult]:
    current, base = _Side.of(trace), _Side.of(baseline)
    return [
        _new_frames(current, base, allow),
        _new_reasons(current, base, allow),
        _more_entries(current, base, allow),
        _step_time(current, base, policy.step_time_tolerance),
    ]


@dataclass
class _Side:
    """One recording's compiled run, keyed for comparison."""

    cwd: str | None
    run: RunData | None
    frames: dict[str, list[Compile]] = field(default_factory=dict)  # frame key -> compiles
    locations: dict[str, str | None] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # frame key -> function name
    reasons: dict[tuple[str, str, str], list[tuple[Compile, Guard]]] = field(default_factory=dict)
    entries: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def of(trace: Trace) -> _Side:
        run = trace.compiled or next(iter(trace.runs.values()), None)
        side = _Side(trace_cwd(trace), run)
        if run is None:
            return side
        counts = run.cache_entries()
        shared = shared_names([*(c.frame for c in run.compiles), *counts])
        for item in run.compiles:
            key = frame_key(item.frame, side.cwd, item.frame in shared)
            side.frames.setdefault(key, []).append(item)
            side.locations.setdefault(key, frame_location(item.frame, side.cwd))
            side.names.setdefault(key, item.frame.name if item.frame else key)
            for guard in item.guards:
                reason = (key, guard.kind, guard.source or _NUMBER.sub("N", guard_text(guard)))
                side.reasons.setdefault(reason, []).append((item, guard))
        for frame, entries in counts.items():
            key = frame_key(frame, side.cwd, frame in shared)
            side.entries[key] = max(entries, side.entries.get(key, 0))
            side.locations.setdefault(key, frame_location(frame, side.cwd))
            side.names.setdefault(key, frame.name)
        return side


def _new_frames(current: _Side, base: _Side, allow: Allowlist) -> RuleResult:
    result = RuleResult("baseline-frames", "")
    for key, compiles in current.frames.items():
        if key in base.frames:
            continue
        message = f"new compiled frame {key}: {len(compiles)} compile(s), none in the baseline"
        entry = allow.match(compiles_subject(compiles, current.locations.get(key)))
        if entry is not None:
            result.allowed.append(Allowed(message, entry.reason, entry.index))
            continue
        first = compiles[0]
        result.violations.append(
            Violation(
                message,
                [
                    f"first compile {first.compile_id} at {where(first)}",
                    "phases: " + ", ".join(sorted({c.phase for c in compiles})),
                ],
                location=current.locations.get(key),
                key=f"baseline-frames:{key}",
            )
        )
    return _finish(
        result, "new", f"{len(current.frames)} compiled frame(s), {len(base.frames)} before"
    )


def _new_reasons(current: _Side, base: _Side, allow: Allowlist) -> RuleResult:
    result = RuleResult("baseline-recompile-reasons", "")
    for reason, hits in current.reasons.items():
        if reason in base.reasons:
            continue
        frame, kind, source = reason
        compiles = list({id(c): c for c, _ in hits}.values())
        guard = hits[0][1]
        message = f"new recompile reason in {frame}: {kind} guard on {source}"
        subject = Subject(
            frame=current.names.get(frame),
            location=current.locations.get(frame),
            guards=guard_texts([g for _, g in hits]),
            phases=frozenset(c.phase for c in compiles),
        )
        entry = allow.match(subject)
        if entry is not None:
            result.allowed.append(Allowed(message, entry.reason, entry.index))
            continue
        result.violations.append(
            Violation(
                message,
                [
                    f"failed in {len(compiles)} recompile(s), first at {where(compiles[0])} "
                    f"(compile {compiles[0].compile_id})",
                    f"guard: {guard_text(guard)}"
                    + (f", read at {guard.user_location}" if guard.user_location else ""),
                ],
                location=current.locations.get(frame),
                key=f"baseline-recompile-reasons:{frame}:{kind}:{source}",
            )
        )
    return _finish(
        result, "new", f"{len(current.reasons)} distinct reason(s), {len(base.reasons)} before"
    )


def _more_entries(current: _Side, base: _Side, allow: Allowlist) -> RuleResult:
    result = RuleResult("baseline-cache-entries", "")
    compared = 0
    for key, entries in current.entries.items():
        before = base.entries.get(key)
        if before is None:
            continue  # a new frame: baseline-frames reports it
        compared += 1
        if entries <= before:
            continue
        message = f"{key} holds {entries} cache entries, {before} in the baseline"
        compiles = current.frames.get(key, [])
        entry = allow.match(
            compiles_subject(compiles, current.locations.get(key))
            if compiles
            else Subject(frame=current.names.get(key), location=current.locations.get(key))
        )
        if entry is not None:
            result.allowed.append(Allowed(message, entry.reason, entry.index))
            continue
        result.violations.append(
            Violation(
                message,
                [
                    f"compiles of this frame: {len(compiles)} now, "
                    f"{len(base.frames.get(key, []))} in the baseline"
                ],
                location=current.locations.get(key),
                key=f"baseline-cache-entries:{key}",
            )
        )
    return _finish(result, "with more entries", f"{compared} code object(s) compared")


def _step_time(current: _Side, base: _Side, tolerance: float) -> RuleResult:
    result = RuleResult("baseline-step-time", "")
    now = _steady(current.run)
    before = _steady(base.run)
    if not now or not before:
        result.status = SKIP
        result.summary = (
            f"not enough steady live steps to compare ({len(now)} now, {len(before)} in the "
            "baseline; step 0 and profiled steps do not count)"
        )
        return result
    metric = "gpu_s" if all(_number(s.gpu_s) for s in now + before) else "wall_s"
    label = "GPU time" if metric == "gpu_s" else "host wall time"
    groups = _by_shape(current.run, now, base.run, before)
    compared = [
        (
            shape,
            compare(
                [_time(s, metric) for s in ours],
                [_time(s, metric) for s in theirs],
                min_band=tolerance,
                labels=("now", "baseline"),
            ),
        )
        for shape, ours, theirs in groups
    ]
    judged = [(shape, c) for shape, c in compared if c.judged]
    noisy = [(shape, c) for shape, c in compared if not c.judged]
    if not judged:
        shape, first = noisy[0]
        result.status = SKIP
        result.summary = (
            f"too noisy to judge: {first.reason}{_for_shape(shape, len(compared))}; "
            f"{_medians(first, label)}"
        )
        return result
    shape, worst = max(judged, key=lambda item: item[1].ratio or 0.0)
    change = (worst.ratio or 1.0) - 1.0
    result.summary = (
        f"{_medians(worst, label)} ({change:+.1%}, tolerance +{tolerance:.0%}"
        + (f", noise band +{worst.band:.0%}" if worst.band > tolerance else "")
        + ")"
        + _for_shape(shape, len(compared))
        + (
            f"; not judged (too noisy): {', '.join(_shape_name(s) for s, _ in noisy)}"
            if noisy
            else ""
        )
    )
    if worst.verdict == SLOWER:
        assert worst.current is not None and worst.reference is not None
        result.violations.append(
            Violation(
                f"steady-state steps are {change:.1%} slower than the baseline "
                f"(tolerance {tolerance:.0%})",
                [
                    f"{label} of steady live steps{_for_shape(shape, len(compared))}: "
                    f"{worst.current.describe()}",
                    f"baseline: {worst.reference.describe()}",
                    "steady: live steps other than each request's step 0, not profiled; "
                    f"slower means past the larger of the tolerance and 3 spreads "
                    f"(+{worst.band:.0%} here)",
                ],
                key="baseline-step-time",
            )
        )
        result.status = FAIL
    return result


def _medians(comparison: Comparison, label: str) -> str:
    now, before = comparison.current, comparison.reference
    return (
        f"median {label} {now.median * 1000 if now else 0.0:.2f} ms vs "
        f"{before.median * 1000 if before else 0.0:.2f} ms"
    )


def _shape_name(shape: tuple[int, ...] | None) -> str:
    return "x".join(str(d) for d in shape) if shape else "unknown shape"


def _for_shape(shape: tuple[int, ...] | None, groups: int) -> str:
    return f" (shape {_shape_name(shape)}, of {groups} compared)" if groups > 1 else ""


def _by_shape(
    run: RunData | None, now: list[Step], base_run: RunData | None, before: list[Step]
) -> list[tuple[tuple[int, ...] | None, list[Step], list[Step]]]:
    """Steady steps of both sides per request shape; one group of all when they share none."""

    def shapes(side: RunData | None, steps: list[Step]) -> dict[tuple[int, ...] | None, list[Step]]:
        of_request = {r.request_id: r.shape for r in side.requests} if side else {}
        grouped: dict[tuple[int, ...] | None, list[Step]] = {}
        for step in steps:
            shape = step.shape or of_request.get(step.request_id)
            key = tuple(int(d) for d in shape) if shape else None
            grouped.setdefault(key, []).append(step)
        return grouped

    ours, theirs = shapes(run, now), shapes(base_run, before)
    common = [k for k in ours if k in theirs]
    if not common:
        return [(None, now, before)]
    return [(k, ours[k], theirs[k]) for k in sorted(common, key=_shape_name)]


def _steady(run: RunData | None) -> list[Step]:
    if run is None:
        return []
    return [
        s
        for s in run.steps
        if s.phase == "live" and s.index != 0 and not s.profiled and _number(s.wall_s)
    ]


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _time(step: Step, metric: str) -> float:
    value = step.gpu_s if metric == "gpu_s" else step.wall_s
    return float(value) if isinstance(value, (int, float)) else 0.0


def _finish(result: RuleResult, what: str, counted: str) -> RuleResult:
    count = len(result.violations)
    result.summary = f"{count} {what}; {counted}" + (
        f"; {len(result.allowed)} allowed" if result.allowed else ""
    )
    if count:
        result.status = FAIL
    return result
