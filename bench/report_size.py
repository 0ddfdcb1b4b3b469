"""How big `diag report` gets on large runs, with and without its aggregation.

A real H200 recording (tests/data/h200/record-wan-offload-unwarmed: compiled run with Kineto
windows, eager baseline) is copied and its compiled run extended with synthetic live traffic
after the recorded requests: requests of 50 steps, a recompile of one of 200 code objects every
few requests, cache-entry reports as they change. Every section of the report is then drawn from
real windows plus a run of the given size. Sizes are steps added.

    python bench/report_size.py [--sizes 1000,10000,100000] [--unlimited-up-to 10000]

Prints one row per size: the run, the report with the default limits, and (up to the given size)
the report with aggregation switched off, side by side.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "h200" / "record-wan-offload-unwarmed"
STEPS_PER_REQUEST = 50
FRAMES = 200
COMPILE_EVERY = 3  # requests


def synthesize(target: Path, steps: int, seed: int = 0) -> dict[str, int]:
    """Copy the recording and append `steps` live steps to its compiled process."""
    shutil.copytree(SOURCE, target, ignore=shutil.ignore_patterns(".diag-cache"))
    events_path = next((target / "runs" / "compiled").glob("*/events.jsonl"))
    lines = events_path.read_text().splitlines()
    last = json.loads(lines[-1])
    t = max(json.loads(line)["t"] for line in lines) + 1_000_000_000
    rng = random.Random(seed)
    entries = [1] * FRAMES
    compiles = 0
    out = []

    def emit(ev: str, **fields: object) -> None:
        out.append(json.dumps({"t": t, "ev": ev, **fields}))

    requests = -(-steps // STEPS_PER_REQUEST)
    for r in range(requests):
        rid = f"synthetic{r}"
        shape = [4, 48, 96 + 16 * (r % 4)]
        emit("request_start", request_id=rid, phase="live", shape=shape, steps=STEPS_PER_REQUEST)
        for s in range(min(STEPS_PER_REQUEST, steps - r * STEPS_PER_REQUEST)):
            position = {"phase": "live", "request_id": rid, "step": s}
            emit("step_start", request_id=rid, step=s, phase="live", shape=shape, profiled=False)
            wall = 0.033 * rng.lognormvariate(0, 0.08)
            if s == 0 and r % COMPILE_EVERY == 0:
                frame = rng.randrange(FRAMES)
                entries[frame] += 1
                compiles += 1
                cid = f"{frame}/{entries[frame] - 1}"
                name = {"name": f"block_{frame}_forward", "file": "/srv/model.py", "line": frame}
                guard = {
                    "compile_id": f"{frame}/0",
                    "kind": "python-value",
                    "source": f"self.blocks[{frame}].scale",
                    "expected": "1.0",
                    "actual": str(r),
                    "user_location": "/srv/model.py:10",
                    "raw": f"{frame}/0: self.blocks[{frame}].scale == 1.0",
                }
                emit("recompile", compile_id=cid, epoch=0, guards=[guard], **position)
                duration = 2.0 * rng.random() + 0.5
                t += int(duration * 1e9)
                emit(
                    "compile_end",
                    compile_id=cid,
                    epoch=0,
                    frame=name,
                    result="ok",
                    duration_s=duration,
                    start_t=t - int(duration * 1e9),
                    fail_type=None,
                    fail_reason=None,
                    cache_size=entries[frame] - 1,
                    graph_op_count=100,
                    guard_count=200,
                    restart_reasons=[],
                    **position,
                )
                wall += duration
                codes = [dict(name, entries=entries[frame])]
            else:
                codes = []
            t += int(wall * 1e9)
            emit("step_end", request_id=rid, step=s, phase="live", wall_s=wall, profiled=False)
            emit("step_gpu", request_id=rid, step=s, gpu_s=wall * 0.98)
            if codes:
                emit("cache_entries", when="step_end", full=False, codes=codes, **position)
            t += 2_000_000
        emit("request_end", request_id=rid, phase="live")
    if last.get("ev") == "process_end":
        lines = lines[:-1]
        out.append(json.dumps(last | {"t": t}))
    events_path.write_text("\n".join(lines + out) + "\n")
    return {"steps": steps, "requests": requests, "compiles": compiles}


def measure(trace_dir: Path, limits: object | None) -> tuple[float, float, float, int]:
    """(report MB, seconds to load and analyze, seconds to draw and assemble, aggregation
    notes in the report)."""
    from diag.findings.analysis import analyze
    from diag.report.build import build_report
    from diag.trace.inputs import open_input

    start = time.perf_counter()
    trace = open_input(trace_dir)
    findings = analyze(trace)
    analyzed = time.perf_counter()
    report = build_report(trace, findings, limits, hta=False)  # type: ignore[arg-type]
    built = time.perf_counter()
    notes = report.html.count('<p class="note">Aggregated')
    broken = [s.key for s in report.sections if s.error]
    if broken:
        print(f"  sections with errors: {broken}", file=sys.stderr)
    return len(report.html.encode()) / 1e6, analyzed - start, built - analyzed, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--unlimited-up-to", type=int, default=10000)
    args = parser.parse_args()
    from diag.report.plot import Limits

    unlimited = Limits(*(10**9,) * 8)
    print(
        f"{'steps':>8} {'compiles':>8} {'events MB':>9} {'analyze s':>9} | {'report MB':>9} "
        f"{'build s':>7} {'aggregated':>10} | {'no-limit MB':>11} {'build s':>7}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="diag-report-bench-") as tmp:
            trace_dir = Path(tmp) / "trace"
            facts = synthesize(trace_dir, size)
            events_mb = sum(p.stat().st_size for p in trace_dir.rglob("events.jsonl")) / 1e6
            mb, analyze_s, build_s, notes = measure(trace_dir, None)
            row = (
                f"{facts['steps']:>8} {facts['compiles']:>8} {events_mb:>9.1f} {analyze_s:>9.1f} "
                f"| {mb:>9.2f} {build_s:>7.1f} {notes:>10} |"
            )
            if size <= args.unlimited_up_to:
                full_mb, _, full_s, _ = measure(trace_dir, unlimited)
                row += f" {full_mb:>11.2f} {full_s:>7.1f}"
            else:
                row += f" {'(skipped)':>11} {'':>7}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
