"""diag's own work per step inside a recorded process, measured in process.

Whole-run overhead ratios (bench/record_overhead.py) are dominated by process-to-process noise
on small machines; this isolates what the collectors add per step: the step_start/step_end
events and the per-step cache-entry snapshot, after a real compiled run of the reference model.

    python bench/record_step_cost.py
    python bench/record_step_cost.py --device cuda --size large --backend inductor

On CUDA the step boundaries also record CUDA events (resolved later, without a sync); the figure
is the host time they add, which is what a launch-bound step pays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import os, statistics, time, torch
    from diag.fixtures.config import FixtureConfig
    from diag.fixtures.runner import FixtureRunner
    from diag.collectors.session import current_session

    FixtureRunner(FixtureConfig(
        compile=True,
        device=os.environ["BENCH_DEVICE"],
        size=os.environ["BENCH_SIZE"],
        backend=os.environ["BENCH_BACKEND"],
    )).run()
    steps = current_session().steps
    samples = []
    for _ in range(20):
        start = time.perf_counter()
        for i in range(500):
            steps.step_start(i)
            steps.step_end()
        samples.append((time.perf_counter() - start) / 500)
    print(statistics.median(samples) * 1e6)
""")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument(
        "--max-size",
        type=int,
        default=0,
        metavar="BYTES",
        help="DIAG_MAX_SIZE for the child (diag record --max-size); 1048576 puts the 10 000 "
        "measured steps in rotated segments, 0 (default) keeps them in events.jsonl",
    )
    args = parser.parse_args()
    bootstrap = Path(__file__).resolve().parent.parent / "collectors" / "bootstrap"
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "DIAG_TRACE_DIR": tmp,
            "DIAG_PROFILE": "none",
            "PYTHONPATH": str(bootstrap),
            "BENCH_DEVICE": args.device,
            "BENCH_SIZE": args.size,
            "BENCH_BACKEND": args.backend,
            "DIAG_MAX_SIZE": str(args.max_size),
        }
        runs = [
            float(
                subprocess.run(
                    [sys.executable, "-c", CHILD],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()[-1]
            )
            for _ in range(3)
        ]
    each = ", ".join(f"{r:.1f}" for r in runs)
    print(
        f"collector work per step (step_start + step_end + cache snapshot; {args.device}, "
        f"{args.size}, {args.backend}, max-size {args.max_size or 'none'}): "
        f"median {statistics.median(runs):.1f} us over 3 processes ({each})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
