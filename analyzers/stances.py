"""stances: a recompile that `set_stance("fail_on_recompile")` refused, and what ran eagerly
after it; live requests served under `eager_on_recompile`.

Why: a service that pins its compiled code after warmup (torch's advice for serving) gets a
plain RuntimeError where a call needs a new compile: no compile runs and torch logs no guard
failure, so nothing else in the record shows it. The program usually catches it and serves the
request again under `force_eager`: the slowest request of the day, with no compile to show for
it. Each refusal is an error at the request, step and thread where it happened (a request's
refusals of one frame together: a program that reruns each call is refused at every step), with
the guards torch named in its message, and the steps that then ran under `force_eager` (count,
requests, their median time against the compiled steps of live requests) and the calls of each
compiled frame the recorder counted under that stance. `eager_on_recompile` runs such calls
eagerly without any error and torch records nothing per call; diag checks each compiled call
under that stance against the frame's cache entries as Dynamo does
(collectors/limit_calls.py, `limit_calls` events with `stance`), and says which calls of which
frame ran eagerly, in which requests and steps, beside the live steps that ran under it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from diag.evidence.fallback import (
    checks_since,
    compiled_count,
    spots_text,
    stance_checks,
    stance_eager_calls,
)
from diag.findings.model import Finding
from diag.trace.run import Event, Frame, RunData, Step, Trace

from .common import format_seconds as _secs

ANALYZER = "stances"
FORCE_EAGER = "force_eager"
EAGER_ON_RECOMPILE = "eager_on_recompile"


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        seen: dict[str, int] = {}
        findings.extend(_refused(run, events, seen) for events in _by_request(run))
        findings.extend(_eager_on_recompile(run))
    return findings


def _where(event: Event) -> str:
    phase, rid, step = event.position
    if rid is None:
        return f"{phase}, outside any request"
    thread = event.data.get("thread")
    place = f"{phase} {rid} step {step}" if step is not None else f"{phase} {rid}"
    return f"{place} (thread {thread})" if isinstance(thread, str) else place


def _by_request(run: RunData) -> list[list[Event]]:
    """Refusals grouped by process, frame and request (a program that reruns each refused call
    eagerly is refused at every step of that request), in the order they began."""
    groups: dict[tuple[int, object, object], list[Event]] = {}
    for event in run.of("recompile_refused"):
        frame = Frame.from_event(event.data.get("frame"))
        rid = event.position[1]
        key = (event.pid, frame, rid if rid is not None else object())
        groups.setdefault(key, []).append(event)
    return list(groups.values())


def _refused(run: RunData, events: list[Event], seen: dict[str, int]) -> Finding:
    event = events[0]
    frame = Frame.from_event(event.data.get("frame"))
    name = frame.name if frame is not None and frame.name else "a compiled frame"
    location = (
        f"{frame.file}:{frame.line}"
        if frame is not None and frame.file and frame.line is not None
        else None
    )
    index = seen.get(name, 0)
    seen[name] = index + 1
    phase, rid, step = event.position
    guards = [g for g in event.data.get("guards") or [] if isinstance(g, str)]
    evidence = [
        f"{name} needed a recompile at {_where(event)}; the stance fail_on_recompile refused it "
        "with a RuntimeError (no compile ran, torch logged no guard failure)",
        "the guards that failed, as torch's error names them: "
        + ("; ".join(guards) if guards else "none named (the frame held no cache entry)"),
    ]
    later = [e.position[2] for e in events[1:]]
    if later:
        steps = ", ".join("?" if s is None else str(s) for s in later)
        evidence.append(
            f"refused again {len(later)} time(s) in {rid}, at step(s) {steps}: each call at "
            "that input raised, and torch compiled nothing"
        )
    evidence.extend(_then_eager(run, event))
    live = phase == "live" and rid is not None
    suffix = f":{index + 1}" if index else ""
    title = f"{name}: a recompile refused under fail_on_recompile at {_where(event)}"
    if later:
        title = (
            f"{name}: {len(events)} recompiles refused under fail_on_recompile, from "
            f"{_where(event)} on"
        )
    return Finding(
        id=f"{ANALYZER}:refused:{name}{suffix}",
        analyzer=ANALYZER,
        severity="error" if live else "warning",
        title=title,
        evidence=evidence,
        fix=(
            "warm up the input the failing guard names (its actual value above) before "
            "set_stance('fail_on_recompile'); until then such requests fail or run eagerly"
        ),
        location=location,
        run=run.label,
        data={
            "request_id": rid,
            "step": step,
            "phase": phase,
            "guards": guards,
            "refused": len(events),
        },
    )


def _stance_at(changes: list[Event], t: int, pid: int) -> str:
    """The process's stance at `t`, from its `stance` events (default before the first)."""
    stance = "default"
    for change in changes:
        if change.pid != pid or change.t > t:
            continue
        stance = str(change.data.get("stance") or "default")
    return stance


def _live_steps(run: RunData, pid: int) -> Iterator[tuple[str, Step]]:
    for request in run.requests:
        if request.pid == pid and request.phase == "live":
            for step in request.steps:
                yield request.request_id, step


def _then_eager(run: RunData, event: Event) -> list[str]:
    """What the program did after the refusal: the live steps that ran under force_eager from
    then on, against the steps that ran compiled, and the calls of each compiled frame the
    recorder counted under force_eager (a program may rerun one call, not a whole step)."""
    changes = run.of("stance")
    eager: list[tuple[str, Step]] = []
    compiled: list[float] = []
    for rid, step in _live_steps(run, event.pid):
        stance = _stance_at(changes, step.start_t, event.pid)
        if stance == FORCE_EAGER and step.start_t >= event.t:
            eager.append((rid, step))
        elif stance not in (FORCE_EAGER, EAGER_ON_RECOMPILE) and step.wall_s is not None:
            compiled.append(step.wall_s)
    checks = checks_since(run, stance_checks(run, FORCE_EAGER), event.pid, event.position, event.t)
    calls = stance_eager_calls(checks)
    if not eager and not calls:
        return ["no live step ran under force_eager after it (the request failed or ended)"]
    lines = []
    if eager:
        requests = sorted({rid for rid, _ in eager}, key=str)
        walls = [s.wall_s for _, s in eager if s.wall_s is not None]
        line = f"then {len(eager)} live step(s) ran eagerly under force_eager, in " + ", ".join(
            requests
        )
        if walls:
            line += f": median {_secs(statistics.median(walls))}"
            if compiled:
                line += (
                    f" a step against {_secs(statistics.median(compiled))} for the "
                    f"{len(compiled)} live step(s) that ran compiled"
                )
        lines.append(line)
    lines.extend(
        f"then {len(spots)} call(s) of {frame} ran eagerly under force_eager "
        f"({spots_text(spots)}), counted as they were made"
        for frame, spots in calls.items()
    )
    return lines


def _eager_on_recompile(run: RunData) -> list[Finding]:
    changes = run.of("stance")
    if not any(c.data.get("stance") == EAGER_ON_RECOMPILE for c in changes):
        return []
    under: dict[int, list[str]] = {}
    for pid in sorted({c.pid for c in changes}):
        for rid, step in _live_steps(run, pid):
            if _stance_at(changes, step.start_t, pid) == EAGER_ON_RECOMPILE:
                under.setdefault(pid, [])
                if rid not in under[pid]:
                    under[pid].append(rid)
    if not under:
        return []
    requests = [rid for rids in under.values() for rid in rids]
    checked = stance_checks(run, EAGER_ON_RECOMPILE)
    eager = stance_eager_calls(checked)
    evidence = ["live requests under eager_on_recompile: " + ", ".join(requests[:20])]
    if not checked:
        title = (
            f"{len(requests)} live request(s) ran under eager_on_recompile: a call that needed "
            "a recompile ran eagerly, silently"
        )
        evidence.append(
            "torch records nothing for such a call (no compile, no error, no guard failure), "
            "and diag checked no call (its compiled callables were not made by torch.compile): "
            "which of these calls fell back to eager is not known"
        )
    elif eager:
        total = sum(len(spots) for spots in eager.values())
        title = (
            f"{total} call(s) ran eagerly under eager_on_recompile, silently: no cache entry's "
            "guards passed and the stance skipped the recompile"
        )
        for frame, spots in eager.items():
            evidence.append(f"{frame}: {len(spots)} eager call(s): {spots_text(spots)}")
        evidence.append(
            "torch records nothing for such a call; diag checked each call under the stance "
            "against the frame's cache entries as Dynamo checks them"
        )
    else:
        title = (
            f"{len(requests)} live request(s) ran under eager_on_recompile; every call diag "
            "checked passed a cache entry and ran compiled"
        )
        evidence.append(
            f"{compiled_count(checked)} call(s) checked against "
            "their frame's cache entries: none fell back to eager"
        )
    return [
        Finding(
            id=f"{ANALYZER}:eager-on-recompile",
            analyzer=ANALYZER,
            severity="warning" if eager or not checked else "info",
            title=title,
            evidence=evidence,
            fix=(
                "record once under set_stance('fail_on_recompile'): each call that would "
                "fall back then raises with the guard torch names, and diag places it; then "
                "warm up what those calls send"
            ),
            run=run.label,
            data={
                "requests": requests,
                "eager_calls": {frame: len(spots) for frame, spots in eager.items()},
            },
        )
    ]
