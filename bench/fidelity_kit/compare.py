"""diag's claims against torch's own record, and the problems torch recorded that no claim names.

A claim (docs/FINDINGS.md, "Claims") is checked field by field against the oracle's record of
the same run: a field that disagrees makes the claim `contradicted` (with why), a claim whose
every checkable field agrees is `confirmed`, and one with nothing checkable is `unchecked`
(with what could not be checked). Planted causes (known by construction) decide a recompile's
cause when torch's record shows the plant among the failures of that recompile; otherwise the
claim is held to torch's record alone (the entry it names failed on the source it names).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .records import CompileRecord, DiagRequest, ProcessRecord, code_name, resume_parent
from .spec import ProgramSpec, Truth

CONFIRMED, CONTRADICTED, UNCHECKED = "confirmed", "contradicted", "unchecked"
#: Claim kinds of docs/FINDINGS.md and the ones this harness added (empty-cache, ...).
CLAIM_KINDS = (
    "compile",
    "recompile",
    "recompile-limit",
    "eager-calls",
    "spike",
    "covered",
    "not-covered",
    "graph-break",
    "compile-failure",
    "crash",
    "no-warmup",
    "empty-cache",
    "gc-collect",
    "cudagraph-record",
    "cudagraph-skip",
    "traced-into",
)
#: Problem kinds the oracle sees, and the analyzers expected to claim them.
PROBLEM_OWNERS = {
    "live-compile": ("live-compile",),
    "recompile-limit": ("recompile-limit",),
    "eager-calls": ("recompile-limit", "compile-failure"),
    "compile-failure": ("compile-failure",),
    "graph-break": ("graph-breaks",),
    "crash": ("crash", "compile-failure"),
    "empty-cache": ("warmup-hygiene",),
    "no-warmup": ("live-compile",),
    "compile-spike": ("step0-spike",),
    "frame-skipped": ("graph-breaks",),
}
_IGNORED_TOKENS = {"L", "G", "self", "__main__", "__import___main__", "tensor"}
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class Verdict:
    status: str = CONFIRMED
    why: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    def check(self, name: str, ok: bool | None, why: str = "") -> None:
        """Record one field: True agrees, False contradicts, None cannot be checked."""
        if ok is None:
            self.unchecked.append(name + (f" ({why})" if why else ""))
        elif ok:
            self.checked.append(name)
        else:
            self.checked.append(name)
            self.why.append(f"{name}: {why}" if why else name)

    def settle(self) -> Verdict:
        if self.why:
            self.status = CONTRADICTED
        elif not self.checked:
            self.status = UNCHECKED
        else:
            self.status = CONFIRMED
        return self


@dataclass
class ClaimResult:
    program: str
    analyzer: str
    finding: str
    severity: str
    claim: dict[str, Any]
    verdict: Verdict


@dataclass
class Problem:
    """Something torch's record shows that a finding should claim."""

    program: str
    kind: str
    role: str
    where: str
    detail: str
    planted: list[str] = field(default_factory=list)
    claimed_by: list[str] = field(default_factory=list)


@dataclass
class Program:
    """One recorded run, as the comparison needs it."""

    spec: ProgramSpec
    path: Path  # the program file
    processes: list[ProcessRecord]
    diag_requests: dict[int, list[DiagRequest]]
    findings: list[dict[str, Any]]
    aliases: dict[int, dict[str, str]] = field(default_factory=dict)  # pid -> diag id -> oracle id

    def __post_init__(self) -> None:
        for process in self.processes:
            self.aliases[process.pid] = align(self.diag_requests.get(process.pid, []), process)

    def process(self, pid: Any) -> ProcessRecord | None:
        return next((p for p in self.processes if p.pid == pid), None)

    def request(self, pid: int, diag_id: Any) -> str | None:
        if not isinstance(diag_id, str):
            return None
        return self.aliases.get(pid, {}).get(diag_id)


def align(diag: list[DiagRequest], process: ProcessRecord) -> dict[str, str]:
    """diag's request ids -> the program's: the same id where diag kept the program's (diag.api
    passes them), else by order within the process."""
    ours = [r.request_id for r in process.requests]
    mapping: dict[str, str] = {}
    for index, request in enumerate(diag):
        if request.request_id in ours:
            mapping[request.request_id] = request.request_id
        elif index < len(ours):
            mapping[request.request_id] = ours[index]
    return mapping


def alignment(program: Program) -> list[str]:
    """How diag's requests and steps differ from the program's (empty: they line up)."""
    notes = []
    for process in program.processes:
        diag = program.diag_requests.get(process.pid, [])
        ours = process.requests
        if len(diag) != len(ours):
            notes.append(
                f"{process.role}: diag saw {len(diag)} request(s), the program ran {len(ours)}"
            )
            continue
        for mine, theirs in zip(ours, diag, strict=True):
            if theirs.steps != len(mine.steps):
                notes.append(
                    f"{process.role}: request {mine.request_id} ran {len(mine.steps)} step(s), "
                    f"diag's {theirs.request_id} has {theirs.steps}"
                )
            if theirs.phase != mine.phase and program.spec.marking != "none":
                notes.append(
                    f"{process.role}: request {mine.request_id} is {mine.phase}, diag's "
                    f"{theirs.request_id} is {theirs.phase}"
                )
    return notes


# --- matching helpers -------------------------------------------------------------------------


def tokens(text: str | None) -> set[str]:
    return {t for t in _IDENT.findall(text or "") if t not in _IGNORED_TOKENS}


def mentions(reason: str | None, source: str | None) -> bool:
    """Whether torch's reason text is about `source` (every identifier of it appears)."""
    wanted = tokens(source)
    return bool(wanted) and wanted <= tokens(reason)


def same_frame(code: str | None, frame: Any, location: Any) -> bool:
    """Whether the oracle's code key (`name@/path/file.py:line`) is the claimed frame: the name
    (a label's part before `@`) and, when given, the file (a path suffix) and first line."""
    if code is None or not isinstance(frame, str):
        return False
    if code_name(code) != frame.split("@", 1)[0]:
        return False
    if isinstance(location, str) and ":" in location:
        file, _, line = location.rpartition(":")
        path, _, first = code.split("@", 1)[1].rpartition(":")
        if line.isdigit() and first.isdigit() and int(line) != int(first):
            return False
        if not path.endswith(file.lstrip("./")) and not file.endswith(Path(path).name):
            return False
    return True


def _short(kind: Any) -> str:
    return str(kind or "").rsplit(".", 1)[-1]


def _keys(spec: ProgramSpec, kind: str, request: str | None) -> list[Truth]:
    return [
        t
        for t in spec.truth
        if t.kind == kind and (not t.requests or request in t.requests) and t.key
    ]


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
    if claim.get("request") is not None:
        mine = program.request(process.pid, claim["request"])
        if mine is None:
            verdict.check("request", None, f"diag's {claim['request']} matches no program request")
        else:
            verdict.check(
                "request", mine == request, f"diag's {claim['request']} is the program's {mine}, "
                f"torch did it in {request}",
            )  # fmt: skip
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
        "compile_id", not found.is_recompile,
        f"{found.compile_id} was a recompile (entries {', '.join(found.entries_before)} existed)",
    )  # fmt: skip
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
        _check_cause(program.spec, found, cause, verdict)


def _check_cause(
    spec: ProgramSpec, found: CompileRecord, cause: dict[str, Any], verdict: Verdict
) -> None:
    """The entry that would have served the call, and the guard of it that failed."""
    entry = cause.get("entry")
    source = cause.get("source")
    said = f"{cause.get('guard_kind') or ''} {source or ''}".strip()
    if entry is not None:
        verdict.check(
            "cause.entry", str(entry) in found.entries_before,
            f"entry {entry} did not exist (entries {', '.join(found.entries_before)})",
        )  # fmt: skip
    reasons = {r.split(":", 1)[0].strip(): r for r in found.reasons}
    named = reasons.get(str(entry)) if entry is not None else None
    if source is not None:
        if entry is not None and named is not None:
            verdict.check(
                "cause.source", mentions(named, source),
                f"torch's reason for entry {entry} is {_clip(named)!r}, not about {source!r}",
            )  # fmt: skip
        else:
            verdict.check(
                "cause.source", any(mentions(r, source) for r in found.reasons),
                f"no entry's reason is about {source!r}: {_clip('; '.join(found.reasons))!r}",
            )  # fmt: skip
    planted = _keys(spec, "live-compile", found.request)
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
        "cause (planted)", hits,
        f"planted {'/'.join(sorted({t.plant for t in shown}))} shows in torch's reasons; diag "
        f"named {said or 'nothing'}" + (f" (entry {entry}: {_clip(named)!r})" if named else ""),
    )  # fmt: skip


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
    if limit is not None:
        match = re.search(r"\((\d+)\)", str(first.get("message")))
        verdict.check(
            "limit", match is not None and int(match.group(1)) == limit, "torch's limit differs"
        )
    compile_id = claim.get("compile_id")
    if compile_id is not None:
        failed = process.failed_metrics.get(str(compile_id), {})
        verdict.check(
            "compile_id", "recompile" in str(failed.get("fail_reason") or "").lower(),
            f"torch's compile {compile_id} is not a recompile-limit attempt",
        )  # fmt: skip


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
            "calls", ran > 0,
            f"at {mine} step {step} torch ran {compiled} call(s) compiled and none eagerly",
        )  # fmt: skip
    count = claim.get("count")
    total = sum(int(r.get("eager") or 0) for r in rows)
    if count is not None:
        verdict.check("count", count == total, f"torch ran {total} call(s) eagerly")
    compiled = claim.get("compiled")
    if compiled is not None:
        after = _after_first_eager(rows)
        ran = sum(int(r.get("calls") or 0) - int(r.get("eager") or 0) for r in after)
        verdict.check("compiled", compiled == ran, f"torch ran {ran} call(s) compiled after it")
    if not calls and count is None:
        verdict.check("eager", bool(eager), "torch ran every watched call of it compiled")


def _after_first_eager(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The call rows from the first one with an eager call on (in the order they ran)."""
    first = next((i for i, r in enumerate(rows) if r.get("eager")), len(rows))
    return rows[first:]


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
            "excess_ms", excess * 1000 >= 0.5 * claimed,
            f"the program's own timing of that step is {excess * 1000:.0f} ms over its median",
        )  # fmt: skip
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
            f"dims[{dim}]", all(v[dim] != shape[dim] for v in values),
            f"warmup served {shape[dim]} at dim {dim}",
        )  # fmt: skip


def _check_graph_break(
    program: Program, process: ProcessRecord, claim: dict[str, Any], verdict: Verdict
) -> None:
    reason = str(claim.get("reason") or "")
    broken = [c for c in process.compiles.values() if c.graph_breaks]
    if claim.get("frame") is not None:
        broken = [
            c for c in broken if same_frame(c.code, claim.get("frame"), claim.get("code"))
        ] or [c for c in broken if code_name(c.code) == str(claim.get("frame")).split("@", 1)[0]]
    if not broken:
        verdict.check("graph-break", False, "torch counted no graph break in that frame")
        return
    texts = [k for c in broken for k in c.graph_breaks]
    verdict.check(
        "reason", any(_same_reason(reason, t) for t in texts) if reason else None,
        f"torch's reasons: {_clip('; '.join(t.splitlines()[0] for t in texts))!r}",
    )  # fmt: skip
    location = claim.get("location")
    planted = [t for t in program.spec.truth if t.kind == "graph-break" and t.line is not None]
    planted = [t for t in planted if re.search(t.key or "", reason, re.I)]
    if location is None:
        verdict.check("location", None, "none given")
    elif planted:
        where = {f"{program.path.name}:{t.line}" for t in planted}
        verdict.check(
            "location", any(str(location).endswith(w) for w in where),
            f"the planted statement is at {', '.join(sorted(where))}",
        )  # fmt: skip
    else:
        verdict.check("location", None, "torch's counters hold no location for an unplanted break")
    if claim.get("request") is not None or claim.get("step") is not None:
        mine = program.request(process.pid, claim.get("request"))
        at = [
            c
            for c in broken
            if c.request == mine and (claim.get("step") is None or c.step == claim.get("step"))
        ]
        verdict.check(
            "request", bool(at), f"no compile that broke ran at {mine} step {claim.get('step')}"
        )


def _same_reason(claimed: str, torch_reason: str) -> bool:
    """diag quotes a line of torch's reason: the first meaningful lines agree."""
    first = [line.strip() for line in torch_reason.splitlines() if line.strip()]
    text = claimed.strip()
    return bool(text) and any(text in line or line in text for line in first[:3])


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
            _short(claim["fail_type"]) == _short(fail_type),
            f"torch's fail_type is {fail_type}",
        )
    if claim.get("suppress_errors") is not None and "config_suppress_errors" in metrics:
        verdict.check(
            "suppress_errors",
            bool(claim["suppress_errors"]) == bool(metrics["config_suppress_errors"]),
            f"torch's config_suppress_errors was {metrics['config_suppress_errors']}",
        )  # fmt: skip
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
        verdict.check("type", _short(claim["type"]) == _short(kind), f"the program died of {kind}")
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
        "no-warmup", not marked,
        f"the program marked its warmup ({spec.marking}: {len(spec.warmup_requests)} request(s))",
    )  # fmt: skip
    requests = claim.get("requests")
    if isinstance(requests, list):
        compiled = {c.request for c in process.compiles.values() if c.request}
        for item in requests:
            mine = program.request(process.pid, item)
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


def _clip(text: str | None, size: int = 160) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= size else flat[: size - 3] + "..."


# --- problems torch recorded, and whether a claim names them ---------------------------------


Claims = list[tuple[dict[str, Any], dict[str, Any]]]  # (finding, claim)


def problems(program: Program) -> list[Problem]:
    """What the oracle saw that a finding should claim, each with the plants that explain it
    and the findings whose claims name it."""
    claims: Claims = [
        (f, c) for f in program.findings for c in f.get("claims") or [] if isinstance(c, dict)
    ]
    found: list[Problem] = []
    for process in program.processes:
        found += _live_compiles(program, process, claims)
        found += _limits(program, process, claims)
        found += _failures_and_eager(program, process, claims)
        found += _graph_breaks(program, process, claims)
        found += _crash(program, process, claims)
        found += _empty_cache(program, process, claims)
        found += _no_warmup(program, process, claims)
    return found


def _claimed(
    claims: Claims, process: ProcessRecord, kinds: tuple[str, ...], test: Any
) -> list[str]:
    return [
        str(f.get("id"))
        for f, c in claims
        if c.get("kind") in kinds and c.get("process") in (process.pid, None) and test(c)
    ]


def _live_compiles(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    """Every compile in a live request (by the program's own phases), and the step-0 spike a
    compile makes; a resume function's compile is claimed by a claim on its parent frame."""
    spec = program.spec
    inverse = {v: k for k, v in program.aliases.get(process.pid, {}).items()}
    found: list[Problem] = []
    spiked: set[tuple[str | None, int | None]] = set()
    for item in process.compiles.values():
        if item.phase != "live" or item.request is None:
            continue
        planted = [
            t.plant
            for t in _keys(spec, "live-compile", item.request)
            if any(re.search(t.key or "", r, re.I) for r in item.reasons)
        ]
        names = {item.name, resume_parent(item.name) or item.name}
        claimed = _claimed(
            claims, process, ("compile", "recompile"),
            lambda c, item=item, names=names: str(c.get("compile_id")) == item.compile_id or (
                c.get("compile_id") is None
                and str(c.get("frame") or "").split("@", 1)[0] in names
                and inverse.get(item.request) == c.get("request")
            ),
        )  # fmt: skip
        kind = "recompile" if item.is_recompile else "first compile"
        detail = f"{kind} {item.compile_id} of {item.code}: " + _clip(
            "; ".join(item.reasons) or "no entry existed", 240
        )
        where = f"{item.request} step {item.step}"
        found.append(
            Problem(spec.program_id, "live-compile", process.role, where, detail, planted, claimed)
        )
        request = process.request(item.request)
        if request is None or item.step not in request.steps or (item.request, item.step) in spiked:
            continue
        step = request.steps[item.step]
        others = [s.wall_s for i, s in request.steps.items() if i != item.step and s.wall_s]
        if (
            step.wall_s
            and others
            and step.compile_s > 0.05
            and step.wall_s > 2 * statistics.median(others)
        ):
            spiked.add((item.request, item.step))
            claimed = _claimed(
                claims, process, ("spike",),
                lambda c, item=item: program.request(process.pid, c.get("request")) == item.request
                and c.get("step") == item.step,
            )  # fmt: skip
            detail = (
                f"step took {step.wall_s:.2f} s against {statistics.median(others):.3f} s, "
                f"{step.compile_s:.2f} s compiling"
            )
            found.append(
                Problem(
                    spec.program_id, "compile-spike", process.role, where, detail, planted, claimed
                )
            )
    return found


def _limits(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    found = []
    for hit in process.limits:
        claimed = _claimed(
            claims, process, ("recompile-limit",),
            lambda c, hit=hit: same_frame(hit.get("code"), c.get("frame"), c.get("code")),
        )  # fmt: skip
        planted = [t.plant for t in program.spec.truth if t.kind == "recompile-limit"]
        where = f"{hit.get('request')} step {hit.get('step')}"
        found.append(Problem(
            program.spec.program_id, "recompile-limit", process.role, where,
            f"{hit.get('code')} hit the limit", planted, claimed,
        ))  # fmt: skip
    return found


def _skipped_by_break(metrics: dict[str, Any]) -> bool:
    """A frame Dynamo gave up on because of a graph break it could not resume from (fail_type
    Unsupported, fullgraph off): the break is the problem, not a failed compile."""
    reason = str(metrics.get("fail_reason") or "").lower()
    return metrics.get("fail_type") == "Unsupported" and "graph break" in reason


def _is_limit(metrics: dict[str, Any]) -> bool:
    reason = str(metrics.get("fail_reason") or "").lower()
    return "recompile_limit" in reason or "recompile limit" in reason


def _failures_and_eager(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    """Compiles that failed, and live calls that ran eagerly, by why: a recompile-limit hit or
    a failure (eager-calls), or a frame Dynamo skipped after a graph break (frame-skipped)."""
    spec = program.spec
    found: list[Problem] = []
    metrics = {c.compile_id: (c.code, c.metrics) for c in process.compiles.values() if c.fail_type}
    metrics.update({k: (_metric_code(v), v) for k, v in process.failed_metrics.items()})
    skipped: set[str] = set()
    failed: set[str] = set()
    for compile_id, (code, values) in metrics.items():
        if _is_limit(values):
            continue
        if _skipped_by_break(values):
            skipped.add(str(code))
            continue
        failed.add(str(code))
        claimed = _claimed(
            claims, process, ("compile-failure",),
            lambda c, compile_id=compile_id: str(c.get("compile_id")) == compile_id,
        )  # fmt: skip
        planted = [
            t.plant for t in spec.truth
            if t.kind == "compile-failure"
            and re.search(t.key or "", str(values.get("fail_type")), re.I)
        ]  # fmt: skip
        detail = f"{values.get('co_name')}: {values.get('fail_type')}: " + _clip(
            str(values.get("fail_reason")), 160
        )
        found.append(
            Problem(
                spec.program_id,
                "compile-failure",
                process.role,
                compile_id,
                detail,
                planted,
                claimed,
            )
        )
    limited = {str(h.get("code")) for h in process.limits}
    eager: dict[str, list[dict[str, Any]]] = {}
    for row in process.calls:
        if row.get("eager") and row.get("phase") == "live":
            eager.setdefault(str(row.get("code")), []).append(row)
    for code, rows in eager.items():
        spots = ", ".join(f"{r.get('request')}/{r.get('step')}" for r in rows[:8])
        total = sum(int(r.get("eager") or 0) for r in rows)
        if code in limited or code in failed:
            claimed = _claimed(
                claims, process, ("eager-calls",),
                lambda c, code=code: same_frame(code, c.get("frame"), c.get("code")),
            )  # fmt: skip
            planted = [t.plant for t in spec.truth if t.kind == "eager-calls"]
            kind, why = "eager-calls", "after a recompile-limit hit or a failed compile"
        else:
            claimed = _claimed(
                claims, process, ("graph-break",),
                lambda c, code=code: same_frame(code, c.get("frame"), c.get("code")),
            )  # fmt: skip
            planted = [t.plant for t in spec.truth if t.kind == "graph-break"]
            kind = "frame-skipped"
            why = (
                "Dynamo skipped the frame after a graph break"
                if code in skipped
                else "no entry served them and nothing was compiled"
            )
        found.append(Problem(
            spec.program_id, kind, process.role, spots,
            f"{total} live call(s) of {code} ran eagerly: {why}", planted, claimed,
        ))  # fmt: skip
    return found


def _metric_code(values: dict[str, Any]) -> str:
    return f"{values.get('co_name')}@{values.get('co_filename')}:{values.get('co_firstlineno')}"


def _graph_breaks(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    """One problem per distinct reason torch counted in the process."""
    reasons: dict[str, list[CompileRecord]] = {}
    for item in process.compiles.values():
        for text in item.graph_breaks:
            reasons.setdefault(text.splitlines()[0][:200], []).append(item)
    found = []
    for text, items in reasons.items():
        claimed = _claimed(
            claims, process, ("graph-break",),
            lambda c, text=text: _same_reason(str(c.get("reason") or ""), text),
        )  # fmt: skip
        planted = [
            t.plant for t in program.spec.truth
            if t.kind == "graph-break" and re.search(t.key or "", text, re.I)
        ]  # fmt: skip
        where = ", ".join(sorted({i.compile_id for i in items})[:6])
        found.append(
            Problem(
                program.spec.program_id, "graph-break", process.role, where, text, planted, claimed
            )
        )
    return found


def _crash(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    noted = next((n for n in process.notes if n.get("kind") == "crash"), None)
    crashed = process.crash or noted
    if crashed is None:
        return []
    kind = crashed.get("type") or (crashed.get("fields") or {}).get("type")
    claimed = _claimed(
        claims, process, ("crash", "compile-failure"),
        lambda c: c.get("kind") == "compile-failure" or _short(c.get("type")) == _short(kind),
    )  # fmt: skip
    planted = [t.plant for t in program.spec.truth if t.kind == "crash"]
    where = noted or process.unwound or crashed
    return [Problem(
        program.spec.program_id, "crash", process.role,
        f"{where.get('request')} step {where.get('step')}", f"died of {kind}", planted, claimed,
    )]  # fmt: skip


def _empty_cache(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    notes = [
        n for n in process.notes if n.get("kind") == "empty_cache" and n.get("phase") == "live"
    ]
    if not notes:
        return []
    claimed = _claimed(claims, process, ("empty-cache",), lambda c: True)
    where = ", ".join(str(n.get("request")) for n in notes)
    return [Problem(
        program.spec.program_id, "empty-cache", process.role, where,
        f"{len(notes)} empty_cache call(s) in live requests", ["empty-cache"], claimed,
    )]  # fmt: skip


def _no_warmup(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    """The program gave diag no warmup mark, and compiled in its requests."""
    spec = program.spec
    unmarked = spec.marking == "none" or spec.warmup == "none"
    if not (unmarked and process.requests and any(c.request for c in process.compiles.values())):
        return []
    claimed = _claimed(claims, process, ("no-warmup",), lambda c: True)
    return [Problem(
        spec.program_id, "no-warmup", process.role, "",
        f"warmup {spec.warmup}, marking {spec.marking}: no warmup identified", [], claimed,
    )]  # fmt: skip
