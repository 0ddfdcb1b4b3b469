"""diag's own work per step inside a recorded process, measured in process.

Whole-run overhead ratios (bench/record_overhead.py) are dominated by process-to-process noise
on small machines; this isolates what the collectors add per step: the step_start/step_end
events and the per-step cache-entry snapshot, after a real compiled run of the reference model.

    python bench/record_step_cost.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import statistics, time, torch
    from diag.fixtures.config import FixtureConfig
    from diag.fixtures.runner import FixtureRunner
    from diag.collectors.session import current_session

    FixtureRunner(FixtureConfig(compile=True)).run()
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
    bootstrap = Path(__file__).resolve().parent.parent / "collectors" / "bootstrap"
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "DIAG_TRACE_DIR": tmp,
            "DIAG_PROFILE": "none",
            "PYTHONPATH": str(bootstrap),
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
        "collector work per step (step_start + step_end + cache snapshot, CPU): "
        f"median {statistics.median(runs):.1f} us over 3 processes ({each})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
