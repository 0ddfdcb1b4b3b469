"""bench/suite_cpu.py: the per-process logger it installs really logs a process's CPU time and
command line at exit, its pytest plugin a test's own and children's CPU, and the report splits
the suite's CPU by both. Both run in real subprocesses from a temporary folder (never this
venv's site-packages, which the other xdist worker's programs read while this test runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.bench_scripts import load_bench


def _bench() -> ModuleType:
    return load_bench("suite_cpu")


def _run_logged(bench: ModuleType, folder: Path, log: Path, *args: str, test: str) -> None:
    (folder / f"{bench._MODULE}.py").write_text(bench._LOGGER, encoding="utf-8")
    env = dict(os.environ, DIAG_SUITE_CPU_LOG=str(log), PYTEST_CURRENT_TEST=test)
    env["PYTHONPATH"] = str(folder)
    prelude = f"import {bench._MODULE}; "
    subprocess.run([sys.executable, *args[:-1], prelude + args[-1]], env=env, check=True)


def test_logged_processes_are_sorted_by_kind_and_by_test(tmp_path: Path) -> None:
    bench = _bench()
    log = tmp_path / "processes.tsv"
    spin = "import time; end = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    _run_logged(bench, tmp_path, log, "-c", spin, test="tests/a/test_x.py::test_one (call)")
    _run_logged(bench, tmp_path, log, "-u", "-c", "pass", test="tests/b/test_y.py::test_two")
    processes = bench.read_log(log)
    assert [(p.kind, p.test_file) for p in processes] == [
        ("python -c", "tests/a/test_x.py"),
        ("python -c", "tests/b/test_y.py"),
    ]
    assert processes[0].cpu_s >= 0.2

    tests = [
        bench.TestCPU(0.5, 1.0, 2.0, "tests/a/test_x.py"),
        bench.TestCPU(0.25, 0.0, 1.0, "tests/b/test_y.py"),
    ]
    text = bench.report(processes, tests, wall_s=10.0, descendants_s=5.0, top=1)
    lines = text.splitlines()
    assert "CPU 5 s" in lines[0]

    def seconds(label: str) -> float:
        return float(next(line for line in lines if label in line).split()[0])

    assert seconds("the tests' own work") == 0.8  # 0.75, to one decimal
    assert seconds("started and waited for") == 1.0
    logged = sum(p.cpu_s for p in processes)
    assert seconds("up to their atexit") == round(logged, 1)
    assert seconds("interpreter shutdown") == round(max(0.0, 1.0 - logged), 1)
    assert seconds("pytest itself") == round(5.0 - 0.75 - 1.0, 1)
    heading = next(x for x in lines if x.startswith("CPU by test file"))
    listed = lines[lines.index(heading) + 1 :]
    assert len(listed) == 1 and listed[0].endswith("tests/a/test_x.py")


def test_the_plugin_counts_a_tests_children_whole(tmp_path: Path) -> None:
    """A real pytest run with the plugin: a test whose child spins for 0.3 s of CPU gets at
    least that much as its children's, and a test that spins itself gets it as its own."""
    bench = _bench()
    (tmp_path / f"{bench._PLUGIN_MODULE}.py").write_text(bench._PLUGIN, encoding="utf-8")
    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    (tmp_path / "test_spin.py").write_text(
        "import subprocess, sys, time\n\n"
        "def test_child():\n"
        f"    subprocess.run([sys.executable, '-c', {spin!r}], check=True)\n\n"
        "def test_self():\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end:\n"
        "        pass\n",
        encoding="utf-8",
    )
    log = tmp_path / "tests.tsv"
    env = dict(os.environ, DIAG_SUITE_CPU_TESTS=str(log), PYTHONPATH=str(tmp_path))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            bench._PLUGIN_MODULE,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "test_spin.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=True,
    )
    child, itself = bench.read_tests(log)
    assert child.test_file == itself.test_file == "test_spin.py"
    assert child.children_s >= 0.3 and itself.children_s == 0
    assert itself.own_s >= 0.3


def test_a_logger_without_its_variable_writes_nothing(tmp_path: Path) -> None:
    bench = _bench()
    (tmp_path / f"{bench._MODULE}.py").write_text(bench._LOGGER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "DIAG_SUITE_CPU_LOG"}
    env["PYTHONPATH"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", f"import {bench._MODULE}; print('ok')"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert (proc.stdout, proc.stderr) == ("ok\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{bench._MODULE}.py"]


def test_command_lines_name_their_kind() -> None:
    classify = _bench().classify
    assert classify("-m diag record -o t -- python app.py", False) == "diag record (launcher)"
    assert classify("-X importtime -m diag check t", False) == "diag (other commands)"
    assert classify("-m diag.fixtures --compile", False).startswith("reference service")
    assert classify("/tmp/app.py --size 8", False) == "a test's own program"
    assert classify("-m pytest -n 2", True).startswith("pytest's processes")
    assert classify("", False) == "a test's own program"


def test_the_speed_probe_is_a_median_of_real_cpu_time() -> None:
    bench = _bench()
    one, five = bench.speed_probe(rounds=1), bench.speed_probe()
    assert one > 0 and five > 0
    # The same workload: within a factor that noise on a loaded 2-core machine stays inside.
    assert 0.2 < one / five < 5
