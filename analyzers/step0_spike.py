"""step0-spike: a live request whose first step is far slower than its own steady steps.

Why: users see the latency of the whole request, and step 0 is where one-off costs land: a
recompile (the new shape or value reaches the compiled frame there first), cuDNN or cuBLAS
building plans for a new shape, the caching allocator growing its pool, an offloaded model's
weights coming back. Averages hide it; comparing step 0 with the same request's other steps
does not, and the attribution says which of those costs it was.

Threshold: step 0 is a spike when it takes at least twice the median of the request's other
steps AND at least 50 ms more than that median. On the H200 (docs/FIXTURES.md) a live
recompile made step 0 3x to 200x the steady median (the smallest: LTX guard-churn r1, 170 vs
56.6 ms), while clean step 0s stayed within 1.5x (qwen compiled r0: 49 vs 34 ms); 2x sits
between with margin on both sides, and the 50 ms floor keeps the jitter of millisecond steps
(small CPU runs) from counting. The median of the others, not their mean, so that one slow
steady step does not move the baseline; and step 0 must also be slower than every one of them,
since a steady step as slow as step 0 makes it no first-step cost but noise.

Noise: step 0 must also stand NOISE_SIGMAS robust spreads (diag.evidence.stats, from the MAD) above
the
baseline's median. A cause the trace shows (a compile, allocator growth, the profiler) is
evidence of its own; a spike with no such cause is a warning only when the host's noise cannot
explain it: the process was on the CPU for at least CPU_SHARE of step 0's extra wall time
(Step.cpu_s; a descheduled process's wall time grows, its CPU time does not), and the excess is
at least HOST_NOISE_FACTOR x the largest excursion of any steady step of the process above its
own request's median, and the host was not loaded (Step.host_load, runnable tasks per CPU, at
most HOST_LOAD_LIMIT: on a busy CPU the program's spinning threads inflate its CPU time too).
Otherwise it is INFO, "too noisy to judge", with the numbers: on a 2-core host at load 4 a
clean run's step 0 took 5x its steady steps.

Times: Step.gpu_s when step 0 and every baseline step have it (CUDA events), else wall_s for
all of them. The baseline is the request's unprofiled other steps; when fewer than
MIN_BASELINE are left (the default windows profile step 0 and two steady steps of the first
live request, and a 3-step request has one step left), its profiled steps join it: the profiler
only slows them, so the baseline can only be too high and a spike found against it is real. A
live request with fewer than MIN_BASELINE other steps cannot be judged: one INFO per process
says which.

Attribution: compiles inside step 0, when their summed seconds are at least half the excess;
CUDA graphs recorded for the new size; otherwise the first-use cost diag.evidence.spikes reads
(`first_use_cause`: step 0's profile op by op against steady profiled steps, cuDNN or cuBLAS
plans, autotuning, allocator, offload reloads, NCCL; without a profile, allocator growth inside
the step and an offloaded model's reload); else unknown, with what the evidence shows (and the
compiles, if any were too short to explain it, e.g. a recompile-limit hit, which compiles
nothing). Being profiled is no cause: the profiler starts before the step's clock does.
Severity is warning throughout: a live compile is already an error of live-compile, which this
finding names instead of repeating it. Warmup requests are not checked: their step-0 compiles are
the expected cost that live-compile's INFO reports.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass

from diag.evidence.causes import cause_short, recompile_cause
from diag.evidence.claims import claim
from diag.evidence.frames import label as frame_label
from diag.evidence.request_names import request_name
from diag.evidence.spikes import (
    DESCRIPTIONS,
    FACTOR,
    FIXES,
    FLOOR_S,
    SpikeCause,
    first_use_cause,
    is_spike,
)
from diag.evidence.stats import NOISE_SIGMAS, Sample, sample
from diag.findings.model import Finding
from diag.trace.run import Compile, Event, Request, RunData, Step, Trace

from .common import format_seconds as _secs
from .common import id_suffix as _id_suffix
from .common import process_lines as _tag_lines

ANALYZER = "step0-spike"

#: Unprofiled other steps the baseline needs.
MIN_BASELINE = 2
#: Compiles "explain" the excess when their seconds are at least this share of it.
EXPLAINED_SHARE = 0.5
#: A spike of unknown cause needs the process on the CPU for this share of the extra wall time ...
CPU_SHARE = 0.5
#: ... and an excess this many times the largest steady-step excursion of the process ...
HOST_NOISE_FACTOR = 2.0
#: ... on a host with at most this many runnable tasks per CPU (Step.host_load).
HOST_LOAD_LIMIT = 1.0


@dataclass
class _Timing:
    step0: float
    baseline: Sample
    metric: str  # "gpu" or "wall"
    baseline_steps: list[int]
    profiled_left_out: list[int]
    profiled_joined: list[int]  # profiled steps in the baseline (too few unprofiled ones)
    #: (step 0's CPU seconds above the baseline's median, its wall seconds above it); None
    #: when a step has no cpu_s (older traces, imported ones).
    cpu: tuple[float, float] | None = None

    @property
    def median(self) -> float:
        return self.baseline.median

    @property
    def slowest(self) -> float:
        return self.baseline.high

    @property
    def excess(self) -> float:
        return self.step0 - self.median

    @property
    def spike(self) -> bool:
        return is_spike(self.step0, self.baseline)

    @property
    def cpu_share(self) -> float | None:
        if self.cpu is None or self.cpu[1] <= 0:
            return None
        return self.cpu[0] / self.cpu[1]


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        index = _Index(run)
        unjudged: dict[int, list[tuple[str, str]]] = {}
        for request in run.requests:
            if request.phase != "live":
                continue
            found = _timing(request)
            if isinstance(found, str):
                unjudged.setdefault(request.pid, []).append((request.request_id, found))
                continue
            if found is None:
                continue
            finding = _check(run, request, index, *found)
            if finding is not None:
                findings.append(finding)
        findings.extend(_unjudged(run, pid, items) for pid, items in unjudged.items())
    return findings


class _Index:
    """What _check looks up per spiking request, indexed once per run: long runs have
    hundreds of thousands of steps, and scanning them per request was quadratic."""

    def __init__(self, run: RunData) -> None:
        self.steps: dict[int, list[Step]] = {}
        for step in sorted(run.steps, key=lambda s: s.start_t):
            self.steps.setdefault(step.pid, []).append(step)
        self.starts = {pid: [s.start_t for s in steps] for pid, steps in self.steps.items()}
        self.compiles: dict[tuple[int, str | None, int | None], list[Compile]] = {}
        for item in run.compiles:
            self.compiles.setdefault((item.pid, item.request_id, item.step), []).append(item)
        # Compile time by phase (collectors/compile_timing.py), by the step it was logged in:
        # autotuning and CUDA-graph capture run at a compiled graph's first call, after the
        # compile, so they land in step 0 beside it.
        self.timings: dict[tuple[int, str | None, int | None], list[Event]] = {}
        for event in run.of("compile_timing"):
            index = event.data.get("step")
            key = (
                event.pid,
                event.data.get("request_id"),
                index if isinstance(index, int) else None,
            )
            self.timings.setdefault(key, []).append(event)
        # CUDA-graph recordings per request (collectors/cudagraphs.py): a new size's graph runs
        # eagerly at its first call (step 0) and records at the next.
        self.recordings: dict[tuple[int, str | None], list[Event]] = {}
        for event in run.of("cudagraph_record"):
            rid = event.data.get("request_id")
            self.recordings.setdefault(
                (event.pid, rid if isinstance(rid, str) else None), []
            ).append(event)
        self.windows: dict[int, list[Event]] = {}
        for event in run.of("profile_window_start"):
            self.windows.setdefault(event.pid, []).append(event)
        self.host_noise = _host_noise(run)

    def previous_step(self, step0: Step) -> Step | None:
        """The step of the same process that started last before step0."""
        starts = self.starts.get(step0.pid, [])
        position = bisect.bisect_left(starts, step0.start_t) - 1
        return self.steps[step0.pid][position] if position >= 0 else None


def _host_noise(run: RunData) -> dict[int, tuple[float, str]]:
    """Per process: the largest excursion of a steady step (unprofiled, not step 0) above its
    own request's median, any phase, and which step it was. What the host's noise alone did
    to steps that pay no first-call cost."""
    noise: dict[int, tuple[float, str]] = {}
    for request in run.requests:
        steady = [s for s in request.steps if s.index != 0 and not s.profiled and s.wall_s]
        if len(steady) < MIN_BASELINE:
            continue
        middle = statistics.median(float(s.wall_s or 0.0) for s in steady)
        slowest = max(steady, key=lambda s: float(s.wall_s or 0.0))
        excursion = float(slowest.wall_s or 0.0) - middle
        if excursion > noise.get(request.pid, (0.0, ""))[0]:
            noise[request.pid] = (excursion, f"{request.request_id} step {slowest.index}")
    return noise


def _timing(request: Request) -> tuple[Step, _Timing] | str | None:
    """Step 0 and its baseline; a reason (str) when step 0 cannot be judged; None when the
    request has no step 0."""
    step0 = next((s for s in request.steps if s.index == 0), None)
    if step0 is None:
        return None
    others = [s for s in request.steps if s is not step0]
    baseline = [s for s in others if not s.profiled]
    joined: list[int] = []
    if len(baseline) < MIN_BASELINE:
        baseline = others
        joined = [s.index for s in others if s.profiled]
    use_gpu = step0.gpu_s is not None and all(s.gpu_s is not None for s in baseline)

    def value(step: Step) -> float | None:
        return step.gpu_s if use_gpu else step.wall_s

    t0 = value(step0)
    times = [(s.index, v) for s in baseline if (v := value(s)) is not None]
    if t0 is None or len(times) < MIN_BASELINE:
        unprofiled = sum(1 for s in others if not s.profiled)
        return (
            f"{len(others)} other step(s) ({unprofiled} unprofiled), {MIN_BASELINE} needed"
            if others
            else "no other step"
        )
    summary = sample(v for _, v in times)
    assert summary is not None
    cpu = None
    cpus = [s.cpu_s for s in baseline]
    walls = [s.wall_s for s in baseline]
    if step0.cpu_s is not None and step0.wall_s is not None and None not in cpus + walls:
        cpu = (
            step0.cpu_s - statistics.median(c for c in cpus if c is not None),
            step0.wall_s - statistics.median(w for w in walls if w is not None),
        )
    timing = _Timing(
        step0=float(t0),
        baseline=summary,
        metric="gpu" if use_gpu else "wall",
        baseline_steps=[i for i, _ in times],
        profiled_left_out=[] if joined else [s.index for s in others if s.profiled],
        profiled_joined=joined,
        cpu=cpu,
    )
    return step0, timing


def _unjudged(run: RunData, pid: int, items: list[tuple[str, str]]) -> Finding:
    """One INFO per process: live requests whose step 0 had no baseline to be judged against."""
    ids = [rid for rid, _ in items]
    shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
    subject = f"request {ids[0]}" if len(ids) == 1 else f"{len(ids)} live requests ({shown})"
    reason = items[0][1] if len({r for _, r in items}) == 1 else "too few other steps"
    return Finding(
        id=f"{ANALYZER}:unjudged{_id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="info",
        title=f"step 0 of {subject} could not be judged: {reason}",
        evidence=[
            *(f"{rid}: {why}" for rid, why in items[:20]),
            f"a step-0 spike is measured against at least {MIN_BASELINE} other steps of the same "
            "request (unprofiled ones first; profiled ones join when too few are left)",
            *_tag_lines(run, pid),
        ],
        fix=(
            f"Only if first-step latency matters: record requests of at least "
            f"{MIN_BASELINE + 1} steps, with --profile new-shapes (or none) so that no steady "
            "step is profiled."
        ),
        run=run.label,
        data={"requests": ids, "reasons": dict(items)},
    )


def _check(
    run: RunData, request: Request, index: _Index, step0: Step, timing: _Timing
) -> Finding | None:
    if not timing.spike:
        return None
    rid = request.request_id
    compiles = index.compiles.get((request.pid, rid, step0.index), [])
    compile_s = sum(c.duration_s or 0.0 for c in compiles)
    previous = index.previous_step(step0)
    window = _profile_window(index.windows.get(step0.pid, []), step0)

    ratio = timing.step0 / timing.median if timing.median > 0 else float("inf")
    metric = "GPU time from CUDA events" if timing.metric == "gpu" else "wall time"
    left_out = (
        f"; profiled steps {_ints(timing.profiled_left_out)} left out"
        if timing.profiled_left_out
        else ""
    )
    if timing.profiled_joined:
        joined = timing.profiled_joined
        left_out = (
            f"; profiled step{'s' if len(joined) > 1 else ''} {_ints(joined)} joined it (too "
            "few unprofiled ones; the profiler only slows them, so the median is if anything "
            "too high)"
        )
    evidence = [
        f"live request {rid} step 0 took {_secs(timing.step0)} ({metric}) against a steady "
        f"median of {_secs(timing.median)} over steps {_ints(timing.baseline_steps)}"
        f"{left_out}: {ratio:.1f}x, {_secs(timing.excess)} more",
    ]
    # How the spike was judged and where its profile is: after the cause's own lines.
    context = [
        f"threshold: at least {FACTOR:g}x the median, {FLOOR_S * 1000:.0f} ms more, "
        f"{NOISE_SIGMAS:g} spreads above it (spread ±{_secs(timing.baseline.spread)}) and "
        f"slower than every steady step (the slowest: {_secs(timing.slowest)})",
    ]
    causes: list[str] = []
    location: str | None = None
    frames = sorted({frame_label(run, c.frame) for c in compiles})
    share = compile_s / timing.excess if timing.excess > 0 else 1.0
    if compiles:
        if share >= EXPLAINED_SHARE:
            causes.append("compile")
        evidence.extend(_compile_line(run, c) for c in compiles)
        evidence.append(
            f"compiles in the step: {_secs(compile_s)} of the {_secs(timing.excess)} excess "
            f"({min(share, 9.99) * 100:.0f}%)"
            + (
                ""
                if share >= EXPLAINED_SHARE
                else f"; the other {_secs(timing.excess - compile_s)} is not explained by them"
            )
        )
        evidence.append(_cross_reference(run, request, compiles))
        biggest = max(compiles, key=lambda c: c.duration_s or 0.0)
        if causes:
            location = biggest.frame.location if biggest.frame is not None else None
    tuning = _tuning(index.timings.get((request.pid, rid, step0.index), []))
    if any(tuning.values()):
        evidence.append(_tuning_line(tuning, compile_s))
    recorded = index.recordings.get((request.pid, rid), [])
    if recorded and [e for e in recorded if e.data.get("step") in (0, 1)]:
        causes.append("cudagraph")
        steps = sorted({str(e.data.get("step")) for e in recorded})
        evidence.append(
            f"{len(recorded)} CUDA graph(s) recorded in this request (step(s) "
            f"{', '.join(steps)}): cudagraph trees run a graph eagerly at its first call at a "
            "new size (step 0 here) and record it at the next; the cudagraphs finding for "
            f"{rid} has the recordings"
        )
    found: SpikeCause | None = None
    if step0.profiled:
        context.append(
            "step 0 ran under torch.profiler"
            + (
                f" (window {window}: `diag tui` and `diag report` show its kernels)"
                if window
                else ""
            )
        )
    if not causes:
        # Read the cause off step 0's own profile (op by op against steady profiled steps),
        # else off the events (allocator growth inside the step, an offloaded model's reload).
        found, notes = first_use_cause(run, request, step0, previous, timing.excess)
        evidence.extend(notes)
        if found is not None:
            evidence.extend(found.evidence)
            if found.kind != "unknown":
                causes.append(found.kind)
    cause = causes[0] if causes else "unknown"
    noisy: list[str] = []
    if cause == "unknown":
        if found is None:
            evidence.append(
                "no compile that explains it and nothing in the step's events (no profile, no "
                "allocator growth inside it): the cause is not in the trace (a host-side pause, "
                "e.g. Python's garbage collector or another process, looks like this)"
            )
        noisy = _host_doubts(timing, index.host_noise.get(request.pid), step0.host_load)
        evidence.extend(noisy)
    evidence.extend(context)
    evidence.extend(_tag_lines(run, request.pid))
    what = _cause_title(cause, compiles, compile_s, frames, found)
    tuned = [
        f"{label} {_secs(seconds)}"
        for label, seconds in (
            ("autotuning", tuning["autotune_s"] + tuning["runtime_autotune_s"]),
            ("CUDA-graph capture", tuning["cudagraphify_s"]),
        )
        if seconds
    ]
    if tuned:
        what += f" ({', '.join(tuned)} of it in the step)"
    if noisy:
        what = "too noisy to judge (" + what + ", and the host's noise could explain it)"
    title = (
        f"Live request {request_name(run, request.pid, rid)} step 0 took "
        f"{_secs(timing.step0)}, {ratio:.1f}x its steady "
        f"{_secs(timing.median)}: {what}"
    )
    return Finding(
        id=f"{ANALYZER}:{rid}{_id_suffix(run, request.pid)}",
        analyzer=ANALYZER,
        # A spike the host's noise could explain is no verdict about the program.
        severity="info" if noisy else "warning",
        title=title,
        evidence=evidence,
        fix=_fix(cause, frames)
        if not noisy
        else (
            "Nothing to fix yet: record again on a quiet host (or read several runs) to tell "
            "a first-step cost from noise. " + _fix(cause, frames)
        ),
        location=location,
        run=run.label,
        data={
            "request_id": rid,
            "step0_s": timing.step0,
            "median_s": timing.median,
            "excess_s": timing.excess,
            "metric": timing.metric,
            "baseline_steps": timing.baseline_steps,
            "baseline_spread_s": round(timing.baseline.spread, 9),
            "profiled_in_baseline": timing.profiled_joined,
            "cpu_share": None if timing.cpu_share is None else round(timing.cpu_share, 3),
            "too_noisy": bool(noisy),
            "cause": cause,
            "causes": causes,
            "compile_ids": [c.compile_id for c in compiles],
            "compile_s": round(compile_s, 6),
            "frames": frames,
            **{key: round(value, 6) for key, value in tuning.items() if value},
        },
        claims=[
            claim(
                "spike",
                run,
                request.pid,
                phase="live",
                request=rid,
                step=step0.index,
                excess_ms=round(timing.excess * 1000, 3),
                cause={
                    "kind": {"cudagraph": "cudagraph-record"}.get(cause, cause),
                    "decided": cause != "unknown" and not noisy,
                },
            )
        ],
    )


def _tuning(timings: list[Event]) -> dict[str, float]:
    """Seconds of autotuning (while compiling, and at the first call) and CUDA-graph capture
    that torch's compilation_metrics logged in one step."""
    totals = {"autotune_s": 0.0, "runtime_autotune_s": 0.0, "cudagraphify_s": 0.0}
    for event in timings:
        for key in totals:
            value = event.data.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                totals[key] += float(value)
    return totals


def _tuning_line(tuning: dict[str, float], compile_s: float) -> str:
    """Step 0's compile time apart from its autotuning and CUDA-graph capture (pytorch's
    compile-time autotuning runs inside the compile; the rest runs at the first call)."""
    inside = tuning["autotune_s"]
    parts = []
    if inside:
        parts.append(
            f"autotuning {_secs(inside)} while compiling (inside the compile time: "
            f"{_secs(max(0.0, compile_s - inside))} of it is compiling itself)"
        )
    first_call = [
        f"{label} {_secs(tuning[key])}"
        for key, label in (
            ("runtime_autotune_s", "autotuning"),
            ("cudagraphify_s", "CUDA-graph capture"),
        )
        if tuning[key]
    ]
    if first_call:
        parts.append(" and ".join(first_call) + " at the first call, after the compile")
    return "torch's compilation_metrics in step 0: " + "; ".join(parts)


def _host_doubts(timing: _Timing, noise: tuple[float, str] | None, load: float | None) -> list[str]:
    """Why an unexplained spike may be the host's noise; empty when the evidence rules it out."""
    doubts: list[str] = []
    if load is not None and load > HOST_LOAD_LIMIT:
        doubts.append(
            f"too noisy to judge: the host was loaded ({load:.2f} runnable tasks per CPU over "
            f"the last minute when step 0 ended, more than {HOST_LOAD_LIMIT:g}): other work "
            "waited for a CPU, and a pause in step 0 may be theirs (a busy CPU also inflates "
            "the process's own CPU time: spinning threads)"
        )
    share = timing.cpu_share
    if share is None:
        doubts.append(
            "too noisy to judge: the trace has no CPU time per step, so a descheduled process "
            "(a loaded host) cannot be told from the program's own work"
        )
    elif share < CPU_SHARE:
        cpu_excess = max(0.0, timing.cpu[0]) if timing.cpu else 0.0
        wall_excess = timing.cpu[1] if timing.cpu else 0.0
        doubts.append(
            f"too noisy to judge: the process ran on the CPU for only {_secs(cpu_excess)} of "
            f"step 0's extra {_secs(wall_excess)} wall time ({max(share, 0.0) * 100:.0f}%, "
            f"{CPU_SHARE * 100:.0f}% needed): it waited, or the host ran something else"
        )
    if noise is not None and timing.excess < HOST_NOISE_FACTOR * noise[0]:
        doubts.append(
            f"too noisy to judge: a steady step of this process ({noise[1]}) strayed "
            f"{_secs(noise[0])} above its request's median; step 0's {_secs(timing.excess)} is "
            f"less than {HOST_NOISE_FACTOR:g}x that"
        )
    return doubts


def _compile_line(run: RunData, item: Compile) -> str:
    frame = frame_label(run, item.frame)
    result = "" if item.result == "ok" else f", result {item.result}"
    line = f"compile {item.compile_id} of {frame}: {_secs(item.duration_s or 0.0)}{result}"
    cause = recompile_cause(run, item)
    if cause is None:
        return line + "; first compile of the frame"
    guard = cause.guard
    if guard is None:
        return f"{line}; {cause_short(cause)}"
    line += f"; failing guard: {guard.kind} on {guard.source or '?'}"
    if guard.expected is not None:
        line += f" (expected {guard.expected}"
        line += f", actual {guard.actual})" if guard.actual is not None else ")"
    return line


def _cross_reference(run: RunData, request: Request, compiles: list[Compile]) -> str:
    """Name the error findings that already report these compiles (the same ids they use)."""
    suffix = _id_suffix(run, request.pid)
    names = {frame_label(run, c.frame): c.result for c in compiles}
    ids = [
        f"live-compile:{name}:{request.request_id}{suffix}"
        if result != "recompile_limit"
        else f"recompile-limit:{name}{suffix}"
        for name, result in sorted(names.items())
    ]
    return (
        f"the compile(s) themselves are reported as errors ({', '.join(ids)}); this finding "
        "measures what they cost the request"
    )


def _profile_window(starts: list[Event], step0: Step) -> str | None:
    windows = [e for e in starts if e.t <= step0.start_t]
    if not windows:
        return None
    window = windows[-1].data.get("window")
    return str(window) if window else None


def _cause_title(
    cause: str,
    compiles: list[Compile],
    compile_s: float,
    frames: list[str],
    found: SpikeCause | None,
) -> str:
    if cause == "compile":
        return f"{len(compiles)} compile(s) of {', '.join(frames)} ({_secs(compile_s)})"
    if cause == "cudagraph":
        return "CUDA graphs warming up at a new size (an eager run, then the recording)"
    if cause in DESCRIPTIONS and cause != "unknown":
        return DESCRIPTIONS[cause]
    if compiles:
        return f"cause unknown (compiles in the step took only {_secs(compile_s)})"
    return "cause unknown"


def _fix(cause: str, frames: list[str]) -> str:
    if cause == "compile":
        return (
            f"Move the compile out of live traffic: see live-compile's fix for "
            f"{', '.join(frames)} (warm up the shape or value that triggered it, or make it "
            "dynamic)."
        )
    if cause == "cudagraph":
        return (
            "Record the request's CUDA graphs in warmup: see the cudagraphs finding's fix (warm "
            "every size traffic sends, or serve static graphs)."
        )
    if cause in FIXES:
        return FIXES[cause]
    return (
        "Profile the first step of a live request (diag record --profile new-shapes) to see "
        "where the time goes: lazy initialisation (cuBLAS/cuDNN handles, autotuning), CUDA "
        "graph capture and first-call data loading are common causes."
    )


def _ints(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


def _bytes(value: int) -> str:
    if abs(value) >= 1 << 30:
        return f"{value / (1 << 30):.2f} GiB"
    return f"{value / (1 << 20):.0f} MiB"
