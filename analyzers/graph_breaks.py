"""graph-breaks: every place where Dynamo split a compiled function into several graphs.

Why: at a graph break Dynamo stops tracing, runs the offending code eagerly and starts a new
graph (a `torch_dynamo_resume_in_...` frame) after it. Each break costs a round trip through
Python on every call, splits the kernels the backend could have fused, and gives the resumed
frame its own guards and cache entries, so recompiles multiply. In a DiT block that runs
blocks x passes x steps times per request, one break in the block is paid thousands of times.

One finding per user location (the line that broke), with Dynamo's reason, how many times it
was hit and in which frames.

A break inside a library (diag.evidence.libraries) is not the person's to remove. When the library
itself wrapped the function in `torch.compiler.disable` (diffusers' group-offload hooks
`onload_`/`offload_`, on purpose: they move weights outside the graph), the break is by design:
info, with the library's switch instead of torch's hint "Remove the torch.compiler.disable
call". Another break in library code stays a warning, with a fix that does not ask to edit it.
A library location is named from its package folder on (`diffusers/hooks/...py:401`) in the
title and id, so both read the same on every machine.
"""

from __future__ import annotations

import re

from diag.evidence.claims import claim
from diag.evidence.frames import label as frame_label
from diag.evidence.libraries import DIFFUSERS, Library, library_of, library_path
from diag.findings.model import Finding
from diag.trace.run import Compile, Event, RunData, Trace

ANALYZER = "graph-breaks"

_BOILERPLATE = re.compile(
    r"^(?:Graph break in user code at |Graph Break Reason: |Encountered graph break when "
    r"attempting to trace|Failed to handle graph break gracefully|For more details|"
    r"Developer debug context|User code traceback|Traceback \(most recent call last\))"
)
#: torch 2.13's words when it cannot resume after a break in a nested call: it gives up on the
#: whole frame, which then runs eagerly (only the frames it calls get compiled).
_SKIPPED = re.compile(r"Skipping the function and falling back to eager", re.IGNORECASE)
_EXPLANATION = re.compile(r"^\s*Explanation:\s*(?P<text>.+)$", re.MULTILINE)
_HINT = re.compile(r"^\s*Hint:\s*(?P<text>.+)$", re.MULTILINE)
#: torch's words for a call into a function wrapped in torch.compiler.disable (2.6 to 2.13).
_DISABLED = re.compile(r"wrapped with `torch\.compiler\.disable`|torch\.compiler\.disable\(\)`d")
#: The disabled function, from the explanation: `<function ModuleGroup.onload_ at 0x...>`.
_DISABLED_NAME = re.compile(r"<function (?P<name>[\w.<>]+) at 0x")
_UNKNOWN = "<unknown location>"


def analyze(trace: Trace) -> list[Finding]:
    cwd = trace.manifest.get("cwd")
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run, cwd if isinstance(cwd, str) else None))
    return findings


def _analyze_run(run: RunData, cwd: str | None) -> list[Finding]:
    groups: dict[str, list[Event]] = {}
    for event in run.of("graph_break"):
        location = event.data.get("user_location")
        key = _relative(location, cwd) if isinstance(location, str) and location else _UNKNOWN
        groups.setdefault(key, []).append(event)
    return [_finding(run, location, events) for location, events in groups.items()]


def _finding(run: RunData, location: str, events: list[Event]) -> Finding:
    first = events[0]
    reason = reason_of(first.data)
    detail = _detail(first.data)
    frames = _unique([_frame_of(run, e) for e in events])
    spots = _unique([_where(e) for e in events])
    library = library_of(location) if location != _UNKNOWN else None
    shown = library_path(location) if library is not None else location
    disabled = library is not None and _disabled(first.data)
    evidence = [
        f"Dynamo broke the graph {len(events)} time(s) at {shown}",
        f"reason: {reason}",
    ]
    if detail and detail != reason:
        evidence.append(f"detail: {detail}")
    evidence.append(f"in frame(s): {', '.join(frames)}")
    evidence.append(f"where: {', '.join(spots[:8])}" + (" ..." if len(spots) > 8 else ""))
    hints = [m.group("text").strip() for m in _HINT.finditer(str(first.data.get("raw") or ""))]
    if library is not None:
        evidence.append(_library_line(library, first.data, disabled, hints))
    elif hints:
        evidence.append(f"torch's hint: {hints[0]}")
    claims = [_claim(run, location, e) for e in events]
    skipped = _unique([_frame_of(run, e) for e in events if skipped_frame(e.data)])
    if skipped:
        evidence.append(
            f"torch could not resume after the break in {', '.join(skipped)} and ran "
            f"{'it' if len(skipped) == 1 else 'them'} eagerly from then on (only the frames "
            "called from there were compiled)"
        )
    live = [e for e in events if e.position[0] == "live" and e.position[1] is not None]
    if live:
        evidence.append(
            f"{len(live)} of them during live requests: the compile that found the break ran "
            "in traffic"
        )
    return Finding(
        id=f"{ANALYZER}:{shown}{'' if run.label == 'compiled' else '@' + run.label}",
        analyzer=ANALYZER,
        severity="info" if disabled else "warning",
        title=(
            f"Graph break at {shown}: {_disabled_name(first.data) or 'a function'} is "
            f"torch.compiler.disable'd by design in {library.name} (not yours to remove)"
            if disabled and library is not None
            else f"Graph break at {shown}: {reason}"
        ),
        evidence=evidence,
        fix=_fix(library, first.data, disabled),
        location=location if location != _UNKNOWN else None,
        run=run.label,
        data={
            "user_location": location,
            "count": len(events),
            "reason": reason,
            "detail": detail,
            "frames": frames,
            "compile_ids": _unique([str(e.data.get("compile_id")) for e in events]),
            "library": library.package if library is not None else None,
            "by_design": disabled,
            "disabled_function": _disabled_name(first.data) if disabled else None,
        },
        claims=claims,
    )


def _disabled(data: dict[str, object]) -> bool:
    """Whether the break is a call into a function wrapped in torch.compiler.disable."""
    return any(
        isinstance(data.get(key), str) and _DISABLED.search(str(data[key]))
        for key in ("reason", "raw")
    )


def _disabled_name(data: dict[str, object]) -> str | None:
    match = _DISABLED_NAME.search(str(data.get("raw") or ""))
    return match.group("name") if match else None


def _group_offload_hook(library: Library, data: dict[str, object]) -> bool:
    """diffusers' group-offload hooks, disabled on purpose (FACTS: onload_/offload_)."""
    name = _disabled_name(data) or ""
    return library is DIFFUSERS and name.rsplit(".", 1)[-1] in ("onload_", "offload_")


def _library_line(
    library: Library, data: dict[str, object], disabled: bool, hints: list[str]
) -> str:
    """Whose code broke, and why torch's hint does not apply when the library chose it."""
    if not disabled:
        hint = f" (torch's hint: {hints[0]})" if hints else ""
        return f"the break is in {library.owner} code, not the program's{hint}"
    name = _disabled_name(data)
    what = f"{name}, which {library.name}" if name else f"a function {library.name}"
    hint = f": torch's hint ({hints[0]}) is not yours to follow" if hints else ""
    return (
        f"by design in {library.name}: the call is to {what} wraps in torch.compiler.disable{hint}"
    )


def _fix(library: Library | None, data: dict[str, object], disabled: bool) -> str:
    if library is None:
        return (
            "Remove the construct Dynamo cannot trace from the compiled region (print/logging, "
            "data-dependent Python control flow, .item()/.tolist(), unsupported calls, an "
            "explicit torch._dynamo.graph_break()), or move it before or after the compiled "
            "call; torch._dynamo.explain(fn)(*args) lists every break, and fullgraph=True turns "
            "them into errors."
        )
    if disabled and _group_offload_hook(library, data):
        return (
            "By design in diffusers: not yours to remove. Group offloading (enable_group_offload) "
            "moves each group's weights in its onload_/offload_ hooks outside the graph, so "
            "every compiled block breaks there. If the GPU has room for the model, drop group "
            "offloading and the breaks go with it; otherwise accept them (offload-bound measures "
            "what the copies cost in profiled steps)."
        )
    if disabled:
        return (
            f"By design in {library.name}: not yours to remove. {library.owner} code runs that "
            "function outside the graph on purpose; accept the break, or compile a region that "
            "does not call it."
        )
    return (
        f"The break is in {library.owner} code, not yours to edit: compile a region that does "
        f"not reach it (a smaller module, or call that part before or after the compiled call), "
        f"try another {library.name} version, or report it to {library.name}; "
        "torch._dynamo.explain(fn)(*args) lists every break."
    )


def _claim(run: RunData, location: str, event: Event) -> dict[str, object]:
    """One break as a claim: the compile that hit it, where, and torch's reason."""
    found = _compile_of(run, event)
    phase, request_id, step = event.position
    return claim(
        "graph-break",
        run,
        event.pid,
        frame=found.frame if found is not None else None,
        label=_frame_of(run, event) if found is not None and found.frame is not None else None,
        phase=phase,
        request=request_id,
        step=step,
        location=location if location != _UNKNOWN else None,
        reason=reason_of(event.data),
        compile_id=str(event.data["compile_id"]) if event.data.get("compile_id") else None,
        frame_skipped=skipped_frame(event.data),
    )


def skipped_frame(data: dict[str, object]) -> bool:
    """Whether torch gave up on the whole frame at this break (it then runs eagerly)."""
    return any(
        isinstance(data.get(key), str) and _SKIPPED.search(str(data[key]))
        for key in ("reason", "raw")
    )


def reason_of(data: dict[str, object]) -> str:
    """The first meaningful line of the break's reason, else of its raw text."""
    for key in ("reason", "raw"):
        text = data.get(key)
        if not isinstance(text, str):
            continue
        for line in text.splitlines():
            line = line.strip().rstrip(":").strip()
            if line and not _BOILERPLATE.match(line):
                return line[:300]
    for key in ("reason", "raw"):
        text = data.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip().splitlines()[0][:300]
    return "no reason recorded"


def _detail(data: dict[str, object]) -> str | None:
    """Dynamo's explanation line (torch >= 2.7 prints one per break type), if any."""
    raw = data.get("raw")
    if not isinstance(raw, str):
        return None
    match = _EXPLANATION.search(raw)
    return match.group("text").strip()[:300] if match else None


def _compile_of(run: RunData, event: Event) -> Compile | None:
    compile_id = event.data.get("compile_id")
    epoch = event.data.get("epoch") or 0
    return next(
        (
            c
            for c in run.compiles
            if c.compile_id == compile_id and c.epoch == epoch and c.pid == event.pid
        ),
        None,
    )


def _frame_of(run: RunData, event: Event) -> str:
    found = _compile_of(run, event)
    if found is not None and found.frame is not None:
        return frame_label(run, found.frame)
    compile_id = event.data.get("compile_id")
    return f"compile {compile_id}" if compile_id else "<unknown frame>"


def _where(event: Event) -> str:
    phase, request_id, step = event.position
    if request_id is None:
        return f"{phase} (outside a request)"
    return f"{phase} {request_id}" + (f" step {step}" if step is not None else "")


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _relative(path: str, cwd: str | None) -> str:
    """A path under the recording's working directory, relative to it (stable ids)."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path
