"""live-compile: every Dynamo compile that lands inside a live request is an error.

Why: warmup exists to pay torch.compile's cost before traffic. A compile during a live request
stalls that request for the whole compile (0.2-5.5 s per recompile on an H200 for the reference
service, against 25-90 ms steps), and it means warmup did not cover what traffic sends: a shape
(a tensor-size guard on a dimension warmup never varied) or a Python value the frame guards on
(see guard-churn). This analyzer says which frame recompiled, on which request and step, the
guard that failed, what it cost, and, for size guards, which dimension of the request's shape
warmup left uncovered.

Compiles that only hit the recompile limit (result `recompile_limit`) compile nothing: the
recompile-limit analyzer reports them. Two INFO findings put the errors in context: the shapes
live traffic used against the shapes warmup served, and the compile seconds warmup took out of
live traffic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diag.evidence.causes import (
    RecompileCause,
    cause_guard,
    cause_line,
    cause_short,
    concurrent_compiles,
    recompile_cause,
    recompile_claim,
    unexplained_by_torch,
    unexplained_guard,
    unexplained_line,
)
from diag.evidence.change import change_fix
from diag.evidence.claims import claim
from diag.evidence.frames import label as frame_label
from diag.evidence.request_names import request_label, request_name
from diag.findings.advice import HOW_TO_MARK
from diag.findings.model import Finding
from diag.findings.rankset import ranks_text
from diag.trace.guards import (
    condition_text,
    describe_subject,
    explain_stride_guard,
    guard_subject,
    mark_dynamic_hint,
)
from diag.trace.inflight import CUT_OFF
from diag.trace.numerals import parse_int
from diag.trace.run import Compile, Frame, Guard, Request, RunData, Trace

from .common import format_seconds as _secs
from .common import id_suffix as _id_suffix
from .common import process_lines as _tag_lines
from .common import process_static_shapes, static_shapes, static_undo, warmup_known
from .recompiles import (
    dimension_index,
    repeated_dimension_fix,
    repeated_dimensions,
    static_size_fix,
)

ANALYZER = "live-compile"

#: Names of the request-shape dimensions, by the adapter that reported the shape and its rank:
#: only where that adapter says what the dimensions are. diag.fixtures reports frames x height x
#: width in latent pixels, LightX2V its latents [C, T, H, W], the diffusers pipeline its
#: `height`/`width` (and `num_frames`) arguments, diffusers model calls a latent's [F, H, W]
#: (or [H, W] of an image's). A shape from any other adapter (the first tensor of a compiled
#: call: [batch, seq] is not height x width) gets positional names, `dim 0`, `dim 1`.
_DIM_NAMES: dict[str, dict[int, tuple[str, ...]]] = {
    "diag.fixtures": {3: ("frames", "height", "width")},
    "lightx2v": {4: ("channels", "frames", "height", "width")},
    "diffusers": {2: ("height", "width"), 3: ("frames", "height", "width")},
    "diffusers model calls (inferred)": {
        2: ("height", "width"),
        3: ("frames", "height", "width"),
    },
}
_SIZE_KINDS = ("tensor-size", "tensor-stride")
#: Compile results that compiled nothing: recompile-limit and compile-failure report them.
_NOT_COMPILED = ("recompile_limit", "failed")
_VALUE_KINDS = (
    "python-value",
    "container-length",
    "container-keys",
    "object-identity",
    "type",
    "global-state",
)

Shape = tuple[int, ...]


@dataclass
class _Coverage:
    """How one live shape relates to the shapes warmup served (same process)."""

    shape: Shape
    warm: list[Shape]
    exact: bool
    # Dimensions whose live value warmup never served, split by whether warmup varied them.
    static_gaps: list[int] = field(default_factory=list)
    varied_gaps: list[int] = field(default_factory=list)
    rank_mismatch: bool = False
    names: tuple[str, ...] | None = None  # what the dimensions are, when the adapter says

    @property
    def covered(self) -> bool:
        """Served by a warmed entry: the same shape, or new values only in varied dimensions."""
        return self.exact or (not self.rank_mismatch and bool(self.warm) and not self.static_gaps)


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    # A compile with no end in a recording still going may be compiling still.
    running = trace.manifest.get("status") == "running"
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run, running))
    return findings


def _analyze_run(run: RunData, running: bool = False) -> list[Finding]:
    if not run.compiles:
        return []
    requests = {(r.pid, r.request_id): r for r in run.requests}
    groups: dict[tuple[int, Frame | None, str], list[Compile]] = {}
    unmarked: dict[int, list[Compile]] = {}
    unwarmed = {pid for pid in {c.pid for c in run.compiles} if not warmup_known(run, pid)}
    for item in run.compiles:
        # A limit hit is recompile-limit's, a failed compile compile-failure's headline.
        if item.live and item.request_id is not None and item.result not in _NOT_COMPILED:
            if item.pid in unwarmed and _cold(run, item):
                unmarked.setdefault(item.pid, []).append(item)
                continue
            # A graph break's resume function belongs to the frame it resumes.
            key = (item.pid, _owner_frame(run, item.frame), item.request_id)
            groups.setdefault(key, []).append(item)
    findings = [
        _live_finding(run, compiles, requests.get((pid, rid)), running)
        for (pid, _, rid), compiles in groups.items()
    ]
    findings.extend(_cold_finding(run, pid, items) for pid, items in unmarked.items())
    coverage = _coverage_finding(run)
    if coverage is not None:
        findings.append(coverage)
    cold = _warmup_compiles_finding(run)
    if cold is not None:
        findings.append(cold)
    return findings


# --- one live compile group -------------------------------------------------------------------


def _live_finding(
    run: RunData, compiles: list[Compile], request: Request | None, running: bool = False
) -> Finding:
    first = next((c for c in compiles if not _is_resume(c.frame)), compiles[0])
    frame = frame_label(run, first.frame)
    rid = first.request_id or "?"
    name = request_name(run, first.pid, rid)
    steps = sorted({c.step for c in compiles if c.step is not None})
    total = sum(c.duration_s or 0.0 for c in compiles)
    shape = _request_shape(request) if request is not None else None
    recompiled = any(c.guards for c in compiles)
    verb = "recompiled" if recompiled else "compiled"
    steps_text = _steps_text(steps)
    cut_off = _cut_off_text(compiles, running)
    title = f"{frame} {verb} during live request {name} at {steps_text}" + (
        f"; {cut_off}" if cut_off else f" ({_secs(total)} of compile)"
    )
    cause = _first_cause(run, compiles)
    newest = cause.guard if cause is not None else None
    if cause is not None:
        title += f": {cause_short(cause)}"

    evidence = [
        f"live request {name}"
        + (f", shape {_fmt(shape)}" if shape else "")
        + f": {len(compiles)} compile(s) of {frame} at {steps_text}, {_secs(total)} in all"
        + (" (at least: one never finished)" if cut_off else "")
    ]
    evidence.extend(_compile_line(run, c, running) for c in compiles)
    coverage: _Coverage | None = None
    size_guard = _size_guard(run, compiles)
    if shape is not None and size_guard is not None:
        coverage = _coverage(shape, _warm_shapes(run, first.pid), _names(run, first.pid, shape))
        static = static_shapes(run, first.pid, first.frame, first.t)
        evidence.append(_coverage_sentence(coverage, rid, size_guard, static))
        evidence.extend(_guard_meaning(size_guard, frame))
    limit = next(
        (
            c
            for c in run.compiles
            if c.result == "recompile_limit"
            and c.pid == first.pid
            and c.frame == first.frame
            and c.t >= first.t
        ),
        None,
    )
    if limit is not None:
        evidence.append(
            f"{frame} then hit the recompile limit at {limit.phase} {limit.request_id} "
            f"step {limit.step} (see recompile-limit)"
        )
    warmed = warmup_known(run, first.pid)
    if not recompiled:
        evidence.append(
            f"first compile of {frame}: no warmup call reached this frame before live traffic"
            if warmed
            else f"first compile of {frame}: diag identified no warmup in this process, so "
            "every request counts as live; if the program warms up, " + HOW_TO_MARK
        )
    repeated = [
        found
        for found in repeated_dimensions(run)
        if found.pid == first.pid
        and found.frame == first.frame
        and any(c is item for c in found.compiles for item in compiles)
    ]
    evidence.extend(
        f"{found.sentence()} (see {'recompile-limit' if limit is not None else 'recompiles'})"
        for found in repeated
    )
    evidence.extend(_tag_lines(run, first.pid))

    uncovered = [_dim_name(coverage, i) for i in coverage.static_gaps] if coverage else []
    guards = [
        {
            "compile_id": c.compile_id,
            "step": c.step,
            "kind": g.kind,
            "source": g.source,
            "expected": g.expected,
            "actual": g.actual,
        }
        for c in compiles
        for g in [cause_guard(run, c)]
        if g is not None
    ]
    return Finding(
        id=f"{ANALYZER}:{frame}:{rid}{_id_suffix(run, first.pid)}",
        analyzer=ANALYZER,
        severity="error",
        title=title,
        evidence=evidence,
        fix=(
            repeated_dimension_fix(
                repeated[0],
                static_shapes(run, repeated[0].pid, repeated[0].frame, repeated[0].compiles[-1].t),
            )
            if repeated
            else _fix(
                newest,
                shape,
                uncovered,
                frame,
                cause,
                coverage is not None and coverage.covered,
                static_shapes(run, first.pid, first.frame, first.t),
                _beside(run, compiles, cause),
            )
        )
        + (
            ""
            if warmed
            else " diag identified no warmup in this process (see the no-warmup finding)."
        ),
        location=first.frame.location if first.frame is not None else None,
        run=run.label,
        data={
            "frame": frame,
            "request_id": rid,
            "request_label": request_label(run, first.pid, rid),
            "cut_off": [c.compile_id for c in compiles if c.result == CUT_OFF],
            "steps": steps,
            "compile_ids": [c.compile_id for c in compiles],
            "compile_s": round(total, 6),
            "shape": list(shape) if shape else None,
            "guards": guards,
            "uncovered": uncovered,
            "new_input": _new_input(run, compiles, rid),
        },
        claims=[recompile_claim(run, c, frame_label(run, c.frame)) for c in compiles],
    )


def _new_input(run: RunData, compiles: list[Compile], rid: str) -> list[Any] | None:
    """`[pid, "r2", 0]`: where a new input shape made this frame recompile (the first
    recompile's decided cause is a size guard), the key that groups the frames it recompiled
    together. The pid and step are numbers, so that rank_merge (which compares data apart from
    its numbers) still sees one problem on every rank."""
    first = next((c for c in compiles if c.guards), None)
    cause = recompile_cause(run, first) if first is not None else None
    if cause is None or cause.guard is None or cause.guard.kind not in _SIZE_KINDS:
        return None
    return [first.pid, rid, first.step] if first is not None else None


def _first_cause(run: RunData, compiles: list[Compile]) -> RecompileCause | None:
    """The cause the title names: the first decided one, else the first recompile's."""
    causes = [cause for c in compiles if (cause := recompile_cause(run, c)) is not None]
    decided = next((c for c in causes if c.guard is not None and c.decided), None)
    return decided or next(
        (c for c in causes if c.guard is not None), causes[0] if causes else None
    )


_RESUME = "torch_dynamo_resume_in_"


def _is_resume(frame: Frame | None) -> bool:
    return frame is not None and frame.name.startswith(_RESUME)


def _owner_frame(run: RunData, frame: Frame | None) -> Frame | None:
    """The frame a compile belongs to: Dynamo's resume function after a graph break
    (`torch_dynamo_resume_in_forward_at_76`) is the rest of `forward` (the one compiled frame of
    that name in that file; itself when there is none or several)."""
    if frame is None or not frame.name.startswith(_RESUME):
        return frame
    name = frame.name[len(_RESUME) :].rsplit("_at_", 1)[0]
    owners = {
        c.frame
        for c in run.compiles
        if c.frame is not None and c.frame.name == name and c.frame.file == frame.file
    }
    return owners.pop() if len(owners) == 1 else frame


def _cold(run: RunData, item: Compile) -> bool:
    """With no warmup identified: a compile that is part of the cold start, not a recompile
    traffic caused: anything in the process's first request that compiled, and the first
    compile of a frame (nothing cached to fail) in any request."""
    first = next((c.request_id for c in run.compiles if c.pid == item.pid and c.live), None)
    return item.request_id == first or not item.guards


def _cold_finding(run: RunData, pid: int, compiles: list[Compile]) -> Finding:
    """One finding for a process whose warmup diag could not identify: what compiled cold, how
    long it took, and how to mark warmup (said once here, not under every frame)."""
    total = sum(c.duration_s or 0.0 for c in compiles)
    rids = list(dict.fromkeys(c.request_id or "?" for c in compiles))
    frames: dict[Frame | None, list[Compile]] = {}
    for item in compiles:
        frames.setdefault(_owner_frame(run, item.frame), []).append(item)
    evidence = [
        f"{len(compiles)} compile(s) of {len(frames)} frame(s) in {_join(rids)}, "
        f"{_secs(total)} in all; no request of this process was in a warmup phase, so diag "
        "cannot tell a warmup call from live traffic",
    ]
    for owner, items in list(frames.items())[:6]:
        label = frame_label(run, owner)
        resumed = sum(1 for c in items if _is_resume(c.frame))
        extra = f", {resumed} of them resume functions after graph breaks" if resumed else ""
        evidence.append(
            f"{label}: {len(items)} compile(s), {_secs(sum(c.duration_s or 0.0 for c in items))}"
            f" ({_join(list(dict.fromkeys(c.request_id or '?' for c in items)))}){extra}"
        )
    if len(frames) > 6:
        evidence.append(f"... and {len(frames) - 6} more frame(s)")
    evidence.extend(_tag_lines(run, pid))
    first = rids[0]
    return Finding(
        id=f"{ANALYZER}:no-warmup{_id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="warning",
        title=f"No warmup identified: {_join(rids[:3])}{' ...' if len(rids) > 3 else ''} "
        f"compiled {_secs(total)} cold ({len(compiles)} compile(s))",
        evidence=evidence,
        fix=f"If {first} was warmup, mark it: diag record --warmup-requests 1 (or --warmup-fn "
        'MOD:QUALNAME, or `with diag.phase("warmup"):` in the program); if it was live '
        "traffic, warm up before serving.",
        run=run.label,
        data={
            "requests": rids,
            "compile_ids": [c.compile_id for c in compiles],
            "compile_s": round(total, 6),
            "frames": list(dict.fromkeys(frame_label(run, c.frame) for c in compiles)),
        },
        claims=[claim("no-warmup", run, pid, requests=rids)]
        + [recompile_claim(run, c, frame_label(run, c.frame)) for c in compiles],
    )


def _cut_off_text(compiles: list[Compile], running: bool) -> str | None:
    """What the title says of compiles that never ended (diag.trace.inflight)."""
    cut = [c for c in compiles if c.result == CUT_OFF]
    if not cut:
        return None
    spent = _secs(sum(c.duration_s or 0.0 for c in compiles))
    if running:
        return f"not finished when the trace was read (at least {spent} of compile so far)"
    return f"the process ended before the compile finished (at least {spent} of compile)"


def _compile_line(run: RunData, item: Compile, running: bool = False) -> str:
    where = f"step {item.step}" if item.step is not None else "outside a step"
    if item.result == CUT_OFF:
        end = "the trace was read" if running else "the process ended"
        line = (
            f"{where}: compile {item.compile_id} started and had not ended when {end}, "
            f"{_secs(item.duration_s or 0.0)} later (no compile_end)"
        )
    else:
        result = "" if item.result == "ok" else f", result {item.result}"
        line = f"{where}: compile {item.compile_id} took {_secs(item.duration_s or 0.0)}{result}"
    cause = recompile_cause(run, item)
    if cause is None:
        return line + " (first compile of the frame: no cache entry to fail)"
    line = f"{line}; {cause_line(cause)}"
    unexplained = unexplained_line(run, item)
    return f"{line}; {unexplained}" if unexplained else line


def _beside(run: RunData, compiles: list[Compile], cause: RecompileCause | None) -> list[Compile]:
    """The compiles other threads ran while the recompile whose cause the finding names started
    (only for torch's `Unexpected recompilation`, where they are the evidence there is)."""
    if not unexplained_by_torch(cause):
        return []
    item = next((c for c in compiles if recompile_cause(run, c) is cause), None)
    return concurrent_compiles(run, item) if item is not None else []


def _guard_meaning(guard: Guard | None, frame: str) -> list[str]:
    """What the failing shape guard checks, in the program's terms: whose attribute or which
    argument it reads, whether through a view's base, and what a stride guard baked in."""
    subject = guard_subject(guard.source) if guard is not None else None
    if guard is None or subject is None:
        return []
    text = f"what the guard checks: {describe_subject(subject, frame)}"
    stride = None
    if guard.kind == "tensor-stride":
        stride = explain_stride_guard(condition_text(guard.raw))
    return [text + (f"; {stride}" if stride else "")]


def _size_guard(run: RunData, compiles: list[Compile]) -> Guard | None:
    """The first size or stride guard that caused one of these recompiles."""
    for item in compiles:
        guard = cause_guard(run, item)
        if guard is not None and guard.kind in _SIZE_KINDS:
            return guard
    return None


def _fix(
    newest: Guard | None,
    shape: Shape | None,
    uncovered: list[str],
    frame: str,
    cause: RecompileCause | None = None,
    shape_warmed: bool = False,
    static: str | None = None,
    beside: list[Compile] | None = None,
) -> str:
    """`static`: what the trace shows keeps the frame's sizes static (common.static_shapes):
    there a second value warmed up makes nothing dynamic. `beside`: the compiles other threads
    ran when a recompile torch could not explain started."""
    if unexplained_guard(newest):
        return _unexpected_fix(beside or [])
    changed = change_fix(cause, frame, shape_warmed) if cause is not None else None
    if changed is not None:
        return changed
    if cause is not None and cause.guard is None:
        sources = ", ".join(f"`{g.source or g.kind}`" for g in cause.candidates[:3])
        return (
            f"diag cannot tell which of {frame}'s cache entries was compiled for this call, so "
            f"the cause is one of {sources}: warm up what live traffic sends for each, or keep "
            "those values the same for every call (see the evidence for each entry's failure)."
        )
    if newest is None:
        return (
            f"Call {frame} in warmup with the inputs live traffic sends, so its first compile "
            "happens before traffic."
        )
    if cause is not None and cause.new_module:
        return (
            f"{frame} ran on a module none of its cache entries was compiled for: call every "
            f"module that runs {frame}'s code (each block, each structure) in warmup with the "
            "inputs live traffic sends, so each has its entry before traffic."
        )
    if newest.kind in _SIZE_KINDS and shape_warmed:
        # The request's shape was warmed: what changed is a tensor whose size does not follow
        # it, and "warm up the shape" would name a shape warmup already served.
        return (
            f"Warm up a call that passes {newest.source or 'the tensor'} as live traffic does "
            f"(expected {newest.expected}, actual {newest.actual}): the request shape was warmed, "
            f"this tensor's size does not follow it; or mark it dynamic: "
            f"{mark_dynamic_hint(newest.source, frame)}."
        )
    if newest.kind in _SIZE_KINDS and static is not None:
        index = dimension_index(newest) or "DIM"
        source = newest.source or "an input"
        dimension = f"dim {index} of `{source}`" if index != "DIM" else f"`{source}`"
        return static_size_fix(frame, static, source, index, dimension, None, at_limit=False)
    if newest.kind in _SIZE_KINDS:
        dims = " and ".join(uncovered) if uncovered else "the dimension that changed"
        where = f" ({_fmt(shape)})" if shape else ""
        return (
            f"Warm up the shape live traffic sends{where}, or a second value of {dims} in "
            f"warmup so automatic dynamic marks it dynamic before traffic; or mark it dynamic "
            f"yourself: {mark_dynamic_hint(newest.source, frame)}."
        )
    if newest.kind in _VALUE_KINDS:
        return (
            f"{frame} guards on a Python value ({newest.source or newest.kind}) that live "
            "traffic changes: see guard-churn. Resolve the value before the compiled frame, or "
            "pass it in as a tensor, so one graph serves every request."
        )
    return (
        "Warm up every variant live traffic uses (shapes, dtypes, devices, passes), or make the "
        "varying input dynamic; for Python-value guards see guard-churn."
    )


def _unexpected_fix(beside: list[Compile]) -> str:
    """No warmup covers a call that fit an entry; the one fix seen to work is taking the other
    thread's compile out of live traffic (the same threaded server, its live compile warmed up,
    had no such recompile in diag's runs)."""
    head = (
        "No warmup covers this recompile: the call fit an entry (torch's guards passed when it "
        "checked them again)."
    )
    if not beside:
        return (
            f"{head} Nothing in the record says what changed between the two checks, and diag "
            "knows no fix for it; torch asks for a bug report with a minimal repro."
        )
    other = beside[0]
    return (
        f"{head} It ran while thread {other.thread} was compiling {other.compile_id}, and a "
        "compile in one thread changes state that the guards of calls in other threads read. "
        f"Take {other.compile_id} out of live traffic (its own finding says how): with nothing "
        "compiling while requests run, the same threaded server had no such recompile."
    )


# --- shapes ------------------------------------------------------------------------------------


def _request_shape(request: Request) -> Shape | None:
    if request.shape:
        return tuple(int(v) for v in request.shape)
    for step in request.steps:
        if step.shape:
            return tuple(int(v) for v in step.shape)
    return None


def _warm_shapes(run: RunData, pid: int) -> list[Shape]:
    shapes: list[Shape] = []
    for request in run.requests:
        if request.phase == "warmup" and request.pid == pid:
            shape = _request_shape(request)
            if shape is not None and shape not in shapes:
                shapes.append(shape)
    return shapes


def _names(run: RunData, pid: int, shape: Shape) -> tuple[str, ...] | None:
    """The dimension names of `shape` when the adapter of its process says what they are."""
    adapter = next((p.adapter for p in run.processes if p.pid == pid), None)
    return _DIM_NAMES.get(adapter or "", {}).get(len(shape))


def _coverage(shape: Shape, warm: list[Shape], names: tuple[str, ...] | None = None) -> _Coverage:
    result = _Coverage(shape, warm, exact=shape in warm, names=names)
    same_rank = [w for w in warm if len(w) == len(shape)]
    if warm and not same_rank:
        result.rank_mismatch = True
        return result
    for i, value in enumerate(shape):
        values = {w[i] for w in same_rank}
        if values and value not in values:
            (result.varied_gaps if len(values) > 1 else result.static_gaps).append(i)
    return result


def _coverage_sentence(
    cov: _Coverage, rid: str, guard: Guard | None, static: str | None = None
) -> str:
    live = f"live {rid} is {_fmt(cov.shape)}"
    if not cov.warm:
        return (
            f"no warmup request with a shape was seen, so nothing warmed {_fmt(cov.shape)} "
            "(if the program warms up, mark it so diag can see it: --warmup-fn, "
            '--warmup-requests N, or with diag.phase("warmup"))'
        )
    served = f"warmup served {_join([_fmt(w) for w in cov.warm])}"
    if cov.rank_mismatch:
        return f"{served}; {live}, a shape of another rank"
    served += f" ({_varied_text(cov)})"
    if cov.exact:
        return (
            f"{served}; {live}, a shape warmup served too: the size guard is on a tensor "
            "whose size does not follow the request shape"
        )
    parts: list[str] = []
    for i in cov.static_gaps:
        name = _dim_name(cov, i)
        # From a warmup shape of the live shape's rank: warmup may serve other ranks too
        # (images 8x8 and videos 2x12x8), and those have no dim i.
        fixed = next(w[i] for w in cov.warm if len(w) == len(cov.shape))
        text = (
            f"{name} {cov.shape[i]} was never warmed: warmup kept the {name} at {fixed}, "
            f"so Dynamo left it static"
        )
        text += _guard_scale(guard, fixed, cov.shape[i], name)
        parts.append(text)
    for i in cov.varied_gaps:
        name = _dim_name(cov, i)
        if static is not None:
            # Automatic dynamic is off: varying a size in warmup makes nothing dynamic.
            parts.append(
                f"{name} {cov.shape[i]} is new; warmup varied the {name}, but the frame was "
                f"compiled with {static}, so no size becomes dynamic: each new one compiles"
            )
            continue
        parts.append(
            f"{name} {cov.shape[i]} is new, but warmup varied the {name}, so it should be "
            "dynamic already (look for a specialisation: sizes 0 and 1, or code that reads "
            "the size as a Python int)"
        )
    return f"{served}; {live}: " + "; ".join(parts)


def _guard_scale(guard: Guard | None, old: int, new: int, name: str) -> str:
    """' (freqs_w 4 -> 6 scales as the width 8 -> 12)' when the guard's sizes follow the dim."""
    if guard is None or old == 0:
        return ""
    expected = parse_int(str(guard.expected), signed=True)
    actual = parse_int(str(guard.actual), signed=True)
    if expected is None or actual is None:
        return ""
    if expected and abs(actual / expected - new / old) < 1e-9:
        return f" ({guard.source} {expected} -> {actual} scales as the {name} {old} -> {new})"
    return ""


def _varied_text(cov: _Coverage) -> str:
    shape = cov.shape
    same_rank = [w for w in cov.warm if len(w) == len(shape)]
    varied: list[str] = []
    fixed: list[str] = []
    for i in range(len(shape)):
        values = sorted({w[i] for w in same_rank})
        name = _dim_name(cov, i)
        if len(values) > 1:
            varied.append(name)
        elif values:
            fixed.append(f"{name} fixed at {values[0]}")
    head = f"{_join(varied)} varied" if varied else "no dimension varied"
    return head + (f"; {', '.join(fixed)}" if fixed else "")


def _dim_name(cov: _Coverage, index: int) -> str:
    return cov.names[index] if cov.names else f"dim {index}"


# --- INFO: coverage and warmup cost ------------------------------------------------------------


def _coverage_fix(static: str | None) -> str:
    """Warm up every shape class; where the trace shows sizes kept static, two values of a
    dimension make nothing dynamic, so the fixes are those tried under it (recompiles.
    static_size_fix)."""
    if static is None:
        return (
            "Warm up every shape class live traffic sends: for each dimension that varies live, "
            "serve at least two values of it in warmup (or mark it dynamic)."
        )
    return (
        f"Under {static} every size is an entry of its own, and two values warmed up make "
        f"nothing dynamic: warm up every shape live traffic sends (no more of them than "
        f"torch._dynamo.config.recompile_limit allows), or drop {static_undo(static)} (then "
        "two values of each varying dimension make it dynamic), or mark the varying dimensions "
        "dynamic (torch._dynamo.mark_dynamic)."
    )


def _size_recompiled(run: RunData) -> set[tuple[int, str]]:
    """(pid, request) pairs with a live compile caused by a size or stride guard."""
    return {
        (c.pid, c.request_id)
        for c in run.compiles
        if c.live
        and c.request_id is not None
        and c.result not in _NOT_COMPILED
        and (guard := cause_guard(run, c)) is not None
        and guard.kind in _SIZE_KINDS
    }


def _coverage_finding(run: RunData) -> Finding | None:
    live: dict[tuple[int, Shape], list[str]] = {}
    for request in run.requests:
        shape = _request_shape(request)
        if request.phase == "live" and shape is not None:
            live.setdefault((request.pid, shape), []).append(request.request_id)
    if not live:
        return None
    warm_all: dict[Shape, list[str]] = {}
    for request in run.requests:
        shape = _request_shape(request)
        if request.phase == "warmup" and shape is not None:
            warm_all.setdefault(shape, []).append(request.request_id)
    not_covered: list[str] = []
    uncovered_shapes: set[Shape] = set()
    rows: list[dict[str, object]] = []
    claims: list[dict[str, Any]] = []
    # Ranks serve the same requests: a shape is listed once, with the processes that served it.
    by_shape: dict[Shape, list[int]] = {}
    for pid, shape in live:
        by_shape.setdefault(shape, []).append(pid)
    live_texts = [_shape_label(run, s, live, pids) for s, pids in by_shape.items()]
    resized = _size_recompiled(run)
    kept_static = {pid: process_static_shapes(run, pid) for pid, _ in live}
    for (pid, shape), rids in live.items():
        cov = _coverage(shape, _warm_shapes(run, pid), _names(run, pid, shape))
        gaps = [_dim_name(cov, i) for i in cov.static_gaps]
        label = _shape_label(run, shape, live, by_shape[shape])
        # Automatic dynamic would serve a varied dim; a size recompile says this frame did not,
        # and so does a trace that shows the sizes kept static (dynamic=False, the setting off).
        static = (
            cov.covered
            and not cov.exact
            and (kept_static[pid] is not None or any((pid, rid) in resized for rid in rids))
        )
        if (not cov.covered or static) and shape not in uncovered_shapes:
            if static and kept_static[pid] is not None:
                why = ""  # the evidence says once what keeps every size static
            elif static:
                why = (
                    ": recompiled live on a size guard although warmup varied the dimension "
                    "(the frame keeps it static: dynamic=False, automatic dynamic off, or "
                    "mark_static)"
                )
            elif gaps:
                why = f": {_join(gaps)} never warmed"
            elif not cov.warm:
                why = ": no warmup request with a shape"
            else:
                why = ": a shape of another rank" if cov.rank_mismatch else ""
            not_covered.append(label + why)
            uncovered_shapes.add(shape)
        rows.append(
            {
                "shape": list(shape),
                "requests": rids,
                "covered": cov.covered and not static,
                "uncovered": gaps,
            }
        )
        claims.append(
            claim(
                "covered" if cov.covered and not static else "not-covered",
                run,
                pid,
                phase="live",
                requests=rids,
                shape=list(shape),
                dims=gaps,
            )
        )
    shapes = {shape for _, shape in live}
    covered_n = len(shapes - uncovered_shapes)
    evidence = [
        f"live traffic used {len(shapes)} shape(s): {_join(live_texts)}",
        "warmup served "
        + (
            _join([f"{_fmt(s)} ({', '.join(dict.fromkeys(r))})" for s, r in warm_all.items()])
            if warm_all
            else "no request with a shape"
        ),
    ]
    if not warm_all and not any(warmup_known(run, pid) for pid, _ in live):
        # Nothing to compare the live shapes with: the no-warmup notice (and live-compile's
        # no-warmup finding) say so once; a coverage finding would only repeat it.
        return None
    if not_covered:
        evidence.append(f"not covered by warmup: {_join(not_covered)}")
        title = (
            f"Warmup covered {covered_n} of {len(shapes)} live shape(s); "
            f"not covered: {_join(sorted(_fmt(s) for s in uncovered_shapes))}"
        )
    else:
        title = f"Warmup covered every live shape ({len(shapes)})"
    static_why = next((why for why in kept_static.values() if why is not None), None)
    evidence.append(
        f"a live shape counts as covered only when warmup served it: {static_why} keeps every "
        "size static"
        if static_why is not None
        else "a live shape counts as covered when warmup served it, or when it differs only in "
        "dimensions warmup varied (automatic dynamic makes those dynamic)"
    )
    return Finding(
        id=f"{ANALYZER}:warmup-coverage{_id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="info",
        title=title,
        evidence=evidence,
        # Every live shape warmed: nothing to do, so no fix line.
        fix="" if covered_n == len(shapes) and warm_all else _coverage_fix(static_why),
        run=run.label,
        data={
            "live_shapes": rows,
            "warmup_shapes": [{"shape": list(s), "requests": r} for s, r in warm_all.items()],
        },
        claims=claims,
    )


def _shape_label(
    run: RunData, shape: Shape, live: dict[tuple[int, Shape], list[str]], pids: list[int]
) -> str:
    """`4x48x96 (r0)`, or `4x48x96 (r0; on rank0 and rank1)` when several processes served it."""
    rids = list(dict.fromkeys(r for pid in pids for r in live[(pid, shape)]))
    ranks = {p.pid: p.rank for p in run.processes}
    ordered = sorted(pids, key=lambda pid: (ranks.get(pid) is None, ranks.get(pid) or 0, pid))
    tags = [run.process_tag(pid) or f"pid {pid}" for pid in ordered]
    where = f"; on {_join(tags)}" if len(pids) > 1 else ""
    known = [r for r in (ranks.get(pid) for pid in ordered) if r is not None]
    if len(known) == len(pids) > 2:  # 64 ranks read `on ranks 0-63`, not 64 names
        where = f"; on {ranks_text(known)}"
    return f"{_fmt(shape)} ({', '.join(rids)}{where})"


def _warmup_compiles_finding(run: RunData) -> Finding | None:
    warm = [c for c in run.compiles if c.phase == "warmup"]
    if not warm:
        return None
    total = sum(c.duration_s or 0.0 for c in warm)
    by_frame: dict[Frame | None, list[Compile]] = {}
    for item in warm:
        by_frame.setdefault(item.frame, []).append(item)
    evidence = []
    for code, items in by_frame.items():
        frame = frame_label(run, code)
        by_step: dict[tuple[str | None, int | None], list[Compile]] = {}
        for item in items:
            by_step.setdefault((item.request_id, item.step), []).append(item)
        spots = [
            (f"{rid} step {step}: " if rid is not None else "outside a request: ")
            + (f"{len(group)} compiles, " if len(group) > 1 else "")
            + _secs(sum(c.duration_s or 0.0 for c in group))
            for (rid, step), group in by_step.items()
        ]
        more = f"; {len(spots) - 6} more" if len(spots) > 6 else ""
        evidence.append(
            f"{frame}: {len(items)} compile(s), "
            f"{_secs(sum(c.duration_s or 0.0 for c in items))} ({'; '.join(spots[:6])}{more})"
        )
    live = [c for c in run.compiles if c.live and c.result not in _NOT_COMPILED]
    if live:
        evidence.append(
            f"still compiled during live requests: {len(live)} compile(s), "
            f"{_secs(sum(c.duration_s or 0.0 for c in live))} (the live-compile errors)"
        )
    return Finding(
        id=f"{ANALYZER}:warmup-compiles{_id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="info",
        title=f"Warmup moved {len(warm)} compile(s), {_secs(total)} of cold start, "
        "out of live traffic",
        evidence=evidence,
        fix="",  # the cost warmup is for: nothing to do
        run=run.label,
        data={"compiles": len(warm), "compile_s": round(total, 6), "live_compiles": len(live)},
    )


# --- text helpers ------------------------------------------------------------------------------


def _steps_text(steps: list[int]) -> str:
    if not steps:
        return "no step"
    if len(steps) == 1:
        return f"step {steps[0]}"
    return "steps " + ", ".join(str(s) for s in steps)


def _fmt(shape: Shape | list[int] | None) -> str:
    return "x".join(str(v) for v in shape) if shape else "?"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
