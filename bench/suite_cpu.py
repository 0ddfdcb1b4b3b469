"""Where the test suite's CPU time goes: the README's test command, with every Python process it
starts accounted by what it was (a pytest worker, a `diag record` launcher, another diag
command, the reference service, a test's own program) and by the test that started it.

    .venv/bin/python bench/suite_cpu.py                   # pytest -n auto, the whole suite
    .venv/bin/python bench/suite_cpu.py -- tests/integration -n auto -k threads

The suite is CPU-bound on 2 cores (xdist's workers keep both busy), so its wall time is its CPU
time over the cores: cutting the suite means cutting CPU seconds, and this says where they are.
A `.pth` file put in this interpreter's site-packages for the run (removed after it, and inert
without DIAG_SUITE_CPU_LOG) makes each Python process of this venv append its own user and
system time, its command line and `PYTEST_CURRENT_TEST` to a log when it exits. A process
killed by a signal or ended by `os._exit` writes nothing; the pytest processes (which end that
way under xdist) are counted by difference, from the descendants' total that the kernel gives
this process once pytest has exited.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_MODULE = "_diag_suite_cpu"
_PYTEST = "pytest's processes: the in-process tests"
_PTH = "zz_diag_suite_cpu.pth"
_LOGGER = '''"""Written by bench/suite_cpu.py for one run; remove it if it was left behind."""
import os, sys, time

_LOG = os.environ.get("DIAG_SUITE_CPU_LOG")


def _write():
    t = os.times()
    fields = (
        "%.3f" % t.user,
        "%.3f" % t.system,
        os.environ.get("PYTEST_CURRENT_TEST", "-"),
        "pytest" if "_pytest" in sys.modules else "-",
        " ".join(getattr(sys, "orig_argv", sys.argv)[1:]),
    )
    line = "\\t".join(f.replace("\\t", " ").replace("\\n", " ") for f in fields) + "\\n"
    try:
        with open(_LOG, "a", encoding="utf-8") as out:
            out.write(line)
    except OSError:
        pass


if _LOG:
    import atexit

    atexit.register(_write)
'''


@dataclass(frozen=True)
class Process:
    """One Python process's own CPU time and what it was."""

    cpu_s: float
    test_file: str
    kind: str


def classify(argv: str, is_pytest: bool) -> str:
    """The kind of process, from its command line (interpreter options included)."""
    words = _without_interpreter_options(argv.split())
    if is_pytest:
        return _PYTEST
    if words[:2] == ["-m", "diag"]:
        verb = words[2] if len(words) > 2 else ""
        return "diag record (launcher)" if verb == "record" else "diag (other commands)"
    if words[:2] == ["-m", "diag.fixtures"] or (words and words[0].endswith("diag/fixtures")):
        return "reference service (python -m diag.fixtures)"
    if words and words[0] == "-c":
        return "python -c"
    return "a test's own program"


def _without_interpreter_options(words: list[str]) -> list[str]:
    """`-u -X importtime -m diag ...` -> `-m diag ...`: options before the program or module."""
    while words and words[0].startswith("-") and words[0] not in ("-m", "-c"):
        words = words[2:] if words[0] in ("-X", "-W") else words[1:]
    return words


def read_log(path: Path) -> list[Process]:
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        user, system, test, pytest_mark, argv = (line.split("\t") + [""] * 5)[:5]
        try:
            cpu = float(user) + float(system)
        except ValueError:
            continue
        test_file = test.split("::")[0] if test != "-" else "-"
        found.append(Process(cpu, test_file, classify(argv, pytest_mark == "pytest")))
    return found


def _table(rows: Iterable[tuple[str, float, int]], total: float) -> list[str]:
    return [f"{cpu:8.1f} s {100 * cpu / total:5.1f}% {n:5d}  {name}" for name, cpu, n in rows]


def report(processes: list[Process], wall_s: float, descendants_s: float, top: int) -> str:
    cores = os.cpu_count() or 1
    logged = sum(p.cpu_s for p in processes)
    unlogged = max(0.0, descendants_s - logged)
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for p in processes:
        kinds[p.kind].append(p.cpu_s)
    # pytest's own processes: those that logged plus, by difference, those that could not.
    kinds[_PYTEST].append(unlogged)
    rows = [(k, sum(v), len(v)) for k, v in kinds.items()]
    rows.sort(key=lambda r: -r[1])
    lines = [
        f"wall {wall_s:.0f} s on {cores} cores; CPU {descendants_s:.0f} s "
        f"({100 * descendants_s / (wall_s * cores):.0f}% of the cores)",
        "",
        "CPU by kind of process (seconds, share, processes; pytest's own processes include,"
        " by difference, those that ended without logging):",
        *_table(rows, descendants_s),
        "",
        f"subprocess CPU by the test file that started it (top {top}):",
    ]
    files: dict[str, list[float]] = collections.defaultdict(list)
    for p in processes:
        if p.kind != _PYTEST and p.test_file != "-":
            files[p.test_file].append(p.cpu_s)
    by_file = sorted(((f, sum(v), len(v)) for f, v in files.items()), key=lambda r: -r[1])
    lines += _table(by_file[:top], descendants_s)
    return "\n".join(lines)


def run(pytest_args: Sequence[str], log: Path) -> tuple[int, float, float]:
    """Run pytest with the logger installed; the exit code, wall seconds and the CPU seconds of
    every descendant the kernel accounted to this process."""
    packages = Path(site.getsitepackages()[0])
    module, pth = packages / f"{_MODULE}.py", packages / _PTH
    module.write_text(_LOGGER, encoding="utf-8")
    pth.write_text(f"import {_MODULE}\n", encoding="utf-8")
    env = dict(os.environ, DIAG_SUITE_CPU_LOG=str(log))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        code = subprocess.call([sys.executable, "-m", "pytest", *pytest_args], env=env)
    finally:
        pth.unlink(missing_ok=True)
        module.unlink(missing_ok=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="test files listed (default 25)")
    parser.add_argument("--keep-log", type=Path, help="also keep the raw per-process log here")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)
    pytest_args = args.pytest_args or ["-n", "auto", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(prefix="diag-suite-cpu-") as tmp:
        log = Path(tmp) / "processes.tsv"
        log.touch()
        code, wall, cpu = run(pytest_args, log)
        processes = read_log(log)
        if args.keep_log:
            args.keep_log.write_bytes(log.read_bytes())
    print(report(processes, wall, cpu, args.top))
    print(f"pytest exited {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
