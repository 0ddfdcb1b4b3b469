"""Record every fixture plant with its eager baseline, analyze it, and check the findings.

For each plant (and a clean run) this runs
`diag record --baseline eager -- python -m diag.fixtures --compile --plant P ...`, then
`diag analyze --json`, and checks that the analyzers the plant is built to trigger fired (and
that the clean run has no error or warning). It also reports the cost of a profiler window:
the median profiled steady step against the median unprofiled one, in the same process.

    python bench/plant_findings.py --out plants-cpu                          # CPU, aot_eager
    python bench/plant_findings.py --device cuda --size large --backend inductor --gpus 0,1

With several GPUs, plants run side by side, one per GPU (CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

#: plant -> analyzers that must report it (at warning or error).
EXPECTED: dict[str, tuple[str, ...]] = {
    "clean": (),
    "guard-churn": ("guard-churn", "live-compile"),
    "recompile-limit": ("recompile-limit", "guard-churn"),
    "unwarmed-shape": ("live-compile", "step0-spike"),
    "routing": ("kernel-routing",),
    "offload-bound": ("offload-bound",),
    "cache-bloat": ("cache-bloat",),
    "empty-cache": ("warmup-hygiene",),
}
#: Plants that only show on a GPU (copies, CUDA allocator).
GPU_ONLY = {"offload-bound", "empty-cache"}
#: Analyzers whose severity follows a measured cost, so the plant is found at any severity:
#: kernel-routing warns only when compiled is slower (on an H200 the inductor RMSNorm that
#: replaces the Triton one is faster, an info finding).
ANY_SEVERITY = {"kernel-routing"}


def record_and_analyze(plant: str, args: argparse.Namespace, gpu: str | None) -> dict[str, Any]:
    folder = args.out / plant
    fixture = [
        sys.executable,
        "-m",
        "diag.fixtures",
        "--device",
        args.device,
        "--size",
        args.size,
        "--compile",
        "--backend",
        args.backend,
        "-q",
    ]
    if plant != "clean":
        fixture += ["--plant", plant]
    env = os.environ.copy()
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    started = time.monotonic()
    recorded = subprocess.run(
        [
            sys.executable,
            "-m",
            "diag",
            "record",
            "--force",
            "--baseline",
            "eager",
            "-o",
            str(folder),
            "--",
            *fixture,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=args.timeout,
    )
    record_s = time.monotonic() - started
    if recorded.returncode != 0:
        return {"plant": plant, "error": recorded.stderr[-2000:]}
    started = time.monotonic()
    analyzed = subprocess.run(
        [sys.executable, "-m", "diag", "analyze", str(folder), "--json"],
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    analyze_s = time.monotonic() - started
    if analyzed.returncode != 0:
        return {"plant": plant, "error": analyzed.stderr[-2000:]}
    findings = json.loads(analyzed.stdout)["findings"]
    fired = sorted(
        {
            f["analyzer"]
            for f in findings
            if f["severity"] in ("error", "warning") or f["analyzer"] in ANY_SEVERITY
        }
    )
    expected = EXPECTED[plant]
    ok = set(expected) <= set(fired) if expected else not fired
    return {
        "plant": plant,
        "ok": ok,
        "expected": list(expected),
        "fired": fired,
        "titles": [f"{f['severity']}: {f['title']}" for f in findings],
        "record_s": round(record_s, 1),
        "analyze_s": round(analyze_s, 2),
        "profile_window": profile_window_cost(folder),
    }


def profile_window_cost(folder: Path) -> dict[str, float] | None:
    """Median profiled vs unprofiled steady live step of the compiled run (steps >= 1)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from diag.trace.load import load_trace

    run = load_trace(folder).compiled
    if run is None:
        return None
    steady = [s for s in run.steps if s.phase == "live" and s.index >= 1]

    def median_of(profiled: bool) -> float | None:
        times = [s.gpu_s or s.wall_s for s in steady if s.profiled == profiled]
        values = [t for t in times if t is not None]
        return statistics.median(values) if values else None

    profiled, plain = median_of(True), median_of(False)
    if profiled is None or plain is None:
        return None
    return {"profiled_s": profiled, "unprofiled_s": plain, "ratio": round(profiled / plain, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--plant", action="append", choices=sorted(EXPECTED))
    parser.add_argument("--gpus", help="comma-separated GPU ids to spread plants over")
    parser.add_argument("--out", type=Path, default=Path("plant-findings"))
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    plants = args.plant or [p for p in EXPECTED if args.device != "cpu" or p not in GPU_ONLY]
    args.out.mkdir(parents=True, exist_ok=True)
    gpus: list[str | None] = list(args.gpus.split(",")) if args.gpus else [None]
    free: queue.Queue[str | None] = queue.Queue()
    for gpu in gpus:
        free.put(gpu)

    def job(plant: str) -> dict[str, Any]:
        gpu = free.get()  # one plant per GPU at a time
        try:
            return record_and_analyze(plant, args, gpu)
        finally:
            free.put(gpu)

    with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        results = list(pool.map(job, plants))
    failed = 0
    with (args.out / "results.jsonl").open("w") as out:
        for result in results:
            out.write(json.dumps(result) + "\n")
            if "error" in result:
                failed += 1
                print(f"{result['plant']:16} FAILED: {result['error'].splitlines()[-1:]}")
                continue
            failed += not result["ok"]
            window = result["profile_window"]
            cost = f"profiled/unprofiled step {window['ratio']}" if window else ""
            print(
                f"{result['plant']:16} {'ok ' if result['ok'] else 'BAD'} fired "
                f"{','.join(result['fired']) or '-'}; record {result['record_s']} s, analyze "
                f"{result['analyze_s']} s; {cost}"
            )
            for title in result["titles"]:
                print(f"    {title[:150]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
