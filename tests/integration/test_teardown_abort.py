"""A program that dies in interpreter teardown, after its work: named as such, with the fix.

The real case is gloo's: a torchrun program that never calls destroy_process_group() can abort a
rank at exit (`terminate called without an active exception`, SIGABRT), a race that a test
cannot make happen on demand. These programs abort the same way on purpose: an object of
`__main__` whose finalizer calls os.abort() when the interpreter clears the module, after the
exit hooks ran. Everything else is real: torch.compile, torchrun, gloo, diag record.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .support import PYTHON, diag_record

# These programs' exits are the point (exit codes, signals, crashes, forks, teardown): their
# processes keep Python's whole shutdown (tests/child_site is left off their PYTHONPATH).
pytestmark = pytest.mark.full_shutdown

PROGRAM = """
import os
import time
import torch
{setup}

class AbortAtTeardown:
    def __init__(self, wait_for=None):
        self.wait_for = wait_for

    def __del__(self, _abort=os.abort, _write=os.write, _exists=os.path.exists,
                _sleep=time.sleep, _now=time.monotonic):
        deadline = _now() + 60
        while self.wait_for and not _exists(self.wait_for) and _now() < deadline:
            _sleep(0.05)
        _write(2, b"terminate called without an active exception\\n")
        _abort()

class MarkAtTeardown:
    def __init__(self, path):
        self.path = path

    def __del__(self, _open=os.open, _close=os.close, _flags=os.O_CREAT | os.O_WRONLY):
        _close(_open(self.path, _flags))

if {aborts}:
    keep = AbortAtTeardown({wait_for!r})
elif {wait_for!r}:
    keep = MarkAtTeardown({wait_for!r})
f = torch.compile(lambda x: x.sin() + 1, backend="aot_eager")
with diag.request():
    for _ in range(3):
        with diag.step():
            f(torch.ones(4))
"""


def _record_two_ranks(tmp_path: Path, app: Path) -> subprocess.CompletedProcess[str]:
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    return diag_record(
        tmp_path / "t",
        torchrun,
        "--standalone",
        "--nproc_per_node",
        "2",
        str(app),
        options=("--profile", "none"),
    )


def _analyze(trace: Path, *args: str) -> dict:
    done = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _check(trace: Path) -> str:
    done = subprocess.run(
        [PYTHON, "-m", "diag", "check", str(trace)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


def test_a_single_process_killed_in_teardown_is_not_called_cut_short(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(PROGRAM.format(setup="import diag.api as diag", aborts="True", wait_for=None))
    proc = diag_record(tmp_path / "t", PYTHON, str(app), options=("--profile", "none"))
    assert "killed by signal SIGABRT" in proc.stderr, proc.stderr
    document = _analyze(tmp_path / "t")
    notice = document["notices"][0]
    assert notice["kind"] == "recording-incomplete"
    assert notice["message"].startswith("the program was ended by SIGABRT after its work")
    assert "findings cover the whole run" in notice["message"]
    assert "only what happened before" not in notice["message"]
    # Not distributed: no process-group advice, but where to look.
    assert "destroy_process_group" not in notice["how"]
    assert "stderr" in notice["how"]
    out = _check(tmp_path / "t")  # the program still failed: the gate fails, and says how
    assert "after its work" in out and "not observed" not in out


def test_a_torchrun_rank_aborting_at_exit_names_destroy_process_group(tmp_path: Path) -> None:
    setup = textwrap.dedent("""
        import diag.api as diag
        import torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.ones(1); dist.all_reduce(t); assert t.item() == 2
        dist.barrier()
    """)
    app = tmp_path / "app.py"
    # Rank 0 dies only once rank 1 is in its own teardown, past diag's exit hook: torchrun stops
    # the ranks still running when one dies, and a rank stopped before its exit hook was cut
    # short, which diag rightly reports as an incomplete recording (on a loaded machine rank 1
    # can still be compiling when rank 0 exits).
    marker = str(tmp_path / "rank1-in-teardown")
    app.write_text(PROGRAM.format(setup=setup, aborts="dist.get_rank() == 0", wait_for=marker))
    proc = _record_two_ranks(tmp_path, app)
    assert proc.returncode != 0, proc.stderr
    document = _analyze(tmp_path / "t")
    crashes = [f for f in document["findings"] if f["analyzer"] == "crash"]
    assert [f["data"]["kind"] for f in crashes] == ["worker-teardown"], crashes
    (crash,) = crashes
    assert crash["title"].startswith("A worker process died after its work: rank 0 was ended by")
    assert "SIGABRT" in crash["title"]
    assert "destroy_process_group()" in crash["fix"]
    assert any(
        "reached diag's exit hook before it died (exit code -6" in e for e in crash["evidence"]
    )
    notice = document["notices"][0]
    assert notice["message"].startswith("the program failed after its work: torchrun reported")
    assert "destroy_process_group()" in notice["how"]


def test_a_torchrun_rank_that_raises_stays_a_crash(tmp_path: Path) -> None:
    """The other side: a rank that dies of its own exception is its crash, not a teardown."""
    setup = textwrap.dedent("""
        import diag.api as diag
        import torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            raise ValueError("rank 1 gave up")
    """)
    app = tmp_path / "app.py"
    app.write_text(PROGRAM.format(setup=setup, aborts="False", wait_for=None))
    _record_two_ranks(tmp_path, app)
    document = _analyze(tmp_path / "t")
    kinds = [f["data"]["kind"] for f in document["findings"] if f["analyzer"] == "crash"]
    assert "worker-teardown" not in kinds and kinds, kinds
    assert not document["notices"][0]["message"].startswith("the program failed after its work")
