"""graph-breaks: every place where Dynamo split a compiled function into several graphs.

Why: at a graph break Dynamo stops tracing, runs the offending code eagerly and starts a new
graph (a `torch_dynamo_resume_in_...` frame) after it. Each break costs a round trip through
Python on every call, splits the kernels the backend could have fused, and gives the resumed
frame its own guards and cache entries, so recompiles multiply. In a DiT block that runs
blocks x passes x steps times per request, one break in the block is paid thousands of times.

One finding per user location (the line that broke), with Dynamo's reason, how many times it
was hit and in which frames.
"""

from __future__ import annotations

import re

from diag.claims import claim
from diag.findings import Finding
from diag.frames import label as frame_label
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
    evidence = [
        f"Dynamo broke the graph {len(events)} time(s) at {location}",
        f"reason: {reason}",
    ]
    if detail and detail != reason:
        evidence.append(f"detail: {detail}")
    evidence.append(f"in frame(s): {', '.join(frames)}")
    evidence.append(f"where: {', '.join(spots[:8])}" + (" ..." if len(spots) > 8 else ""))
    hints = [m.group("text").strip() for m in _HINT.finditer(str(first.data.get("raw") or ""))]
    if hints:
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
        id=f"{ANALYZER}:{location}{'' if run.label == 'compiled' else '@' + run.label}",
        analyzer=ANALYZER,
        severity="warning",
        title=f"Graph break at {location}: {reason}",
        evidence=evidence,
        fix="Remove the construct Dynamo cannot trace from the compiled region (print/logging, "
        "data-dependent Python control flow, .item()/.tolist(), unsupported calls, an explicit "
        "torch._dynamo.graph_break()), or move it before or after the compiled call; "
        "torch._dynamo.explain(fn)(*args) lists every break, and fullgraph=True turns them "
        "into errors.",
        location=location if location != _UNKNOWN else None,
        run=run.label,
        data={
            "user_location": location,
            "count": len(events),
            "reason": reason,
            "detail": detail,
            "frames": frames,
            "compile_ids": _unique([str(e.data.get("compile_id")) for e in events]),
        },
        claims=claims,
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
