"""`diag check` end to end on a trace directory with 10 000 compile events (target: 0.5 s).

Builds a one-process trace by hand (tests/analyzers/support.py's write_trace) with the fields
`diag record` writes: N code objects, each compiled twice in warmup (the second a tensor-size
recompile on a new height) and then recompiled in every live request on a Python value (a
TeaCache-style counter: `block.state.cnt == k`, with torch's comment and user stack trace in the
raw text) until it holds `--per-frame` entries. Each recompile lists one failing guard per cache
entry it was checked against, as torch reports them, so guard text grows with the entries.

Then runs `python -m diag check DIR --format json` as a subprocess N times (median, and the
bare interpreter start-up for reference) and times the parts in process: reading the trace and
each rule of the default policy.

    python bench/check_latency.py [--frames 1250] [--per-frame 8] [--runs 7]
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diag.check.allowlist import Allowlist  # noqa: E402
from diag.check.policy import Policy  # noqa: E402
from diag.trace.run import load_trace  # noqa: E402
from tests.analyzers.support import write_trace  # noqa: E402

TARGET_S = 0.5
MS = 1_000_000
STACK = (
    "\nUser stack trace:\n"
    '  File "/srv/app/model/blocks.py", line 87, in block_forward\n'
    "    return (block(x, context, t_mod, freqs),)\n"
    '  File "/srv/app/model/blocks.py", line 54, in forward\n'
    "    y = self.attn(modulate(self.norm1(x), shift, scale), freqs) * self.scale()\n"
    '  File "/srv/app/model/common.py", line 61, in scale\n'
    "    if state.cnt >= 0:"
)


class _Events:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.t = 10 * MS

    def add(self, ev: str, **fields: Any) -> None:
        self.t += 50_000
        self.items.append({"t": self.t, "ev": ev, **fields})


def _guard(frame: int, entry: int) -> dict[str, Any]:
    cid = f"{frame}/{entry}"
    if entry == 0:
        return {
            "compile_id": cid,
            "kind": "tensor-size",
            "source": "x",
            "expected": "32",
            "actual": "48",
            "user_location": None,
            "raw": f"{cid}: tensor 'x' size mismatch at index 1. expected 32, actual 48",
        }
    return {
        "compile_id": cid,
        "kind": "python-value",
        "source": "block.state.cnt",
        "expected": str(entry),
        "actual": None,
        "user_location": "model/common.py:61",
        "raw": f"{cid}: block.state.cnt == {entry}"
        + " " * 30
        + "# if state.cnt >= 0:  # model/common.py:61 in scale (HINT: torch.compile considers "
        "integer attributes of the nn.Module to be static.)" + STACK,
    }


def _compile(events: _Events, frame: int, attempt: int, where: dict[str, Any]) -> None:
    cid = f"{frame}/{attempt}"
    if attempt:
        guards = [_guard(frame, entry) for entry in range(attempt - 1, -1, -1)]
        events.add("recompile", compile_id=cid, epoch=0, guards=guards, **where)
    start = events.t
    events.add("compile_start", compile_id=cid, epoch=0)
    events.add(
        "compile_end",
        compile_id=cid,
        epoch=0,
        frame={"name": f"block_forward_{frame}", "file": "/srv/app/model/blocks.py", "line": 78},
        result="ok",
        duration_s=0.42,
        start_t=start,
        fail_type=None,
        fail_reason=None,
        cache_size=attempt,
        graph_op_count=104,
        guard_count=294,
        restart_reasons=[],
        **where,
    )


def _request(
    events: _Events, rid: str, phase: str, shape: list[int], frames: int, attempt: int
) -> None:
    events.add("request_start", request_id=rid, phase=phase, shape=shape, steps=4)
    for step in range(4):
        where = {"request_id": rid, "step": step, "phase": phase}
        events.add("step_start", **where, shape=shape, profiled=False)
        if step == 0:
            for frame in range(frames):
                _compile(events, frame, attempt, where)
        events.add("step_end", **where, wall_s=0.4 if step == 0 else 0.03, profiled=False)
    events.add("request_end", request_id=rid, phase=phase)


def build(folder: Path, frames: int, per_frame: int) -> int:
    """Writes the trace; returns the number of compile_end events."""
    events = _Events()
    events.add("adapter", name="diag.api")
    events.add("phase", phase="warmup")
    _request(events, "warmup0", "warmup", [2, 8, 8], frames, 0)
    _request(events, "warmup1", "warmup", [2, 12, 8], frames, 1)
    events.add("phase", phase="live")
    for attempt in range(2, per_frame):
        _request(events, f"r{attempt - 2}", "live", [2, 8, 8], frames, attempt)
    codes = [
        {"name": f"block_forward_{f}", "file": "/srv/app/model/blocks.py", "line": 78}
        | {"entries": per_frame}
        for f in range(frames)
    ]
    events.add("cache_entries", when="exit", full=True, codes=codes, request_id=None, step=None)
    events.add("process_end", gpu=None)
    write_trace(folder, events.items)
    return sum(1 for e in events.items if e["ev"] == "compile_end")


def _subprocess_median(command: list[str], runs: int) -> tuple[float, int]:
    times = []
    code = 0
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT / "bench")
        times.append(time.perf_counter() - start)
        code = proc.returncode
        if code not in (0, 1):
            raise SystemExit(f"{' '.join(command)} failed ({code}): {proc.stderr.strip()}")
    return statistics.median(times), code


def _in_process(folder: Path) -> list[tuple[str, float]]:
    from diag.check import rules

    parts: list[tuple[str, float]] = []
    start = time.perf_counter()
    trace = load_trace(folder)
    parts.append(("read the trace (load_trace)", time.perf_counter() - start))
    policy = Policy()
    allow = Allowlist(())
    start = time.perf_counter()
    rules.recording_rule(trace, policy)
    parts.append(("rule recording", time.perf_counter() - start))
    for name in policy.fail_on:
        start = time.perf_counter()
        if name == rules.LIVE_COMPILE:
            rules.live_compile_rule(trace, policy, allow)
        else:
            rules.analyzer_rule(name, trace, policy, allow)
        parts.append((f"rule {name}", time.perf_counter() - start))
    start = time.perf_counter()
    rules.cache_entries_rule(trace, policy, allow)
    parts.append(("rule cache-entries", time.perf_counter() - start))
    return parts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1250, help="code objects")
    parser.add_argument("--per-frame", type=int, default=8, help="compiles per code object")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    importlib.import_module("diag.analyzers")  # fail early, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "trace"
        folder.mkdir()
        compiles = build(folder, args.frames, args.per_frame)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        lines = sum(1 for _ in (folder / "runs" / "compiled" / "pid7" / "events.jsonl").open())
        policy = Path(tmp) / "diag.toml"
        policy.write_text("[check]\n")
        bare, _ = _subprocess_median([sys.executable, "-c", "pass"], args.runs)
        check = [sys.executable, "-m", "diag", "check", str(folder), "--policy", str(policy)]
        median, code = _subprocess_median([*check, "--format", "json"], args.runs)
        text, _ = _subprocess_median(check, args.runs)
        light = Path(tmp) / "light.toml"
        light.write_text('[check]\nfail_on = ["live-compile", "recompile-limit"]\n')
        light_check = [*check[:-1], str(light)]
        without, _ = _subprocess_median(light_check, args.runs)
        parts = _in_process(folder)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} (other work inflates every figure)")
    print(
        f"trace: {compiles} compile events ({args.frames} code objects x {args.per_frame}), "
        f"{lines} event lines, {size / 1e6:.1f} MB"
    )
    label = f"diag check --format json, end to end (median of {args.runs})"
    print(f"{label:52} {median:8.3f} s")
    print(f"{'target':52} {TARGET_S:8.3f} s  -> {'met' if median <= TARGET_S else 'NOT met'}")
    print(f"{'  same, text output':52} {text:8.3f} s")
    print(f"{'  same, text, guard-churn left out of fail_on':52} {without:8.3f} s")
    print(f"{'python -c pass (interpreter start-up)':52} {bare:8.3f} s")
    print(f"exit code {code} (1: the planted live recompiles fail the default policy)")
    print("in process, one run:")
    for name, seconds in parts:
        print(f"  {name:50} {seconds:8.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
