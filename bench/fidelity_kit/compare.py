"""The comparison's common ground: a verdict, a claim's result, a problem, one recorded program
as the comparison reads it, how diag's requests line up with the program's, and the rules that
match diag's names (frames, guard sources, reasons) to torch's.

bench/fidelity_kit/checks.py checks each claim against torch's record; problems.py lists what
torch recorded that a finding should claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .records import CompileRecord, DiagRequest, ProcessRecord, code_name
from .spec import ProgramSpec, Truth

CONFIRMED, CONTRADICTED, UNCHECKED = "confirmed", "contradicted", "unchecked"
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
    # A live compile that failed is compile-failure's headline (one root cause, one headline).
    "live-compile": ("live-compile", "compile-failure"),
    "recompile-limit": ("recompile-limit",),
    "eager-calls": ("recompile-limit", "compile-failure"),
    "compile-failure": ("compile-failure",),
    "graph-break": ("graph-breaks",),
    "crash": ("crash", "compile-failure"),
    "empty-cache": ("warmup-hygiene",),
    "no-warmup": ("live-compile",),
    "compile-spike": ("step0-spike", "live-compile"),
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
    #: Processes whose requests and steps diag saw as the program ran them: a claim's request
    #: and step can be checked only there (elsewhere `alignment` reports the difference).
    aligned: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        for process in self.processes:
            diag = self.diag_requests.get(process.pid, [])
            self.aliases[process.pid] = align(diag, process)
            if not _misaligned(process, diag, self.spec.marking):
                self.aligned.add(process.pid)

    def process(self, pid: Any) -> ProcessRecord | None:
        return next((p for p in self.processes if p.pid == pid), None)

    def request(self, pid: int, diag_id: Any) -> str | None:
        """The program's request for diag's id, when diag's requests line up with it."""
        if not isinstance(diag_id, str) or pid not in self.aligned:
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
        found = _misaligned(
            process, program.diag_requests.get(process.pid, []), program.spec.marking
        )
        notes.extend(f"{process.role}: {note}" for note in found)
    return notes


def _misaligned(process: ProcessRecord, diag: list[DiagRequest], marking: str) -> list[str]:
    ours = process.requests
    if len(diag) != len(ours):
        return [f"diag saw {len(diag)} request(s), the program ran {len(ours)}"]
    notes = []
    for mine, theirs in zip(ours, diag, strict=True):
        if theirs.steps != len(mine.steps):
            notes.append(
                f"request {mine.request_id} ran {len(mine.steps)} step(s), diag's "
                f"{theirs.request_id} has {theirs.steps}"
            )
        if theirs.phase != mine.phase and marking != "none":
            notes.append(
                f"request {mine.request_id} is {mine.phase}, diag's {theirs.request_id} is "
                f"{theirs.phase}"
            )
    return notes


# --- matching helpers -------------------------------------------------------------------------


def tokens(text: str | None) -> set[str]:
    return {t for t in _IDENT.findall(text or "") if t not in _IGNORED_TOKENS}


def mentions(reason: str | None, source: str | None) -> bool:
    """Whether torch's reason text is about `source` (every identifier of it appears)."""
    wanted = tokens(source)
    if not wanted:  # a source that is only `self` or `L`: compare its own identifiers
        wanted = set(_IDENT.findall(source or ""))
        return bool(wanted) and wanted <= set(_IDENT.findall(reason or ""))
    return wanted <= tokens(reason)


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


def skipped_by_break(metrics: dict[str, Any]) -> bool:
    """A frame Dynamo gave up on because of a graph break it could not resume from (fail_type
    Unsupported, fullgraph off): the break is the problem, not a failed compile."""
    reason = str(metrics.get("fail_reason") or "").lower()
    return metrics.get("fail_type") == "Unsupported" and (
        "graph break" in reason or "data-dependent" in reason
    )


def break_reasons(item: CompileRecord) -> list[str]:
    """torch's reasons for the graph breaks a compile hit: the counters' keys, and the reason
    of a frame it gave up on."""
    reasons = list(item.graph_breaks)
    if skipped_by_break(item.metrics):
        reasons.append(str(item.metrics.get("fail_reason")))
    return reasons


def short_type(kind: Any) -> str:
    return str(kind or "").rsplit(".", 1)[-1]


def planted_keys(spec: ProgramSpec, kind: str, request: str | None) -> list[Truth]:
    return [
        t
        for t in spec.truth
        if t.kind == kind and (not t.requests or request in t.requests) and t.key
    ]


def same_reason(claimed: str, torch_reason: str) -> bool:
    """diag quotes a line of torch's reason: the first meaningful lines agree."""
    first = [line.strip() for line in torch_reason.splitlines() if line.strip()]
    text = claimed.strip()
    return bool(text) and any(text in line or line in text for line in first[:3])


def clip(text: str | None, size: int = 160) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= size else flat[: size - 3] + "..."
