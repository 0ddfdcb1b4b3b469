"""cache-bloat: a code object holding far more compiled entries than the shapes it serves.

Why: Dynamo keeps one cache per code object, shared by every torch.compile wrapper of that code
(LightX2V compiles one wrapper per block index or staging buffer, all on the same block
function). A well-behaved frame needs about one entry per shape class; many more means the
compiled code specialises on something else, most often a per-block Python value, so every
block compiles and checks its own entry. Each extra entry costs a compile in warmup, guard
checks on every call, and memory; and at torch's recompile limit (8 entries by default) the
next variation falls back to eager for good, so a deeper model (12 blocks) runs its last blocks
uncompiled without a word.

Reads the entry counts at exit (or the last seen) against the distinct request shapes, and names
the guard sources that separate the entries from that frame's recompile reasons.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diag.evidence.causes import recompile_cause
from diag.evidence.frames import label as frame_label
from diag.findings.model import Finding
from diag.trace.guards import condition_text
from diag.trace.run import Frame, Guard, RunData, Trace

from .common import static_shapes, static_undo, static_verb
from .recompiles import cache_entries, repeated_dimensions

ANALYZER = "cache-bloat"

#: torch's default recompile limit (torch._dynamo.config.recompile_limit / cache_size_limit).
DEFAULT_LIMIT = 8
MIN_ENTRIES = 4
RATIO = 2
_TENSOR_KINDS = ("tensor-size", "tensor-stride", "tensor-dtype", "tensor-device")
#: Source names that look like a block or layer index.
_PER_BLOCK = re.compile(r"(?:^|[._\[])(?:block|layer)?_?(?:idx|index|id|num)\]?$", re.IGNORECASE)


def analyze(trace: Trace) -> list[Finding]:
    cwd = trace.manifest.get("cwd")
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run, cwd if isinstance(cwd, str) else None))
    return findings


def _analyze_run(run: RunData, cwd: str | None) -> list[Finding]:
    shapes = {tuple(r.shape) for r in run.requests if r.shape}
    limited = _limited_frames(run)
    # A dimension that never generalised explains its frame's entries: the recompiles finding
    # (or recompile-limit's, at the limit) reports it, with the entry count.
    explained = {found.frame for found in repeated_dimensions(run)}
    recorded = run.cache_entries()
    frames = set(recorded) | {c.frame for c in run.compiles if c.frame and c.cache_size is not None}
    findings: list[Finding] = []
    for frame in sorted(frames, key=lambda f: (f.location, f.name)):
        entries = cache_entries(run, frame)
        if entries is None or frame in explained:
            continue
        from_metrics = frame not in recorded
        # More entries than the default limit and no hit: this run raised the limit.
        raised = entries > DEFAULT_LIMIT and frame not in limited
        at_limit = frame in limited or (entries >= DEFAULT_LIMIT and not raised)
        if shapes:
            bloated = entries >= RATIO * len(shapes) and entries >= MIN_ENTRIES
        else:
            # No request shapes to compare with: only a full (or past-default) cache is news.
            bloated = at_limit or raised
        if bloated:
            findings.append(
                _finding(
                    run,
                    frame,
                    entries,
                    len(shapes),
                    (at_limit, frame in limited, raised),
                    cwd,
                    from_metrics,
                )
            )
    return findings


def _finding(
    run: RunData,
    frame: Frame,
    entries: int,
    shapes: int,
    limits: tuple[bool, bool, bool],
    cwd: str | None,
    from_metrics: bool = False,
) -> Finding:
    at_limit, limit_hit, raised = limits
    sources = _sources(run, frame)
    held = (
        f"{frame.name} holds at least {entries} cache entries (torch's "
        "compilation_metrics.cache_size before its last compile, plus that compile)"
        if from_metrics
        else f"{frame.name} holds {entries} cache entries at exit"
    )
    evidence = [
        held,
        f"distinct request shapes served: {shapes}"
        + (f" ({entries / shapes:.1f} entries per shape)" if shapes else " (no shapes reported)"),
    ]
    if sources:
        evidence.append(
            "guard sources that differ between the entries: "
            + "; ".join(
                f"{s.source} ({s.kind}; {len(s.values)} value(s): {_short(s.values)})"
                for s in sources
            )
        )
    else:
        evidence.append(f"no recompile reasons were recorded for {frame.name}")
    python = [s.source for s in sources if s.kind not in _TENSOR_KINDS]
    per_block = [
        s.source
        for s in sources
        if s.kind not in _TENSOR_KINDS and (s.within_step or _PER_BLOCK.search(s.source))
    ]
    if per_block:
        evidence.append(
            "typical cause, one entry per block: the compiled code reads a per-block Python "
            "value (e.g. block.block_idx on a staging buffer keyed by block index); here "
            f"{', '.join(per_block)}"
        )
        fix = (
            "Make the compiled code independent of per-block Python values: look up per-block "
            "data before the compiled call and pass it in as tensors, so one entry per shape "
            "serves every block (torch.compile treats int attributes of nn.Modules as static)."
        )
    elif python:
        evidence.append(
            f"the entries differ in Python state ({', '.join(python)}) that changes between "
            "steps or requests: see guard-churn"
        )
        fix = (
            f"Stop specialising on {', '.join(python)}: resolve it before the compiled call or "
            "pass it in as an input (see guard-churn), so one entry per shape serves every call."
        )
    elif (static := _static(run, frame)) is not None:
        fix = (
            f"The entries differ only in tensor guards, and {frame.name} {static_verb(static)} "
            f"{static}: every new size is an entry of its own, and warming up two values makes "
            f"nothing dynamic. Drop {static_undo(static)} (the second value then makes a "
            "dimension dynamic), or mark the dimensions that vary dynamic "
            "(torch._dynamo.mark_dynamic)."
        )
    else:
        fix = (
            "The entries differ only in tensor guards: mark the dimensions that vary dynamic "
            "(torch._dynamo.mark_dynamic), or warm up two values of each so automatic dynamic "
            "covers them with one entry."
        )
    if limit_hit:
        evidence.append(
            f"{frame.name} hit the recompile limit: further variations run eagerly, with no "
            "further compile or message"
        )
    elif at_limit:
        evidence.append(
            f"{entries} entries is torch's default recompile limit ({DEFAULT_LIMIT}): the next "
            "variation (a new shape, a deeper model's next block) runs eagerly"
        )
    elif raised:
        evidence.append(
            f"{entries} entries is more than torch's default recompile limit ({DEFAULT_LIMIT}) "
            "and no limit was hit: this run raised torch._dynamo.config.recompile_limit, so "
            "every variation still compiles"
        )
    if at_limit:
        fix += " At the recompile limit, further variations run eagerly."
    label = frame_label(run, frame)
    title = f"{label} holds {entries} cache entries " + (
        f"for {shapes} distinct shape(s)" if shapes else "(no request shapes known)"
    )
    if raised:
        title += ": past the default recompile limit, which this run raised"
    if limit_hit:
        title += ": recompile limit hit"
    elif at_limit:
        title += ": at the recompile limit"
    return Finding(
        id=f"{ANALYZER}:{label}{'' if run.label == 'compiled' else '@' + run.label}",
        analyzer=ANALYZER,
        # Entries beyond the shapes cost only when traffic compiled more of them (or the limit
        # is near); compiled in warmup alone they are context.
        severity="error"
        if at_limit
        else ("info" if _warmup_only(run, frame) and not raised else "warning"),
        title=title,
        evidence=evidence,
        fix=fix,
        location=f"{_relative(frame.file, cwd)}:{frame.line}" if frame.file else frame.name,
        run=run.label,
        data={
            "frame": frame.name,
            "entries": entries,
            "distinct_shapes": shapes,
            "at_limit": at_limit,
            "limit_hit": limit_hit,
            "sources": [
                {"source": s.source, "kind": s.kind, "values": s.values, "per_call": s.within_step}
                for s in sources
            ],
            "per_block_sources": per_block,
        },
    )


def _limited_frames(run: RunData) -> set[Frame]:
    frames = {c.frame for c in run.compiles if c.result == "recompile_limit" and c.frame}
    for event in run.of("recompile_limit"):
        frame = Frame.from_event(event.data.get("frame"))
        if frame is not None:
            frames.add(frame)
    return frames


@dataclass
class _Source:
    """One guard source that failed in this frame's recompiles."""

    source: str
    kind: str
    values: list[str] = field(default_factory=list)
    within_step: bool = False  # failed in two recompiles of one step: differs per call site


def _sources(run: RunData, frame: Frame) -> list[_Source]:
    """The guard sources that caused the frame's recompiles (diag.evidence.causes), Python-state
    sources
    first; each with the values its entries expected (every entry's failure on that source)."""
    found: dict[tuple[str, str], _Source] = {}
    compiled_at = {(c.epoch, c.compile_id): (c.pid, c.request_id, c.step) for c in run.compiles}
    hits: list[tuple[tuple[int, ...], Guard]] = []
    for item in run.compiles:
        if item.frame != frame:
            continue
        cause = recompile_cause(run, item)
        if cause is None or cause.guard is None:
            continue
        source = cause.guard.source or _guard_text(cause.guard)
        key = (source, cause.guard.kind)
        entry = found.setdefault(key, _Source(*key))
        # Per call site: the entry that failed was compiled earlier in this same step.
        if cause.entry is not None and item.step is not None:
            at = compiled_at.get((item.epoch, cause.entry))
            entry.within_step = entry.within_step or at == (item.pid, item.request_id, item.step)
        hits.extend(
            (_attempt(g.compile_id or item.compile_id), g)
            for g in item.guards
            if (g.source or _guard_text(g)) == source
        )
    for _, guard in sorted(hits, key=lambda hit: hit[0]):
        known = found.get((guard.source or _guard_text(guard), guard.kind))
        if known is None:
            continue  # the same source under another kind of guard: not what added entries
        entry = known
        value = guard.expected if guard.expected is not None else _guard_text(guard)
        if value not in entry.values:
            entry.values.append(value)
    return sorted(found.values(), key=lambda e: (e.kind in _TENSOR_KINDS, -len(e.values)))


def _warmup_only(run: RunData, frame: Frame) -> bool:
    """Every compile of the frame ran in a warmup phase diag identified."""
    compiles = [c for c in run.compiles if c.frame == frame]
    return bool(compiles) and all(c.phase == "warmup" for c in compiles)


def _attempt(compile_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", compile_id))


def _guard_text(guard: Guard) -> str:
    lines = condition_text(guard.raw).splitlines()
    return (lines[0] if lines else guard.kind)[:200]


def _short(values: list[str]) -> str:
    shown = values if len(values) <= 6 else [*values[:4], "...", values[-1]]
    return ", ".join(shown)


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _static(run: RunData, frame: Frame) -> str | None:
    """What the trace shows keeps this frame's sizes static (common.static_shapes), read at its
    last compile."""
    for item in reversed(run.compiles):
        if item.frame == frame:
            return static_shapes(run, item.pid, frame, item.t)
    return None
