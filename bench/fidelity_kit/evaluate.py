"""One program's verdict: its claims checked, the problems torch recorded with the findings that
claim them, its behaviour with and without diag, and how diag's requests line up with the
program's. Read entirely from the run folder, so a kept folder can be re-evaluated."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import behaviour, checks, compare, problems
from .records import read_diag_requests, read_findings, read_oracle
from .spec import ProgramSpec


@dataclass
class Evaluation:
    spec: ProgramSpec
    claims: list[compare.ClaimResult] = field(default_factory=list)
    problems: list[compare.Problem] = field(default_factory=list)
    differences: list[behaviour.Difference] = field(default_factory=list)
    alignment: list[str] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def evaluate(folder: Path) -> Evaluation:
    spec = ProgramSpec.load(folder / "spec.json")
    result = Evaluation(spec)
    run = _json(folder / "run.json") or {}
    result.errors.extend(run.get("errors") or [])
    for label in ("plain", "recorded", "analyze"):
        item = run.get(label) or {}
        result.seconds += float(item.get("seconds") or 0.0)
    plain = read_oracle(folder / "oracle-plain")
    recorded = read_oracle(folder / "oracle-recorded")
    if not plain:
        result.errors.append("the plain run left no oracle record")
    if not recorded:
        result.errors.append("the recorded run left no oracle record")
    document = read_findings(folder / "findings.json")
    if document is None:
        result.errors.append("no findings document (diag analyze --json failed)")
        document = {}
    result.findings = [f for f in document.get("findings") or [] if isinstance(f, dict)]
    result.differences = behaviour.compare(
        spec.program_id,
        plain,
        recorded,
        (run.get("plain") or {}).get("exit_code"),
        (run.get("recorded") or {}).get("exit_code"),
    )
    if recorded:
        program = load_program(folder, spec, result.findings)
        result.claims = checks.check_claims(program)
        result.problems = problems.problems(program)
        result.alignment = compare.alignment(program)
    return result


def load_program(
    folder: Path, spec: ProgramSpec | None = None, findings: list[dict[str, Any]] | None = None
) -> compare.Program:
    """The recorded run of a kept folder, as the comparison reads it: the oracle's record,
    diag's requests and diag's findings."""
    if spec is None:
        spec = ProgramSpec.load(folder / "spec.json")
    if findings is None:
        document = read_findings(folder / "findings.json") or {}
        findings = [f for f in document.get("findings") or [] if isinstance(f, dict)]
    return compare.Program(
        spec,
        folder / "program.py",
        read_oracle(folder / "oracle-recorded"),
        read_diag_requests(folder / "trace"),
        findings,
    )


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
