"""The sign-off's tables, computed from the trials (docs/BENCH.md gives the method).

Per configuration and request shape: the steady-state mean and median from step 3 on and from
step 6 on, across valid trials, with a 95% interval; step 0 against steady; lingering start-up
(steps 3-5 slower than 6+ beyond noise). Per pair of configurations: the reduction with its
interval. For programs that serve several shapes: the variable-resolution table and its
verdict. Pure functions of the trials; standard library only (`diag check --bench` uses them).
"""

from __future__ import annotations

import importlib
import statistics
from dataclasses import dataclass, field
from typing import Any

from diag.benchmark.program_clock import CLOCK_GPU, CLOCK_PROGRAM, CLOCK_WALL
from diag.benchmark.trial import Shape, TimedStep, Trial
from diag.benchmark.validity import Flaw, flaws, unchecked, window_steps
from diag.evidence.stats import (
    SLOWER,
    Interval,
    compare,
    mean_interval,
    reduction_interval,
    sample,
    stands_out,
)

#: A phase's step 0 "matches steady state" within this share of the steady median (or within
#: 3 robust spreads, when those are wider): first-call costs that no compile explains (a cuDNN
#: plan, an allocation) stay under it on the H200 recordings, a live recompile is many times it.
STEP0_BAND = 0.25

#: How a problem that the noise leaves undecided starts (it makes a verdict "not judged").
NOT_JUDGED = "too noisy to judge: "
#: A phase whose calls may have run eagerly after a recompile-limit hit: not judged either.
UNCHECKED = "not checked: "

#: The posts' two windows: steady state from step 3 on and from step 6 on (steps counted from 0).
WINDOWS = (3, 6)


def shape_name(shape: Shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "unknown shape"


@dataclass(frozen=True)
class Clock:
    """The one clock every number of a bench is read on, and why it is that one."""

    name: str
    why: str

    def of(self, step: TimedStep) -> float | None:
        if self.name == CLOCK_PROGRAM:
            return step.program_s
        if self.name == CLOCK_GPU:
            return step.gpu_s
        return step.wall_s


def choose_clock(trials: list[Trial]) -> Clock:
    """The program's own infer_main log where every usable trial has it, tied to diag's steps;
    else CUDA-event GPU time where every live step has it; else host wall time."""
    usable = [t for t in trials if t.usable]
    if not usable:
        return Clock(CLOCK_WALL, "no usable trial")
    missing = [t for t in usable if not t.program_clock.aligned]
    if not missing:
        return Clock(CLOCK_PROGRAM, "every trial's log has one infer_main line per live step")
    first = missing[0]
    why = (
        f"not the program's log: {first.config} trial {first.number}: {first.program_clock.reason}"
    )
    if all(t.has_gpu_times for t in usable):
        return Clock(CLOCK_GPU, why)
    return Clock(CLOCK_WALL, why)


@dataclass
class WindowStats:
    """One configuration, one shape, one window, across its valid trials."""

    start: int
    trial_means: list[float]
    trial_medians: list[float]
    interval: Interval | None
    median: float | None
    excluded: list[tuple[int, list[Flaw]]]  # (trial number, why)
    empty: list[int]  # trials with no step in this window (requests too short)

    def as_dict(self) -> dict[str, Any]:
        return {
            "from_step": self.start,
            "valid_trials": len(self.trial_means),
            "mean_s": self.interval.mean if self.interval else None,
            "ci95_s": _pair(self.interval),
            "median_s": self.median,
            "trial_means_s": self.trial_means,
            "excluded": [
                {"trial": n, "why": [{"kind": f.kind, "text": f.text} for f in why]}
                for n, why in self.excluded
            ],
            "no_steps_in_window": self.empty,
        }


@dataclass
class Lingering:
    verdict: str  # "lingering", "settled", "not judged"
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "text": self.text}


@dataclass
class ShapeStats:
    config: str
    shape: Shape
    step0: Interval | None  # mean of each trial's step-0 mean
    windows: dict[int, WindowStats]
    lingering: Lingering

    def as_dict(self) -> dict[str, Any]:
        steady = self.windows[WINDOWS[0]].interval
        return {
            "config": self.config,
            "shape": list(self.shape) if self.shape else None,
            "step0_mean_s": self.step0.mean if self.step0 else None,
            "step0_ci95_s": _pair(self.step0),
            "step0_over_steady": (
                self.step0.mean / steady.mean if self.step0 and steady and steady.mean > 0 else None
            ),
            "windows": {str(k): w.as_dict() for k, w in self.windows.items()},
            "lingering_startup": self.lingering.as_dict(),
        }


@dataclass
class PairRow:
    reference: str
    other: str
    shape: Shape
    start: int
    reduction: Interval | None
    verdict: str  # "faster", "slower", "no difference within noise", "not judged: ..."

    @property
    def speedup(self) -> float | None:
        if self.reduction is None or self.reduction.mean >= 1:
            return None
        return 1 / (1 - self.reduction.mean)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "other": self.other,
            "shape": list(self.shape) if self.shape else None,
            "from_step": self.start,
            "reduction": self.reduction.mean if self.reduction else None,
            "reduction_ci95": _pair(self.reduction),
            "speedup": self.speedup,
            "verdict": self.verdict,
        }


@dataclass
class PhaseRow:
    index: int  # from 1
    shape: Shape
    requests: int
    step0: Interval | None
    steady: Interval | None
    compiles: list[int]  # per trial
    problems: list[str]  # why this phase fails, per trial

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.index,
            "shape": list(self.shape) if self.shape else None,
            "requests": self.requests,
            "step0_mean_s": self.step0.mean if self.step0 else None,
            "steady_mean_s": self.steady.mean if self.steady else None,
            "compiles_per_trial": self.compiles,
            "problems": self.problems,
        }


@dataclass
class VariableResolution:
    config: str
    phases: list[PhaseRow]
    passed: bool | None  # None: could not judge
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "passed": self.passed,
            "verdict": self.verdict,
            "phases": [p.as_dict() for p in self.phases],
        }


@dataclass
class BenchTables:
    configs: list[str]
    clock: Clock
    trials: list[Trial]
    shapes: list[ShapeStats]
    pairs: list[PairRow]
    variable_resolution: list[VariableResolution]
    notes: list[str] = field(default_factory=list)

    def stats(self, config: str, shape: Shape) -> ShapeStats | None:
        return next((s for s in self.shapes if s.config == config and s.shape == shape), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "configs": self.configs,
            "clock": {"name": self.clock.name, "why": self.clock.why},
            "windows": list(WINDOWS),
            "trials": [_trial_dict(t) for t in self.trials],
            "steady_state": [s.as_dict() for s in self.shapes],
            "pairs": [p.as_dict() for p in self.pairs],
            "variable_resolution": [v.as_dict() for v in self.variable_resolution],
            "notes": self.notes,
        }


def _pair(interval: Interval | None) -> list[float] | None:
    if interval is None or interval.low is None or interval.high is None:
        return None
    return [interval.low, interval.high]


def _trial_dict(trial: Trial) -> dict[str, Any]:
    return {
        "config": trial.config,
        "trial": trial.number,
        "trace": str(trial.trace),
        "problem": trial.problem,
        "flaws": {
            str(k): [{"kind": f.kind, "text": f.text} for f in flaws(trial, k)] for k in WINDOWS
        }
        if trial.usable
        else {},
        "program_clock": "" if trial.program_clock.aligned else trial.program_clock.reason,
        "not_checked": unchecked(trial),
    }


def build_tables(configs: list[str], trials: list[Trial]) -> BenchTables:
    clock = choose_clock(trials)
    shapes: list[ShapeStats] = []
    for config in configs:
        mine = [t for t in trials if t.config == config]
        shapes.extend(_shape_stats(config, shape, mine, clock) for shape in _shapes(mine))
    pairs = _pairs(configs, shapes, trials, clock)
    variable = [v for config in configs if (v := _variable(config, trials, clock)) is not None]
    notes = [f"{t.config} trial {t.number}: not used: {t.problem}" for t in trials if not t.usable]
    return BenchTables(configs, clock, trials, shapes, pairs, variable, notes)


def _shapes(trials: list[Trial]) -> list[Shape]:
    seen: list[Shape] = []
    for trial in trials:
        for request in trial.requests:
            if request.shape not in seen:
                seen.append(request.shape)
    return seen


def _times(steps: list[TimedStep], clock: Clock) -> list[float]:
    return [v for s in steps if (v := clock.of(s)) is not None]


def _shape_stats(config: str, shape: Shape, trials: list[Trial], clock: Clock) -> ShapeStats:
    usable = [t for t in trials if t.usable]
    windows: dict[int, WindowStats] = {}
    valid_steps: dict[int, list[TimedStep]] = {}
    for start in WINDOWS:
        means: list[float] = []
        medians: list[float] = []
        excluded: list[tuple[int, list[Flaw]]] = []
        empty: list[int] = []
        pooled: list[TimedStep] = []
        for trial in usable:
            steps = [s for s in window_steps(trial, start) if s.shape == shape]
            times = _times(steps, clock)
            if not times:
                empty.append(trial.number)
                continue
            why = flaws(trial, start)
            if why:
                excluded.append((trial.number, why))
                continue
            means.append(statistics.fmean(times))
            medians.append(statistics.median(times))
            pooled.extend(steps)
        windows[start] = WindowStats(
            start,
            means,
            medians,
            mean_interval(means, floor=0.0),
            statistics.median(medians) if medians else None,
            excluded,
            empty,
        )
        valid_steps[start] = pooled
    step0s = [
        statistics.fmean(times)
        for trial in usable
        if (
            times := _times(
                [s for s in trial.steps if s.index == 0 and s.shape == shape and s.counted],
                clock,
            )
        )
    ]
    lingering = _lingering(valid_steps, clock)
    return ShapeStats(config, shape, mean_interval(step0s, floor=0.0), windows, lingering)


def _lingering(valid: dict[int, list[TimedStep]], clock: Clock) -> Lingering:
    first, second = WINDOWS
    early = _times([s for s in valid[first] if s.index < second], clock)
    late = _times(valid[second], clock)
    if not late:
        return Lingering("not judged", f"no valid steps from step {second} on")
    result = compare(early, late, labels=(f"{first}-{second - 1}", f"{second}+"))
    if not result.judged:
        return Lingering("not judged", f"too noisy to judge: {result.reason}")
    assert result.current is not None and result.reference is not None
    text = (
        f"steps {first}-{second - 1} median {result.current.median * 1e3:.2f} ms vs steps "
        f"{second}+ {result.reference.median * 1e3:.2f} ms ({(result.ratio or 1) - 1:+.1%}, "
        f"noise band ±{result.band:.0%})"
    )
    if result.verdict == SLOWER:
        return Lingering("lingering", f"start-up lingers past step {first}: {text}")
    return Lingering("settled", text)


def _pairs(
    configs: list[str], shapes: list[ShapeStats], trials: list[Trial], clock: Clock
) -> list[PairRow]:
    rows: list[PairRow] = []
    for i, reference in enumerate(configs):
        for other in configs[i + 1 :]:
            for ref_stats in (s for s in shapes if s.config == reference):
                other_stats = next(
                    (s for s in shapes if s.config == other and s.shape == ref_stats.shape), None
                )
                if other_stats is None:
                    continue
                rows.extend(
                    _pair_row(
                        reference,
                        other,
                        ref_stats.shape,
                        start,
                        ref_stats.windows[start].trial_means,
                        other_stats.windows[start].trial_means,
                    )
                    for start in WINDOWS
                )
    return rows


def _pair_row(
    reference: str, other: str, shape: Shape, start: int, ref: list[float], oth: list[float]
) -> PairRow:
    reduction = reduction_interval(ref, oth)
    if reduction is None:
        verdict = f"not judged: {len(ref)} and {len(oth)} valid trial(s)"
    elif not reduction.known:
        verdict = f"not judged: {len(ref)} and {len(oth)} valid trial(s), 2 each needed"
    elif reduction.spans(0.0):
        verdict = "no difference within noise"
    elif reduction.mean > 0:
        verdict = "faster"
    else:
        verdict = "slower"
    return PairRow(reference, other, shape, start, reduction, verdict)


def _variable(config: str, trials: list[Trial], clock: Clock) -> VariableResolution | None:
    """The variable-resolution test, for a configuration whose trials serve several shapes."""
    usable = [t for t in trials if t.config == config and t.usable]
    if not any(len({r.shape for r in t.requests}) > 1 for t in usable):
        return None
    per_trial = [_phases(t) for t in usable]
    layout = [[shape for shape, _ in phases] for phases in per_trial]
    if any(item != layout[0] for item in layout):
        return VariableResolution(
            config, [], None, "not judged: the trials served their shapes in different orders"
        )
    rows: list[PhaseRow] = []
    for index, shape in enumerate(layout[0]):
        step0s: list[float] = []
        steadies: list[float] = []
        compiles: list[int] = []
        problems: list[str] = []
        requests = 0
        for trial, phases in zip(usable, per_trial, strict=True):
            members = phases[index][1]
            requests = max(requests, len(members))
            ids = {r.request_id for r in members}
            first = [s for s in members[0].steps if s.index == 0]
            zero = _times(first, clock)
            steady = _times([s for r in members for s in r.steps if s.index != 0], clock)
            count = sum(1 for c in trial.compiles if c.live and c.request_id in ids)
            count += sum(
                1
                for e in trial.events
                if e.kind in ("magi_compile_end", "magi_runtime_compile", "cudagraph_record")
                and e.position[1] in ids
            )
            compiles.append(count)
            if zero:
                step0s.append(zero[0])
            if steady:
                steadies.append(statistics.fmean(steady))
            tag = f"trial {trial.number}"
            abnormal = _abnormal(trial, ids) or _eager_unknown(trial, ids)
            if index == 0:
                # The first shape may compile (a frame's first compile) and pay for it at step
                # 0; a recompile or a recompile-limit hit is abnormal there too.
                if abnormal:
                    problems.append(f"{tag}: {abnormal}")
                continue
            if count:
                problems.append(
                    f"{tag}: {count} compile(s) or CUDA-graph recording(s)"
                    + (f" ({abnormal})" if abnormal else "")
                )
                continue  # step 0 paid the compile: its time says nothing more
            if abnormal:
                problems.append(f"{tag}: {abnormal}")
            if zero and steady:
                problem = _step0_problem(first[0], zero[0], steady, clock)
                if problem:
                    problems.append(f"{tag}: {problem}")
            elif not steady:
                problems.append(f"{tag}: no steady steps to hold step 0 against")
        rows.append(
            PhaseRow(
                index + 1,
                shape,
                requests,
                mean_interval(step0s, floor=0.0),
                mean_interval(steadies, floor=0.0),
                compiles,
                problems,
            )
        )
    failing = [row for row in rows if row.problems]
    if failing:
        judged = [
            row
            for row in failing
            if any(
                "no steady steps" not in p and NOT_JUDGED not in p and UNCHECKED not in p
                for p in row.problems
            )
        ]
        if not judged:
            return VariableResolution(config, rows, None, "not judged: " + failing[0].problems[0])
        failing = judged
        where = ", ".join(f"phase {row.index} ({shape_name(row.shape)})" for row in failing)
        return VariableResolution(config, rows, False, f"fail: {where}")
    return VariableResolution(
        config,
        rows,
        True,
        "pass: after the first shape every step 0 is within the noise of steady and nothing "
        "compiled; nothing recompiled",
    )


def _abnormal(trial: Trial, ids: set[str]) -> str:
    """Recompiles and recompile-limit hits in a phase: abnormal in any phase, the first too."""
    recompiles = [c for c in trial.compiles if c.live and c.request_id in ids and c.is_recompile]
    limits = sum(1 for c in trial.compiles if c.request_id in ids and c.result == "recompile_limit")
    limits += sum(1 for e in trial.events if e.kind == "recompile_limit" and e.position[1] in ids)
    parts = []
    if recompiles:
        parts.append(f"{len(recompiles)} recompile(s)")
    if limits:
        parts.append(
            "the recompile limit hit (from then on, calls that match none of the frame's "
            "entries run eagerly)"
        )
    parts.extend(_eager_calls(trial, ids))
    return ", ".join(parts)


def _eager_calls(trial: Trial, ids: set[str]) -> list[str]:
    """Calls of the phase that ran eagerly after a recompile-limit hit, in the phase or before
    it (warmup included): its step 0 is then within the noise of an eager program, not of a
    compiled one, so nothing it times is the compiled service's."""
    parts = []
    for hit in trial.limit_hits:
        calls = sum(n for rid, n in hit.eager.items() if rid in ids)
        if calls:
            parts.append(
                f"{calls} call(s) of {hit.frame} ran eagerly: it hit the recompile limit "
                f"({hit.where}) and they matched none of its cache entries"
            )
    return parts


def _eager_unknown(trial: Trial, ids: set[str]) -> str:
    """A recompile-limit hit before the phase ended whose later calls the recorder did not
    check: the phase's calls may have run eagerly, so its timings cannot pass."""
    ends = [s.end_t for s in trial.steps if s.request_id in ids]
    for hit in trial.limit_hits:
        if not hit.known and ends and hit.t <= max(ends):
            return (
                f"{UNCHECKED}{hit.frame} hit the recompile limit ({hit.where}) before this phase "
                "ended and the recording did not check which later calls ran eagerly"
            )
    return ""


def _phases(trial: Trial) -> list[tuple[Shape, list[Any]]]:
    """Consecutive live requests of one shape: the test's phases, in serving order."""
    phases: list[tuple[Shape, list[Any]]] = []
    for request in trial.requests:
        if phases and phases[-1][0] == request.shape:
            phases[-1][1].append(request)
        else:
            phases.append((request.shape, [request]))
    return phases


def _step0_problem(step: TimedStep, step0: float, steady: list[float], clock: Clock) -> str:
    """Why step 0 is not within the noise of the phase's steady steps, or ''.

    A step 0 past the noise on a loaded host, or one the process spent mostly off the CPU
    (host wall time only: step0-spike's rule, diag.analyzers.step0_spike), is too noisy to
    judge: the machine, not the program, may have made it slow."""
    summary = sample(steady)
    if summary is None or summary.n < 2:
        return ""
    if step0 <= summary.median * (1 + STEP0_BAND) or not stands_out(step0, summary):
        return ""
    rule = importlib.import_module("diag.analyzers.step0_spike")  # analyzers/ (package-dir)
    host_load_limit: float = rule.HOST_LOAD_LIMIT
    cpu_share: float = rule.CPU_SHARE
    if step.host_load is not None and step.host_load > host_load_limit:
        return (
            f"{NOT_JUDGED}step 0 {step0 * 1e3:.2f} ms vs steady median "
            f"{summary.median * 1e3:.2f} ms on a loaded host ({step.host_load:.1f} runnable "
            f"tasks per CPU)"
        )
    if clock.name == CLOCK_WALL and step.cpu_s is not None:
        extra = step0 - summary.median
        if extra > 0 and step.cpu_s < cpu_share * extra:
            return (
                f"{NOT_JUDGED}step 0 {step0 * 1e3:.2f} ms vs steady median "
                f"{summary.median * 1e3:.2f} ms, but the process ran on the CPU for only "
                f"{step.cpu_s * 1e3:.2f} ms of it (descheduled)"
            )
    return (
        f"step 0 {step0 * 1e3:.2f} ms vs steady median {summary.median * 1e3:.2f} ms "
        f"({step0 / summary.median:.2f}x, beyond 3 spreads and +{STEP0_BAND:.0%})"
    )
