"""Two set-ups of the test suite side by side: the same pytest selection run in each, taking
turns, and the CPU and wall medians of each with their ratio (B over A).

On this machine the speed drifts by 15-20% over an hour, more than most changes to the suite
save, so a change is measured here, alternating in one run, not by comparing two whole-suite
figures taken at different times (docs/BENCHMARKS.md, "The test suite"). A set-up is a checkout
and its interpreter, given as `DIR` (uses `DIR/.venv/bin/python`) or `DIR:PYTHON`:

    python bench/suite_ab.py /work/before /work/after -- tests/integration/test_threads.py -n 2
    python bench/suite_ab.py --runs 5 /work/a:/work/a/.venv/bin/python /work/b -- -k diffusers

CPU is user + system time of pytest and everything it started and waited for. The order of the
two alternates from one round to the next, so neither always runs first on a warm page cache.
Each run's last line goes to stderr as it ends, with the tests that failed in it. Exit codes:
0 done (whatever the tests did), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Setup:
    name: str
    root: Path
    python: Path
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def parse_setup(text: str, name: str) -> Setup:
    """`DIR` or `DIR:PYTHON`; ValueError unless the directory exists and the interpreter runs."""
    folder, _, python = text.partition(":")
    root = Path(folder).resolve()
    interpreter = Path(python) if python else root / ".venv" / "bin" / "python"
    if not root.is_dir():
        raise ValueError(f"{name}: no such directory: {root}")
    if not os.access(interpreter, os.X_OK):
        raise ValueError(f"{name}: no interpreter at {interpreter}")
    return Setup(name, root, interpreter)


def run_once(setup: Setup, pytest_args: list[str]) -> str:
    """One pytest run in the set-up's checkout; its CPU and wall appended; its last line (and
    any FAILED or ERROR lines) back."""
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run(
        [str(setup.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
        cwd=setup.root,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    setup.cpu.append(cpu)
    setup.wall.append(wall)
    lines = proc.stdout.strip().splitlines() or ["(no output)"]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return "\n  ".join([lines[-1], *failed])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="set-up A: DIR or DIR:PYTHON")
    parser.add_argument("b", help="set-up B: DIR or DIR:PYTHON")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs in each")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        setups = [parse_setup(args.a, "A"), parse_setup(args.b, "B")]
    except ValueError as exc:
        parser.error(str(exc))
    for round_ in range(args.runs):
        order = setups if round_ % 2 == 0 else setups[::-1]
        for setup in order:
            last = run_once(setup, args.pytest_args)
            print(
                f"suite_ab: run {round_ + 1}/{args.runs} {setup.name}: CPU "
                f"{setup.cpu[-1]:.1f} s, wall {setup.wall[-1]:.1f} s: {last}",
                file=sys.stderr,
                flush=True,
            )
    print("| set-up | CPU median (min) | wall median |")
    print("|---|---|---|")
    for setup in setups:
        print(
            f"| {setup.name} {setup.root} | {statistics.median(setup.cpu):.1f} s "
            f"({min(setup.cpu):.1f} s) | {statistics.median(setup.wall):.1f} s |"
        )
    a, b = setups
    print(
        f"B/A: CPU median {statistics.median(b.cpu) / statistics.median(a.cpu):.3f} "
        f"(min {min(b.cpu) / min(a.cpu):.3f}), "
        f"wall median {statistics.median(b.wall) / statistics.median(a.wall):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
