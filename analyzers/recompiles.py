"""recompiles: each compile and recompile when diag cannot tell warmup from live, and a dimension
that keeps recompiling and never generalises, in every run.

Why: live-compile judges compiles by the phase they ran in, and a program no adapter knows (a
hand-written loop over a diffusers transformer, any TORCH_TRACE log) reports no steps, requests
or warmup phase. Saying nothing then would be a false all-clear: the compiles still happened,
and a recompile on a stride guard in the middle of traffic still stalled a request. So for a
process with no steps known this analyzer lists, per code object (a frame is its file, first
line and name: two lambdas of one file are two frames), each compile with its failing guards
and its time since the program started (for a TORCH_TRACE log: since the log's first compile),
and says what diag could not identify and how to mark it.

A dimension that never generalises is judged in every run, steps known or not: the same guard
source and dimension failing again and again (15 compiles of one frame for 15 sizes of `x` with
automatic dynamic shapes off) means Dynamo compiles a new entry per size instead of making the
dimension dynamic. That is a warning with the fix. Root causes other analyzers own are not
repeated: a frame that hit the recompile limit is recompile-limit's finding (the repeated
dimension becomes its evidence), recompiles on Python state are guard-churn's, and compiles
inside live requests are live-compile's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diag.evidence.causes import (
    cause_guard,
    cause_line,
    cause_short,
    recompile_cause,
    recompile_claim,
)
from diag.evidence.frames import run_labels
from diag.findings.advice import HOW_TO_MARK
from diag.findings.model import Finding
from diag.trace.guards import condition_text
from diag.trace.run import Compile, Frame, Guard, Process, RunData, Trace

from .common import (
    compile_options,
    static_shapes,
    static_undo,
    static_verb,
    steps_known,
    warmup_known,
)
from .common import format_seconds as _secs
from .common import id_suffix as _id_suffix
from .common import process_lines as _tag_lines
from .guard_churn import churn_compiles

ANALYZER = "recompiles"

#: Recompiles failing on one guard source and dimension that mean it never became dynamic.
REPEATED_SHAPE_RECOMPILES = 3
#: torch's default recompile limit (torch._dynamo.config.recompile_limit).
DEFAULT_LIMIT = 8
_SHAPE_KINDS = ("tensor-size", "tensor-stride")
_MAX_LINES = 12

#: How to tell diag which calls are warmup, requests and steps (docs/FINDINGS.md, README).

_AT_INDEX = re.compile(r"mismatch at index (\d+)")
_SYM_INDEX = re.compile(r"\.(?:size|stride)\(\)\[(\d+)\]")


# --- what other analyzers ask ------------------------------------------------------------------


@dataclass
class RepeatedDimension:
    """One guard source and dimension that failed in many recompiles of one frame."""

    pid: int
    frame: Frame | None
    kind: str
    source: str
    index: str | None
    compiles: list[Compile] = field(default_factory=list)

    @property
    def dimension(self) -> str:
        what = "stride" if self.kind == "tensor-stride" else "dim"
        return f"{what} {self.index} of `{self.source}`" if self.index else f"`{self.source}`"

    guards: list[Guard] = field(default_factory=list)  # each compile's cause, in order

    @property
    def values(self) -> list[str]:
        """The sizes the failing entries expected, then the last size called with."""
        values: list[str] = []
        for guard in self.guards:
            if guard.expected is not None and guard.expected not in values:
                values.append(guard.expected)
        last = self.guards[-1].actual if self.guards else None
        if last is not None and last not in values:
            values.append(last)
        return values

    def sentence(self) -> str:
        return (
            f"{len(self.compiles)} recompiles of {_name(self.frame)} failed on "
            f"{self.dimension} ({self.kind}; sizes {_short(self.values)}): each new size "
            "compiled a new entry instead of making the dimension dynamic"
        )


def repeated_dimensions(run: RunData) -> list[RepeatedDimension]:
    """Per process and frame, each (guard kind, source, dimension) that caused
    REPEATED_SHAPE_RECOMPILES or more recompiles (diag.evidence.causes) over at least as many
    values:
    a dimension that keeps taking new values and never became dynamic. Two layouts that
    alternate (a transposed view and a contiguous tensor) are two entries, not this."""
    groups: dict[tuple[int, Frame | None, str, str, str | None], RepeatedDimension] = {}
    for item in run.compiles:
        if item.result == "recompile_limit" or not item.guards:
            continue
        guard = cause_guard(run, item)
        if guard is None or guard.kind not in _SHAPE_KINDS:
            continue
        source = guard.source or condition_text(guard.raw)[:120] or guard.kind
        index = _dim_index(guard)
        key = (item.pid, item.frame, guard.kind, source, index)
        group = groups.get(key)
        if group is None:
            group = groups[key] = RepeatedDimension(item.pid, item.frame, guard.kind, source, index)
        group.compiles.append(item)
        group.guards.append(guard)
    return [
        g
        for g in groups.values()
        if len(g.compiles) >= REPEATED_SHAPE_RECOMPILES
        and len(g.values) >= REPEATED_SHAPE_RECOMPILES
    ]


def automatic_dynamic_evidence(run: RunData, found: RepeatedDimension) -> str:
    """What the trace shows about automatic dynamic shapes for this frame: whether any of its
    compiles made a dimension dynamic (`shape_symbol` events), and how it was compiled."""
    ids = {
        (c.epoch, c.compile_id)
        for c in run.compiles
        if c.pid == found.pid and c.frame == found.frame
    }
    symbols = [
        e
        for e in run.of("shape_symbol")
        if e.pid == found.pid and (e.data.get("epoch") or 0, e.data.get("compile_id")) in ids
    ]
    options = compile_options(run, found.pid, found.frame)
    dynamic = options.get("dynamic", "unknown") if options else "unknown"
    if symbols:
        sources = sorted({str(e.data.get("source")) for e in symbols})
        return (
            f"automatic dynamic was on for {_name(found.frame)}: its compiles made "
            f"{len(sources)} dimension(s) dynamic ({', '.join(sources[:3])}), but not "
            f"{found.dimension}: something keeps it static (torch.compile(dynamic=False), "
            "mark_static, or code that specialises it: a size of 0 or 1, or read as a Python int)"
        )
    static = static_shapes(run, found.pid, found.frame, found.compiles[-1].t)
    if static is not None:
        return (
            f"{_name(found.frame)} {static_verb(static)} {static}: no dimension can become "
            "dynamic, so every new size compiles a new entry"
        )
    return (
        f"no compile of {_name(found.frame)} made any dimension dynamic: automatic dynamic "
        "shapes were off for it (torch.compile(dynamic=False), "
        "torch._dynamo.config.automatic_dynamic_shapes = False, or the dimension marked static)"
        + ("" if dynamic == "unknown" else f"; torch.compile was called with dynamic={dynamic}")
    )


def repeated_dimension_fix(
    found: RepeatedDimension, static: str | None = None, at_limit: bool = False
) -> str:
    """The fix for a dimension that never generalised. `static`: what the trace says keeps
    every size static (common.static_shapes); `at_limit`: the frame hit the recompile limit."""
    index = found.index if found.index is not None else "DIM"
    if static is not None:
        # The sizes its entries were compiled for, and the one that hit the limit.
        sizes = len(found.values) + (1 if at_limit else 0)
        return static_size_fix(
            _name(found.frame), static, found.source, index, found.dimension, sizes, at_limit
        )
    return (
        f"Make the dimension dynamic: torch._dynamo.mark_dynamic(tensor, {index}) on the input "
        f"behind `{found.source}` before the first call; or turn automatic dynamic shapes back on "
        "(torch._dynamo.config.automatic_dynamic_shapes = True, the default, and no "
        "torch.compile(dynamic=False)), so the second size makes it dynamic; or, if only a few "
        "sizes occur, warm each of them before traffic. Raising "
        "torch._dynamo.config.recompile_limit only hides it: every new size still compiles."
    )


def static_size_fix(
    frame: str,
    static: str,
    source: str,
    index: str,
    dimension: str,
    sizes: int | None,
    at_limit: bool,
) -> str:
    """The fix for sizes a frame keeps static (`dynamic=False`, automatic dynamic off), where
    warming up a second size makes nothing dynamic. Each was tried on tests/integration/
    test_static_limit.py's program (dynamic=False, new sizes live until the limit): dropping
    dynamic=False, mark_dynamic on the input, and every size warmed with the limit raised to
    hold them each left no recompile-limit hit."""
    undo = static_undo(static)
    if at_limit:
        counted = (
            f" ({sizes} here so far: the sizes it compiled and the one that hit the limit; more "
            "if later calls brought others)"
            if sizes
            else ""
        )
        last = (
            "warm every size live traffic sends before traffic and raise "
            "torch._dynamo.config.recompile_limit to at least their number"
            f"{counted}: each size holds an entry of its own, and warmup's compiles count "
            "against the same limit."
        )
    else:
        last = (
            "warm every size live traffic sends before traffic, no more of them than "
            "torch._dynamo.config.recompile_limit allows (8 by default): each holds an entry "
            "of its own."
        )
    verb = static_verb(static)
    return (
        f"{frame} {verb} {static}: automatic dynamic is off for it, so every new "
        f"size of {dimension} compiles a new entry, and warming up two sizes does not make it "
        f"dynamic. Drop {undo} (the second size then compiles the dimension dynamic), or call "
        f"torch._dynamo.mark_dynamic(tensor, {index}) on the input behind `{source}` before "
        f"each call (it holds under {static}); or, keeping the sizes static, {last}"
    )


def cache_entries(run: RunData, frame: Frame | None, pid: int | None = None) -> int | None:
    """Entries the frame holds: the recorder's count at exit (or the last seen), else (a
    TORCH_TRACE log) the most torch's compilation_metrics.cache_size implies: the entries before
    a compile, plus the one a successful compile adds."""
    if frame is None:
        return None
    counted = run.cache_entries().get(frame)
    implied = [
        (item.cache_size + (1 if item.result == "ok" else 0))
        for item in run.compiles
        if item.frame == frame and item.cache_size is not None and (pid is None or item.pid == pid)
    ]
    return counted if counted is not None else (max(implied) if implied else None)


def limited_frames(run: RunData) -> set[tuple[int, Frame | None]]:
    """(process, frame) pairs that hit the recompile limit: recompile-limit's findings."""
    found = {(c.pid, c.frame) for c in run.compiles if c.result == "recompile_limit"}
    for event in run.of("recompile_limit"):
        found.add((event.pid, Frame.from_event(event.data.get("frame"))))
    return found


# --- the analyzer ------------------------------------------------------------------------------


def analyze(trace: Trace) -> list[Finding]:
    recorded = trace.manifest.get("format") == "diag-trace"
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run, recorded))
    return findings


def _analyze_run(run: RunData, recorded: bool) -> list[Finding]:
    if not run.compiles:
        return []
    limited = limited_frames(run)
    labels = run_labels(run)
    clock = _Clock(run, recorded)
    findings: list[Finding] = []
    covered: dict[int, str] = {}  # id(compile) -> the finding that reports it
    for found in repeated_dimensions(run):
        for item in found.compiles:
            covered[id(item)] = "the repeated-dimension finding"
        if (found.pid, found.frame) in limited:
            continue  # recompile-limit's finding carries it as evidence
        findings.append(_repeated_finding(run, found, labels, clock))
    for compile_key, source in churn_compiles(run).items():  # guard-churn's own rule
        covered.setdefault(compile_key, f"guard-churn (`{source}`)")
    for pid in sorted({c.pid for c in run.compiles}):
        if steps_known(run, pid):
            continue
        compiles = [c for c in run.compiles if c.pid == pid and c.result != "recompile_limit"]
        by_frame: dict[Frame | None, list[Compile]] = {}
        for item in compiles:
            by_frame.setdefault(item.frame, []).append(item)
        warm = warmup_known(run, pid)
        for frame, items in by_frame.items():
            if (pid, frame) in limited:
                continue
            after = [c for c in items if warm and c.phase != "warmup" and id(c) not in covered]
            if after or any(c.guards and id(c) not in covered for c in items):
                findings.append(
                    _frame_finding(run, pid, frame, items, covered, labels, clock, warm)
                )
        if compiles:
            findings.append(_summary_finding(run, pid, by_frame, limited, labels, clock, warm))
    return findings


# --- a dimension that never generalises ---------------------------------------------------------


def _repeated_finding(
    run: RunData, found: RepeatedDimension, labels: dict[Frame | None, str], clock: _Clock
) -> Finding:
    label = labels.get(found.frame, _name(found.frame))
    first, last = found.compiles[0], found.compiles[-1]
    seconds = sum(c.duration_s or 0.0 for c in found.compiles)
    evidence = [
        found.sentence(),
        automatic_dynamic_evidence(run, found),
        f"from compile {first.compile_id} at {clock.since(first)} to compile {last.compile_id} "
        f"at {clock.since(last)} {clock.origin}; {_secs(seconds)} of compile in these recompiles",
    ]
    entries = cache_entries(run, found.frame, found.pid)
    if entries is not None:
        line = f"{label} holds {entries} cache entries"
        if entries > DEFAULT_LIMIT:
            line += (
                f", more than torch's default recompile limit ({DEFAULT_LIMIT}) and no limit was "
                "hit: this run raised torch._dynamo.config.recompile_limit (with the default, "
                "every further size would have run eagerly)"
            )
        evidence.append(line)
    evidence.extend(_compile_line(run, c, clock) for c in found.compiles[:_MAX_LINES])
    if len(found.compiles) > _MAX_LINES:
        evidence.append(f"... and {len(found.compiles) - _MAX_LINES} more")
    live = [c for c in found.compiles if c.live]
    if live:
        evidence.append(f"{len(live)} of them ran during live requests (see live-compile)")
    elif not steps_known(run, found.pid):
        evidence.append(_unknown_sentence(clock))
    evidence.extend(_tag_lines(run, found.pid))
    index = found.index if found.index is not None else ""
    return Finding(
        id=f"{ANALYZER}:{label}:{found.source}:{index}{_id_suffix(run, found.pid)}",
        analyzer=ANALYZER,
        severity="warning",
        title=(
            f"{label} recompiled {len(found.compiles)} times on {found.dimension} and never "
            f"generalised (sizes {_short(found.values)})"
        ),
        evidence=evidence,
        fix=repeated_dimension_fix(
            found, static_shapes(run, found.pid, found.frame, found.compiles[-1].t)
        ),
        location=_location(found.frame),
        run=run.label,
        data={
            "frame": _name(found.frame),
            "file": found.frame.file if found.frame else None,
            "line": found.frame.line if found.frame else None,
            "kind": found.kind,
            "source": found.source,
            "index": found.index,
            "values": found.values,
            "compile_ids": [c.compile_id for c in found.compiles],
            "cache_entries": entries,
            "live": len(live),
        },
        claims=[recompile_claim(run, c, label) for c in found.compiles],
    )


# --- no steps known: each frame's compiles -------------------------------------------------------


def _frame_finding(
    run: RunData,
    pid: int,
    frame: Frame | None,
    items: list[Compile],
    covered: dict[int, str],
    labels: dict[Frame | None, str],
    clock: _Clock,
    warm: bool,
) -> Finding:
    label = labels.get(frame, _name(frame))
    recompiles = [c for c in items if c.guards]
    after = [c for c in items if warm and c.phase != "warmup" and id(c) not in covered]
    own = after or [c for c in recompiles if id(c) not in covered]
    last = own[-1]
    cause = recompile_cause(run, last)
    guard = cause.guard if cause is not None else None
    verb = "recompiled" if cause is not None else "compiled"
    if after:
        title = (
            f"{label} {verb} after the warmup phase, outside any request "
            f"({len(after)} compile(s), the last at {clock.since(last)} {clock.origin})"
        )
    else:
        title = (
            f"{label} recompiled {len(recompiles)} time(s) with no steps known; "
            f"the last at {clock.since(last)} {clock.origin}"
        )
    if cause is not None:
        title += f": {cause_short(cause)}"
    evidence = [
        f"{label}: {len(items)} compile(s), {len(recompiles)} recompile(s), "
        f"{_secs(sum(c.duration_s or 0.0 for c in items))} of compile",
        _unknown_sentence(clock, warm),
    ]
    previous: Compile | None = None
    for item in items[:_MAX_LINES]:
        line = _compile_line(run, item, clock, previous)
        if warm:
            line += " [warmup phase]" if item.phase == "warmup" else " [after the warmup phase]"
        if id(item) in covered and item.guards:
            line += f" (reported by {covered[id(item)]})"
        evidence.append(line)
        previous = item
    if len(items) > _MAX_LINES:
        evidence.append(f"... and {len(items) - _MAX_LINES} more compile(s)")
    entries = cache_entries(run, frame, pid)
    if entries is not None:
        evidence.append(f"{label} holds {entries} cache entries")
    evidence.extend(_tag_lines(run, pid))
    if guard is None:
        what = "call it in the warmup phase with the inputs traffic sends"
    elif guard.kind in _SHAPE_KINDS:
        what = (
            f"warm that shape before traffic, or mark the dimension dynamic "
            f"(torch._dynamo.mark_dynamic on the input behind `{guard.source or 'it'}`)"
        )
    else:
        what = "warm that input before traffic, or keep the guarded value the same for every call"
    return Finding(
        id=f"{ANALYZER}:{label}{_id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="warning" if after else "info",
        title=title,
        evidence=evidence,
        fix=(
            f"If a compile after the first compiles came from traffic (the last one at "
            f"{clock.since(last)}), {what}. So that diag can tell warmup from live, {HOW_TO_MARK}."
        ),
        location=_location(frame),
        run=run.label,
        data={
            "frame": _name(frame),
            "file": frame.file if frame else None,
            "line": frame.line if frame else None,
            "compiles": [_compile_data(c, clock) for c in items],
            "steps_known": False,
        },
        claims=[recompile_claim(run, c, label) for c in items],
    )


def _summary_finding(
    run: RunData,
    pid: int,
    by_frame: dict[Frame | None, list[Compile]],
    limited: set[tuple[int, Frame | None]],
    labels: dict[Frame | None, str],
    clock: _Clock,
    warm: bool,
) -> Finding:
    compiles = [c for items in by_frame.values() for c in items]
    recompiles = sum(1 for c in compiles if c.guards)
    evidence = [_unknown_sentence(clock, warm)]
    for frame, items in list(by_frame.items())[:_MAX_LINES]:
        label = labels.get(frame, _name(frame))
        times = ", ".join(clock.since(c) for c in items[:6]) + (", ..." if len(items) > 6 else "")
        line = (
            f"{label}: {len(items)} compile(s) at {times} {clock.origin} "
            f"({_secs(sum(c.duration_s or 0.0 for c in items))} of compile)"
        )
        if (pid, frame) in limited:
            line += "; hit the recompile limit (see recompile-limit)"
        evidence.append(line)
    if len(by_frame) > _MAX_LINES:
        evidence.append(f"... and {len(by_frame) - _MAX_LINES} more code object(s)")
    evidence.extend(_tag_lines(run, pid))
    return Finding(
        id=f"{ANALYZER}:no-steps{_id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="info",
        title=(
            f"{len(compiles)} compile(s) of {len(by_frame)} code object(s), {recompiles} "
            "recompile(s), with no steps or requests known: "
            + (
                "diag knows the warmup phase but not which request a later compile stalled"
                if warm
                else "diag cannot tell warmup from live"
            )
        ),
        evidence=evidence,
        fix=f"So that diag can judge compiles by phase, {HOW_TO_MARK}."
        + (
            ""
            if clock.recorded
            else " A TORCH_TRACE log never carries steps: record the program with "
            "`diag record` for them."
        ),
        run=run.label,
        data={
            "compiles": len(compiles),
            "recompiles": recompiles,
            "frames": [
                {
                    "frame": _name(frame),
                    "file": frame.file if frame else None,
                    "line": frame.line if frame else None,
                    "compiles": len(items),
                }
                for frame, items in by_frame.items()
            ],
            "steps_known": False,
        },
    )


# --- times and text -----------------------------------------------------------------------------


class _Clock:
    """Times since the program started: the process's start on the event clock for a
    recording; for a TORCH_TRACE log, which has no process start, the first compile's start."""

    def __init__(self, run: RunData, recorded: bool) -> None:
        self.recorded = recorded
        self.origin = "after the program started" if recorded else "after the log's first compile"
        firsts: dict[int, int] = {}
        for item in run.compiles:
            start = _start(item)
            firsts[item.pid] = min(start, firsts.get(item.pid, start))
        processes: dict[int, Process] = {p.pid: p for p in run.processes}
        self.zero: dict[int, int] = {}
        for pid, first in firsts.items():
            process = processes.get(pid)
            begun = process.start_t if process is not None else 0
            self.zero[pid] = begun if recorded and 0 < begun <= first else first

    def seconds(self, item: Compile) -> float:
        return max(0, _start(item) - self.zero.get(item.pid, _start(item))) / 1e9

    def since(self, item: Compile) -> str:
        elapsed = self.seconds(item)
        return _secs(elapsed) if elapsed > 0 else "0 s"


def _start(item: Compile) -> int:
    if item.start_t is not None:
        return item.start_t
    return item.t - int((item.duration_s or 0.0) * 1e9)


def _unknown_sentence(clock: _Clock, warm: bool = False) -> str:
    if warm:
        return (
            "diag identified a warmup phase in this process but no requests or steps, so a "
            "compile after the warmup phase is placed in time only, not in a request"
        )
    if clock.recorded:
        return (
            "diag could not identify steps, requests or a warmup phase in this process (no "
            "adapter knew the program), so it cannot tell whether these compiles ran in warmup "
            "or during traffic"
        )
    return (
        "a TORCH_TRACE log has no steps, requests or warmup phase, so diag cannot tell whether "
        "these compiles ran in warmup or during traffic"
    )


def _compile_line(
    run: RunData, item: Compile, clock: _Clock, previous: Compile | None = None
) -> str:
    line = f"compile {item.compile_id} at {clock.since(item)} {clock.origin}"
    if previous is not None:
        gap = (_start(item) - previous.t) / 1e9
        if gap > 0:
            line += f", {_secs(gap)} after the frame's previous compile ended"
    line += f" (took {_secs(item.duration_s or 0.0)})"
    if item.result != "ok":
        line += f", result {item.result}"
    cause = recompile_cause(run, item)
    if cause is None:
        return line + ": first compile of the frame"
    return f"{line}: {cause_line(cause)}"


def _compile_data(item: Compile, clock: _Clock) -> dict[str, object]:
    return {
        "compile_id": item.compile_id,
        "since_start": clock.since(item),
        "since_start_s": clock.seconds(item),
        "duration_s": item.duration_s,
        "result": item.result,
        "guards": [
            {"kind": g.kind, "source": g.source, "expected": g.expected, "actual": g.actual}
            for g in item.guards
        ],
    }


def dimension_index(guard: Guard) -> str | None:
    """The dimension a size or stride guard checks (`1` of `size mismatch at index 1`)."""
    return _dim_index(guard)


def _dim_index(guard: Guard) -> str | None:
    match = _AT_INDEX.search(guard.raw.split("\n", 1)[0])
    if match is None:
        match = _SYM_INDEX.search(condition_text(guard.raw))
    return match.group(1) if match else None


def _name(frame: Frame | None) -> str:
    return frame.name if frame is not None else "<unknown frame>"


def _location(frame: Frame | None) -> str | None:
    return frame.location if frame is not None else None


def _short(values: list[str]) -> str:
    shown = values if len(values) <= 8 else [*values[:4], "...", *values[-2:]]
    return ", ".join(shown)
