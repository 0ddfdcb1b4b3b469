"""bench/suite_cpu.py: the per-process logger it installs really logs a process's CPU time and
command line at exit, and the report sorts the processes by kind and by the test that started
them. The logger runs in real subprocesses from a temporary folder (never this venv's
site-packages, which the other xdist worker's programs read while this test runs)."""

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

    text = bench.report(processes, wall_s=10.0, descendants_s=5.0, top=1)
    lines = text.splitlines()
    assert "CPU 5 s" in lines[0]
    # pytest's own processes, by difference: what the kernel counted beyond the logged ones.
    pytest_row = next(line for line in lines if "in-process tests" in line)
    assert float(pytest_row.split()[0]) == round(5.0 - sum(p.cpu_s for p in processes), 1)
    listed = lines[lines.index(next(x for x in lines if x.startswith("subprocess CPU"))) + 1 :]
    assert len(listed) == 1 and listed[0].endswith("tests/a/test_x.py")


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
