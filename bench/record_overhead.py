"""Steady-state step time of the reference service with and without `diag record --profile none`.

Runs the two variants alternately (plain, recorded, plain, recorded, ...) in one invocation so
that machine drift hits both alike. Each run writes the fixture's own per-step wall times
(`--json`); the steady state is every live step except each request's step 0. Prints the median
step time of each variant and the ratio recorded / plain (median of the per-pair ratios).

Kept for history: a process's steady median moves by up to 40% from one process to the next on
an H200, so these pairs cannot resolve 1%. bench/record_overhead_interleaved.py measures the
overhead inside one recorded process instead.

    python bench/record_overhead.py                       # CPU, small model, aot_eager
    python bench/record_overhead.py --device cuda --size large --backend inductor
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def steady_steps(path: Path) -> list[float]:
    results = json.loads(path.read_text())["results"]
    return [s for r in results if r["phase"] == "live" for s in r["step_seconds"][1:]]


def run(variant: str, fixture_args: list[str], workdir: Path, index: int) -> list[float]:
    out = workdir / f"{variant}-{index}.json"
    command = [sys.executable, "-m", "diag.fixtures", *fixture_args, "-q", "--json", str(out)]
    if variant == "recorded":
        trace = workdir / f"trace-{index}"
        command = [
            sys.executable,
            "-m",
            "diag",
            "record",
            "--profile",
            "none",
            "-o",
            str(trace),
            "--",
            *command,
        ]
    subprocess.run(command, check=True, capture_output=True, env=os.environ.copy())
    return steady_steps(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=5, help="plain/recorded pairs (default 5)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--steps", type=int, default=20, help="steps per live request")
    args = parser.parse_args()
    shapes = {"small": ("2x8x8", "2x12x8"), "large": ("4x48x96", "4x64x96")}[args.size]
    fixture_args = [
        "--device",
        args.device,
        "--size",
        args.size,
        "--compile",
        "--backend",
        args.backend,
        "--requests",
        ",".join(f"{s}:{args.steps}" for s in shapes),
    ]
    plain_all: list[float] = []
    recorded_all: list[float] = []
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="diag-overhead-") as tmp:
        workdir = Path(tmp)
        for index in range(args.pairs):
            plain = run("plain", fixture_args, workdir, index)
            recorded = run("recorded", fixture_args, workdir, index)
            plain_all += plain
            recorded_all += recorded
            ratio = statistics.median(recorded) / statistics.median(plain)
            ratios.append(ratio)
            print(
                f"pair {index}: plain {statistics.median(plain) * 1e3:.3f} ms, "
                f"recorded {statistics.median(recorded) * 1e3:.3f} ms, ratio {ratio:.4f}",
                flush=True,
            )
    print(
        f"\nsteady-state step, {len(plain_all)} steps per variant "
        f"({args.device}, {args.size}, {args.backend}):"
    )
    print(f"  plain    median {statistics.median(plain_all) * 1e3:.3f} ms")
    print(
        f"  recorded median {statistics.median(recorded_all) * 1e3:.3f} ms"
        "  (diag record --profile none)"
    )
    print(
        f"  ratio recorded/plain: median of pairs {statistics.median(ratios):.4f} "
        f"(pairs: {min(ratios):.4f} .. {max(ratios):.4f}); of all steps "
        f"{statistics.median(recorded_all) / statistics.median(plain_all):.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
