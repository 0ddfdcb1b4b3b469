"""The problems torch's record shows, each with the plants that explain it and the findings
whose claims name it: live compiles and the step-0 spikes they make, recompile-limit hits,
failed compiles, calls that ran eagerly (after a limit or a failure) or in a frame Dynamo
skipped, graph breaks, crashes, `empty_cache` in live requests, and compiles of a program that
gave diag no warmup mark.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from .compare import (
    Problem,
    Program,
    break_reasons,
    clip,
    planted_keys,
    same_frame,
    same_reason,
    short_type,
    skipped_by_break,
)
from .records import CompileRecord, ProcessRecord, resume_parent

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
            for t in planted_keys(spec, "live-compile", item.request)
            if any(re.search(t.key or "", r, re.I) for r in item.reasons)
        ]
        names = {item.name, resume_parent(item.name) or item.name}
        claimed = _claimed(
            claims,
            process,
            # A failed live compile is claimed by compile-failure, with the same compile id.
            ("compile", "recompile", "compile-failure"),
            lambda c, item=item, names=names: (
                str(c.get("compile_id")) == item.compile_id
                or (
                    c.get("compile_id") is None
                    and str(c.get("frame") or "").split("@", 1)[0] in names
                    and inverse.get(item.request) == c.get("request")
                )
            ),
        )
        kind = "recompile" if item.is_recompile else "first compile"
        detail = f"{kind} {item.compile_id} of {item.code}: " + clip(
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
            # A slow step is explained by a spike claim at that step, or by a claim naming one
            # of the compiles torch ran in that step (a live compile's finding says what it
            # cost and where): step0-spike only speaks of step 0 by design.
            in_step = {
                c.compile_id
                for c in process.compiles.values()
                if c.request == item.request and c.step == item.step
            }
            claimed = _claimed(
                claims,
                process,
                ("spike", "compile", "recompile", "compile-failure"),
                lambda c, item=item, in_step=in_step: (
                    program.request(process.pid, c.get("request")) == item.request
                    and c.get("step") == item.step
                    if c.get("kind") == "spike"
                    else str(c.get("compile_id")) in in_step
                ),
            )
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
            claims,
            process,
            ("recompile-limit",),
            lambda c, hit=hit: same_frame(hit.get("code"), c.get("frame"), c.get("code")),
        )
        planted = [t.plant for t in program.spec.truth if t.kind == "recompile-limit"]
        where = f"{hit.get('request')} step {hit.get('step')}"
        found.append(
            Problem(
                program.spec.program_id,
                "recompile-limit",
                process.role,
                where,
                f"{hit.get('code')} hit the limit",
                planted,
                claimed,
            )
        )
    return found


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
    failed: set[str] = set()  # frames that ran on eagerly after a suppressed failure
    raised: set[str] = set()  # frames whose failure raised into the program
    for compile_id, (code, values) in metrics.items():
        if _is_limit(values):
            continue
        if skipped_by_break(values):
            skipped.add(str(code))
            continue
        (failed if values.get("config_suppress_errors") else raised).add(str(code))
        claimed = _claimed(
            claims,
            process,
            ("compile-failure",),
            lambda c, compile_id=compile_id: str(c.get("compile_id")) == compile_id,
        )
        planted = [
            t.plant
            for t in spec.truth
            if t.kind == "compile-failure"
            and re.search(t.key or "", str(values.get("fail_type")), re.I)
        ]
        detail = f"{values.get('co_name')}: {values.get('fail_type')}: " + clip(
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
        if code in raised and code not in failed:
            continue  # the call whose compile raised did not run: the failure is the problem
        spots = ", ".join(f"{r.get('request')}/{r.get('step')}" for r in rows[:8])
        total = sum(int(r.get("eager") or 0) for r in rows)
        if code in limited or code in failed:
            claimed = _claimed(
                claims,
                process,
                ("eager-calls",),
                lambda c, code=code: same_frame(code, c.get("frame"), c.get("code")),
            )
            planted = [t.plant for t in spec.truth if t.kind == "eager-calls"]
            kind, why = "eager-calls", "after a recompile-limit hit or a failed compile"
        else:
            claimed = _claimed(
                claims,
                process,
                ("graph-break",),
                lambda c, code=code: same_frame(code, c.get("frame"), c.get("code")),
            )
            planted = [t.plant for t in spec.truth if t.kind == "graph-break"]
            kind = "frame-skipped"
            why = (
                "Dynamo skipped the frame after a graph break"
                if code in skipped
                else "no entry served them and nothing was compiled"
            )
        found.append(
            Problem(
                spec.program_id,
                kind,
                process.role,
                spots,
                f"{total} live call(s) of {code} ran eagerly: {why}",
                planted,
                claimed,
            )
        )
    return found


def _metric_code(values: dict[str, Any]) -> str:
    return f"{values.get('co_name')}@{values.get('co_filename')}:{values.get('co_firstlineno')}"


def _graph_breaks(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    """One problem per distinct reason torch counted in the process."""
    reasons: dict[str, list[CompileRecord]] = {}
    for item in process.compiles.values():
        for text in break_reasons(item):
            reasons.setdefault(text.splitlines()[0][:200], []).append(item)
    found = []
    for text, items in reasons.items():
        claimed = _claimed(
            claims,
            process,
            ("graph-break",),
            lambda c, text=text: same_reason(str(c.get("reason") or ""), text),
        )
        planted = [
            t.plant
            for t in program.spec.truth
            if t.kind == "graph-break" and re.search(t.key or "", text, re.I)
        ]
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
        claims,
        process,
        ("crash", "compile-failure"),
        lambda c: (
            c.get("kind") == "compile-failure" or short_type(c.get("type")) == short_type(kind)
        ),
    )
    planted = [t.plant for t in program.spec.truth if t.kind == "crash"]
    where = noted or process.unwound or crashed
    return [
        Problem(
            program.spec.program_id,
            "crash",
            process.role,
            f"{where.get('request')} step {where.get('step')}",
            f"died of {kind}",
            planted,
            claimed,
        )
    ]


def _empty_cache(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    notes = [
        n for n in process.notes if n.get("kind") == "empty_cache" and n.get("phase") == "live"
    ]
    if not notes:
        return []
    claimed = _claimed(claims, process, ("empty-cache",), lambda c: True)
    where = ", ".join(str(n.get("request")) for n in notes)
    return [
        Problem(
            program.spec.program_id,
            "empty-cache",
            process.role,
            where,
            f"{len(notes)} empty_cache call(s) in live requests",
            ["empty-cache"],
            claimed,
        )
    ]


def _no_warmup(program: Program, process: ProcessRecord, claims: Claims) -> list[Problem]:
    """The program gave diag no warmup mark, and compiled in its requests."""
    spec = program.spec
    unmarked = spec.marking == "none" or spec.warmup == "none"
    if not (unmarked and process.requests and any(c.request for c in process.compiles.values())):
        return []
    claimed = _claimed(claims, process, ("no-warmup",), lambda c: True)
    return [
        Problem(
            spec.program_id,
            "no-warmup",
            process.role,
            "",
            f"warmup {spec.warmup}, marking {spec.marking}: no warmup identified",
            [],
            claimed,
        )
    ]
