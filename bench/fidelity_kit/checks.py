"""diag's claims against torch's own record, field by field.

A claim (docs/FINDINGS.md, "Claims") is checked against the oracle's record of the same run: a
field that disagrees makes the claim `contradicted` (with why), a claim whose every checkable
field agrees is `confirmed`, and one with nothing checkable is `unchecked` (with what could not
be checked). Planted causes (known by construction) decide a recompile's cause when torch's
record shows the plant among the failures of that recompile; otherwise the claim is held to
torch's record alone (the entry it names failed on the source it names).
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from .compare import (
    ClaimResult,
    Program,
    Verdict,
    break_reasons,
    clip,
    mentions,
    planted_keys,
    same_frame,
    same_reason,
    short_type,
    skipped_by_break,
)
from .records import CompileRecord, ProcessRecord
from .spec import ProgramSpec

# --- claims ----------------------------------------------------------------------------------


def check_claims(program: Program) -> list[ClaimResult]:
    results = []
    for finding in program.findings:
        for claim in finding.get("claims") or []:
            if not isinstance(claim, dict):
                continue
            verdict = check_claim(program, claim)
            results.append(
                ClaimResult(
                    program.spec.program_id,
                    str(finding.get("analyzer")),
                    str(finding.get("id")),
                    str(finding.get("severity")),
                    claim,
                    verdict,
                )
            )
    return results


def check_claim(program: Program, claim: dict[str, Any]) -> Verdict:
    verdict = Verdict()
    kind = claim.get("kind")
    process = program.process(claim.get("process"))
    if claim.get("process") is not None and process is None:
        verdict.check("process", False, f"no process {claim.get('process')} ran the program")
        return verdict.settle()
    if process is None and len(program.processes) == 1:
        process = program.processes[0]
    if process is None:
        verdict.check("process", None, "the claim names no process")
        return verdict.settle()
    if claim.get("rank") is not None:
        verdict.check("rank", claim.get("rank") == process.rank, f"pid is {process.role}")
    checker = _CHECKERS.get(str(kind))
    if checker is None:
        verdict.check("kind", None, f"the harness does not know claims of kind {kind!r}")
    else:
        checker(program, process, claim, verdict)
    return verdict.settle()


def _position(
    program: Program,
    process: ProcessRecord,
    claim: dict[str, Any],
    verdict: Verdict,
    phase: Any,
    request: Any,
    step: Any,
) -> None:
    """The claim's phase, request and step against where torch did it (the program's terms)."""
    if claim.get("phase") is not None:
        verdict.check("phase", claim["phase"] == phase, f"torch did it in {phase}")
    if process.pid not in program.aligned:
        if claim.get("request") is not None or claim.get("step") is not None:
            verdict.check("request", None, "diag's requests do not line up with the program's")
        return
    if claim.get("request") is not None:
        mine = program.request(process.pid, claim["request"])
        if mine is None:
            verdict.check("request", None, f"diag's {claim['request']} matches no program request")
        else:
            verdict.check(
                "request",
                mine == request,
                f"diag's {claim['request']} is the program's {mine}, torch did it in {request}",
            )
    if claim.get("step") is not None:
        verdict.check("step", claim["step"] == step, f"torch did it at step {step}")


def _frame(claim: dict[str, Any], code: str | None, verdict: Verdict) -> None:
    if claim.get("frame") is not None:
        verdict.check(
            "frame",
            same_frame(code, claim.get("frame"), claim.get("code")),
            f"torch compiled {code}",
        )


def _compile_of(
    process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> CompileRecord | None:
    compile_id = claim.get("compile_id")
    if compile_id is None:
        verdict.check("compile_id", None, "none given")
        return None
    found = process.compiles.get(str(compile_id))
    if found is None:
        verdict.check(
            "compile_id", False, f"torch started no compile {compile_id} in {process.role}"
        )
    return found


def _check_compile(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    found = _compile_of(process, claim, verdict)
    if found is None:
        return
    verdict.check(
        "compile_id",
        not found.is_recompile,
        f"{found.compile_id} was a recompile (entries {', '.join(found.entries_before)} existed)",
    )
    _frame(claim, found.code, verdict)
    _position(program, process, claim, verdict, found.phase, found.request, found.step)
    result = claim.get("result")
    if result is not None:
        failed = found.fail_type is not None
        verdict.check(
            "result", (result == "failed") == failed, f"torch's fail_type {found.fail_type}"
        )


def _check_recompile(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    found = _compile_of(process, claim, verdict)
    if found is None:
        return
    verdict.check("compile_id", found.is_recompile, f"{found.compile_id} was a first compile")
    _frame(claim, found.code, verdict)
    _position(program, process, claim, verdict, found.phase, found.request, found.step)
    cause = claim.get("cause")
    if isinstance(cause, dict) and found.is_recompile:
        _check_cause(program.spec, found, cause, verdict, process)


#: Plants whose cause is a shape the request brings: once an entry was compiled for it in that
#: request, a later recompile of the same frame there has another cause.
_SHAPE_PLANTS = {"new-shape", "unwarmed-shape"}


def _check_cause(
    spec: ProgramSpec,
    found: CompileRecord,
    cause: dict[str, Any],
    verdict: Verdict,
    process: ProcessRecord | None = None,
) -> None:
    """The entry that would have served the call, and the guard of it that failed."""
    entry = cause.get("entry")
    source = cause.get("source")
    said = f"{cause.get('guard_kind') or ''} {source or ''}".strip()
    if entry is not None:
        verdict.check(
            "cause.entry",
            str(entry) in found.entries_before,
            f"entry {entry} did not exist (entries {', '.join(found.entries_before)})",
        )
    reasons = {r.split(":", 1)[0].strip(): r for r in found.reasons}
    named = reasons.get(str(entry)) if entry is not None else None
    if source is not None:
        if entry is not None and named is not None:
            verdict.check(
                "cause.source",
                mentions(named, source),
                f"torch's reason for entry {entry} is {clip(named)!r}, not about {source!r}",
            )
        else:
            verdict.check(
                "cause.source",
                any(mentions(r, source) for r in found.reasons),
                f"no entry's reason is about {source!r}: {clip('; '.join(found.reasons))!r}",
            )
    planted = planted_keys(spec, "live-compile", found.request)
    if process is not None and _shape_served(process, found):
        planted = [t for t in planted if t.plant not in _SHAPE_PLANTS]
    shown = [t for t in planted if any(re.search(t.key or "", r, re.I) for r in found.reasons)]
    if not shown:
        verdict.check("cause (planted)", None, "no planted cause shows in torch's reasons")
        return
    if not cause.get("decided", entry is not None):
        verdict.check("cause (planted)", None, "diag left the cause undecided")
        return
    hits = any(re.search(t.key or "", said, re.I) for t in shown) or (
        named is not None and any(re.search(t.key or "", named, re.I) for t in shown)
    )
    verdict.check(
        "cause (planted)",
        hits,
        f"planted {'/'.join(sorted({t.plant for t in shown}))} shows in torch's reasons; diag "
        f"named {said or 'nothing'}" + (f" (entry {entry}: {clip(named)!r})" if named else ""),
    )


def _shape_served(process: ProcessRecord, found: CompileRecord) -> bool:
    """An entry of this frame was compiled earlier in the same request (for its new shape)."""
    return any(
        other.compile_id in found.entries_before
        and other.code == found.code
        and other.request == found.request
        for other in process.compiles.values()
    )


def _check_limit(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    frame = claim.get("frame")
    hits = [h for h in process.limits if same_frame(h.get("code"), frame, claim.get("code"))]
    if frame is None:
        hits = list(process.limits)
    verdict.check("frame", bool(hits), f"torch logged no recompile-limit hit for {frame}")
    if not hits:
        return
    first = hits[0]
    _position(
        program,
        process,
        claim,
        verdict,
        first.get("phase"),
        first.get("request"),
        first.get("step"),
    )
    limit = claim.get("limit")
    if isinstance(limit, dict):  # the limit the program set: {setting, value, default, cause}
        limit = limit.get("value")
    if limit is not None:
        match = re.search(r"\((\d+)\)", str(first.get("message")))
        verdict.check(
            "limit", match is not None and int(match.group(1)) == limit, "torch's limit differs"
        )
    compile_id = claim.get("compile_id")
    if compile_id is not None:
        failed = process.failed_metrics.get(str(compile_id), {})
        verdict.check(
            "compile_id",
            "recompile" in str(failed.get("fail_reason") or "").lower(),
            f"torch's compile {compile_id} is not a recompile-limit attempt",
        )


def _calls_of(process: ProcessRecord, claim: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c for c in process.calls if same_frame(c.get("code"), claim.get("frame"), claim.get("code"))
    ]


def _check_eager(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    rows = _calls_of(process, claim)
    if not rows:
        verdict.check("calls", None, f"the oracle does not watch {claim.get('frame')}'s calls")
        return
    eager = [r for r in rows if r.get("eager")]
    calls = claim.get("calls") or []
    for item in calls if isinstance(calls, list) else []:
        mine = program.request(process.pid, item.get("request"))
        step = item.get("step")
        here = [
            r for r in rows if r.get("request") == mine and (step is None or r.get("step") == step)
        ]
        if not here:
            verdict.check("calls", None, f"no watched call at {item}")
            continue
        ran = sum(int(r.get("eager") or 0) for r in here)
        compiled = sum(int(r.get("calls") or 0) - int(r.get("eager") or 0) for r in here)
        verdict.check(
            "calls",
            ran > 0,
            f"at {mine} step {step} torch ran {compiled} call(s) compiled and none eagerly",
        )
    count = claim.get("count")
    total = sum(int(r.get("eager") or 0) for r in rows)
    if count is not None:
        verdict.check("count", count == total, f"torch ran {total} call(s) eagerly")
    compiled = claim.get("compiled")
    if compiled is not None:
        least, most = _compiled_after_first_eager(rows)
        if least <= compiled <= most and least < most:
            verdict.check(
                "compiled",
                None,
                f"torch ran {least}-{most} call(s) compiled after it: the oracle's record does "
                "not say which calls of that step ran before it",
            )
        else:
            ran = str(least) if least == most else f"{least}-{most}"
            verdict.check(
                "compiled", least <= compiled <= most, f"torch ran {ran} call(s) compiled after it"
            )
    if not calls and count is None:
        verdict.check("eager", bool(eager), "torch ran every watched call of it compiled")


def _compiled(row: dict[str, Any]) -> int:
    return int(row.get("calls") or 0) - int(row.get("eager") or 0)


def _compiled_after_first_eager(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """The calls that ran compiled after the frame's first eager call (the limit's hit), the
    least and the most the oracle's per-step rows allow. Blocks sharing a code object share its
    limit: in the step of the hit, calls of other blocks may run compiled before it (one of
    them may even compile the entry that fills the cache). The oracle counts the step's calls
    after its first eager one; an older record does not, but a call that compiled a new entry
    ran before the hit (torch compiles nothing for the frame after it), and one served by an
    earlier entry may have run on either side."""
    first = next((i for i, r in enumerate(rows) if r.get("eager")), len(rows))
    if first == len(rows):
        return 0, 0
    later = sum(_compiled(r) for r in rows[first + 1 :])
    row = rows[first]
    if "compiled_after_eager" in row:
        exact = later + int(row["compiled_after_eager"] or 0)
        return exact, exact
    return later, later + _compiled(row) - int(row.get("compiled_new") or 0)


def _check_spike(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    mine = program.request(process.pid, claim.get("request"))
    request = process.request(mine)
    step = claim.get("step")
    if request is None or not isinstance(step, int) or step not in request.steps:
        verdict.check("step", None, "the claimed step is not one the program ran")
        return
    this = request.steps[step]
    others = [s.wall_s for i, s in request.steps.items() if i != step and s.wall_s is not None]
    if this.wall_s is None or not others:
        verdict.check("excess_ms", None, "the oracle has no steady steps to compare with")
        return
    excess = this.wall_s - statistics.median(others)
    claimed = claim.get("excess_ms")
    if isinstance(claimed, (int, float)):
        verdict.check(
            "excess_ms",
            excess * 1000 >= 0.5 * claimed,
            f"the program's own timing of that step is {excess * 1000:.0f} ms over its median",
        )
    cause = claim.get("cause") if isinstance(claim.get("cause"), dict) else {}
    kind = cause.get("kind")
    compiled = this.compile_s
    if kind == "compile":
        verdict.check("cause", compiled > 0, "torch compiled nothing in that step")
    elif kind in ("empty-cache",):
        before = [n for n in process.notes if n.get("kind") == "empty_cache"]
        verdict.check("cause", bool(before), "the program never called empty_cache")
    elif kind is not None and compiled > 0.5 * max(excess, 1e-9) and compiled > 0.05:
        verdict.check(
            "cause", False, f"torch compiled for {compiled:.2f} s in that step, diag said {kind}"
        )
    else:
        verdict.check("cause", None, f"the oracle cannot see {kind} on this device")


def _check_coverage(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    """A live shape warmup served (`covered`) or did not (`not-covered`, with the dims warmup
    never varied to the live value). A shape is the program's resolution or the latents'."""
    shape = claim.get("shape")
    if not isinstance(shape, list):
        verdict.check("shape", None, "no shape given")
        return
    served = [r for r in process.requests if shape in (r.shape, r.latents)]
    if not served:
        verdict.check("shape", False, f"the program served no request at {shape}")
        return
    warm = [r for r in process.requests if r.phase == "warmup"]
    covered = any(shape in (r.shape, r.latents) for r in warm)
    if claim.get("kind") == "covered":
        verdict.check("covered", covered, f"warmup never served {shape}")
        return
    verdict.check("not-covered", not covered, f"warmup served {shape}")
    dims = claim.get("dims")
    if not isinstance(dims, list) or not warm or covered:
        return
    as_latents = shape == served[0].latents
    for dim in dims:
        values = [(r.latents if as_latents else r.shape) or [] for r in warm]
        if not isinstance(dim, int) or not all(dim < len(v) for v in values) or dim >= len(shape):
            verdict.check(f"dims[{dim}]", None, "no such dimension")
            continue
        verdict.check(
            f"dims[{dim}]",
            all(v[dim] != shape[dim] for v in values),
            f"warmup served {shape[dim]} at dim {dim}",
        )


def _check_graph_break(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    """A break: the compile that hit it (or, without a compile id, a compile of the frame),
    torch's reason, the planted line, and whether torch gave up on the frame there."""
    reason = str(claim.get("reason") or "")
    compile_id = claim.get("compile_id")
    if compile_id is not None:
        found = process.compiles.get(str(compile_id))
        if found is None:
            verdict.check("compile_id", False, f"torch started no compile {compile_id}")
            return
        broken = [found] if break_reasons(found) else []
        if not broken:
            verdict.check("graph-break", False, f"torch counted no graph break in {compile_id}")
            return
        _frame(claim, found.code, verdict)
        _position(program, process, claim, verdict, found.phase, found.request, found.step)
        if claim.get("frame_skipped") is not None:
            skipped = skipped_by_break(found.metrics)
            verdict.check(
                "frame_skipped",
                bool(claim["frame_skipped"]) == skipped,
                f"torch {'gave up on' if skipped else 'kept'} the frame at that break",
            )
    else:
        broken = [c for c in process.compiles.values() if break_reasons(c)]
        if claim.get("frame") is not None:
            broken = [
                c for c in broken if same_frame(c.code, claim.get("frame"), claim.get("code"))
            ]
        if not broken:
            verdict.check("graph-break", False, "torch counted no graph break in that frame")
            return
    texts = [text for c in broken for text in break_reasons(c)]
    verdict.check(
        "reason",
        any(same_reason(reason, t) for t in texts) if reason else None,
        f"torch's reasons: {clip('; '.join(t.splitlines()[0] for t in texts))!r}",
    )
    location = claim.get("location")
    planted = [t for t in program.spec.truth if t.kind == "graph-break" and t.line is not None]
    planted = [t for t in planted if re.search(t.key or "", reason, re.I)]
    if location is None:
        verdict.check("location", None, "none given")
    elif planted:
        where = {f"{program.path.name}:{t.line}" for t in planted}
        verdict.check(
            "location",
            any(str(location).endswith(w) for w in where),
            f"the planted statement is at {', '.join(sorted(where))}",
        )
    else:
        verdict.check("location", None, "torch's counters hold no location for an unplanted break")


def _check_failure(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    compile_id = str(claim.get("compile_id"))
    found = process.compiles.get(compile_id)
    metrics = found.metrics if found is not None else process.failed_metrics.get(compile_id, {})
    if not metrics:
        verdict.check("compile_id", False, f"torch recorded no compile {compile_id}")
        return
    fail_type = metrics.get("fail_type")
    verdict.check("compile_id", bool(fail_type), f"torch's compile {compile_id} succeeded")
    if claim.get("fail_type") is not None:
        verdict.check(
            "fail_type",
            short_type(claim["fail_type"]) == short_type(fail_type),
            f"torch's fail_type is {fail_type}",
        )
    if claim.get("suppress_errors") is not None and "config_suppress_errors" in metrics:
        verdict.check(
            "suppress_errors",
            bool(claim["suppress_errors"]) == bool(metrics["config_suppress_errors"]),
            f"torch's config_suppress_errors was {metrics['config_suppress_errors']}",
        )
    if found is not None:
        _frame(claim, found.code, verdict)
        _position(program, process, claim, verdict, found.phase, found.request, found.step)


def _check_crash(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    crash = process.crash
    noted = next((n for n in process.notes if n.get("kind") == "crash"), None)
    if crash is None and noted is None and process.unwound is None:
        verdict.check("crash", False, f"{process.role} did not die of an exception")
        return
    kind = (
        (crash or {}).get("type")
        or (process.unwound or {}).get("type")
        or (noted or {}).get("fields", {}).get("type")
    )
    if claim.get("type") is not None:
        verdict.check(
            "type", short_type(claim["type"]) == short_type(kind), f"the program died of {kind}"
        )
    where = noted or process.unwound or crash or {}
    _position(
        program,
        process,
        claim,
        verdict,
        where.get("phase"),
        where.get("request"),
        where.get("step"),
    )
    inside = claim.get("inside")
    if isinstance(inside, list) and noted is not None:
        verdict.check(
            "inside",
            not ({"compiled_code", "compiling"} & set(inside)),
            "the planted raise is outside compiled code",
        )


def _check_no_warmup(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    spec = program.spec
    marked = spec.warmup != "none" and spec.marking != "none"  # bare passes --warmup-requests
    verdict.check(
        "no-warmup",
        not marked,
        f"the program marked its warmup ({spec.marking}: {len(spec.warmup_requests)} request(s))",
    )
    requests = claim.get("requests")
    if isinstance(requests, list):
        compiled = {c.request for c in process.compiles.values() if c.request}
        for item in requests:
            mine = program.request(process.pid, item)
            if mine is None:
                verdict.check("requests", None, f"diag's {item} matches no program request")
                continue
            verdict.check("requests", mine in compiled, f"{item} ({mine}) compiled nothing")


def _check_empty_cache(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    notes = [n for n in process.notes if n.get("kind") == "empty_cache"]
    calls = claim.get("calls")
    if not isinstance(calls, list) or not calls:
        verdict.check("calls", bool(notes), "the program never called empty_cache")
        return
    for item in calls:
        mine = program.request(process.pid, item.get("request"))
        if mine is None:
            verdict.check("calls", None, f"diag's {item.get('request')} matches no program request")
            continue
        verdict.check(
            "calls", any(n.get("request") == mine for n in notes), f"no empty_cache in {mine}"
        )
    if claim.get("count") is not None:
        live = [n for n in notes if n.get("phase") == "live"]
        verdict.check(
            "count", claim["count"] == len(live), f"the program called it {len(live)} time(s) live"
        )


def _check_unseeable(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    verdict.check(str(claim.get("kind")), None, "the oracle records no such event on a CPU")


def _check_traced_into(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    ids = claim.get("compile_ids") or []
    for compile_id in ids:
        verdict.check(
            "compile_ids", compile_id in process.compiles, f"torch started no compile {compile_id}"
        )
    breaks = claim.get("graph_breaks")
    if isinstance(breaks, int) and ids:
        seen = sum(
            sum(process.compiles[c].graph_breaks.values()) for c in ids if c in process.compiles
        )
        verdict.check(
            "graph_breaks", breaks <= seen, f"torch counted {seen} break(s) in those compiles"
        )


_CHECKERS = {
    "compile": _check_compile,
    "recompile": _check_recompile,
    "recompile-limit": _check_limit,
    "eager-calls": _check_eager,
    "spike": _check_spike,
    "covered": _check_coverage,
    "not-covered": _check_coverage,
    "graph-break": _check_graph_break,
    "compile-failure": _check_failure,
    "crash": _check_crash,
    "no-warmup": _check_no_warmup,
    "empty-cache": _check_empty_cache,
    "gc-collect": _check_unseeable,
    "cudagraph-record": _check_unseeable,
    "cudagraph-skip": _check_unseeable,
    "traced-into": _check_traced_into,
}
