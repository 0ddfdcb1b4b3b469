"""trace-boundary: Dynamo traced into code that is not model computation — a function behind
`functools.lru_cache` (a kernel library's JIT loader), `os`/`posixpath`, `threading`,
`datetime`, `importlib`, `logging` — with the graph breaks and compile time it added.

Why: Dynamo ignores an lru_cache wrapper and traces the wrapped function on every compile, so
a loader that looks a module up, stats a file and takes a lock is re-traced by every frame and
every recompile; a lock, a clock or a `stat` then breaks the graph, and each break gives the
frame a resumed twin with its own compile. FlashInfer's RoPE wrapper did this to LightX2V
until the call was registered as a custom op (docs/FINDINGS.md). A `torch.library.custom_op`
with `register_fake` is one opaque node: Dynamo never looks inside.

Evidence: `traced_code` events (collectors/trace_boundary.py): the boundary code Dynamo had
finished inlining when it broke or produced a graph, and the calls it was inside at a break.
One finding per entry into boundary code (the outermost such function on the way in).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from diag.evidence.claims import claim
from diag.findings.model import Finding
from diag.trace.run import Compile, Event, Frame, RunData, Trace

from .common import format_seconds, id_suffix, process_lines
from .graph_breaks import reason_of

ANALYZER = "trace-boundary"
_LRU = "functools.lru_cache"
_CompileKey = tuple[int, int, str]
_EXPLANATION = re.compile(r"^\s*Explanation:\s*(?P<text>.+)$", re.MULTILINE)


@dataclass
class _Entry:
    pid: int
    name: str
    file: str
    line: int
    call_site: dict[str, Any] | None = None
    #: The call site is the compiled frame itself (no function of the model to make an op of).
    from_root: bool = False
    modules: set[str] = field(default_factory=set)
    functions: dict[str, int] = field(default_factory=dict)
    cached: bool = False
    compiles: set[_CompileKey] = field(default_factory=set)
    resumes: set[tuple[str, int]] = field(default_factory=set)
    breaks: int = 0
    reasons: list[str] = field(default_factory=list)


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run))
    return findings


def _key(pid: int, data: dict[str, Any]) -> _CompileKey:
    epoch = data.get("epoch")
    return (pid, epoch if isinstance(epoch, int) else 0, str(data.get("compile_id")))


def _frames(value: Any) -> list[dict[str, Any]]:
    return [f for f in value if isinstance(f, dict)] if isinstance(value, list) else []


def _label(frame: dict[str, Any]) -> str:
    return f"{frame.get('name')} at {frame.get('file')}:{frame.get('line')}"


def _inside(chain: list[dict[str, Any]], root: Frame | None) -> list[dict[str, Any]]:
    """The part of a break's call chain from the compiled frame inwards."""
    if root is not None:
        for index in range(len(chain) - 1, -1, -1):
            if chain[index].get("name") == root.name and chain[index].get("file") == root.file:
                return chain[index:]
    return chain


def _analyze_run(run: RunData) -> list[Finding]:
    events = run.of("traced_code")
    if not events:
        return []
    compiles = {(c.pid, c.epoch, c.compile_id): c for c in run.compiles}
    breaks: dict[_CompileKey, list[Event]] = defaultdict(list)
    for event in run.of("graph_break"):
        breaks[_key(event.pid, event.data)].append(event)
    entries: dict[tuple[int, str, str], _Entry] = {}
    for event in events:
        key = _key(event.pid, event.data)
        compiled = compiles.get(key)
        chain = _inside(_frames(event.data.get("chain")), compiled.frame if compiled else None)
        codes = _frames(event.data.get("codes"))
        at = next((i for i, f in enumerate(chain) if f.get("boundary")), None)
        if at is not None:
            head, call_site = chain[at], chain[at - 1] if at > 0 else None
        else:
            cached = [c for c in codes if c.get("boundary") == _LRU]
            head, call_site = (cached or codes or [{}])[0], None
        if not head.get("name"):
            continue
        name, file = str(head["name"]), str(head.get("file"))
        entry = entries.get((event.pid, name, file))
        if entry is None:
            line = head.get("line")
            entry = _Entry(event.pid, name, file, line if isinstance(line, int) else 0)
            entries[(event.pid, name, file)] = entry
        if entry.call_site is None and call_site is not None:
            entry.call_site, entry.from_root = call_site, at == 1
        entry.compiles.add(key)
        for frame in (chain[at:] if at is not None else []) + codes:
            boundary = frame.get("boundary")
            if boundary == _LRU:
                entry.cached = True
            elif isinstance(boundary, str):
                entry.modules.add(boundary)
                label = f"{boundary}.{frame.get('name')}"
                count = frame.get("count")
                entry.functions[label] = entry.functions.get(label, 0) + (
                    count if isinstance(count, int) else 1
                )
        if event.data.get("at") == "graph_break":
            entry.breaks += 1
            # The break splits every frame on the way in at its call: each resumes in a frame
            # of its own (`torch_dynamo_resume_in_<name>_at_<line>`), compiled apart.
            for frame in chain[: at if at is not None else len(chain)]:
                line = frame.get("line")
                if isinstance(line, int):
                    entry.resumes.add((str(frame.get("name")), line))
            reason = _reason(breaks.get(key, []), chain)
            if reason and reason not in entry.reasons:
                entry.reasons.append(reason)
    return [_finding(run, entry, compiles) for entry in entries.values()]


def _reason(events: list[Event], chain: list[dict[str, Any]]) -> str | None:
    innermost = f"{chain[-1].get('file')}:{chain[-1].get('line')}" if chain else None
    matching = [e for e in events if e.data.get("user_location") == innermost] or events
    if not matching:
        return None
    data = matching[0].data
    explained = _EXPLANATION.search(str(data.get("raw") or ""))
    reason = reason_of(data)
    return f"{reason} at {innermost}" + (
        f": {explained.group('text').strip()[:200]}" if explained else ""
    )


def _added_compiles(entry: _Entry, compiles: dict[_CompileKey, Compile]) -> list[Compile]:
    """The compiles that traced the entry and those of the frames its breaks resumed in."""
    resumed = {f"torch_dynamo_resume_in_{name}_at_{line}" for name, line in entry.resumes}
    epochs = {epoch for _, epoch, _ in entry.compiles}
    added = [compiles[key] for key in entry.compiles if key in compiles]
    added += [
        c
        for key, c in compiles.items()
        if key not in entry.compiles
        and c.pid == entry.pid
        and c.epoch in epochs
        and c.frame is not None
        and c.frame.name in resumed
    ]
    return sorted(added, key=lambda c: c.t)


def _finding(run: RunData, entry: _Entry, compiles: dict[_CompileKey, Compile]) -> Finding:
    added = _added_compiles(entry, compiles)
    seconds = sum(c.duration_s or 0.0 for c in added)
    roots = sorted(
        {
            c.frame.name
            for key in entry.compiles
            if (c := compiles.get(key)) is not None and c.frame is not None
        }
    )
    kind = "an lru_cache'd function" if entry.cached else "non-model code"
    modules = sorted(entry.modules)
    what = kind + (f" reaching {', '.join(modules)}" if modules else "")
    title = (
        f"Dynamo traced into {entry.name} ({what}) from {len(roots) or 1} frame(s): "
        f"{entry.breaks} graph break(s), {len(added)} compile(s) taking {format_seconds(seconds)}"
    )
    evidence = [
        f"entered at {_label(entry.call_site)} -> {entry.name} ({entry.file})"
        if entry.call_site
        else f"{entry.name} at {entry.file}:{entry.line} was inlined",
        f"traced while compiling {', '.join(roots) or 'an unknown frame'} "
        f"(compile id(s) {', '.join(sorted(k[2] for k in entry.compiles)[:8])})",
    ]
    if entry.cached:
        evidence.append(
            "Dynamo ignores the lru_cache wrapper and traces the wrapped function on every "
            "compile (torch warns once: 'Dynamo detected a call to a functools.lru_cache-wrapped "
            "function')"
        )
    if entry.functions:
        evidence.append(
            "non-model functions inlined: "
            + ", ".join(f"{name} x{count}" for name, count in sorted(entry.functions.items())[:12])
        )
    evidence.extend(f"graph break: {reason}" for reason in entry.reasons[:3])
    evidence.extend(
        f"compile {c.compile_id} of {c.frame.name if c.frame else '?'}: "
        f"{format_seconds(c.duration_s or 0.0)}"
        for c in added[:6]
    )
    evidence.extend(process_lines(run, entry.pid))
    site = entry.call_site
    if site is not None and not entry.from_root:
        call = str(site.get("name"))
        target = f"the function that calls it ({call} at {site.get('file')}:{site.get('line')})"
    else:
        call = "my_kernel"
        target = f"the call of {entry.name} and the kernel it loads, moved into a function of "
        target += "their own,"
    fix = (
        f"make {target} one opaque op: decorate it with @torch.library.custom_op('mylib::"
        f"{call.strip('<>')}', mutates_args=()) and give it a register_fake that returns empty "
        f"tensors of the output's shape, so Dynamo never traces {entry.name}; or call "
        f"{entry.name} before the compiled region and pass its result in"
    )
    location = f"{site.get('file')}:{site.get('line')}" if site else f"{entry.file}:{entry.line}"
    # A cached function that reaches no file, clock, lock or import and breaks nothing costs
    # a re-trace per compile only (torch warns about the ignored cache itself): context.
    severity = "warning" if entry.breaks or modules else "info"
    return Finding(
        id=f"{ANALYZER}:{entry.name}@{os.path.basename(entry.file)}" + id_suffix(run, entry.pid),
        analyzer=ANALYZER,
        severity=severity,
        title=title,
        evidence=evidence,
        fix=fix,
        location=location,
        run=run.label,
        data={
            "entry": entry.name,
            "file": entry.file,
            "lru_cache": entry.cached,
            "modules": modules,
            "frames": roots,
            "graph_breaks": entry.breaks,
            "compiles": len(added),
            "compile_ids": [c.compile_id for c in added],
            "compile_s": round(seconds, 6),
        },
        claims=[
            claim(
                "traced-into",
                run,
                entry.pid,
                function=entry.name,
                file=entry.file,
                lru_cache=entry.cached,
                modules=modules,
                compile_ids=sorted(k[2] for k in entry.compiles),
                graph_breaks=entry.breaks,
            )
        ],
    )
