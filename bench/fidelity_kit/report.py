"""The harness's figures over many programs: per analyzer, claims made, confirmed, contradicted
(with the program and the claim), unchecked; per claim kind, the same, saying plainly when no
claim of a kind was made; problems torch recorded that no finding claimed (planted or not);
errors and warnings on clean programs; behaviour differences with and without diag; and how
diag's requests line up with the programs'."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict
from typing import Any

from .compare import CLAIM_KINDS, CONFIRMED, CONTRADICTED, PROBLEM_OWNERS, UNCHECKED
from .evaluate import Evaluation


def summary(evaluations: list[Evaluation]) -> dict[str, Any]:
    claims = [c for e in evaluations for c in e.claims]
    problems = [p for e in evaluations for p in e.problems]
    by_analyzer: dict[str, Counter[str]] = defaultdict(Counter)
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for item in claims:
        by_analyzer[item.analyzer][item.verdict.status] += 1
        by_kind[str(item.claim.get("kind"))][item.verdict.status] += 1
    missed: dict[str, Counter[str]] = defaultdict(Counter)
    for problem in problems:
        bucket = missed[problem.kind]
        bucket["seen"] += 1
        bucket["planted" if problem.planted else "unplanted"] += 1
        if problem.claimed_by:
            bucket["claimed"] += 1
        else:
            bucket["missed planted" if problem.planted else "missed unplanted"] += 1
    clean = [e for e in evaluations if e.spec.clean]
    clean_findings = Counter(
        f"{f.get('severity')} {f.get('analyzer')}"
        for e in clean
        for f in e.findings
        if f.get("severity") in ("error", "warning")
    )
    return {
        "programs": len(evaluations),
        "clean_programs": len(clean),
        "claims": len(claims),
        "confirmed": sum(1 for c in claims if c.verdict.status == CONFIRMED),
        "contradicted": sum(1 for c in claims if c.verdict.status == CONTRADICTED),
        "unchecked": sum(1 for c in claims if c.verdict.status == UNCHECKED),
        "by_analyzer": {k: dict(v) for k, v in sorted(by_analyzer.items())},
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "problems": {k: dict(v) for k, v in sorted(missed.items())},
        "clean_errors_warnings": dict(clean_findings),
        "behaviour_differences": sum(len(e.differences) for e in evaluations),
        "programs_with_differences": sum(1 for e in evaluations if e.differences),
        "misaligned_programs": sum(1 for e in evaluations if e.alignment),
        "errors": sum(1 for e in evaluations if e.errors),
    }


def render(evaluations: list[Evaluation], header: list[str]) -> str:
    figures = summary(evaluations)
    lines = list(header)
    lines.append("")
    lines.append(
        f"{figures['programs']} program(s), {figures['clean_programs']} clean; "
        f"{figures['claims']} claim(s): {figures['confirmed']} confirmed, "
        f"{figures['contradicted']} contradicted, {figures['unchecked']} unchecked"
    )
    checked = figures["confirmed"] + figures["contradicted"]
    if checked:
        lines.append(f"confirmed among checked claims: {100 * figures['confirmed'] / checked:.1f}%")
    lines += ["", "claims per analyzer (made / confirmed / contradicted / unchecked):"]
    analyzers = sorted({*figures["by_analyzer"], *{a for o in PROBLEM_OWNERS.values() for a in o}})
    for name in analyzers:
        counts = figures["by_analyzer"].get(name)
        if not counts:
            lines.append(f"  {name:18} no claims were made")
            continue
        made = sum(counts.values())
        lines.append(
            f"  {name:18} {made:5} / {counts.get(CONFIRMED, 0):5} / "
            f"{counts.get(CONTRADICTED, 0):5} / {counts.get(UNCHECKED, 0):5}"
        )
    lines += ["", "claims per kind:"]
    for kind in CLAIM_KINDS:
        counts = figures["by_kind"].get(kind)
        if not counts:
            lines.append(f"  {kind:18} no claims of kind {kind} were made")
            continue
        lines.append(
            f"  {kind:18} {sum(counts.values()):5} made: {counts.get(CONFIRMED, 0)} confirmed, "
            f"{counts.get(CONTRADICTED, 0)} contradicted, {counts.get(UNCHECKED, 0)} unchecked"
        )
    for kind in sorted(set(figures["by_kind"]) - set(CLAIM_KINDS)):
        lines.append(f"  {kind:18} a kind the schema does not list: {figures['by_kind'][kind]}")
    contradicted = [c for e in evaluations for c in e.claims if c.verdict.status == CONTRADICTED]
    lines += ["", f"contradicted claims ({len(contradicted)}):"]
    for item in contradicted:
        lines.append(f"  {item.program} {item.finding}")
        lines.append(f"      claim: {_claim_text(item.claim)}")
        lines.extend(f"      why: {why}" for why in item.verdict.why)
    unchecked_fields = Counter(
        u.split(" (")[0] for e in evaluations for c in e.claims for u in c.verdict.unchecked
    )
    if unchecked_fields:
        lines += [
            "",
            "claim fields the oracle could not check: "
            + ", ".join(f"{k} x{v}" for k, v in unchecked_fields.most_common()),
        ]
    lines += ["", "problems torch recorded, and whether a finding claims them:"]
    lines.append(
        "  kind             seen  claimed  missed(planted)  missed(unplanted)  expected from"
    )
    for kind, owners in PROBLEM_OWNERS.items():
        counts = figures["problems"].get(kind, {})
        lines.append(
            f"  {kind:15} {counts.get('seen', 0):5} {counts.get('claimed', 0):8} "
            f"{counts.get('missed planted', 0):16} {counts.get('missed unplanted', 0):18}  "
            + ", ".join(owners)
        )
    missed = [p for e in evaluations for p in e.problems if not p.claimed_by and p.planted]
    lines += ["", f"planted problems torch recorded that no finding claimed ({len(missed)}):"]
    for problem in missed[:60]:
        lines.append(
            f"  {problem.program} [{problem.role}] {problem.kind} at {problem.where}: "
            f"{_clip(problem.detail)} (planted: {', '.join(problem.planted)})"
        )
    if len(missed) > 60:
        lines.append(f"  ... and {len(missed) - 60} more (in the JSON)")
    unplanted = [p for e in evaluations for p in e.problems if not p.claimed_by and not p.planted]
    lines += ["", f"unplanted problems torch recorded that no finding claimed: {len(unplanted)}"]
    for problem in unplanted[:20]:
        lines.append(
            f"  {problem.program} [{problem.role}] {problem.kind} at {problem.where}: "
            + _clip(problem.detail)
        )
    lines += ["", "clean programs: errors and warnings diag reported:"]
    clean = [e for e in evaluations if e.spec.clean]
    if not clean:
        lines.append("  no clean program in this sample")
    for evaluation in clean:
        loud = [f for f in evaluation.findings if f.get("severity") in ("error", "warning")]
        seen = [p for p in evaluation.problems if p.kind != "no-warmup"]
        lines.append(
            f"  {evaluation.spec.program_id}: {len(loud)} error/warning finding(s)"
            + (
                f"; torch recorded {len(seen)} problem(s) in it"
                if seen
                else "; torch recorded no problem"
            )
        )
        lines.extend(
            f"      {f.get('severity')} {f.get('id')}: {_clip(str(f.get('title')))}" for f in loud
        )
    differences = [d for e in evaluations for d in e.differences]
    lines += ["", f"behaviour differences with and without diag ({len(differences)}):"]
    for item in differences:
        lines.append(f"  {item.program} [{item.role}] {item.what}")
        lines.append(f"      plain:    {item.plain}")
        lines.append(f"      recorded: {item.recorded}")
    misaligned = [e for e in evaluations if e.alignment]
    lines += ["", f"programs whose requests/steps diag saw differently ({len(misaligned)}):"]
    for evaluation in misaligned:
        lines.append(
            f"  {evaluation.spec.program_id} (marking {evaluation.spec.marking}): "
            + "; ".join(evaluation.alignment[:3])
        )
    broken = [e for e in evaluations if e.errors]
    lines += ["", f"programs the harness could not run through ({len(broken)}):"]
    for evaluation in broken:
        lines.append(f"  {evaluation.spec.program_id}: " + "; ".join(evaluation.errors))
    return "\n".join(lines) + "\n"


def to_json(evaluations: list[Evaluation], header: list[str]) -> str:
    return json.dumps(
        {
            "header": header,
            "summary": summary(evaluations),
            "programs": [
                {
                    "spec": e.spec.to_json(),
                    "claims": [asdict(c) for c in e.claims],
                    "problems": [asdict(p) for p in e.problems],
                    "differences": [asdict(d) for d in e.differences],
                    "alignment": e.alignment,
                    "errors": e.errors,
                    "findings": [
                        {k: f.get(k) for k in ("id", "analyzer", "severity", "title")}
                        for f in e.findings
                    ],
                    "seconds": e.seconds,
                }
                for e in evaluations
            ],
        },
        indent=1,
        default=str,
    )


def _claim_text(claim: dict[str, Any]) -> str:
    return _clip(json.dumps(claim, default=str), 400)


def _clip(text: str, size: int = 220) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 3] + "..."
