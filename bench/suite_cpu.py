"""Where the test suite's CPU time goes: the README's test command, with each test's CPU (its
own, in pytest's process, and that of every process it started and waited for) and every Python
process it starts accounted by what it was (a `diag record` launcher, another diag command, the
reference service, a test's own program).

    .venv/bin/python bench/suite_cpu.py                   # pytest -n auto, the whole suite
    .venv/bin/python bench/suite_cpu.py -- tests/integration -n auto -k threads

The suite is CPU-bound on 2 cores (xdist's workers keep both busy), so its wall time is its CPU
time over the cores: cutting the suite means cutting CPU seconds, and this says where they are.

Two instruments, both inert outside this script's run:

- a pytest plugin (`-p`, from a temporary folder on PYTHONPATH) that writes, per test, the
  change in its process's own CPU time and in its waited-for children's (`getrusage`), which
  is complete: a child's CPU counts once it has been waited for, interpreter shutdown
  included;
- a `.pth` file put in this interpreter's site-packages for the run (removed after it, inert
  without DIAG_SUITE_CPU_LOG) that makes each Python process of this venv append its own CPU
  time, command line and `PYTEST_CURRENT_TEST` to a log from an atexit handler. That is before
  the interpreter shuts down, which for a process that imported torch and compiled is most of
  a second more (measured: 3.9 s at the end of a program against 4.8 s in all; `os._exit` at
  the same point, 3.7 against 3.7). What the children used and the log did not see is that
  shutdown, and the processes that never logged (killed, `os._exit`, not Python).
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
_PLUGIN_MODULE = "_diag_suite_cpu_tests"
_PYTEST = "pytest's processes: the in-process tests"
_PTH = "zz_diag_suite_cpu.pth"
_PLUGIN = '''"""Written by bench/suite_cpu.py for one run: each test's own and children's CPU."""
import os
import resource
import time

import pytest

_LOG = os.environ.get("DIAG_SUITE_CPU_TESTS")


def _cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    yield
    if not _LOG:
        return
    fields = (
        "%.3f" % (_cpu(resource.RUSAGE_SELF) - own),
        "%.3f" % (_cpu(resource.RUSAGE_CHILDREN) - children),
        "%.3f" % (time.monotonic() - started),
        item.nodeid.replace("\\t", " ").replace("\\n", " "),
    )
    with open(_LOG, "a", encoding="utf-8") as out:
        out.write("\\t".join(fields) + "\\n")
'''
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


@dataclass(frozen=True)
class TestCPU:
    """One test's CPU: its own (in pytest's process) and its waited-for children's, complete."""

    own_s: float
    children_s: float
    wall_s: float
    test_file: str


def read_tests(path: Path) -> list[TestCPU]:
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        own, children, wall, nodeid = (line.split("\t") + [""] * 4)[:4]
        try:
            found.append(TestCPU(float(own), float(children), float(wall), nodeid.split("::")[0]))
        except ValueError:
            continue
    return found


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


def report(
    processes: list[Process], tests: list[TestCPU], wall_s: float, descendants_s: float, top: int
) -> str:
    cores = os.cpu_count() or 1
    own = sum(t.own_s for t in tests)
    children = sum(t.children_s for t in tests)
    started = [p for p in processes if p.kind != _PYTEST]
    logged = sum(p.cpu_s for p in started)
    lines = [
        f"wall {wall_s:.0f} s on {cores} cores; CPU {descendants_s:.0f} s "
        f"({100 * descendants_s / (wall_s * cores):.0f}% of the cores)",
        "",
        "Where it went (seconds, share):",
        *_table(
            [
                ("the tests' own work, in pytest's processes", own, len(tests)),
                ("the processes the tests started and waited for", children, len(started)),
                ("  of which up to their atexit (by kind below)", logged, len(started)),
                (
                    "  of which after it (interpreter shutdown) or never logged",
                    max(0.0, children - logged),
                    0,
                ),
                (
                    "pytest itself: start-up, collection, xdist (by difference)",
                    max(0.0, descendants_s - own - children),
                    0,
                ),
            ],
            descendants_s,
        ),
        "",
        "started processes by kind, up to their atexit (seconds, share, processes):",
    ]
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for p in started:
        kinds[p.kind].append(p.cpu_s)
    rows = sorted(((k, sum(v), len(v)) for k, v in kinds.items()), key=lambda r: -r[1])
    lines += _table(rows, descendants_s)
    files: dict[str, list[float]] = collections.defaultdict(list)
    for t in tests:
        files[t.test_file].append(t.own_s + t.children_s)
    by_file = sorted(((f, sum(v), len(v)) for f, v in files.items()), key=lambda r: -r[1])
    lines += [
        "",
        f"CPU by test file, its tests' own and their children's (top {top}; seconds, share,"
        " tests):",
        *_table(by_file[:top], descendants_s),
    ]
    return "\n".join(lines)


def speed_probe(rounds: int = 5) -> float:
    """CPU seconds of a fixed pure-Python workload (the median of `rounds`), taken before and
    after a run: a first check on the machine's state, printed beside the suite's figures. The
    same suite took 1761 and 2428 CPU-seconds on one day; the probe has stayed level through
    such a swing (docs/BENCHMARKS.md, "The test suite"), so only runs side by side compare."""
    times = []
    for _ in range(rounds):
        started = time.process_time()
        sum(i * i for i in range(2_000_000))
        times.append(time.process_time() - started)
    return sorted(times)[len(times) // 2]


def run(pytest_args: Sequence[str], folder: Path) -> tuple[int, float, float]:
    """Run pytest with both instruments, logging into `folder`; the exit code, wall seconds
    and the CPU seconds of every descendant the kernel accounted to this process."""
    packages = Path(site.getsitepackages()[0])
    module, pth = packages / f"{_MODULE}.py", packages / _PTH
    (folder / f"{_PLUGIN_MODULE}.py").write_text(_PLUGIN, encoding="utf-8")
    module.write_text(_LOGGER, encoding="utf-8")
    pth.write_text(f"import {_MODULE}\n", encoding="utf-8")
    env = dict(
        os.environ,
        DIAG_SUITE_CPU_LOG=str(folder / "processes.tsv"),
        DIAG_SUITE_CPU_TESTS=str(folder / "tests.tsv"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])),
    )
    command = [sys.executable, "-m", "pytest", "-p", _PLUGIN_MODULE, *pytest_args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        code = subprocess.call(command, env=env)
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
    parser.add_argument("--keep-log", type=Path, help="also keep both raw logs in this folder")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)
    pytest_args = args.pytest_args or ["-n", "auto", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(prefix="diag-suite-cpu-") as tmp:
        folder = Path(tmp)
        for name in ("processes.tsv", "tests.tsv"):
            (folder / name).touch()
        probe_before = speed_probe()
        code, wall, cpu = run(pytest_args, folder)
        probe_after = speed_probe()
        processes = read_log(folder / "processes.tsv")
        tests = read_tests(folder / "tests.tsv")
        if args.keep_log:
            args.keep_log.mkdir(parents=True, exist_ok=True)
            for name in ("processes.tsv", "tests.tsv"):
                (args.keep_log / name).write_bytes((folder / name).read_bytes())
    print(report(processes, tests, wall, cpu, args.top))
    print(
        f"machine speed: the probe took {probe_before:.3f} s of CPU before the run and"
        f" {probe_after:.3f} s after (median of 5; more is slower)"
    )
    print(f"pytest exited {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
