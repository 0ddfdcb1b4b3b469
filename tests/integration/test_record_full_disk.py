"""A full disk under `diag record`: the recorded program runs on unchanged (same stdout, same
exit code, one `diag:` line more on stderr), the trace is finished and says where it stopped,
and no profiler window fills the disk. Real full filesystems: a small tmpfs mounted for the
test (root can mount one here and in CI)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diag.trace.lines import iter_events

from .support import PYTHON, diag_record, manifest

#: A deterministic program: a compiled function, a warmup, then live requests with two shapes
#: (so the default profile takes new-shape and steady windows), output on stdout and stderr.
APP = """
import sys, torch
import diag.api as diag
double = torch.compile(lambda x: x * 2 + 1, backend="eager")
with diag.phase("warmup"):
    with diag.request("w0", shape=[4]):
        with diag.step():
            double(torch.ones(4))
total = 0.0
for r in range(int(sys.argv[1])):
    shape = 4 if r % 2 == 0 else 8
    with diag.request(f"r{r}", shape=[shape]):
        for i in range(100):
            with diag.step():
                total += float(double(torch.full((shape,), float(i))).sum())
    print(f"request r{r}: {total:.1f}", flush=True)
print("program stderr line", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[2]))
"""

DIAG_LINE = "diag: recording stopped in process"


def _mount_tmpfs(folder: Path, size: str) -> None:
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs to fill ({done.stderr.strip() or 'mount failed'}): the "
            "full-disk tests need root (or CAP_SYS_ADMIN)"
        )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """`small_disk(free_bytes)`: a 2 MB tmpfs holding a filler file that leaves `free_bytes`
    free (0: leave it empty), as a folder the trace goes into."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "2m")

    def fill(free_bytes: int) -> Path:
        if free_bytes:
            stats = os.statvfs(disk)
            (disk / "filler").write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - free_bytes))
        return disk

    try:
        yield fill
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("app") / "app.py"
    path.write_text(APP)
    return path


@pytest.fixture(scope="module")
def normal(app: Path, tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """The same program recorded on an ordinary disk: 6 requests, exit code 3."""
    folder = tmp_path_factory.mktemp("normal") / "t"
    return diag_record(folder, PYTHON, str(app), "6", "3", options=("--profile", "none"))


def _program_stderr(stderr: str) -> str:
    """What the program (and diag inside it) printed: everything before diag record's summary."""
    return stderr.split("\ndiag: recorded ", 1)[0]


def _no_leftovers(trace: Path) -> None:
    leftovers = [
        p.relative_to(trace)
        for p in trace.rglob("*")
        if p.name.endswith(".tmp") or p.name == ".diag-reserve" or p.suffix == ".json"
        if p.name != "manifest.json"
    ]
    assert leftovers == []


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "diag", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "options",
    [("--profile", "none"), ("--profile", "none", "--torch-trace")],
    ids=["events", "torch-trace"],
)
def test_the_disk_fills_mid_run_and_the_program_runs_on_unchanged(
    small_disk: Callable[[int], Path],
    app: Path,
    normal: subprocess.CompletedProcess[str],
    options: tuple[str, ...],
) -> None:
    # 160 KiB free: the reserves (96 KiB) and the first few hundred steps fit, not 600 steps.
    trace = small_disk(160 << 10) / "t"
    full = diag_record(trace, PYTHON, str(app), "6", "3", options=options)

    assert full.returncode == normal.returncode == 3
    assert full.stdout == normal.stdout and full.stdout.count("request r") == 6
    program = _program_stderr(full.stderr).splitlines()
    ours = [line for line in program if line.startswith("diag:")]
    assert len(ours) == 1 and ours[0].startswith(DIAG_LINE) and "disk full" in ours[0], program
    assert [line for line in program if line not in ours] == _program_stderr(
        normal.stderr
    ).splitlines()
    assert "Traceback" not in full.stderr and "Logging error" not in full.stderr
    assert "stopped early (disk full)" in full.stderr  # diag record's own summary says so

    recorded = manifest(trace)
    assert recorded["status"] == "crashed"
    (run,) = recorded["runs"]
    assert run["exit_code"] == 3 and run["truncated"]["reason"] == "disk full"
    _no_leftovers(trace)
    if "--torch-trace" in options:
        return  # what analyze and check make of it is the same as below

    analyzed = _diag("analyze", str(trace))
    assert analyzed.returncode == 0 and "Traceback" not in analyzed.stderr
    head = analyzed.stdout.splitlines()
    assert head[0] == (
        "recording: crashed: the program exited with code 3; the recording stopped early "
        "(disk full): later events are missing"
    )
    notice = next(line for line in head if "stopped in process" in line)
    assert "disk full (ENOSPC" in notice and "later events are missing" in notice
    assert "s after it started" in notice  # when, and (below) where the program was
    assert " live request r" in notice and ", step " in notice  # filled in the live requests

    checked = _diag("check", str(trace))
    assert checked.returncode == 1 and "stopped before the program ended" in checked.stdout


def test_profiler_windows_that_would_fill_the_disk_are_skipped(
    small_disk: Callable[[int], Path],
    app: Path,
    normal: subprocess.CompletedProcess[str],
) -> None:
    trace = small_disk(0) / "t"
    full = diag_record(trace, PYTHON, str(app), "6", "3")  # default profiling

    assert full.returncode == normal.returncode == 3
    assert full.stdout == normal.stdout
    assert _program_stderr(full.stderr) == _program_stderr(normal.stderr)
    assert "profile window(s) (3 skipped: not enough disk space)" in full.stderr

    (events_path,) = trace.glob("runs/compiled/*/events.jsonl")
    events = list(iter_events(events_path))
    skipped = [e for e in events if e["ev"] == "profile_window_skipped"]
    assert [e["window"] for e in skipped] == ["r0-s0-new-shape", "r0-s2-steady", "r1-s0-new-shape"]
    assert all("filesystem has" in e["reason"] for e in skipped)
    assert not any(e["ev"] == "profile_window_end" for e in events)
    assert events[-1]["ev"] == "process_end"  # the rest was recorded whole
    assert not list(trace.rglob("kineto"))
    _no_leftovers(trace)
    assert "truncated" not in manifest(trace)["runs"][0]

    analyzed = json.loads(_diag("analyze", "--json", str(trace)).stdout)
    (notice,) = [n for n in analyzed["notices"] if n["kind"] == "profile-skipped"]
    assert "3 profiler window(s)" in notice["message"]
