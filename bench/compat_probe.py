"""Run a program as `python` would and print Dynamo's counters when it exits (the compat smoke).

    python bench/compat_probe.py SCRIPT ARGS...      # as `python SCRIPT ARGS...`
    python bench/compat_probe.py -m MODULE ARGS...   # as `python -m MODULE ARGS...`

At exit it prints one line, `COMPAT-COUNTERS {json}`: torch._dynamo.utils.counters, the
program's own record of what Dynamo did (frames captured, graphs, graph breaks, recompiles).
bench/compat.py runs each program plain and under `diag record` through this probe and compares
the two lines: diag must not change what Dynamo does. The atexit hook registered here runs
before diag's own (atexit is last-in first-out), so diag's exit work cannot show in it.
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
from pathlib import Path

MARKER = "COMPAT-COUNTERS"


def _print_counters() -> None:
    from torch._dynamo.utils import counters

    table = {group: dict(sorted(values.items())) for group, values in counters.items() if values}
    print(MARKER, json.dumps(table, sort_keys=True, default=str), flush=True)


def main(argv: list[str]) -> None:
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        print("usage: compat_probe.py SCRIPT ARGS... | -m MODULE ARGS...", file=sys.stderr)
        raise SystemExit(2)
    atexit.register(_print_counters)
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
