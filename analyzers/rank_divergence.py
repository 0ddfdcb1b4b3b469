"""rank-divergence: ranks of one run that compiled different things, or one rank that kept the
others waiting.

Why: with sequence or CFG parallelism every step ends in a collective, and a collective waits for
the slowest rank. A recompile on one rank only (a per-rank value the compiled frame guards on, a
shape only that rank's share has), an `empty_cache` on one rank, a straggling GPU: each stalls
the whole group, while the other ranks' own traces show only a slow step with no cause. The
single-process analyzers see the halves; this one joins them.

Which runs: every run whose processes carry 2+ distinct ranks (torchrun sets RANK); a rank seen
in two processes (a restarted worker) counts its later process. Steps are aligned across ranks by
request id, the request's occurrence in the process and the step index.

(a) Compile divergence. Live compiles are grouped by frame, request and step; a rank that
compiled where another rank serving the same request did not is an ERROR per (frame, request,
rank), with the failing guard and how long each other rank waited for it. Outside live
requests (warmup, start-up) only the count of compiles per frame and rank is compared (the
moment can differ harmlessly): INFO.

(b) Step skew, live steps present on every rank: the slowest rank's step is a skew when it takes
more than SKEW_RATIO x the median of the other ranks' and SKEW_FLOOR_S more. The culprit is the
slow rank, except when the ranks' steps end together and the slow rank started first: then a
collective inside the step made it wait for the rank that started last, and that one is the
culprit (what delayed it happened before the step). What happened on the culprit is listed (its
compiles, empty_cache, gc.collect, the profiler, the recompile limit, allocator growth). A skew
counts as explained when those events' seconds make up EXPLAINED_SHARE of the excess (or the
event costs time it does not measure: the profiler, an eager fallback). One WARNING per culprit
rank, when it has an explained skew or when it is the unexplained culprit of at least
STRAGGLER_SHARE of the aligned live steps (and 2): a single unexplained slow step is host noise
as often as not. Skews whose cause is a compile that (a) reports are left to (a).

Step times are host wall times (step_end's wall_s): compiles, empty_cache and gc.collect are
spent on the host. A GPU-only straggler behind asynchronous collectives shows in kernel traces,
not here.

How long another rank waited: how much earlier it ended that step than the culprit (the
collective after the step), plus how much longer than its own median the step took (a collective
inside the step), counted only above SKEW_FLOOR_S.

Clock: CLOCK_MONOTONIC is one clock for all processes of a host, so event times compare as they
are; when the processes' monotonic-to-unix offsets differ by more than SAME_HOST_NS they ran on
different hosts and instants are compared in unix time (Process.unix_ns).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from diag.evidence.causes import cause_guard, cause_short, recompile_cause
from diag.evidence.frames import label as frame_label
from diag.evidence.frames import labels as frame_labels
from diag.evidence.stats import sample
from diag.findings.model import Finding
from diag.findings.rankset import rank_tags, ranks_text
from diag.trace.guards import condition_text
from diag.trace.run import Compile, Event, Guard, Process, RunData, Step, Trace

from .common import format_seconds as _secs
from .common import id_suffix as _id_suffix

ANALYZER = "rank-divergence"

#: A step is skewed when the slowest rank takes more than SKEW_RATIO x the others' median ...
SKEW_RATIO = 1.5
#: ... and more than SKEW_FLOOR_S seconds more.
SKEW_FLOOR_S = 0.005
#: Recorded causes explain a skew when their seconds are at least this share of the excess.
EXPLAINED_SHARE = 0.5
#: An unexplained straggler is reported when it is the culprit of this share of aligned steps.
STRAGGLER_SHARE = 0.5
#: Processes whose monotonic-to-unix offsets differ by more than this ran on different hosts.
SAME_HOST_NS = 100_000_000
#: On a CPU-only run, an unexplained straggler whose process ran on the CPU for less than this
#: share of its extra wall time was descheduled (a loaded host): INFO, too noisy to judge.
CPU_SHARE = 0.5
#: ... and so is one on a host with more runnable tasks per CPU than this (Step.host_load).
HOST_LOAD_LIMIT = 1.0

_CAUSE_EVENTS = (
    "empty_cache",
    "gc_collect",
    "recompile_limit",
    "eager_fallback",
    "profile_window_start",
    "profile_window_end",
    "dynamo_reset",
)
#: Causes that cost time they do not measure: they explain a skew by being there.
_UNMEASURED = ("eager_fallback", "recompile_limit", "profile_window_start", "profiled")
_SIZE_KINDS = ("tensor-size", "tensor-stride")

StepKey = tuple[str, int, int]  # request id, its occurrence in the process, step index


@dataclass
class _Rank:
    """One rank's process, its steps by key, and its compiles and events in time order."""

    rank: int
    process: Process
    offset: int  # added to this process's event times to put them on the shared clock
    run: RunData | None = (
        None  # its run: recompile causes are read through it (diag.evidence.causes)
    )
    steps: dict[StepKey, Step] = field(default_factory=dict)
    order: list[StepKey] = field(default_factory=list)  # by start time
    starts: list[int] = field(default_factory=list)  # of `order`, local clock
    position: dict[StepKey, int] = field(default_factory=dict)  # in `order`
    compiles: list[Compile] = field(default_factory=list)  # by end time
    events: list[Event] = field(default_factory=list)  # the cause kinds, by time
    phase_median: dict[str, float] = field(default_factory=dict)
    # (request id, occurrence) -> its steps' wall times, and their median.
    request_walls: dict[tuple[str, int], list[tuple[StepKey, float]]] = field(default_factory=dict)
    request_median: dict[tuple[str, int], float] = field(default_factory=dict)
    compile_ts: list[int] = field(default_factory=list)
    event_ts: list[int] = field(default_factory=list)
    request_ids: set[str] = field(default_factory=set)

    def index(self, request_ids: set[str], compiles: list[Compile], events: list[Event]) -> None:
        """Index this rank's steps; `compiles` and `events` are its own, in time order."""
        self.order = sorted(self.steps, key=lambda k: self.steps[k].start_t)
        self.starts = [self.steps[k].start_t for k in self.order]
        self.position = {k: i for i, k in enumerate(self.order)}
        self.request_ids = request_ids
        self.compiles = compiles
        self.events = events
        self.compile_ts = [c.t for c in self.compiles]
        self.event_ts = [e.t for e in self.events]
        by_phase: dict[str, list[float]] = {}
        for key, step in self.steps.items():
            if step.wall_s is not None:
                by_phase.setdefault(step.phase, []).append(step.wall_s)
                self.request_walls.setdefault(key[:2], []).append((key, step.wall_s))
        self.phase_median = {k: float(statistics.median(v)) for k, v in by_phase.items()}
        self.request_median = {
            k: float(statistics.median(w for _, w in v)) for k, v in self.request_walls.items()
        }

    def between(self, lo: int, hi: int) -> tuple[list[Compile], list[Event]]:
        """Compiles that ended and events that happened in [lo, hi], local clock."""
        c_ts, e_ts = self.compile_ts, self.event_ts
        compiles = self.compiles[bisect_left(c_ts, lo) : bisect_right(c_ts, hi)]
        return compiles, self.events[bisect_left(e_ts, lo) : bisect_right(e_ts, hi)]

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self, key: StepKey) -> int:
        return self.steps[key].start_t + self.offset

    def end(self, key: StepKey) -> int:
        step = self.steps[key]
        return (step.end_t if step.end_t is not None else step.start_t) + self.offset


@dataclass
class _Cause:
    kind: str
    text: str
    seconds: float | None
    compile: Compile | None = None


@dataclass
class _Skew:
    key: StepKey
    culprit: _Rank
    late: bool  # the culprit started late (a collective inside the step made others wait)
    walls: dict[int, float]
    excess: float
    waits: dict[int, float]
    causes: list[_Cause]
    explained: bool
    late_by: float = 0.0  # seconds the culprit started after the others' median start


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        ranks = _ranks(run)
        if len(ranks) >= 2:
            divergent, compile_findings = _compile_findings(run, ranks)
            findings.extend(compile_findings)
            findings.extend(_skew_findings(run, ranks, divergent))
    return findings


# --- ranks, steps and the shared clock ----------------------------------------------------------


def _ranks(run: RunData) -> list[_Rank]:
    latest: dict[int, Process] = {}
    for process in run.processes:
        rank = process.rank
        if isinstance(rank, int) and not isinstance(rank, bool):
            if rank not in latest or process.start_t >= latest[rank].start_t:
                latest[rank] = process
    processes = [latest[r] for r in sorted(latest)]
    offsets = [p.wall_ns - p.start_t for p in processes if p.wall_ns is not None]
    complete = len(offsets) == len(processes) and bool(offsets)
    cross_host = complete and max(offsets) - min(offsets) > SAME_HOST_NS
    ranks = [
        _Rank(p.rank or 0, p, (p.wall_ns or 0) - p.start_t if cross_host else 0, run)
        for p in processes
    ]
    by_pid = {r.pid: r for r in ranks}
    seen: dict[tuple[int, str], int] = {}
    for request in run.requests:  # sorted by start time
        owner = by_pid.get(request.pid)
        if owner is None:
            continue
        occurrence = seen.get((request.pid, request.request_id), 0)
        seen[(request.pid, request.request_id)] = occurrence + 1
        for step in request.steps:
            owner.steps.setdefault((request.request_id, occurrence, step.index), step)
    # Split the run by process once (at 512 ranks a filter per rank is 512 passes over all).
    request_ids: dict[int, set[str]] = {}
    for request in run.requests:
        request_ids.setdefault(request.pid, set()).add(request.request_id)
    compiles: dict[int, list[Compile]] = {}
    for compiled in run.compiles:  # the run keeps them sorted
        compiles.setdefault(compiled.pid, []).append(compiled)
    events: dict[int, list[Event]] = {}
    for event in run.events:
        if event.kind in _CAUSE_EVENTS:
            events.setdefault(event.pid, []).append(event)
    for holder in ranks:
        pid = holder.pid
        holder.index(request_ids.get(pid, set()), compiles.get(pid, []), events.get(pid, []))
    return ranks


def _live_keys(ranks: list[_Rank]) -> list[StepKey]:
    """Live steps every rank has finished, in the first rank's order."""
    keys = []
    for key in ranks[0].order:
        rows = [r.steps.get(key) for r in ranks]
        if all(s is not None and s.phase == "live" and s.wall_s is not None for s in rows):
            if all(s is not None and s.end_t is not None for s in rows):
                keys.append(key)
    return keys


def _step_at(rank: _Rank, t: int) -> StepKey | None:
    """The key of the rank's step whose window holds the local instant t."""
    position = bisect_right(rank.starts, t) - 1
    if position < 0:
        return None
    key = rank.order[position]
    end = rank.steps[key].end_t
    return key if end is not None and t <= end else None


def _typical(rank: _Rank, key: StepKey) -> float | None:
    """The rank's median step wall time in the same request, this step left out (in a long
    request one step moves the median by nothing that matters, so it stays in); for a request
    of one step, the median of its phase."""
    walls = rank.request_walls.get(key[:2], [])
    if len(walls) > 8:
        return rank.request_median[key[:2]]
    same = [w for k, w in walls if k != key]
    if same:
        return float(statistics.median(same))
    return rank.phase_median.get(rank.steps[key].phase)


def _wait(waiter: _Rank, culprit: _Rank, key: StepKey) -> float:
    """Seconds `waiter` lost to `culprit` in this step (see the module docstring)."""
    lag = max(0.0, (culprit.end(key) - waiter.end(key)) / 1e9)
    typical = _typical(waiter, key)
    wall = waiter.steps[key].wall_s
    inflation = (wall - typical) if typical is not None and wall is not None else 0.0
    return lag + (inflation if inflation > SKEW_FLOOR_S else 0.0)


# --- (a) compile divergence ---------------------------------------------------------------------


def _compile_findings(run: RunData, ranks: list[_Rank]) -> tuple[set[int], list[Finding]]:
    """Findings, and the ids of the compiles they report (so (b) does not repeat them)."""
    by_pid = {r.pid: r for r in ranks}
    live: dict[tuple[str, str, int | None], dict[int, list[Compile]]] = {}
    other: dict[str, dict[int, list[Compile]]] = {}
    for item in run.compiles:
        owner = by_pid.get(item.pid)
        if owner is None:
            continue
        frame = frame_label(run, item.frame)
        if item.live and item.request_id is not None:
            group = live.setdefault((frame, item.request_id, item.step), {})
        else:
            group = other.setdefault(frame, {})
        group.setdefault(owner.rank, []).append(item)

    reported: set[int] = set()
    # (frame, request) -> rank -> its compiles there, and the ranks that did not compile.
    per_place: dict[tuple[str, str], dict[int, list[tuple[list[Compile], list[int]]]]] = {}
    for (frame, rid, _), by_rank in live.items():
        # Ranks that served the request and did not compile (a rank that never got the request,
        # e.g. one that died, is no divergence).
        missing = [r.rank for r in ranks if r.rank not in by_rank and rid in r.request_ids]
        if not missing:
            continue
        for rank, compiles in by_rank.items():
            per_place.setdefault((frame, rid), {}).setdefault(rank, []).append((compiles, missing))
            reported.update(id(c) for c in compiles)
    findings: list[Finding] = []
    for (frame, rid), at_place in sorted(per_place.items()):
        culprits = sorted(at_place)
        named = {m for groups in at_place.values() for _, ms in groups for m in ms}
        without = sorted(named - set(culprits))
        if len(culprits) == 1 or not without:
            # One rank compiled (or each compiled at another step): one finding per rank.
            findings.extend(
                _live_finding(run, ranks, frame, rid, [rank], at_place[rank]) for rank in culprits
            )
        else:
            # Several ranks did what the others did not: one finding names them all.
            groups = [g for rank in culprits for g in at_place[rank]]
            findings.append(_live_finding(run, ranks, frame, rid, culprits, groups, without))
    for frame, by_rank in sorted(other.items()):
        counts = {r.rank: len(by_rank.get(r.rank, [])) for r in ranks}
        if len(set(counts.values())) > 1:
            findings.append(_warmup_finding(run, frame, counts, by_rank))
    return reported, findings


def _live_finding(
    run: RunData,
    ranks: list[_Rank],
    frame: str,
    rid: str,
    culprit_ranks: list[int],
    groups: list[tuple[list[Compile], list[int]]],
    without: list[int] | None = None,
) -> Finding:
    """The ranks in `culprit_ranks` compiled `frame` in live request `rid` and the ranks in
    `without` (default: those the groups name) did not."""
    compiles = sorted((c for group, _ in groups for c in group), key=lambda c: c.t)
    missing = without or sorted({m for _, group_missing in groups for m in group_missing})
    by_rank = {r.rank: r for r in ranks}
    culprits = [by_rank[r] for r in culprit_ranks]
    owner = {r.pid: r for r in culprits}
    # Per step every waiter waits for the slowest culprit; the steps' waits add up.
    per_step: dict[StepKey, dict[int, float]] = {}
    for item in compiles:
        culprit = owner[item.pid]
        key = _step_at(culprit, item.t)
        if key is None or not all(key in r.steps for r in ranks):
            continue
        step_waits = per_step.setdefault(key, {})
        for other in ranks:
            if other.rank in missing:
                wait = _wait(other, culprit, key)
                step_waits[other.rank] = max(wait, step_waits.get(other.rank, 0.0))
    waits: dict[int, float] = {}
    for step_waits in per_step.values():
        for rank, seconds in step_waits.items():
            waits[rank] = waits.get(rank, 0.0) + seconds
    total = sum(c.duration_s or 0.0 for c in compiles)
    steps = sorted({c.step for c in compiles if c.step is not None})
    where = "step " + ", ".join(map(str, steps)) if steps else "outside a step"
    guard = next((g for c in compiles if (g := cause_guard(run, c)) is not None), None)
    limit = any(c.result == "recompile_limit" for c in compiles)
    verb = (
        "hit the recompile limit on"
        if limit
        else ("recompiled" if any(c.guards for c in compiles) else "compiled")
    )
    who = ranks_text(culprit_ranks)
    others = ranks_text(missing)
    title = f"{who} {verb} {frame} at {rid} {where} and {others} did not"
    title += f" (guard {_short(_guard_text(guard), 100)})" if guard is not None else ""
    title += "; " + _waits_title(waits) if waits else f"; {others} waited for it"
    several = len(culprit_ranks) > 1
    cost = f"{_secs(total)} of compile"
    if several:  # the ranks compiled side by side: what each spent
        per_rank = [sum(c.duration_s or 0.0 for c in compiles if c.pid == r.pid) for r in culprits]
        cost = f"{_spread(per_rank)} of compile per rank"
    evidence = [
        f"live request {rid}: {who} compiled {frame} {len(compiles)} time(s) at {where} "
        f"({cost}); {others} compiled nothing for {frame} there"
    ]
    evidence.extend(_compile_lines(run, compiles, culprits, several))
    evidence.extend(_wait_lines(waits, who))
    if not waits:
        evidence.append(
            "the wait is not measured: the compile fell outside a step every rank recorded"
        )
    location = guard.user_location if guard is not None and guard.user_location else None
    if location is None and compiles[0].frame is not None:
        location = compiles[0].frame.location
    suffix = (
        _id_suffix(run, culprits[0].pid)
        if not several
        else f"@{rank_tags(culprit_ranks)}" + _id_suffix(run, None)
    )
    return Finding(
        id=f"{ANALYZER}:compile:{frame}:{rid}{suffix}",
        analyzer=ANALYZER,
        severity="error",
        title=title,
        evidence=evidence,
        fix=_compile_fix(who, frame, guard, limit),
        location=location,
        run=run.label,
        data={
            "frame": frame,
            "request_id": rid,
            "rank": culprit_ranks[0],
            "ranks": culprit_ranks,
            "steps": steps,
            "ranks_without": missing,
            "compile_ids": list(dict.fromkeys(c.compile_id for c in compiles)),
            "compile_s": round(total, 6),
            "waits_s": {str(r): round(w, 6) for r, w in sorted(waits.items())},
            "guard": None
            if guard is None
            else {"kind": guard.kind, "source": guard.source, "expected": guard.expected},
        },
    )


#: Above this many ranks, per-rank lines (walls, waits, compiles) are summarised.
LIST_RANKS = 4


def _waits_title(waits: dict[int, float]) -> str:
    """`rank 0 waited 1.15 s`, or for many ranks `ranks 0-62 waited 1.1-1.2 s (median ...)`."""
    if len(waits) <= LIST_RANKS - 1:
        return ", ".join(f"rank {r} waited {_secs(w)}" for r, w in sorted(waits.items()))
    return f"{ranks_text(waits)} waited {_spread(list(waits.values()))}"


def _spread(values: list[float]) -> str:
    """`1.1 s` when all round alike, else `1.1-1.2 s (median 1.15 s)`."""
    low, high = _secs(min(values)), _secs(max(values))
    if low == high:
        return low
    return f"{low} to {high} (median {_secs(statistics.median(values))})"


def _wait_lines(waits: dict[int, float], who: str) -> list[str]:
    why = (
        "(its step ended that much earlier, or took that much longer than its own median): "
        "every collective waits for the slowest rank"
    )
    if len(waits) <= LIST_RANKS:
        return [
            f"rank {rank} waited {_secs(seconds)} for {who} in that step {why}"
            for rank, seconds in sorted(waits.items())
        ]
    longest = max(waits, key=lambda r: waits[r])
    spread = _spread(list(waits.values()))
    line = f"{ranks_text(waits)} waited {spread} for {who} in that step {why}"
    return [line + (f"; longest: rank {longest}" if "median" in spread else "")]


def _compile_lines(
    run: RunData, compiles: list[Compile], culprits: list[_Rank], several: bool
) -> list[str]:
    """One line per compile; with several ranks, the first ranks' and a count of the rest
    (their compiles look alike: the same frame at the same place)."""
    if not several:
        return [_compile_line(run, c, frame_label(run, c.frame)) for c in compiles]
    tag = {r.pid: r.rank for r in culprits}
    shown = {r.rank for r in culprits[:2]}
    lines = [
        f"rank {tag[c.pid]}: " + _compile_line(run, c, frame_label(run, c.frame))
        for c in compiles
        if tag[c.pid] in shown
    ]
    rest = [r.rank for r in culprits if r.rank not in shown]
    if rest:
        seconds = [
            sum(c.duration_s or 0.0 for c in compiles if c.pid == r.pid)
            for r in culprits
            if r.rank in rest
        ]
        lines.append(
            f"and {ranks_text(rest)}: {sum(1 for c in compiles if tag[c.pid] in rest)} more "
            f"compile(s) of the frame, {_spread(seconds)} per rank"
        )
    kinds = {(g.kind, g.source) for c in compiles if (g := cause_guard(run, c)) is not None}
    if len(kinds) > 1:
        lines.append(
            "the ranks' failing guards differ: "
            + "; ".join(f"{k} on {s or '?'}" for k, s in sorted(kinds, key=str)[:4])
        )
    return lines


def _compile_fix(who: str, frame: str, guard: Guard | None, limit: bool) -> str:
    tail = " Every collective waits for the slowest rank, so one rank's compile stalls all."
    subject = who[0].upper() + who[1:]
    that = "that rank" if who.startswith("rank ") else "those ranks"
    if limit:
        return (
            f"{subject} runs {frame} eagerly from now on wherever a call matches none of its "
            f"cache entries, while the others run it compiled, and every step waits for it: "
            f"remove what makes it recompile on {that} (see recompile-limit)." + tail
        )
    if guard is None:
        return (
            f"{subject} reached {frame} for the first time in live traffic: its warmup took "
            f"another path than live requests (a pass or branch only {that} runs). Warm up "
            "every rank's own share of the work." + tail
        )
    if guard.kind in _SIZE_KINDS:
        return (
            f"{subject} received a shape the other ranks did not ({guard.source or 'an input'}"
            "): an uneven split of tokens, frames or batch across ranks. Warm up each rank's "
            "share, pad the shares to equal sizes, or mark the dimension dynamic." + tail
        )
    return (
        f"{frame} reads per-rank Python state ({guard.source or guard.kind}) that changed on "
        f"{who} only. Read it outside the compiled frame (resolve it before the call, or "
        "pass it as a tensor), or keep it equal on every rank and warm up each value the ranks "
        "will use." + tail
    )


def _warmup_finding(
    run: RunData, frame: str, counts: dict[int, int], by_rank: dict[int, list[Compile]]
) -> Finding:
    text = _counts_text(counts)
    evidence = [f"compiles of {frame} outside live requests per rank: {text}"]
    # Ranks whose compiles happened at the same places share one line.
    spots_of: dict[str, list[int]] = {}
    for rank, compiles in sorted(by_rank.items()):
        spots = sorted({f"{c.request_id or 'no request'} step {c.step}" for c in compiles})
        line = f"{', '.join(spots[:6])}{' ...' if len(spots) > 6 else ''}"
        spots_of.setdefault(line, []).append(rank)
    for line, ranks in spots_of.items():
        evidence.append(f"{ranks_text(ranks)}: {line}")
    return Finding(
        id=f"{ANALYZER}:warmup-compiles:{frame}{_id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="info",
        title=f"Warmup compiled {frame} a different number of times per rank ({text})",
        evidence=evidence,
        fix="Nothing costs live traffic yet; but the ranks guard on different things (their "
        "passes or shares differ), so check that warmup covers what each rank will see live.",
        location=next((c.frame.location for cs in by_rank.values() for c in cs if c.frame), None),
        run=run.label,
        data={"frame": frame, "counts": {str(r): n for r, n in sorted(counts.items())}},
    )


def _counts_text(counts: dict[int, int]) -> str:
    """`rank 0: 2, rank 1: 1`; ranks with the same count together (`ranks 0-31, 33-63: 2;
    rank 32: 3`), in the order of their first rank."""
    by_count: dict[int, list[int]] = {}
    for rank, count in sorted(counts.items()):
        by_count.setdefault(count, []).append(rank)
    parts = [f"{ranks_text(ranks)}: {count}" for count, ranks in by_count.items()]
    grouped = any(len(ranks) > 1 for ranks in by_count.values())
    return ("; " if grouped else ", ").join(parts)


# --- (b) step skew ------------------------------------------------------------------------------


def _skew_findings(run: RunData, ranks: list[_Rank], divergent: set[int]) -> list[Finding]:
    keys = _live_keys(ranks)
    skews: list[_Skew] = []
    for key in keys:
        skew = _skew(ranks, key)
        if skew is not None and not any(
            c.compile is not None and id(c.compile) in divergent for c in skew.causes
        ):
            skews.append(skew)
    findings = []
    for rank in ranks:
        mine = [s for s in skews if s.culprit is rank]
        unexplained = [s for s in mine if not s.explained]
        straggler = len(unexplained) >= max(2.0, STRAGGLER_SHARE * len(keys))
        if any(s.explained for s in mine) or straggler:
            findings.append(_skew_finding(run, rank, mine, len(keys), straggler, ranks))
    return findings


def _skew(ranks: list[_Rank], key: StepKey) -> _Skew | None:
    walls = {r.rank: float(r.steps[key].wall_s or 0.0) for r in ranks}
    slow = max(ranks, key=lambda r: walls[r.rank])
    base = statistics.median(walls[r.rank] for r in ranks if r is not slow)
    excess = walls[slow.rank] - base
    if walls[slow.rank] <= SKEW_RATIO * base or excess <= SKEW_FLOOR_S:
        return None
    latest = max(ranks, key=lambda r: r.start(key))
    late = (
        latest is not slow
        and (latest.start(key) - slow.start(key)) / 1e9 >= 0.5 * excess
        and abs(latest.end(key) - slow.end(key)) / 1e9 <= 0.5 * excess
    )
    culprit = latest if late else slow
    step = culprit.steps[key]
    if late:
        position = culprit.position[key]
        previous = culprit.steps[culprit.order[position - 1]] if position else None
        lo = previous.end_t if previous is not None and previous.end_t else culprit.process.start_t
        causes = _causes(culprit, lo, step.start_t, None)
    else:
        causes = _causes(culprit, step.start_t, step.end_t or step.start_t, key)
    measured = sum(c.seconds or 0.0 for c in causes)
    explained = measured >= EXPLAINED_SHARE * excess or any(c.kind in _UNMEASURED for c in causes)
    waits = {r.rank: _wait(r, culprit, key) for r in ranks if r is not culprit}
    others = [r.start(key) for r in ranks if r is not culprit]
    late_by = (culprit.start(key) - statistics.median(others)) / 1e9 if late else 0.0
    return _Skew(key, culprit, late, walls, excess, waits, causes, explained, late_by)


def _causes(rank: _Rank, lo: int, hi: int, key: StepKey | None) -> list[_Cause]:
    """What the rank's trace holds between two of its own instants (`key`: the step they
    bound, whose profiling and allocator growth count too)."""
    compiles, events = rank.between(lo, hi)
    names = frame_labels(c.frame for c in rank.compiles)
    causes = [
        _Cause(
            "compile",
            _compile_line(rank.run, c, names.get(c.frame, "?")),
            c.duration_s or 0.0,
            compile=c,
        )
        for c in compiles
    ]
    for event in events:
        if event.kind == "gc_collect" and any(_inside(event, c) for c in compiles):
            continue  # Dynamo's own collection while it compiles
        causes.append(_event_cause(event))
    if key is not None and rank.steps[key].profiled:
        causes.append(_Cause("profiled", "the step ran under torch.profiler", None))
    growth = _reserved_growth(rank, key) if key is not None else 0
    if growth > 0:
        causes.append(
            _Cause(
                "allocator",
                f"reserved GPU memory grew by {growth / 2**20:.0f} MiB (new cudaMalloc)",
                None,
            )
        )
    return causes


def _event_cause(event: Event) -> _Cause:
    data = event.data
    seconds = data.get("duration_s")
    if event.kind == "profile_window_end":
        seconds = data.get("export_s")
    value = float(seconds) if isinstance(seconds, (int, float)) else None
    spent = f" ({_secs(value)})" if value is not None else ""
    frame = data.get("frame") if isinstance(data.get("frame"), dict) else None
    name = str(frame.get("name")) if frame else "a frame"
    texts = {
        "empty_cache": f"torch.cuda.empty_cache(){spent}",
        "gc_collect": f"gc.collect(){spent}",
        "recompile_limit": (
            f"{name} hit the recompile limit: from now on a call that matches none of its "
            "cache entries runs eagerly"
        ),
        "eager_fallback": f"{name} ran eagerly (recompile limit reached earlier)",
        "profile_window_start": "torch.profiler started",
        "profile_window_end": f"torch.profiler exported its trace{spent}",
        "dynamo_reset": "torch._dynamo.reset() (every compiled frame compiles again)",
    }
    return _Cause(event.kind, texts.get(event.kind, event.kind), value)


def _inside(event: Event, item: Compile) -> bool:
    return item.start_t is not None and item.start_t <= event.t <= item.t


def _reserved_growth(rank: _Rank, key: StepKey) -> int:
    """Bytes the allocator reserved by the end of this step beyond the rank's previous step."""
    position = rank.position[key]
    step = rank.steps[key]
    if position == 0 or step.memory is None:
        return 0
    before = rank.steps[rank.order[position - 1]].memory
    if before is None:
        return 0
    return int(step.memory.get("reserved", 0)) - int(before.get("reserved", 0))


_PROFILER_KINDS = {"profiled", "profile_window_start", "profile_window_end"}


def _host_noise(rank: _Rank, skews: list[_Skew], ranks: list[_Rank]) -> str | None:
    """Why an unexplained straggler may be the host's noise: on a CPU-only run (no step has
    GPU time), its process ran on the CPU for less than CPU_SHARE of its extra wall time in
    those steps, its CPU time against the other ranks' median for the same step (the same
    work). None when that rules it out or the trace has no CPU times."""
    steps = [r.steps[s.key] for s in skews for r in ranks]
    if any(st.gpu_s is not None for st in steps):
        return None
    loads = sample(st.host_load for st in steps if st.host_load is not None)
    if loads is not None and loads.median > HOST_LOAD_LIMIT:
        return (
            f"too noisy to judge: the host was loaded in these steps ({loads.median:.2f} "
            f"runnable tasks per CPU, more than {HOST_LOAD_LIMIT:g}); on a CPU-only run a rank "
            "that waits for a CPU looks like a straggler"
        )
    if any(st.cpu_s is None for st in steps):
        return None
    extra_wall = sum(s.excess for s in skews)
    if extra_wall <= 0:
        return None
    extra_cpu = 0.0
    for skew in skews:
        others = sample(r.steps[skew.key].cpu_s or 0.0 for r in ranks if r is not rank)
        if others is not None:
            extra_cpu += max(0.0, (rank.steps[skew.key].cpu_s or 0.0) - others.median)
    share = extra_cpu / extra_wall
    if share >= CPU_SHARE:
        return None
    return (
        f"too noisy to judge: rank {rank.rank} ran on the CPU for only {_secs(extra_cpu)} of "
        f"its {_secs(extra_wall)} extra wall time in these steps ({share * 100:.0f}%, "
        f"{CPU_SHARE * 100:.0f}% needed); on a CPU-only run that is a descheduled process "
        "(another process had the CPU), not the program"
    )


def _skew_finding(
    run: RunData,
    rank: _Rank,
    skews: list[_Skew],
    aligned: int,
    straggler: bool,
    ranks: list[_Rank],
) -> Finding:
    worst = max(skews, key=lambda s: s.excess)
    waited = sum(w for s in skews for w in s.waits.values())
    kinds = sorted({c.kind for s in skews for c in s.causes if s.explained})
    title = (
        f"rank {rank.rank} kept the other ranks waiting in {len(skews)} of {aligned} live "
        f"step(s): worst {_headline(worst)}"
    )
    title += f" ({_cause_summary(worst)})" if worst.causes else " (nothing recorded explains it)"
    evidence = [_skew_line(s) for s in skews[:8]]
    if len(skews) > 8:
        evidence.append(f"and {len(skews) - 8} more step(s)")
    evidence.append(
        f"the other ranks waited {_secs(waited)} in all; threshold: the slowest rank above "
        f"{SKEW_RATIO:g}x the others' median and {SKEW_FLOOR_S * 1000:.0f} ms more"
    )
    if straggler:
        evidence.append(
            f"rank {rank.rank} was slowest with nothing recorded to explain it in "
            f"{sum(not s.explained for s in skews)} of {aligned} aligned live steps: a "
            "straggler, not a one-off"
        )
    # Skew that only diag's own profiler explains is the cost of measuring, not a problem.
    own = not straggler and bool(kinds) and set(kinds) <= _PROFILER_KINDS
    noisy = _host_noise(rank, skews, ranks) if straggler and not kinds else None
    if noisy:
        evidence.append(noisy)
        title += ": too noisy to judge"
    return Finding(
        id=f"{ANALYZER}:skew{_id_suffix(run, rank.pid)}",
        analyzer=ANALYZER,
        severity="info" if own or noisy else "warning",
        title=title,
        evidence=evidence,
        fix=_skew_fix(rank.rank, kinds, straggler),
        run=run.label,
        data={
            "rank": rank.rank,
            "aligned_steps": aligned,
            "steps": [
                {
                    "request_id": s.key[0],
                    "step": s.key[2],
                    "late_start": s.late,
                    "walls_s": {str(r): round(w, 6) for r, w in sorted(s.walls.items())},
                    "excess_s": round(s.excess, 6),
                    "waits_s": {str(r): round(w, 6) for r, w in sorted(s.waits.items())},
                    "causes": [c.kind for c in s.causes],
                    "explained": s.explained,
                }
                for s in skews
            ],
            "waited_s": round(waited, 6),
        },
    )


def _skew_line(skew: _Skew) -> str:
    rank = skew.culprit.rank
    if len(skew.walls) <= LIST_RANKS:
        walls = ", ".join(f"rank {r} {_secs(w)}" for r, w in sorted(skew.walls.items()))
        waits = ", ".join(f"rank {r} {_secs(w)}" for r, w in sorted(skew.waits.items()))
    else:  # many ranks: the culprit against the spread of the others
        others = [w for r, w in skew.walls.items() if r != rank]
        walls = f"rank {rank} {_secs(skew.walls[rank])}, {ranks_text(skew.waits)} {_spread(others)}"
        waits = f"{ranks_text(skew.waits)} {_spread(list(skew.waits.values()))}"
    line = f"{_where(skew.key)}: {walls} (+{_secs(skew.excess)}); waited: {waits}"
    if skew.late:
        line += f"; rank {rank} started the step late, the others waited inside theirs"
    what = "before the step" if skew.late else "in the step"
    if skew.causes:
        line += f"; on rank {rank} {what}: " + "; ".join(c.text for c in skew.causes)
        if not skew.explained:
            line += " (too short to explain it)"
    else:
        line += f"; nothing recorded on rank {rank} {what}"
    return line


def _headline(skew: _Skew) -> str:
    """`r0 step 1, 40 ms against 10 ms on rank 0`, or for a late start `r0 step 1, started
    50 ms after rank 0`."""
    culprit = skew.culprit
    others = [r for r in sorted(skew.walls) if r != culprit.rank]
    where = _where(skew.key)
    if skew.late:
        return f"{where}, started {_secs(skew.late_by)} after {ranks_text(others)}"
    base = _secs(statistics.median(skew.walls[r] for r in others))
    return f"{where}, {_secs(skew.walls[culprit.rank])} against {base} on {ranks_text(others)}"


def _cause_summary(skew: _Skew) -> str:
    names = {
        "compile": "a compile",
        "empty_cache": "torch.cuda.empty_cache()",
        "gc_collect": "gc.collect()",
        "recompile_limit": "the recompile limit",
        "eager_fallback": "an eager fallback",
        "profile_window_start": "the profiler",
        "profile_window_end": "the profiler's export",
        "profiled": "the profiler",
        "allocator": "allocator growth",
        "dynamo_reset": "a Dynamo reset",
    }
    kinds = list(dict.fromkeys(names.get(c.kind, c.kind) for c in skew.causes))
    return ("before it: " if skew.late else "in it: ") + ", ".join(kinds)


def _skew_fix(rank: int, kinds: list[str], straggler: bool) -> str:
    parts = []
    if "compile" in kinds:
        parts.append(
            f"rank {rank} compiled longer than the others in live steps: move the compile into "
            "warmup on every rank (see live-compile), or warm its compile cache"
        )
    if "empty_cache" in kinds or "allocator" in kinds:
        parts.append(
            f"take torch.cuda.empty_cache() out of rank {rank}'s request path and let the "
            "allocator keep warmup's memory (see warmup-hygiene)"
        )
    if "gc_collect" in kinds:
        parts.append("call gc.collect() outside live steps, or at the same point on every rank")
    if any(k in kinds for k in ("recompile_limit", "eager_fallback")):
        parts.append(
            f"rank {rank} runs a frame eagerly after the recompile limit: see recompile-limit"
        )
    if any(k.startswith("profile") for k in kinds):
        parts.append("profile every rank alike, or leave profiled steps out of comparisons")
    if straggler or not parts:
        parts.append(
            f"nothing in rank {rank}'s trace explains its slow steps: compare its GPU and host "
            "(clocks, NUMA and CPU binding, other processes) and its share of the work with the "
            "other ranks'"
        )
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + ". Every collective waits for the slowest rank."


# --- text helpers ------------------------------------------------------------------------------


def _where(key: StepKey) -> str:
    return f"{key[0]} step {key[2]}"


def _guard_text(guard: Guard | None) -> str:
    if guard is None:
        return ""
    text = condition_text(guard.raw)
    return text or (f"{guard.source} == {guard.expected}" if guard.source else guard.kind)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _compile_line(run: RunData | None, item: Compile, frame: str) -> str:
    where = f"step {item.step}" if item.step is not None else "outside a step"
    line = (
        f"{item.request_id or 'no request'} {where}: compile {item.compile_id} of "
        f"{frame} took {_secs(item.duration_s or 0.0)}"
    )
    if item.result != "ok":
        line += f", result {item.result}"
    cause = recompile_cause(run, item) if run is not None else None
    if cause is not None and cause.guard is None:
        line += f"; {cause_short(cause)}"
    elif cause is not None and cause.guard is not None:
        guard = cause.guard
        line += f"; failing guard ({guard.kind}): {_short(_guard_text(guard), 200)}"
        if guard.user_location:
            line += f" at {guard.user_location}"
    return line
