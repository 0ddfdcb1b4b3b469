"""`diag warmup-plan TRACE --verify -- CMD`: record CMD again with the plan applied, serving the
recorded live request shapes, and say whether live traffic still compiled.

How the plan reaches the program (docs/WARMUP.md):
- the reference service (`python -m diag.fixtures`): `--warmup-shapes` and `--requests` are
  appended to its command line;
- any other program: the environment. `DIAG_WARMUP_SHAPES` and `DIAG_LIVE_SHAPES` hold JSON
  lists of request shapes (the recorded request shape's dimensions, in order), which the program
  reads through `diag.api.warmup_shapes(default)` and `diag.api.live_shapes(default)`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from diag.errors import DiagError
from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.warmup.forms import distinct_shapes, fixture_shapes
from diag.warmup.plan import WarmupPlan

WARMUP_ENV = "DIAG_WARMUP_SHAPES"
LIVE_ENV = "DIAG_LIVE_SHAPES"
_NOT_COMPILED = ("recompile_limit", "failed")


@dataclass
class Verification:
    output: Path
    command: list[str]
    exit_code: int
    live_compiles: list[str]  # `frame compile_id at request step N`
    warmup_s: float | None  # wall time of the warmup requests in the replay
    recorded_warmup_s: float | None  # ... and in the first recording
    warmup_compile_s: float
    bench_verdict: str | None
    #: Variants a shape list cannot carry (their shape repeats an earlier request's): not applied.
    not_applied: list[str] = field(default_factory=list)
    #: Recompile-limit hits in the replay (`frame compile_id at request step N`): calls past the
    #: limit run eagerly without compiling, so "0 live compiles" alone would read as a pass.
    limit_hits: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.live_compiles and not self.limit_hits

    @property
    def added_s(self) -> float | None:
        if self.warmup_s is None or self.recorded_warmup_s is None:
            return None
        return self.warmup_s - self.recorded_warmup_s

    def text(self) -> str:
        lines = [
            f"verify: recorded {' '.join(self.command)} -> {self.output}/ (exit {self.exit_code})",
            f"  live compiles: {len(self.live_compiles)} (0 expected)",
        ]
        lines += [f"    - {item}" for item in self.live_compiles[:10]]
        if self.limit_hits:
            lines.append(
                f"  recompile-limit hits: {len(self.limit_hits)} (0 expected; calls past the "
                "limit ran eagerly: see recompile-limit in diag analyze)"
            )
            lines += [f"    - {item}" for item in self.limit_hits[:10]]
        if self.warmup_s is not None:
            added = self.added_s
            lines.append(
                f"  warmup: {self.warmup_s:.2f} s of start-up ({self.warmup_compile_s:.2f} s "
                "of it compiling)"
                + (
                    f"; the recorded warmup took {self.recorded_warmup_s:.2f} s: "
                    f"{added:+.2f} s added"
                    if added is not None and self.recorded_warmup_s is not None
                    else ""
                )
            )
        else:
            lines.append("  warmup: no warmup request was recorded in the replay")
        lines += [f"  not applied (no shape says it): {item}" for item in self.not_applied]
        if self.bench_verdict is not None:
            lines.append(f"  diag bench variable-resolution: {self.bench_verdict}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "output": str(self.output),
            "command": self.command,
            "exit_code": self.exit_code,
            "live_compiles": self.live_compiles,
            "warmup_s": self.warmup_s,
            "recorded_warmup_s": self.recorded_warmup_s,
            "added_s": self.added_s,
            "warmup_compile_s": self.warmup_compile_s,
            "bench_verdict": self.bench_verdict,
            "not_applied": self.not_applied,
            "limit_hits": self.limit_hits,
        }


def applied_command(plan: WarmupPlan, command: list[str]) -> list[str]:
    """The command with the plan applied where the program takes it on its command line."""
    if "diag.fixtures" not in command:
        return command
    requests = ",".join(
        "x".join(str(v) for v in item["shape"]) + f":{max(1, int(item['steps']))}"
        for item in plan.served
    )
    return [*command, "--warmup-shapes", fixture_shapes(plan)] + (
        ["--requests", requests] if requests else []
    )


def verify(plan: WarmupPlan, recorded: Trace, command: list[str], output: Path) -> Verification:
    if not command:
        raise DiagError("--verify needs a command: diag warmup-plan TRACE --verify -- CMD ...")
    if not plan.requests:
        raise DiagError("the plan has no warmup request to verify (no live request shape)")
    if output.exists():
        raise DiagError(f"{output} exists: choose another --output or remove it")
    full = applied_command(plan, command)
    env = dict(os.environ)
    env[WARMUP_ENV] = json.dumps(distinct_shapes(plan))
    env[LIVE_ENV] = json.dumps([item["shape"] for item in plan.served])
    record = [sys.executable, "-m", "diag", "record", "-o", str(output), "--profile", "none"]
    proc = subprocess.run([*record, "--", *full], env=env, check=False)
    if not (output / "manifest.json").is_file():
        raise DiagError(f"the replay wrote no recording (diag record exited {proc.returncode})")
    replay = load_trace(output)
    live = [
        f"{c.frame.name if c.frame else '?'} {c.compile_id} at {c.request_id} step {c.step}"
        for run in replay.subject_runs
        for c in run.compiles
        if c.live and c.result not in _NOT_COMPILED
    ]
    hits = [
        f"{c.frame.name if c.frame else '?'} {c.compile_id} at {c.request_id} step {c.step}"
        for run in replay.subject_runs
        for c in run.compiles
        if c.result == "recompile_limit"
    ]
    compile_s = sum(
        c.duration_s or 0.0
        for run in replay.subject_runs
        for c in run.compiles
        if c.phase == "warmup"
    )
    return Verification(
        output=output,
        command=full,
        exit_code=proc.returncode,
        live_compiles=live,
        warmup_s=_warmup_seconds(replay),
        recorded_warmup_s=_warmup_seconds(recorded),
        warmup_compile_s=compile_s,
        bench_verdict=_bench_verdict(output),
        not_applied=[
            f"a request like {r.like}: {r.why}"
            for i, r in enumerate(plan.requests)
            if r.shape in [earlier.shape for earlier in plan.requests[:i]]
        ],
        limit_hits=hits,
    )


def _warmup_seconds(trace: Trace) -> float | None:
    spans = [
        (r.end_t - r.start_t) / 1e9
        for run in trace.subject_runs
        for r in run.requests
        if r.phase == "warmup" and r.end_t is not None
    ]
    return sum(spans) if spans else None


def _bench_verdict(output: Path) -> str | None:
    """diag bench's variable-resolution verdict on the replay, read as a one-trial bench."""
    from diag.benchmark.read import spec_tables
    from diag.benchmark.spec import ConfigSpec

    try:
        tables = spec_tables([ConfigSpec("replay", traces=(output,))])
    except DiagError as exc:
        return f"not judged: {exc.message}"
    found = tables.variable_resolution
    if not found:
        return "not judged: the replay served one shape"
    return found[0].verdict
