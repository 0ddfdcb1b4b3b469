"""Shared test set-up: a fresh Dynamo state per test, and recorded reference-service traces
(each distinct recording made once per session and shared by every suite)."""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diag.trace.load import load_trace
from diag.trace.run import Trace

# A shell's background job (`cmd &` with no job control) starts with SIGINT ignored, and every
# process it starts inherits that. diag record keeps an ignored signal ignored, as it should, so
# the tests that send SIGINT would see nothing reach the program: give the processes the tests
# start the disposition of an interactive shell (a Python handler here: SIG_DFL after exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

RecordFixture = Callable[..., Trace]


#: End-to-end folders: every test there records or replays whole programs (tens of seconds
#: each). `pytest -m "not slow"` leaves them out while developing; CI runs everything.
_SLOW_FOLDERS = ("integration", "fixtures")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        folder = Path(str(item.path)).relative_to(tests).parts[0]
        if folder in _SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
    items[:] = _slow_files_first(items)


def _slow_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The files that hold a slow test first, then the rest, each group by test count (most
    first), each file's tests in their own order. pytest-xdist (`--dist loadfile
    --no-loadscope-reorder`) hands the files out in this order as workers free up, so the run
    ends on the quick files and both workers finish together: ordered by test count alone,
    the end-to-end files with one or two tests of a minute each came last and left the other
    worker idle."""
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(Path(str(item.path)), []).append(item)

    def weight(tests: list[pytest.Item]) -> tuple[bool, int]:
        return (not any(t.get_closest_marker("slow") for t in tests), -len(tests))

    return [item for tests in sorted(files.values(), key=weight) for item in tests]


def pytest_configure(config: pytest.Config) -> None:
    """Keep CPU tests within the 2-core budget: one process has both cores, and pytest-xdist's
    workers share them (`-n 2`: a thread each). An OpenMP thread beyond a worker's share does
    not idle: it spins after each parallel region on the core the other worker (and the
    programs it records) needs; with 2 workers on 2 cores the plants' ground truth took twice
    the CPU time at 2 threads a worker as at 1. Set in the controller before it starts the
    workers, so they and every program the tests record inherit it; a value already in the
    environment is kept.

    Inductor on CPU picks its vector ISA by building and loading a probe library per ISA into
    each fresh cache folder (about 8 s of g++ per folder, measured: a one-kernel program took
    15.0 s user cold and 7.3-8.4 s with TORCHINDUCTOR_VEC_ISA_OK=1). With the variable set it
    trusts /proc/cpuinfo's flags, which pick the same ISA on a machine whose compiler builds
    them; the inductor tests are about Dynamo's and the FX cache's record, not that probe."""
    os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
    _quick_child_exits()
    if not hasattr(config, "workerinput"):  # the controller, once, before the workers start
        _compile_diag_bytecode()
    if "OMP_NUM_THREADS" in os.environ:
        return
    distributed = config.getoption("dist", "no") != "no"
    workers = len(config.getoption("tx", None) or ()) if distributed else 1
    os.environ["OMP_NUM_THREADS"] = str(max(1, 2 // max(1, workers)))


#: tests/child_site/sitecustomize.py: the processes the tests start skip the final walk of the
#: heap at exit (its docstring says why and what it changes).
_CHILD_SITE = str(Path(__file__).with_name("child_site"))

#: DIAG_TEST_USUAL_GC=1: neither the child site nor the workers' freeze (to compare, or to rule
#: them out). Read once: the workers inherit the controller's environment.
_USUAL_GC = os.environ.get("DIAG_TEST_USUAL_GC") == "1"


def _quick_child_exits() -> None:
    """Put the child site first on PYTHONPATH for every process the tests start."""
    if _USUAL_GC:
        return
    path = os.environ.get("PYTHONPATH", "")
    if _CHILD_SITE not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_CHILD_SITE, path) if p)


def _compile_diag_bytecode() -> None:
    """Write diag's bytecode (`__pycache__`, every folder pyproject maps into the diag package)
    before the tests start their processes.

    With PYTHONDONTWRITEBYTECODE set (this machine's environment sets it), Python never caches
    diag's modules, so each of the suite's ~800 processes (launchers, programs with diag's
    collectors, diag's commands) compiled what it imported of diag from source again. Measured
    side by side, 6 alternating runs each (medians of CPU): a recorded one-function aot_eager
    program 4.44 s without the cache and 3.92 s with it, `diag analyze` 0.40 s and 0.21 s
    (docs/BENCHMARKS.md, "The test suite"). The variable stops writing, not reading.
    compileall rewrites only what changed; a read-only checkout just goes without."""
    import compileall
    import tomllib

    root = Path(__file__).parents[1]
    with open(root / "pyproject.toml", "rb") as f:
        folders = set(tomllib.load(f)["tool"]["setuptools"]["package-dir"].values())
    for folder in sorted(folders):  # diag/, and collectors/, analyzers/... installed under diag.
        try:
            compileall.compile_dir(root / folder, quiet=2)
        except OSError:
            pass


_SAVED_PYTHONPATH = pytest.StashKey[str]()


def _without_child_site(path: str) -> str:
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and p != _CHILD_SITE)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what start-up and collection left (torch, diffusers, pandas, Textual, every test
    module): the collector's full collections during the tests, compiles run in this process
    included, then walk only what the tests made."""
    if not _USUAL_GC:
        gc.collect()
        gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test file marked `full_shutdown` starts its processes with Python's shutdown as is
    (set before its fixtures, module-scoped ones included, start anything)."""
    if item.get_closest_marker("full_shutdown") and "PYTHONPATH" in os.environ:
        item.stash[_SAVED_PYTHONPATH] = os.environ["PYTHONPATH"]
        path = _without_child_site(os.environ["PYTHONPATH"])
        if path:
            os.environ["PYTHONPATH"] = path
        else:
            del os.environ["PYTHONPATH"]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if _SAVED_PYTHONPATH in item.stash:
        os.environ["PYTHONPATH"] = item.stash[_SAVED_PYTHONPATH]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this run's workers keep the recordings they share: under pytest-xdist each worker
    has its own base temp (`pytest-N/popen-gw0`), and their parent is this run's alone."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "shared-recordings"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def record_fixture(tmp_path_factory: pytest.TempPathFactory) -> RecordFixture:
    """`record_fixture("unwarmed-shape", model="wan", baseline=False)` -> the loaded Trace.

    Runs `diag record --profile none -- python -m diag.fixtures --compile --backend aot_eager
    --plant ...` once per distinct argument set in the test run, whichever worker asks first
    (a file lock per recording: another worker waits for it and reads the same trace).
    `diag record`'s stderr (its end-of-run summary) is kept beside the trace:
    `recorded_stderr(trace)`.
    """
    from filelock import FileLock

    cache: dict[tuple[object, ...], Trace] = {}
    shared = _shared_folder(tmp_path_factory)

    def record(
        *plants: str,
        model: str = "wan",
        baseline: bool = False,
        profile: str = "none",
        extra: tuple[str, ...] = (),
    ) -> Trace:
        key = (plants, model, baseline, profile, extra)
        if key in cache:
            return cache[key]
        name = hashlib.sha1(repr(key).encode()).hexdigest()[:16]
        folder = shared / name / "t"
        with FileLock(str(shared / f"{name}.lock")):
            if not (shared / name / "done").exists():
                if folder.parent.exists():
                    shutil.rmtree(folder.parent)  # a worker that failed half-way
                folder.parent.mkdir()
                _record_service(folder, plants, model, baseline, profile, extra)
                (shared / name / "done").write_text(repr(key), encoding="utf-8")
        cache[key] = load_trace(folder)
        return cache[key]

    return record


def _record_service(
    folder: Path,
    plants: tuple[str, ...],
    model: str,
    baseline: bool,
    profile: str,
    extra: tuple[str, ...],
) -> None:
    options = ["--profile", profile] + (["--baseline", "eager"] if baseline else [])
    command = [
        sys.executable,
        "-m",
        "diag.fixtures",
        "--compile",
        "--backend",
        "aot_eager",
        "--model",
        model,
        "-q",
        *extra,
    ]
    for plant in plants:
        command += ["--plant", plant]
    proc = subprocess.run(
        [sys.executable, "-m", "diag", "record", "-o", str(folder), *options, "--", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (folder.parent / "stderr.txt").write_text(proc.stderr, encoding="utf-8")


def recorded_stderr(trace: Trace) -> str:
    """What `diag record` printed on stderr while making a `record_fixture` recording."""
    return (trace.path.parent / "stderr.txt").read_text(encoding="utf-8")
