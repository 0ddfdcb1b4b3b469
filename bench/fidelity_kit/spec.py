"""What one generated program is: the choices it was built from, its requests, and the causes
planted in it (known by construction). Plain data, written beside each program as JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

UNITS = ("repeated", "per-block", "whole", "helper")
DYNAMICS = ("None", "True", "False")
WARMUPS = ("none", "one", "two", "all")
#: How the program tells diag about warmup: diag.api phases, `diag record --warmup-requests N`
#: (requests and steps marked with diag.api), no warmup mark (requests and steps marked), and
#: `bare`: no diag.api at all (diag infers steps; `--warmup-requests N` when there is warmup).
MARKINGS = ("api", "flag", "none", "bare")
LAYOUTS = ("single", "spawn", "ranks")

#: The catalogue of issue 24. Each plant is written into the program by bench/fidelity_kit/
#: program.py; `truth` entries say what it is expected to cause, which the oracle confirms.
PLANTS = (
    "unwarmed-shape",
    "hidden-dim",
    "python-scalar",
    "global-switch",
    "attr-churn",
    "lazy-init",
    "layer-strides",
    "graph-break-item",
    "graph-break-print",
    "graph-break-branch",
    "recompile-limit",
    "mark-dynamic-conflict",
    "backend-failure",
    "suppress-errors",
    "empty-cache",
    "crash",
    # inductor only (the generator never picks it for another backend): the program replaces
    # torch.empty after `import torch`, as LightX2V's CPU start-up does; issue 23 found that
    # AOTAutograd then bypasses its cache in a plain run and uses it under diag record.
    "patched-torch",
)


@dataclass
class Request:
    request_id: str
    phase: str  # warmup | live
    res: list[int]
    steps: int
    #: Per-request state the program sets before serving it (plants): tier, churn value.
    tier: str = "sdpa"
    churn: float = 1.0


@dataclass
class Truth:
    """One planted cause and what it should make torch do, by construction.

    `kind` is the problem (recompile, graph-break, compile-failure, eager-calls, crash,
    empty-cache, recompile-limit); `key` a regular expression a guard's source (or a break's
    reason) matches when this plant is the cause; `requests` where it may show (empty: anywhere);
    `line` the program line of a planted statement (graph breaks)."""

    plant: str
    kind: str
    key: str | None = None
    requests: list[str] = field(default_factory=list)
    line: int | None = None
    note: str = ""


@dataclass
class ProgramSpec:
    program_id: str
    seed: int
    family: str
    unit: str
    dynamic: str
    warmup: str
    marking: str
    layout: str
    backend: str
    plants: list[str]
    requests: list[Request]
    clean: bool = False
    truth: list[Truth] = field(default_factory=list)

    @property
    def warmup_requests(self) -> list[Request]:
        return [r for r in self.requests if r.phase == "warmup"]

    @property
    def live_requests(self) -> list[Request]:
        return [r for r in self.requests if r.phase == "live"]

    def describe(self) -> str:
        plants = "+".join(self.plants) or "clean"
        return (
            f"{self.program_id}: {self.family} unit={self.unit} dynamic={self.dynamic} "
            f"warmup={self.warmup} marking={self.marking} layout={self.layout} plants={plants}"
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> ProgramSpec:
        data = dict(data)
        data["requests"] = [Request(**r) for r in data.get("requests", [])]
        data["truth"] = [Truth(**t) for t in data.get("truth", [])]
        return ProgramSpec(**data)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")

    @staticmethod
    def load(path: Path) -> ProgramSpec:
        return ProgramSpec.from_json(json.loads(path.read_text(encoding="utf-8")))
