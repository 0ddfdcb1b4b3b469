"""recompile-limit: a frame that hit torch's recompile limit, and which calls then ran eagerly.

Why: when a frame holds `torch._dynamo.config.recompile_limit` cache entries (8 by default) and
a call matches none of them, Dynamo stops compiling it: such calls run the frame eagerly, with
no further compile and no message beyond one log line. Calls that still pass an entry's guards
run that entry compiled, so the service gets slower only on the calls that miss (on the H200
the reference block went from 25-37 ms compiled steps to 44.5 ms), which no error surfaces.
Each hit is an error here: the frame, where it happened (phase, request, step), the guards that
were failing (diag.evidence.causes), the cache entries the frame holds, and which calls ran eagerly
afterwards (diag.evidence.fallback: read off the recorder's guard checks, or said to be unknown).
"""

from __future__ import annotations

import statistics

from diag.evidence.causes import (
    RecompileCause,
    cause_line,
    cause_short,
    guard_condition,
    recompile_cause,
)
from diag.evidence.change import change_fix, is_zero_one
from diag.evidence.claims import claim
from diag.evidence.fallback import EagerExtent, eager_extent, spots_text
from diag.evidence.frames import label as frame_label
from diag.evidence.settings import Setting, limit_while, settings_at
from diag.findings.advice import HOW_TO_MARK
from diag.findings.model import Finding
from diag.trace.run import Compile, Event, Frame, RunData, Step, Trace

from .common import format_seconds as _secs
from .common import id_suffix as _id_suffix
from .common import process_lines as _tag_lines
from .common import (
    static_shapes,
    static_undo,
    static_verb,
    steps_known,
    warmup_known,
)
from .recompiles import (
    RepeatedDimension,
    dimension_index,
    repeated_dimension_fix,
    repeated_dimensions,
    static_size_fix,
)

ANALYZER = "recompile-limit"

_SIZE_KINDS = ("tensor-size", "tensor-stride")


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        # Numbered per process and frame: each rank's first hit keeps the plain id.
        seen: dict[tuple[int, str], int] = {}
        for event in run.of("recompile_limit"):
            frame = Frame.from_event(event.data.get("frame"))
            name = frame_label(run, frame)
            index = seen.get((event.pid, name), 0)
            seen[(event.pid, name)] = index + 1
            repeated = [
                found
                for found in repeated_dimensions(run)
                if found.pid == event.pid and _same_frame_opt(found.frame, frame, name)
            ]
            findings.append(_finding(run, event, frame, name, index, repeated))
    return findings


def _same_frame_opt(found: Frame | None, frame: Frame | None, name: str) -> bool:
    return found is not None and _same_frame(found, frame, name)


def _finding(
    run: RunData,
    event: Event,
    frame: Frame | None,
    name: str,
    index: int,
    repeated: list[RepeatedDimension],
) -> Finding:
    phase, rid, step = event.position
    known = phase != "unknown" and (
        rid is not None or steps_known(run, event.pid) or warmup_known(run, event.pid)
    )
    where = _where(phase, rid, step) if known else "a point with no step information"
    epoch = event.data.get("epoch")
    compile_id = event.data.get("compile_id")
    reason = event.data.get("reason") or "no reason recorded"
    limited = _limit_compile(run, event)
    guards = limited.guards if limited is not None else []
    cause = recompile_cause(run, limited) if limited is not None else None
    extent = eager_extent(run, event)
    entries_at_hit = _entries_at(run, frame, name, event.t)
    entries_exit = _entries_exit(run, frame, name)
    before = [
        c
        for c in run.compiles
        if c.pid == event.pid
        and (c.frame.name if c.frame else None) == name
        and c.epoch == epoch
        and c.t < event.t
        and c.result != "recompile_limit"
    ]
    after = _steps_after(run, event)
    fallback = _fallback(run, event, name) if not extent.known else None

    evidence = [
        f"{name} hit the recompile limit at {where} (compile {compile_id}): {reason}",
    ]
    if cause is not None:
        evidence.append(f"at the hit, {cause_line(cause)}")
        if len(guards) > 1:
            sources = sorted({g.source or guard_condition(g) for g in guards})
            evidence.append(
                f"every one of its {len(guards)} cache entries rejected the call; their failing "
                f"guards read {', '.join(sources)}"
            )
    else:
        evidence.append("no failing-guard list was recorded for the limited compile")
    # The dimension that never generalised is the churn behind this hit: evidence, not a
    # second finding (the recompiles analyzer leaves frames at the limit to this one).
    evidence.extend(found.sentence() for found in repeated)
    if before:
        warm = sum(1 for c in before if c.phase == "warmup")
        live = sum(1 for c in before if c.live)
        seconds = sum(c.duration_s or 0.0 for c in before)
        split = (
            "no step information"
            if all(c.phase == "unknown" for c in before) or not known
            else f"{warm} in warmup, {live} live"
        )
        evidence.append(
            f"{name} compiled {len(before)} time(s) before the hit ({split}; "
            f"{_secs(seconds)} of compile)"
        )
    held = entries_at_hit if entries_at_hit is not None else entries_exit
    if held is not None:
        evidence.append(
            f"{name} holds {held} cache entries"
            + (f" ({entries_exit} at exit)" if entries_exit not in (None, held) else "")
            + f": the recompile limit ({_limit_text(run, event)}) is reached"
        )
    evidence.extend(_extent_lines(name, extent, fallback))
    if not known:
        evidence.append(
            "diag could not identify steps or requests here, so it cannot say which requests "
            f"ran eagerly; {HOW_TO_MARK}"
        )
    elif after and not extent.known:
        times = [s.wall_s for s in after if s.wall_s is not None]
        median = f"; median step {_secs(statistics.median(times))}" if times else ""
        evidence.append(
            f"{len(after)} live step(s) ran from the hit on ({_steps_list(after)}){median}; "
            f"which of their calls of {name} ran eagerly was not recorded"
        )
    elif not after:
        evidence.append("no live step ran after the hit")
    evidence.extend(_tag_lines(run, event.pid))

    churn = _churn_sources(cause)
    because = (
        cause_short(cause)
        if cause is not None and cause.new_module
        else f"failing guards on {churn}"
        if churn
        else ""
    )
    limit = settings_at(run, event.pid, event.t).get("recompile_limit")
    lowered = limit if limit is not None and limit.changed else None
    static = static_shapes(run, event.pid, frame, event.t)
    refused = _refused_by_lowered_limit(limit, held, cause, repeated, static is not None)
    # A limit lowered only around serving (`config.patch`): warmup compiled under a higher one.
    warm_limit = limit_while(run, [c for c in before if c.phase == "warmup"])
    if refused is None or warm_limit is None or warm_limit.value <= refused.value:
        warm_limit = None
    if refused is not None:
        # The program's own limit is the cause: torch's default would have compiled this call.
        evidence.insert(
            1,
            f"under torch's default limit ({refused.default}) this call would have compiled "
            f"entry {refused.value + 1} of {name}; the program's limit ({refused.value}) refused "
            "it, so the calls no entry serves run eagerly",
        )
        if warm_limit is not None:
            evidence.insert(
                2,
                f"warmup compiled {name} under a limit of {warm_limit.value}; the program "
                f"lowered it to {refused.value} afterwards (torch checks the limit only when it "
                "compiles: entries compiled before still serve the calls that match them)",
            )
        # The change's first clause: the evidence line above the fix says the rest.
        short = cause_short(cause).split(": ", 1)[0]
        title = (
            f"{name} hit the recompile limit at {where} because {refused.phrase()}: its entry "
            f"{refused.value + 1} ({short}) was refused; {_title_extent(extent)}"
        )
        then = _fix(run, event.pid, frame, cause, raising="", static=static)
        fix = (
            _lowered_after_warmup_fix(refused, warm_limit, name, then)
            if warm_limit is not None
            else _lowered_fix(refused, name, then)
        )
    else:
        title = (
            f"{name} hit the recompile limit at {where}: {_title_extent(extent)}"
            + (f" ({because})" if because else "")
            + (f"; {lowered.phrase()}" if lowered is not None else "")
        )
        fix = (
            f"{_capital(lowered.phrase())}: the frame stops compiling after {lowered.value} "
            "entries. "
            if lowered is not None
            else ""
        ) + (
            repeated_dimension_fix(repeated[0], static, at_limit=True)
            if repeated
            else _fix(run, event.pid, frame, cause, static=static, held=held)
        )
    return Finding(
        id=f"{ANALYZER}:{name}" + (f":{index + 1}" if index else "") + _id_suffix(run, event.pid),
        analyzer=ANALYZER,
        severity="error",
        title=title,
        evidence=evidence,
        fix=fix,
        location=frame.location if frame is not None else None,
        run=run.label,
        data={
            "frame": name,
            "phase": phase,
            "request_id": rid,
            "step": step,
            "compile_id": compile_id,
            "reason": reason,
            "guards": [
                {"kind": g.kind, "source": g.source, "expected": g.expected, "actual": g.actual}
                for g in guards
            ],
            "cache_entries": held,
            "compiles_before": len(before),
            "eager_fallback": fallback.position if fallback is not None else None,
            "eager_calls": extent.eager_calls if extent.known else None,
            "compiled_calls": extent.compiled_calls if extent.known else None,
            "live_steps_after": len(after),
            "recompile_limit": limit.value if limit is not None else None,
            "lowered_limit_refused": refused is not None,
            "warmup_recompile_limit": warm_limit.value if warm_limit is not None else None,
            # warmup-plan reads which finding explains a compile by its compile ids.
            "compile_ids": [compile_id] if compile_id is not None else [],
        },
        claims=[
            claim(
                "recompile-limit",
                run,
                event.pid,
                frame=frame,
                label=name,
                phase=phase,
                request=rid,
                step=step,
                compile_id=compile_id,
                # Only a limit the program set: torch's own is in torch's log line.
                **(
                    {
                        "limit": {
                            "setting": "recompile_limit",
                            "value": limit.value,
                            "default": limit.default,
                            "cause": "lowered-setting" if refused is not None else None,
                        }
                    }
                    if limit is not None
                    else {}
                ),
            ),
            extent.claim(run, event.pid, name),
        ],
    )


def _title_extent(extent: EagerExtent) -> str:
    if not extent.known:
        return "calls that match none of its entries run eagerly (which ones was not recorded)"
    eager = sorted(extent.eager, key=_spot_order)
    text = f"{extent.eager_calls} call(s) ran eagerly ({spots_text(eager, 3)})"
    if extent.compiled_calls:
        text += f", {extent.compiled_calls} still ran compiled entries"
    return text


def _extent_lines(name: str, extent: EagerExtent, fallback: Event | None) -> list[str]:
    if extent.known:
        eager = sorted(extent.eager, key=_spot_order)
        lines = [
            f"after the hit, {extent.eager_calls} call(s) of {name} matched none of its cache "
            f"entries and ran eagerly: {spots_text(eager)} (the call that hit the limit "
            "included; diag checked each later call's guards as Dynamo does)"
        ]
        if extent.compiled_calls:
            compiled = sorted(extent.compiled, key=_spot_order)
            lines.append(
                f"{extent.compiled_calls} call(s) passed an existing entry's guards and ran "
                f"compiled: {spots_text(compiled)}"
            )
        else:
            lines.append("no later call matched an existing entry: every call ran eagerly")
        if extent.unchecked:
            lines.append(f"{extent.unchecked} call(s) were not checked (diag's budget)")
        return lines
    if fallback is not None:
        f_phase, f_rid, f_step = fallback.position
        return [
            f"diag saw a call of {name} after the hit at {_where(f_phase, f_rid, f_step)} "
            "(an older recording's eager_fallback marker, which did not check the call's "
            "guards): only calls that match none of its entries run eagerly"
        ]
    return [
        f"after the hit, calls of {name} that match none of its cache entries run eagerly and "
        "calls that pass an entry's guards still run it compiled; this recording did not check "
        "which calls did"
    ]


def _spot_order(spot: tuple[str, str | None, int | None]) -> tuple[str, int]:
    return (spot[1] or "", spot[2] if spot[2] is not None else -1)


def _churn_sources(cause: RecompileCause | None) -> str:
    if cause is None:
        return ""
    sources = list(dict.fromkeys(g.source or g.kind for g in cause.candidates))
    return ", ".join(f"`{s}`" for s in sources[:3])


def _limit_compile(run: RunData, event: Event) -> Compile | None:
    candidates = [
        c
        for c in run.compiles
        if c.pid == event.pid
        and c.compile_id == event.data.get("compile_id")
        and c.epoch == event.data.get("epoch")
    ]
    limited = [c for c in candidates if c.result == "recompile_limit"]
    found = limited or candidates
    return found[-1] if found else None


def _same_frame(a: Frame, frame: Frame | None, name: str) -> bool:
    return a == frame if frame is not None else a.name == name


def _entries_at(run: RunData, frame: Frame | None, name: str, t: int) -> int | None:
    """Entries the frame held at the hit: the last count recorded before it.

    With several processes (ranks), the largest count any of them had recorded by then.
    """
    latest = {
        pid: n
        for when, pid, _, _, f, n in run.cache_history
        if when <= t and _same_frame(f, frame, name)
    }
    return max(latest.values()) if latest else None


def _entries_exit(run: RunData, frame: Frame | None, name: str) -> int | None:
    counts = [n for f, n in run.cache_entries().items() if _same_frame(f, frame, name)]
    return max(counts) if counts else None


def _steps_after(run: RunData, event: Event) -> list[Step]:
    """Live steps of the process that were running at the hit or started after it."""
    return [
        s
        for s in run.steps
        if s.pid == event.pid and s.phase == "live" and (s.end_t is None or s.end_t >= event.t)
    ]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _limit_text(run: RunData, event: Event) -> str:
    """The limit as the program had it: `the program lowered torch._dynamo.config.
    recompile_limit to 2 (torch's default: 8)`, or torch's default when it kept it."""
    setting = settings_at(run, event.pid, event.t).get("recompile_limit")
    if setting is None:
        return (
            "torch._dynamo.config.recompile_limit, 8 by default; the program's own value was "
            "not recorded"
        )
    return setting.phrase()


def _fallback(run: RunData, event: Event, name: str) -> Event | None:
    for item in run.of("eager_fallback"):
        frame = Frame.from_event(item.data.get("frame"))
        if item.pid == event.pid and item.t >= event.t and frame is not None:
            if frame.name == name:
                return item
    return None


_RAISING = (
    "Raising torch._dynamo.config.recompile_limit only hides it: every new value still "
    "compiles, and the cache keeps growing."
)


def _refused_by_lowered_limit(
    limit: Setting | None,
    held: int | None,
    cause: RecompileCause | None,
    repeated: list[RepeatedDimension],
    static: bool,
) -> Setting | None:
    """The program's lowered limit, when it is what refused this compile: torch's default would
    have compiled it (the frame held fewer entries than the default), and the call needed an
    entry a warmup request can give (a size 0/1, another variant, a module), not one per value
    of a Python number, of a size the program keeps static (`dynamic=False`, automatic dynamic
    off) or of a dimension that never generalised: there raising only postpones the hit."""
    if limit is None or not limit.changed or cause is None or cause.guard is None or repeated:
        return None
    if static and cause.guard.kind in _SIZE_KINDS and not is_zero_one(cause):
        return None
    value, default = limit.value, limit.default
    if not (isinstance(value, int) and isinstance(default, int) and value < default):
        return None
    if (held if held is not None else value) >= default:
        return None
    if _scalar_arguments(cause) or cause.guard.kind in _PER_VALUE_KINDS:
        return None
    return limit


#: Guards whose every new value is a new entry: a higher limit only postpones the hit.
_PER_VALUE_KINDS = ("python-value", "container-length", "container-keys", "object-identity")


def _lowered_fix(limit: Setting, name: str, then: str) -> str:
    """Raise the lowered limit so the call compiles, then move that compile into warmup (tried
    on tests/integration/test_lowered_limit.py's program: no eager call, no live compile)."""
    need = limit.value + 1
    return (
        f"{_capital(limit.phrase())}, and {name} needs at least {need} entries: the "
        f"{limit.value} it holds and one for this call. Raise the limit to {need} or more (or "
        f"drop the setting: torch's default is {limit.default}) so the call compiles instead of "
        "running eagerly; warmup alone cannot help, its compiles count against the same limit. "
        f"Then move that compile out of live traffic: {then}"
    ).rstrip()


def _lowered_after_warmup_fix(limit: Setting, warm: Setting, name: str, then: str) -> str:
    """The limit was lowered after warmup (a `config.patch` around serving): warming the call
    up while the limit is still the higher one keeps it compiled, since torch checks the limit
    only when it compiles (tried on the patch-form program in tests/integration/
    test_patched_limit.py: no compile refused, none live)."""
    return (
        f"{_capital(limit.phrase())} after warmup, which compiled {name} under a limit of "
        f"{warm.value}: entries compiled then still serve the calls that match them; only a new "
        f"compile is refused once {name} holds {limit.value}. {then.strip()} Run that warmup "
        f"before the limit is lowered; or raise the limit the program sets for serving to "
        f"{limit.value + 1} or more, so the call compiles live instead of running eagerly."
    )


def _fix(
    run: RunData,
    pid: int,
    frame: Frame | None,
    cause: RecompileCause | None,
    raising: str = _RAISING,
    static: str | None = None,
    held: int | None = None,
) -> str:
    guard = cause.guard if cause is not None else None
    if cause is not None and cause.new_module:
        return (
            "Every cache entry was compiled for another module: the modules that run this code "
            "share one code object and its recompile limit, and each needs an entry of its own. "
            "Raise torch._dynamo.config.recompile_limit to the number of entries they need "
            "together (one per module structure and per value of what else they guard)."
        )
    scalars = _scalar_arguments(cause)
    if scalars and cause is not None:
        names = ", ".join(f"`{s}`" for s in scalars)
        kind = "float" if any("." in str(g.expected) for g in cause.candidates) else "int"
        if static is not None:
            return (
                f"{names}: Python {kind} argument(s) whose every new value is a new entry, "
                f"because the frame {static_verb(static)} {static}. Drop "
                f"{static_undo(static)} (under the default, the second value makes a scalar "
                "argument dynamic), or pass the values as 0-d tensors. " + raising
            )
        return (
            f"{names}: Python {kind} argument(s) that the frame specialises on per value. Pass "
            "them as 0-d tensors, or check why they are not made dynamic (a branch on the value, "
            f"torch._dynamo.config.specialize_float, mark_static). {raising}"
        )
    changed = change_fix(cause, frame.name if frame else "the frame", False) if cause else None
    if changed is not None:
        # A size Dynamo specialises (0 or 1), a dispatch-key change, a module int attribute:
        # the fix tried for that change, never mark_dynamic for a 0/1 size.
        return f"{changed} {raising}"
    if guard is not None and guard.kind in _SIZE_KINDS and static is not None:
        # Automatic dynamic is off: a second size warmed up makes nothing dynamic.
        source = guard.source or "an input"
        index = dimension_index(guard) or "DIM"
        return static_size_fix(
            frame.name if frame is not None else "the frame",
            static,
            source,
            index,
            f"dim {index} of `{source}`" if index != "DIM" else f"`{source}`",
            held + 1 if held is not None else None,
            at_limit=True,
        )
    if guard is not None and guard.kind in _SIZE_KINDS:
        return (
            f"The frame keeps recompiling on the size of {guard.source or 'an input'}: warm up "
            "two values of that dimension so automatic dynamic marks it, or mark it dynamic "
            f"(torch._dynamo.mark_dynamic). {raising}"
        )
    churn = f" ({_churn_sources(cause)})" if cause is not None else ""
    return (
        f"Find the guard that keeps failing{churn}, see guard-churn: pass the value in as a "
        f"tensor or resolve it before the compiled frame, so one entry serves every call. "
        f"{raising}"
    )


def _scalar_arguments(cause: RecompileCause | None) -> list[str]:
    """The frame's own arguments (plain names) whose value guards failed with numbers expected:
    Python scalars passed in, one entry per value."""
    if cause is None:
        return []
    names: list[str] = []
    for guard in cause.candidates:
        if guard.kind != "python-value" or not guard.source or not guard.source.isidentifier():
            return []
        try:
            float(str(guard.expected))
        except ValueError:
            return []
        names.append(guard.source)
    return list(dict.fromkeys(names))


def _where(phase: str, rid: str | None, step: int | None) -> str:
    if phase == "unknown":
        return "a point the trace has no step information for"
    if rid is None:
        return f"{phase}, outside a request"
    return f"{phase} {rid}" + (f" step {step}" if step is not None else "")


def _steps_list(steps: list[Step]) -> str:
    by_request: dict[str, list[int]] = {}
    for step in steps:
        by_request.setdefault(step.request_id, []).append(step.index)
    parts = []
    for rid, indexes in by_request.items():
        lo, hi = min(indexes), max(indexes)
        contiguous = sorted(indexes) == list(range(lo, hi + 1))
        if len(indexes) == 1:
            parts.append(f"{rid} step {lo}")
        elif contiguous:
            parts.append(f"{rid} steps {lo}-{hi}")
        else:
            parts.append(f"{rid} steps {', '.join(str(i) for i in sorted(indexes))}")
    return "; ".join(parts)
