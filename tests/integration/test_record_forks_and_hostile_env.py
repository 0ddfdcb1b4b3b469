"""Issue 37, the record side: forked children, environment values, a FIFO in the trace, and
warmup at two tensor ranks, each through the real `diag record` (aot_eager, `--profile none`:
the profiler's part of forking is tests of collectors/profiling.py). The program's output
and exit code are compared with a plain run of the same program."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from diag.trace.lines import iter_events

from .support import PYTHON, diag_record, manifest

# These programs' exits are the point (exit codes, signals, crashes, forks, teardown): their
# processes keep Python's whole shutdown (tests/child_site is left off their PYTHONPATH).
pytestmark = pytest.mark.full_shutdown

COMPILED = """
import os, sys, torch
import diag.api as diag

@torch.compile(backend="aot_eager", dynamic=False)
def f(x):
    return (x * 2).sum()
"""

#: multiprocessing's fork start method: a Pool whose workers serve a request each, and a
#: Process that exits with its own code.
MULTIPROCESSING = (
    COMPILED
    + """
import multiprocessing as mp

def work(n):
    with diag.request(f"child{n}", shape=[n]):
        with diag.step():
            return float(f(torch.ones(n)))

def seven():
    print("seven", flush=True)
    sys.exit(7)

if __name__ == "__main__":
    with diag.request("parent", shape=[4]):
        with diag.step():
            f(torch.ones(4))
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        print(sorted(pool.map(work, [3, 5])), flush=True)
    p = ctx.Process(target=seven)
    p.start(); p.join()
    print("child exit", p.exitcode, flush=True)
"""
)

#: A pre-forking server: the parent warms up, then forks two workers that serve requests and
#: exit with their own codes (one through sys.exit, one through os._exit).
PREFORK = (
    COMPILED
    + """
with diag.request("warm", shape=[4]):
    with diag.step():
        f(torch.ones(4))
children = []
for worker in range(2):
    pid = os.fork()
    if pid == 0:
        for r in range(2):
            with diag.request(f"w{worker}r{r}", shape=[6 + worker]):
                for _ in range(2):
                    with diag.step():
                        f(torch.ones(6 + worker))
        os.write(1, f"worker {worker} served\\n".encode())  # one write: the workers run at once
        os._exit(11) if worker else sys.exit(10)
    children.append(pid)
codes = sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
print("codes", codes, flush=True)
sys.exit(3)
"""
)

#: Warmup at two tensor ranks (images and videos), then live traffic at both.
TWO_RANKS = (
    COMPILED
    + """
with diag.phase("warmup"):
    for shape in ([8, 8], [2, 12, 8]):
        with diag.request(shape=shape):
            with diag.step():
                f(torch.ones(*shape))
for shape in ([2, 12, 16], [8, 8], [4, 4]):
    with diag.request(shape=shape):
        with diag.step():
            f(torch.ones(*shape))
"""
)

#: The program swaps its own event file for a FIFO nobody writes.
FIFO = """
import os, sys, torch
folder = os.path.join(os.environ["DIAG_TRACE_DIR"], "runs", "compiled", f"pid{os.getpid()}")
events = os.path.join(folder, "events.jsonl")
os.unlink(events)
os.mkfifo(events)
print("fifo made", flush=True)
"""


def _program(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _plain(program: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [PYTHON, str(program)], capture_output=True, text=True, timeout=240, env=environment
    )


def _processes(trace: Path) -> dict[str, list[dict[str, Any]]]:
    """Each process folder of the compiled run -> its events."""
    return {
        folder.name: list(iter_events(folder / "events.jsonl"))
        for folder in sorted((trace / "runs" / "compiled").iterdir())
    }


def _requests(events: list[dict[str, Any]]) -> list[str]:
    return [e["request_id"] for e in events if e["ev"] == "request_start"]


def _start(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["ev"] == "process_start")


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", *args], capture_output=True, text=True, timeout=240
    )


@pytest.mark.parametrize("name", ["multiprocessing", "prefork"])
def test_a_forked_child_records_its_own_events_and_runs_as_plain(tmp_path: Path, name: str) -> None:
    body = MULTIPROCESSING if name == "multiprocessing" else PREFORK
    program = _program(tmp_path, f"app_{name}", body)  # not multiprocessing.py: the module
    plain = _plain(program)
    recorded = diag_record(tmp_path / "t", PYTHON, str(program), options=("--profile", "none"))
    assert recorded.returncode == plain.returncode, recorded.stderr
    assert sorted(recorded.stdout.splitlines()) == sorted(plain.stdout.splitlines())
    processes = _processes(tmp_path / "t")
    parent = next(events for events in processes.values() if _requests(events)[:1] in (
        ["parent"], ["warm"]))  # fmt: skip
    parent_pid = _start(parent)["pid"]
    children = [events for events in processes.values() if events is not parent]
    # The parent's file holds only the parent's requests ...
    assert _requests(parent) in (["parent"], ["warm"])
    # ... each child's its own, under its own pid, with the parent as its ppid.
    served = sorted(r for events in children for r in _requests(events))
    expected = ["child3", "child5"] if name == "multiprocessing" else [
        "w0r0", "w0r1", "w1r0", "w1r1"]  # fmt: skip
    assert served == expected
    for folder, events in processes.items():
        start = _start(events)
        assert folder == f"pid{start['pid']}"
        if events is not parent:
            assert start["ppid"] == parent_pid
            # Its compiles are its own: each served a shape the parent never compiled.
            if _requests(events):
                assert any(e["ev"] == "compile_end" for e in events), folder
    assert manifest(tmp_path / "t")["status"] in ("complete", "crashed")
    analyzed = _diag("analyze", str(tmp_path / "t"))
    assert analyzed.returncode == 0 and "Traceback" not in analyzed.stderr, analyzed.stderr


def test_environment_values_the_reader_accepts_as_the_writer_reads_them(tmp_path: Path) -> None:
    """RANK=99999999999 was written into process_start and refused by the reader (analyze
    said no process was recorded); RANK=² and WORLD_SIZE=² stopped the collectors."""
    program = _program(tmp_path, "app", COMPILED + "print(float(f(torch.ones(3))))\n")
    plain = _plain(program)
    for number, env in enumerate(
        ({"RANK": "99999999999", "WORLD_SIZE": "99999999999"}, {"RANK": "²", "WORLD_SIZE": "²"})
    ):
        trace = tmp_path / f"t{number}"
        recorded = diag_record(trace, PYTHON, str(program), env={**os.environ, **env})
        assert (recorded.returncode, recorded.stdout) == (plain.returncode, plain.stdout)
        (events,) = _processes(trace).values()
        start = _start(events)
        assert (start["rank"], start["world_size"]) == (None, None), start
        assert any(e["ev"] == "compile_end" for e in events)
        analyzed = _diag("analyze", str(trace))
        assert analyzed.returncode == 0, analyzed.stderr
        assert "no process" not in analyzed.stdout and "warning" not in analyzed.stderr


def test_a_fifo_for_an_event_file_hangs_neither_record_nor_the_readers(tmp_path: Path) -> None:
    program = _program(tmp_path, "fifo", FIFO)
    recorded = diag_record(tmp_path / "t", PYTHON, str(program), timeout=120)
    assert recorded.returncode == 0 and recorded.stdout == "fifo made\n", recorded.stderr
    assert manifest(tmp_path / "t")["status"] != "running"
    for verb in ("analyze", "check"):
        proc = _diag(verb, str(tmp_path / "t"))
        assert "Traceback" not in proc.stderr
        assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr


def test_warmup_at_two_tensor_ranks_is_read(tmp_path: Path) -> None:
    """Warmup at 8x8 and 2x12x8 (images and videos): analyze and report once stopped with an
    IndexError in live-compile's coverage."""
    program = _program(tmp_path, "ranks", TWO_RANKS)
    recorded = diag_record(tmp_path / "t", PYTHON, str(program), options=("--profile", "none"))
    assert recorded.returncode == 0, recorded.stderr
    analyzed = _diag("analyze", str(tmp_path / "t"))
    assert analyzed.returncode == 0, analyzed.stderr
    assert "live r3 is 2x12x16: dim 2 16 was never warmed" in analyzed.stdout
    assert "dim 2 fixed at 8" in analyzed.stdout
    report = _diag("report", str(tmp_path / "t"), "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
