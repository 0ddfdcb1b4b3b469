"""Profiler windows in a service that serves from threads and forks workers (issues 33, 37):
under default profiling the program's exit code and stdout equal a plain run's, its stderr
gains nothing but diag's own lines (no Kineto "External init callback" line), and each window
is stopped by the thread that started it.

One program does it all, recorded once (the suite must not grow by a recording per case):
a warmup in the main thread; two threads serving at once (their steps interleave, a barrier
makes sure); one request in a thread other than the warmup's; a thread that leaves with a
window open (a new shape, no step: its window ends when the thread does); then `os.fork()`
after profiled steps, a child that exits 7 and one that runs steps first; and a
multiprocessing child (fork start method) that runs steps and exits 7.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from diag.trace.lines import iter_events

from .support import PYTHON, diag_record, of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork and Kineto: Linux only")

APP = """
import multiprocessing as mp, os, sys, threading
import torch
import diag.api as diag

torch.manual_seed(0)
torch.set_num_threads(1)  # no OpenMP pool: a forked child of a parent that used one hangs
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
f = torch.compile(model, backend="aot_eager")

def serve(rows, steps, barrier=None):
    x = torch.ones(rows, 16)
    with torch.no_grad(), diag.request(shape=[rows, 16]):
        for i in range(steps):
            if barrier is not None:
                barrier.wait()  # the two threads' steps interleave
            with diag.step():
                x = f(x).tanh()
    return round(float(x.sum()), 3)

with diag.phase("warmup"):
    serve(2, 2)

out = {}
barrier = threading.Barrier(2)
def two(tag):
    for r in range(2):
        out[(tag, r)] = serve(2, 6, barrier)
threads = [threading.Thread(target=two, args=(t,)) for t in "ab"]
for t in threads: t.start()
for t in threads: t.join()
print("two threads", sorted(out.items()), flush=True)

one = threading.Thread(target=lambda: out.__setitem__("one", serve(3, 6)))
one.start(); one.join()
print("other thread", out["one"], flush=True)

def leave_open():
    diag._tracker().request_start(shape=[5, 16]) if diag._tracker() else None
t = threading.Thread(target=leave_open); t.start(); t.join()

def fork(run_steps):
    pid = os.fork()
    if pid == 0:
        if run_steps:
            print("forked child", serve(2, 4), flush=True)
        sys.exit(7)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

print("forked idle child exit", fork(False), flush=True)
print("forked busy child exit", fork(True), flush=True)

def mp_child(q):
    q.put(serve(2, 4))
    sys.exit(7)

ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=mp_child, args=(q,))
p.start()
print("mp child", q.get(timeout=120), flush=True)
p.join()
print("mp child exit", p.exitcode, flush=True)
sys.exit(3)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("threads")
    app = folder / "app.py"
    app.write_text(APP)
    plain = subprocess.run(
        [PYTHON, str(app)], capture_output=True, text=True, timeout=300, cwd=folder
    )
    trace = folder / "trace"
    recorded = diag_record(trace, PYTHON, str(app), timeout=300, cwd=folder)
    return {"plain": plain, "recorded": recorded, "trace": trace}


def _program_stderr(stderr: str) -> list[str]:
    """The recorded run's stderr without diag's own summary (its `diag:` lines and theirs)."""
    lines = stderr.splitlines()
    if "diag: recorded" in stderr:
        lines = lines[: next(i for i, line in enumerate(lines) if line.startswith("diag:"))]
    return [line for line in lines if line.strip()]


def test_threads_and_forks_behave_as_plain(runs: dict[str, Any]) -> None:
    plain, recorded = runs["plain"], runs["recorded"]
    assert plain.returncode == 3, plain.stderr
    assert "forked idle child exit 7" in plain.stdout
    assert "mp child exit 7" in plain.stdout
    assert recorded.returncode == plain.returncode, recorded.stderr
    assert recorded.stdout == plain.stdout
    program_stderr = _program_stderr(recorded.stderr)
    assert not any("External init callback" in line for line in program_stderr)
    assert program_stderr == _program_stderr(plain.stderr)


def _event_files(trace: Path) -> list[list[dict[str, Any]]]:
    """Each process's events, the parent's (the first to start) first."""
    files = [list(iter_events(p)) for p in (trace / "runs" / "compiled").glob("*/events.jsonl")]
    return sorted(files, key=lambda evs: min(e["t"] for e in evs))


def test_windows_are_stopped_by_their_own_thread(runs: dict[str, Any]) -> None:
    files = _event_files(runs["trace"])
    mine = files[0]  # the parent's (forked children may write here too: their windows skip)
    errors = [
        e for evs in files for e in of("collector_error", evs) if "profiling" in str(e.get("where"))
    ]
    assert errors == []
    starts = {e["window"] for e in of("profile_window_start", mine)}
    ends = {e["window"]: e for e in of("profile_window_end", mine)}
    skipped = {e["window"] for e in of("profile_window_skipped", mine)}
    assert starts, "no window was started"
    assert starts <= set(ends) | skipped  # every window ended or said why not
    for end in ends.values():
        assert end["export_s"] == pytest.approx(end["stop_s"] + end["save_s"], abs=1e-3)
        assert list((runs["trace"] / "runs" / "compiled").glob(f"*/{end['file']}"))
    # The thread that left with its request open: its window ended with the thread.
    assert any(e.get("ended_by") == "thread_end" for e in ends.values()), sorted(ends)


def test_no_event_file_grew_a_kineto_leftover(runs: dict[str, Any]) -> None:
    leftovers = [
        p.name
        for p in (runs["trace"] / "runs").rglob("kineto/*")
        if not p.name.endswith(".json.gz")
    ]
    assert leftovers == []
