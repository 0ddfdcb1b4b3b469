"""Read back what a run left: the oracle's files (torch's own record), the requests diag saw in
its trace directory (docs/FORMAT.md, read as plain JSON lines), and diag's findings document.

Nothing here imports diag: the harness reads diag's outputs as a user's script would.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_(?P<line>\d+)$")


@dataclass
class StepRecord:
    index: int
    wall_s: float | None = None
    compile_s: float = 0.0


@dataclass
class RequestRecord:
    request_id: str
    phase: str
    shape: list[int] | None
    latents: list[int] | None
    steps: dict[int, StepRecord] = field(default_factory=dict)


@dataclass
class CompileRecord:
    compile_id: str
    code: str | None
    phase: str
    request: str | None
    step: int | None
    entries_before: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    seconds: float | None = None
    graph_breaks: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def is_recompile(self) -> bool:
        return bool(self.entries_before)

    @property
    def name(self) -> str:
        return code_name(self.code)

    @property
    def fail_type(self) -> str | None:
        value = self.metrics.get("fail_type")
        return str(value) if value else None

    def reason_of(self, entry: str) -> str | None:
        """torch's failure reason for one existing entry (`0/1: ...`), if recorded."""
        for reason in self.reasons:
            if reason.split(":", 1)[0].strip() == entry:
                return reason.split(":", 1)[1] if ":" in reason else reason
        return None


@dataclass
class ProcessRecord:
    """One process's oracle file: what torch did, in the program's own positions."""

    role: str
    pid: int
    requests: list[RequestRecord] = field(default_factory=list)
    compiles: dict[str, CompileRecord] = field(default_factory=dict)
    failed_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    limits: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    crash: dict[str, Any] | None = None
    unwound: dict[str, Any] | None = None
    exited: bool = False

    @property
    def rank(self) -> int | None:
        match = re.fullmatch(r"rank(\d+)", self.role)
        return int(match.group(1)) if match else None

    def request(self, request_id: str | None) -> RequestRecord | None:
        return next((r for r in self.requests if r.request_id == request_id), None)

    @property
    def final_entries(self) -> dict[str, list[str]]:
        return dict(self.entries[-1]["entries"]) if self.entries else {}


def code_name(code: str | None) -> str:
    return code.split("@", 1)[0] if code else "?"


def resume_parent(name: str) -> str | None:
    """`torch_dynamo_resume_in_forward_at_63` -> `forward` (the frame a break resumed)."""
    match = _RESUME.match(name)
    return match.group("name") if match else None


def read_oracle(folder: Path) -> list[ProcessRecord]:
    processes = []
    for path in sorted(folder.glob("oracle-*.jsonl")):
        record = _read_one(path)
        if record is not None:
            processes.append(record)
    return processes


def _read_one(path: Path) -> ProcessRecord | None:
    process: ProcessRecord | None = None
    metrics: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line of a killed process
        kind = event.get("ev")
        if kind == "start":
            process = ProcessRecord(str(event.get("role")), int(event.get("pid") or 0))
            continue
        if process is None:
            continue
        if kind == "request_start":
            facts = event.get("facts") or {}
            process.requests.append(
                RequestRecord(
                    str(event.get("request")),
                    str(event.get("phase")),
                    event.get("shape"),
                    facts.get("latents") if isinstance(facts, dict) else None,
                )
            )
        elif kind == "step_end":
            request = process.request(event.get("request"))
            if request is not None and isinstance(event.get("step"), int):
                request.steps[event["step"]] = StepRecord(
                    event["step"], event.get("wall_s"), float(event.get("compile_s") or 0.0)
                )
        elif kind == "compile_start":
            compile_id = str(event.get("compile_id"))
            process.compiles[compile_id] = CompileRecord(
                compile_id,
                event.get("code"),
                str(event.get("phase")),
                event.get("request"),
                event.get("step"),
                list(event.get("entries_before") or []),
                list(event.get("reasons") or []),
            )
        elif kind == "compile_end":
            found = process.compiles.get(str(event.get("compile_id")))
            if found is not None:
                found.seconds = event.get("seconds")
                found.graph_breaks = dict(event.get("graph_breaks") or {})
        elif kind == "metrics":
            metrics[str(event.get("compile_id"))] = event
        elif kind == "recompile_limit":
            process.limits.append(event)
        elif kind == "calls":
            process.calls.append(event)
        elif kind == "entries":
            process.entries.append(event)
        elif kind == "counters":
            process.counters = dict(event.get("counters") or {})
        elif kind == "note":
            process.notes.append(event)
        elif kind == "output":
            process.outputs[str(event.get("request_id"))] = str(event.get("digest"))
        elif kind == "crash":
            process.crash = event
        elif kind == "unwound" and process.unwound is None:
            process.unwound = event
        elif kind == "exit":
            process.exited = True
    if process is None:
        return None
    for compile_id, values in metrics.items():
        found = process.compiles.get(compile_id)
        if found is not None:
            found.metrics = values
        elif values.get("fail_type"):  # a recompile-limit attempt never starts compiling
            process.failed_metrics[compile_id] = values
    return process


# --- diag's side: its requests, read from the trace's event files ---------------------------


@dataclass
class DiagRequest:
    request_id: str
    phase: str
    shape: list[int] | None
    steps: int = 0


def read_diag_requests(trace: Path) -> dict[int, list[DiagRequest]]:
    """Per pid, the requests diag recorded (docs/FORMAT.md `request_start`/`step_start`), in
    the order they started."""
    found: dict[int, list[DiagRequest]] = {}
    for path in sorted((trace / "runs" / "compiled").glob("*/events.jsonl")):
        pid = 0
        requests: list[DiagRequest] = []
        by_id: dict[str, DiagRequest] = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if (
                '"request_start"' not in line
                and '"step_start"' not in line
                and ('"process_start"' not in line)
            ):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("ev") == "process_start":
                pid = int(event.get("pid") or 0)
            elif event.get("ev") == "request_start":
                request = DiagRequest(
                    str(event.get("request_id")), str(event.get("phase")), event.get("shape")
                )
                requests.append(request)
                by_id[request.request_id] = request
            elif event.get("ev") == "step_start":
                owner = by_id.get(str(event.get("request_id")))
                if owner is not None:
                    owner.steps += 1
        if pid:
            found.setdefault(pid, []).extend(requests)
    return found


def read_findings(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None
