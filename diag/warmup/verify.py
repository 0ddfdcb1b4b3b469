"""`diag warmup-plan TRACE --verify -- CMD`: record CMD again with the plan applied, serving the
recorded live request shapes, and say whether live traffic still compiled.

How the plan reaches the program (docs/WARMUP.md):
- the reference service (`python -m diag.fixtures`): `--warmup-shapes` and `--requests` are
  appended to its command line;
- LightX2V (a recording whose runner diag's adapter saw): through the runner's own warmup entry.
  `DIAG_LIGHTX2V_WARMUP` holds the plan's resolutions in pixels, which the adapter puts in the
  runner's `_WARMUP_RESOLUTIONS` (or the entry it reads) before its warmup runs;
  `lightx2v.infer`'s `--target_shape` becomes the recorded live request's, and
  `DIAG_LIGHTX2V_LIVE` holds the recorded live resolutions for a program that sends them to
  LightX2V's server (bench/lightx2v_serve.py);
- any other program: the environment. `DIAG_WARMUP_SHAPES` and `DIAG_LIVE_SHAPES` hold JSON
  lists of request shapes (the recorded request shape's dimensions, in order), which the program
  reads through `diag.api.warmup_shapes(default)` and `diag.api.live_shapes(default)`.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.errors import DiagError
from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.warmup.forms import (
    distinct_requests,
    distinct_shapes,
    fixture_shapes,
    lightx2v_resolutions,
    strides,
)
from diag.warmup.plan import WarmupPlan

WARMUP_ENV = "DIAG_WARMUP_SHAPES"
LIVE_ENV = "DIAG_LIVE_SHAPES"
#: The same with each request's call arguments: `[{"shape": [...], "params": {...}}, ...]`
#: (diag.api.warmup_requests() and live_requests()).
WARMUP_CALLS_ENV = "DIAG_WARMUP_CALLS"
LIVE_CALLS_ENV = "DIAG_LIVE_CALLS"
#: Read by diag's LightX2V adapter (collectors/adapters/lightx2v.py: WARMUP_ENV).
LIGHTX2V_WARMUP_ENV = "DIAG_LIGHTX2V_WARMUP"
LIGHTX2V_LIVE_ENV = "DIAG_LIGHTX2V_LIVE"
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
    #: How the plan reached the program, in words (the entry it was put in).
    applied: list[str] = field(default_factory=list)
    #: The request shapes the replay's warmup served, and the plan's: a plan that never reached
    #: the program's warmup verifies nothing, whatever the live compiles.
    warmup_served: list[dict[str, Any]] = field(default_factory=list)
    planned: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reached(self) -> bool:
        """Every request of the plan was served in the replay's warmup: its shape, with its call
        arguments where the plan gives some (the replay records what the call site passed)."""
        return all(
            any(
                served["shape"] == item["shape"]
                and all(served["params"].get(k) == v for k, v in item["params"].items())
                for served in self.warmup_served
            )
            for item in self.planned
        )

    @property
    def passed(self) -> bool:
        return not self.live_compiles and not self.limit_hits and self.reached

    @property
    def added_s(self) -> float | None:
        if self.warmup_s is None or self.recorded_warmup_s is None:
            return None
        return self.warmup_s - self.recorded_warmup_s

    def text(self) -> str:
        lines = [
            f"verify: recorded {shlex.join(self.command)} -> {self.output}/ "
            f"(exit {self.exit_code})",
            f"  live compiles: {len(self.live_compiles)} (0 expected)",
        ]
        lines += [f"    - {item}" for item in self.live_compiles[:10]]
        lines += [f"  plan applied: {item}" for item in self.applied]
        usual = self.planned[0]["params"] if self.planned else {}
        served = ", ".join(_request(i, usual) for i in self.warmup_served) or "nothing"
        lines.append(
            f"  warmup served {served}"
            + (
                ": every request of the plan"
                if self.reached
                else "; THE PLAN DID NOT REACH THE PROGRAM'S WARMUP (it plans "
                + ", ".join(_request(item, usual) for item in self.planned)
                + "): nothing is verified"
            )
        )
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
            "applied": self.applied,
            "warmup_served": self.warmup_served,
            "planned": self.planned,
            "reached": self.reached,
            "passed": self.passed,
        }


def _request(item: dict[str, Any], usual: dict[str, Any]) -> str:
    """`16x16`, or `16x16 (guidance_scale=1.0)`: the call arguments that differ from the
    plan's first request's."""
    params = item.get("params") or {}
    said = ", ".join(f"{k}={v!r}" for k, v in params.items() if usual.get(k) != v)
    return "x".join(map(str, item["shape"])) + (f" ({said})" if said else "")


def _module(command: list[str]) -> str | None:
    """`python -m MODULE ...`: MODULE."""
    at = command.index("-m") if "-m" in command else -1
    return command[at + 1] if 0 <= at < len(command) - 1 else None


def _with_target_shape(command: list[str], height: int, width: int) -> list[str]:
    """`lightx2v.infer`'s command with `--target_shape H W` (its values replaced, nargs="+")."""
    out: list[str] = []
    skipping = False
    for word in command:
        if skipping and word.lstrip("-").isdigit() and not word.startswith("--"):
            continue
        skipping = False
        if word == "--target_shape":
            skipping = True
            continue
        if word.startswith("--target_shape="):
            continue
        out.append(word)
    return [*out, "--target_shape", str(height), str(width)]


def lightx2v_live(plan: WarmupPlan, vae_stride: int | None = None) -> list[list[int]]:
    """The recorded live requests' resolutions in pixels, in order ([height, width])."""
    h, w = plan.dims.index("height"), plan.dims.index("width")
    sh, sw = strides(plan, vae_stride)
    return [[item["shape"][h] * sh, item["shape"][w] * sw] for item in plan.served]


def applied_command(
    plan: WarmupPlan, command: list[str], vae_stride: int | None = None
) -> tuple[list[str], list[str]]:
    """The command with the plan applied where the program takes it on its command line, and
    what the replay leaves out."""
    if plan.runner is not None and _module(command) == "lightx2v.infer" and plan.served:
        live = lightx2v_live(plan, vae_stride)
        skipped = [
            f"live request {'x'.join(map(str, item['shape']))}: lightx2v.infer serves one "
            "request per process; the replay serves the first recorded one"
            for item in plan.served[1:]
        ]
        return _with_target_shape(command, *live[0]), skipped
    if "diag.fixtures" not in command:
        return command, []
    requests = ",".join(
        "x".join(str(v) for v in item["shape"]) + f":{max(1, int(item['steps']))}"
        for item in plan.served
    )
    return [*command, "--warmup-shapes", fixture_shapes(plan)] + (
        ["--requests", requests] if requests else []
    ), []


def verify(
    plan: WarmupPlan,
    recorded: Trace,
    command: list[str],
    output: Path,
    vae_stride: int | None = None,
) -> Verification:
    if not command:
        raise DiagError("--verify needs a command: diag warmup-plan TRACE --verify -- CMD ...")
    if not plan.requests:
        raise DiagError("the plan has no warmup request to verify (no live request shape)")
    if output.exists():
        raise DiagError(f"{output} exists: choose another --output or remove it")
    full, skipped = applied_command(plan, command, vae_stride)
    env = dict(os.environ)
    env[WARMUP_ENV] = json.dumps(distinct_shapes(plan))
    env[LIVE_ENV] = json.dumps([item["shape"] for item in plan.served])
    env[WARMUP_CALLS_ENV] = json.dumps(distinct_requests(plan))
    env[LIVE_CALLS_ENV] = json.dumps(
        [{"shape": item["shape"], "params": item.get("params") or {}} for item in plan.served]
    )
    if plan.runner is not None:
        env[LIGHTX2V_WARMUP_ENV] = json.dumps(lightx2v_resolutions(plan, vae_stride))
        env[LIGHTX2V_LIVE_ENV] = json.dumps(lightx2v_live(plan, vae_stride))
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
            if (r.shape, r.params) in [(e.shape, e.params) for e in plan.requests[:i]]
        ]
        + skipped,
        limit_hits=hits,
        applied=_applied(replay, _on_command_line(command, full)),
        warmup_served=[
            {"shape": r.shape, "params": r.params or {}}
            for run in replay.subject_runs
            for r in run.requests
            if r.phase == "warmup" and r.shape is not None
        ],
        planned=distinct_requests(plan),
    )


def _on_command_line(command: list[str], full: list[str]) -> list[str]:
    """What the replay's command line says that the recorded one did not."""
    if full == command:
        return []
    if _module(command) == "lightx2v.infer":
        return [
            f"--target_shape {' '.join(full[-2:])} (the recorded live request; the warmup "
            "comes from the runner's entry)"
        ]
    return [shlex.join(full[len(command) :]) + " on the command line"]


def _applied(replay: Trace, said: list[str]) -> list[str]:
    """How the plan reached the replayed program, as the replay records it."""
    said = list(said)
    for run in replay.subject_runs:
        for event in run.of("lightx2v_runner"):
            data = event.data
            pairs = tuple(tuple(p) for p in data.get("warmup_resolutions") or ())
            if data.get("applied"):
                said.append(
                    f"{data.get('warmup_owner') or data.get('runner')}: "
                    f"{data.get('warmup_attr')} = {pairs!r} (the runner's own warmup entry, "
                    "set by diag's adapter)"
                )
            else:
                said.append(
                    f"NOT in {data.get('runner')}'s {data.get('warmup_attr')}, which stayed "
                    f"{pairs!r}"
                )
    return said


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
