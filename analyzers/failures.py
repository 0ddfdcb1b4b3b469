"""compile-failure: a compile that failed, and a frame that silently runs eagerly because of it.

Why: a failed compile either kills the program (`BackendCompilerFailed`, `Unsupported` under
`fullgraph=True`, a `ConstraintViolationError` on a dim marked dynamic) or, with
`torch._dynamo.config.suppress_errors = True`, is swallowed: Dynamo logs one warning and skips
that frame's code from then on, so every later call of it runs eagerly (even calls an entry
compiled before the failure would serve) and the service is simply as slow as eager, with
nothing else to show for it. A program may also catch the error itself (try/except around the
call) and run the call some other way: the frame's entries keep serving what they cover, and
each call at the failing input compiles and fails again. One finding per failing frame and
cause, always an error, with torch's whole reason, the user line it names, the place (request,
step, thread), the guard torch named when it was a recompile, what ran eagerly afterwards, and
the fix for the known causes. A crash that is this failure's exception is folded in here as
evidence (the crash analyzer leaves it alone).

Results `recompile_limit` are the recompile-limit analyzer's, and a failed compile inside a
failed `magi_compile` is magi-compile's (with the declared dims and magi's fix): neither is
repeated here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diag.evidence.causes import cause_line, recompile_cause, recompile_claim
from diag.evidence.claims import claim
from diag.evidence.fallback import (
    EagerExtent,
    checks_since,
    spots_text,
    stance_checks,
    stance_eager_calls,
    suppressed_extent,
)
from diag.evidence.frames import label as frame_label
from diag.evidence.request_names import request_name
from diag.findings.model import Finding
from diag.trace.numerals import parse_int
from diag.trace.run import Compile, Event, RunData, Trace

from .common import format_seconds, id_suffix, process_lines
from .magi import magi_owned_failure

ANALYZER = "compile-failure"

_BACKEND = re.compile(r"backend='(?P<backend>[^']*)' raised:\s*\n(?P<inner>[^\n]+)")
_DIMS = re.compile(r"Constraints violated \((?P<dims>.*?)\)!")
_MARKED = re.compile(
    r"You marked (?P<dim>\S+) as dynamic but your code specialized it to be a constant "
    r"\((?P<value>[^)]*)\)"
)
_STACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>[^\n]+)')
_USER_STACK = re.compile(r"(?:User stack:|from user code:)(?P<stack>.*)", re.S)
_HINT = re.compile(r"^\s*Hint:\s*(?P<text>.+)$", re.M)
_OOM = re.compile(r"out of memory|OutOfMemoryError|CUDA error: out of memory", re.I)
_AUTOTUNE = re.compile(r"autotun|benchmark", re.I)
# A crash that is a failed compile's own exception (the short type names of torch's).
_COMPILE_CRASH_TYPES = (
    "BackendCompilerFailed",
    "Unsupported",
    "ConstraintViolationError",
    "InternalTorchDynamoError",
    "TorchRuntimeError",
    "UserError",
    "FailOnRecompileLimitHit",
    "RecompileError",
    "OutOfMemoryError",
)


@dataclass(frozen=True)
class UserLine:
    file: str
    line: int
    code: str | None

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


def analyze(trace: Trace) -> list[Finding]:
    imported = trace.manifest.get("format") == "torch-trace"
    findings: list[Finding] = []
    for run in trace.subject_runs:
        groups: dict[tuple[int, str, str, str], list[Compile]] = {}
        for item in run.compiles:
            if item.result != "failed" or magi_owned_failure(run, item):
                continue  # a failed magi_compile has magi-compile's finding, with magi's fix
            frame = item.frame.name if item.frame is not None else "<unknown frame>"
            key = (item.pid, frame, item.fail_type or "?", _headline(item.fail_reason))
            groups.setdefault(key, []).append(item)
        numbered: dict[tuple[int, str], int] = {}
        for (pid, frame, _, _), items in groups.items():
            index = numbered.get((pid, frame), 0)
            numbered[(pid, frame)] = index + 1
            findings.append(_finding(trace, run, frame, items, index, imported))
    return findings


def compile_crash(run: RunData, crash: Event) -> Compile | None:
    """The failed compile whose exception this crash is, if any (shared with the crash
    analyzer, which then stays quiet about it)."""
    short = str(crash.data.get("type") or "").rsplit(".", 1)[-1]
    if short not in _COMPILE_CRASH_TYPES:
        return None
    # Same process, before the crash, the same exception type, and not swallowed by
    # suppress_errors (that one never reached the program).
    matching = [
        c
        for c in run.compiles
        if c.pid == crash.pid
        and c.result == "failed"
        and c.t <= crash.t
        and c.fail_type == short
        and c.suppress_errors is not True
    ]
    return matching[-1] if matching else None


def _finding(
    trace: Trace, run: RunData, frame: str, items: list[Compile], index: int, imported: bool
) -> Finding:
    first = items[0]
    reason = first.fail_reason or "no reason recorded"
    fail_type = first.fail_type or "unknown"
    user = user_line(reason) or _located(first.fail_user_frame)
    where = _where(run, first)
    crash = _crash_of(run, first)
    kind, why, fix = _explain(fail_type, reason, user)
    title = f"{frame} failed to compile: {why}"
    evidence = [
        f"compile {first.compile_id} of {frame} failed at {where}: {fail_type}",
        "reason: " + _indent(reason),
    ]
    if user is not None:
        evidence.append(f"user line: {user.location}" + (f": {user.code}" if user.code else ""))
    elif first.fail_user_frame:
        evidence.append(f"user frame: {first.fail_user_frame}")
    if len(items) > 1:
        ids = ", ".join(c.compile_id for c in items[:8])
        places = "; ".join(_where(run, c) for c in items[:4])
        evidence.append(f"{len(items)} compiles of {frame} failed the same way ({ids}: {places})")
    cause = recompile_cause(run, first)
    if cause is not None:
        # Why Dynamo was compiling at all: torch's failing guard, as live-compile words it.
        evidence.append(f"a {'live ' if first.live else ''}recompile: {cause_line(cause)}")
    label = frame_label(run, first.frame) if first.frame is not None else frame
    claims = [_failure_claim(run, c, label) for c in items]
    if cause is not None:
        claims.append(recompile_claim(run, first, label))
    eager = _eager_fallback(run, first, crash, imported, items)
    if eager is not None:
        lines, eager_claim = eager
        evidence.extend(lines)
        if eager_claim is not None:
            position = claim("eager-calls", run, first.pid, frame=first.frame, label=label)
            claims.append(position | eager_claim)
        # Failures of other frames of the same name in this group: each of those frames runs
        # eagerly too, by its own entries (one claim each; the evidence speaks of the first).
        for other in _first_of_other_frames(items):
            more = _eager_fallback(run, other, _crash_of(run, other), imported)
            if more is not None and more[1] is not None:
                other_label = frame_label(run, other.frame) if other.frame is not None else frame
                position = claim(
                    "eager-calls", run, other.pid, frame=other.frame, label=other_label
                )
                claims.append(position | more[1])
        if first.suppress_errors:
            kind = "eager-fallback"
            entries = _entries_before(run, first)
            title = (
                f"{frame} never compiled and runs eagerly for the rest of the run ({why})"
                if not entries
                else f"{frame} runs eagerly for the rest of the run, its {entries} compiled "
                f"entr{'y' if entries == 1 else 'ies'} unused: a compile failed ({why})"
            )
            fix = (
                f"{fix} torch._dynamo.config.suppress_errors = True hid this: set it to False "
                "while fixing it, so the failure raises where it happens."
            )
    if crash is not None:
        evidence.append(
            f"the program died of it: uncaught {crash.data.get('type')}" + _exit_text(trace, run)
        )
        claims.append(
            claim(
                "crash",
                run,
                crash.pid,
                phase=first.phase,
                request=first.request_id,
                step=first.step,
                type=crash.data.get("type"),
                inside=[str(i) for i in crash.data.get("inside") or [] if isinstance(i, str)],
            )
        )
    evidence.extend(process_lines(run, first.pid))
    location = user.location if user is not None else first.fail_user_frame
    if location is None and first.frame is not None:
        location = first.frame.location
    return Finding(
        id=f"{ANALYZER}:{kind}:{frame}"
        + (f":{index + 1}" if index else "")
        + id_suffix(run, first.pid),
        analyzer=ANALYZER,
        severity="error",
        title=title,
        evidence=evidence,
        fix=fix,
        location=location,
        run=run.label,
        data={
            "frame": frame,
            "kind": kind,
            "fail_type": fail_type,
            "fail_reason": reason,
            "compile_ids": [c.compile_id for c in items],
            "user_line": user.location if user is not None else first.fail_user_frame,
            "suppress_errors": first.suppress_errors,
            "crashed": crash is not None,
            "phase": first.phase,
            "request_id": first.request_id,
            "step": first.step,
        },
        claims=claims,
    )


def _failure_claim(run: RunData, item: Compile, label: str) -> dict[str, object]:
    return claim(
        "compile-failure",
        run,
        item.pid,
        frame=item.frame,
        label=label,
        phase=item.phase if item.phase != "unknown" else None,
        request=item.request_id,
        step=item.step,
        compile_id=item.compile_id,
        fail_type=item.fail_type,
        suppress_errors=item.suppress_errors,
    )


def _entries_before(run: RunData, item: Compile) -> int:
    """Cache entries the frame held when this compile failed: torch's cache_size, else the
    frame's earlier successful compiles in the process."""
    if item.cache_size is not None:
        return item.cache_size
    return sum(
        1
        for c in run.compiles
        if c.pid == item.pid and c.frame == item.frame and c.t < item.t and c.result == "ok"
    )


def _explain(fail_type: str, reason: str, user: UserLine | None) -> tuple[str, str, str]:
    """(kind, cause, fix) for the known causes; the cause completes "F failed to compile: "."""
    at = f" at {user.location}" if user is not None else ""
    if _OOM.search(reason) or fail_type == "OutOfMemoryError":
        during = "autotuning" if _AUTOTUNE.search(reason) else "compiling"
        return (
            "oom",
            f"out of GPU memory while {during}",
            "Compiling (and autotuning, which benchmarks candidate kernels with buffers of its "
            "own) needs memory beyond the steady state: compile it during warmup before caches "
            "and pools fill, leave headroom (a smaller warmup batch, weights offloaded while "
            "compiling), or compile that region without max-autotune (mode='default').",
        )
    if fail_type == "BackendCompilerFailed":
        match = _BACKEND.search(reason)
        backend = match.group("backend") if match else "the backend"
        inner = match.group("inner").strip() if match else _headline(reason)
        return (
            "backend",
            f"backend {backend!r} raised {inner}",
            f"The backend ({backend}) raised while compiling{at}: fix the backend or the "
            "op it rejects (the whole reason is above; TORCHDYNAMO_VERBOSE=1 prints the backend's "
            "stack), or compile this frame with another backend (backend='aot_eager' tells a "
            "backend bug from a tracing one).",
        )
    if fail_type == "ConstraintViolationError":
        dims = _marked_dims(reason)
        named = ", ".join(d for d, _ in dims) or "a dim"
        values = ", ".join(v for _, v in dims if v)
        return (
            "constraint",
            f"{named} was marked dynamic, but the code"
            + (f" at {user.location}" if user is not None else "")
            + " specialises it"
            + (f" to {values}" if values else ""),
            f"The dim marked dynamic (torch._dynamo.mark_dynamic) is turned into a constant{at}: "
            "let the size arrive as the tensor's own dimension (x.shape[i]) instead of reading "
            "it from Python state (self.xxx), int() or .item(); or, if it really is fixed, drop "
            "mark_dynamic for it (maybe_mark_dynamic does not fail).",
        )
    if fail_type == "Unsupported":
        hints = [m.group("text").strip() for m in _HINT.finditer(reason)]
        return (
            "unsupported",
            f"Dynamo cannot trace it ({_headline(reason)}){at}",
            f"Dynamo could not trace the code{at} and could not split the graph there "
            "(fullgraph=True makes every graph break an error): rewrite that line so Dynamo "
            "can trace it, move it out of the compiled region, or drop fullgraph=True to let "
            "Dynamo break the graph (graph-breaks then reports the break)."
            + (f" torch's hint: {hints[0]}" if hints else ""),
        )
    return (
        "failed",
        f"{fail_type}: {_headline(reason)}",
        f"Read torch's reason above{at}; TORCHDYNAMO_VERBOSE=1 prints the internal stack, and "
        "backend='aot_eager' tells a tracing problem from a backend one.",
    )


def _first_of_other_frames(items: list[Compile]) -> list[Compile]:
    """The first failed compile of each frame in `items` other than the first item's frame."""
    seen = {(items[0].pid, items[0].frame)}
    found = []
    for item in items[1:]:
        key = (item.pid, item.frame)
        if item.frame is not None and key not in seen:
            seen.add(key)
            found.append(item)
    return found


def _eager_fallback(
    run: RunData,
    item: Compile,
    crash: Event | None,
    imported: bool,
    items: list[Compile] | None = None,
) -> tuple[list[str], dict[str, object] | None] | None:
    """Evidence of what ran after the failure, with its eager-calls claim (the fields beyond
    the position), or None if the program died of the exception.

    After a suppressed failure Dynamo skips the frame's code: every later call runs eagerly,
    even one an entry compiled before would serve (the entries stay in the cache, unused; seen
    with a counting backend on torch 2.6 and 2.13). The recorder counts those calls. An error
    that reached the program and did not kill it was caught there (`items`: the failures of the
    group, each one a call that raised and ran no compiled code)."""
    frame = item.frame.name if item.frame is not None else "the frame"
    if crash is not None:
        return None
    if item.suppress_errors is None:
        if not imported:
            return None
        return [
            "a TORCH_TRACE log does not say whether the error reached the program or was "
            f"suppressed (torch._dynamo.config.suppress_errors), in which case every later "
            f"call of {frame} ran eagerly"
        ], None
    if item.suppress_errors is False:
        caught = _caught(run, item, items or [item])
        return (caught, None) if caught is not None else None
    after = [s for s in run.steps if s.pid == item.pid and s.start_t >= item.t]
    entries = _entries_before(run, item)
    extent = suppressed_extent(run, item)
    lines = [
        f"suppress_errors was on: Dynamo swallowed the error, ran the call eagerly and skips "
        f"{frame}'s code from then on: every later call of it runs eagerly, with no further "
        "compile or message"
        + (
            f"; the {entries} entr{'y' if entries == 1 else 'ies'} compiled before the failure "
            "stay in the cache, unused"
            if entries
            else ""
        )
    ]
    if extent.known:
        lines.append(_counted_line(frame, extent))
        fields: dict[str, object] = {
            "calls": _calls(extent),
            "count": extent.eager_calls,
            "extent": extent.how,
        }
    else:
        lines.append(
            f"diag cannot count the eager calls (it did not wrap the callable whose code is "
            f"{frame}); the call that failed to compile ran eagerly"
        )
        failed_call = {"request": item.request_id, "step": item.step}
        spots = [failed_call] + [{"request": s.request_id, "step": s.index} for s in after]
        fields = {"calls": list({(c["request"], c["step"]): c for c in spots}.values()),
                  "count": None, "extent": extent.how}  # fmt: skip
    if after:
        requests = sorted({s.request_id for s in after})
        lines.append(
            f"{len(after)} step(s) of {len(requests)} request(s) ran after the failure "
            f"({', '.join(requests[:6])}); every call of {frame} in them ran eagerly"
        )
    elif run.steps:
        lines.append("no step ran after the failure")
    else:
        lines.append("no steps were identified, so diag cannot say how much of the run it cost")
    last = _last_seen(run, item.pid)
    if last > item.t:
        lines.append(
            f"the process ran on for {format_seconds((last - item.t) / 1e9)} after the failure "
            "(to its last recorded event)"
        )
    return lines, fields


def _counted_line(frame: str, extent: EagerExtent) -> str:
    spots = sorted(extent.eager, key=_spot_order)
    return (
        f"{extent.eager_calls} call(s) of {frame} ran eagerly from the failure on "
        f"({spots_text(spots)}), counted as they were made"
    )


def _calls(extent: EagerExtent) -> list[dict[str, object]]:
    return [
        {"request": rid, "step": step} for (_, rid, step) in sorted(extent.eager, key=_spot_order)
    ]


def _spot_order(spot: tuple[str, str | None, int | None]) -> tuple[str, int]:
    return (str(spot[1]), spot[2] if spot[2] is not None else -1)


def _caught(run: RunData, item: Compile, items: list[Compile]) -> list[str] | None:
    """The error reached the program and did not kill it: the program caught it. None when
    nothing shows the program went on (no step or request of the process ended after it)."""
    went_on = any(s.pid == item.pid and (s.end_t or 0) > item.t for s in run.steps) or any(
        r.pid == item.pid and (r.end_t or 0) > item.t for r in run.requests
    )
    if not went_on:
        return None
    frame = item.frame.name if item.frame is not None else "the frame"
    mine = [c for c in items if c.pid == item.pid and c.frame == item.frame]
    spots = [(c.phase, c.request_id, c.step) for c in mine]
    line = (
        f"the error reached the program (suppress_errors off) and did not stop it: the program "
        f"caught it; {len(mine)} call(s) of {frame} raised it and ran no compiled code "
        f"({spots_text(sorted(spots, key=_spot_order))}); what the program ran instead is its own"
    )
    lines = [line]
    requests = {c.request_id for c in mine if c.request_id is not None}
    for request in run.requests:
        if request.pid == item.pid and request.request_id in requests:
            ended = "ended" if request.end_t is not None else "was still open at the end"
            lines.append(
                f"{request_name(run, request.pid, request.request_id)} went on and {ended} "
                f"after {request.step_count} step(s)"
            )
    spot = (item.phase, item.request_id, item.step)
    checks = checks_since(run, stance_checks(run, "force_eager"), item.pid, spot, item.t)
    for name, forced in stance_eager_calls(checks).items():
        lines.append(
            f"then {len(forced)} call(s) of {name} ran under set_stance('force_eager') "
            f"({spots_text(sorted(forced, key=_spot_order))}), eagerly, counted as they were made"
        )
    lines.append(
        f"torch keeps {frame}'s entries: later calls they serve run compiled, and each call at "
        "the failing input compiles again and fails again"
    )
    return lines


def _last_seen(run: RunData, pid: int) -> int:
    """The time of the process's last event diag kept (steps, compiles, other events)."""
    times = [e.t for e in run.events if e.pid == pid]
    times += [c.t for c in run.compiles if c.pid == pid]
    times += [s.end_t or s.start_t for s in run.steps if s.pid == pid]
    return max(times, default=0)


def _crash_of(run: RunData, item: Compile) -> Event | None:
    for crash in run.of("crash"):
        if crash.pid == item.pid and compile_crash(run, crash) is item:
            return crash
    return None


def user_line(reason: str) -> UserLine | None:
    """The innermost frame of the user stack torch appends to a reason ("User stack:" of a
    ConstraintViolationError, "from user code:" of an Unsupported), with its source line."""
    section = _USER_STACK.search(reason)
    if section is None:
        return None
    frames = list(_STACK_FRAME.finditer(section.group("stack")))
    if not frames:
        return None
    last = frames[-1]
    rest = section.group("stack")[last.end() :].lstrip("\n").splitlines()
    code = rest[0].strip() if rest and rest[0].strip() else None
    number = parse_int(last.group("line"))
    return UserLine(last.group("file"), number, code) if number is not None else None


def _located(where: str | None) -> UserLine | None:
    if not where or ":" not in where:
        return None
    file, _, line = where.rpartition(":")
    number = parse_int(line)
    return UserLine(file, number, None) if number is not None else None


def _marked_dims(reason: str) -> list[tuple[str, str | None]]:
    marked = [(m.group("dim"), m.group("value")) for m in _MARKED.finditer(reason)]
    if marked:
        return marked
    header = _DIMS.search(reason)
    if header is None:
        return []
    return [(d.strip(), None) for d in header.group("dims").split(", ") if d.strip()]


def _headline(reason: str | None) -> str:
    if not reason or not reason.strip():
        return "no reason recorded"
    return reason.strip().splitlines()[0][:300]


def _indent(reason: str) -> str:
    lines = reason.strip().splitlines()
    shown = "\n          ".join(line.rstrip() for line in lines[:40])
    return shown + ("\n          ..." if len(lines) > 40 else "")


def _where(run: RunData, item: Compile) -> str:
    if item.phase == "unknown":
        return "a point the trace has no step information for"
    if item.request_id is None:
        return f"{item.phase}, outside a request"
    name = request_name(run, item.pid, item.request_id)
    return f"{item.phase} {name}" + (f" step {item.step}" if item.step is not None else "")


def _exit_text(trace: Trace, run: RunData) -> str:
    for entry in trace.manifest.get("runs") or []:
        if isinstance(entry, dict) and entry.get("label") == run.label:
            code = entry.get("exit_code")
            if isinstance(code, int):
                return f" (the process exited with code {code})"
    return ""
