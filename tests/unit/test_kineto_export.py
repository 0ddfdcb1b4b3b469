"""collectors/kineto_export.py with a real torch.profiler window on a real small tmpfs: a
window that would not fit is skipped before anything is written, and one whose write fails
anyway leaves nothing behind (kineto's temporary file included)."""

from __future__ import annotations

import errno
import gc
import gzip
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from diag.collectors import kineto_export
from diag.collectors.kineto_export import WindowSkipped, export_window


def _profiled() -> Any:
    """A stopped profiler over a few hundred CPU ops (~0.3 MB of JSON)."""
    x = torch.randn(32, 32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(300):
            x = torch.relu(x @ x) / 32
    return prof


@pytest.fixture
def window() -> Any:
    """kineto exports a window once, so one per test."""
    return _profiled()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 KiB tmpfs: less than the window's JSON."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    (disk / "pid1").mkdir()
    try:
        yield disk / "pid1"
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_roomy_disk_gets_the_window_gzipped(window: Any, tmp_path: Path) -> None:
    (tmp_path / "pid1").mkdir()
    written = export_window(window, tmp_path / "pid1" / "kineto", "r0-s2-steady")
    assert written.name == "r0-s2-steady.json.gz"
    assert json.loads(gzip.decompress(written.read_bytes()))["traceEvents"]
    assert sorted(p.name for p in written.parent.iterdir()) == ["r0-s2-steady.json.gz"]


def test_a_window_that_would_not_fit_is_skipped_before_writing(
    window: Any, small_disk: Path
) -> None:
    with pytest.raises(WindowSkipped, match="not enough disk space: its export needs about"):
        export_window(window, small_disk / "kineto", "r0-s2-steady")
    assert list(small_disk.iterdir()) == []  # not even the kineto folder


def test_a_write_that_fails_anyway_leaves_nothing_behind(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget off (as when the program filled the disk during the export): kineto fails to
    write its temporary file, says so on stderr, and returns; diag finds out and cleans up. The
    deleted file's space comes back when the profiler is released (kineto holds it open)."""
    monkeypatch.setattr(kineto_export, "keep_free", lambda total: 0)
    monkeypatch.setattr(kineto_export, "BYTES_PER_EVENT", 0)
    monkeypatch.setattr(kineto_export, "FIXED_BYTES", 0)
    prof = _profiled()
    with pytest.raises(OSError) as failed:
        export_window(prof, small_disk / "kineto", "r0-s2-steady")
    assert failed.value.errno == errno.ENOSPC
    assert list((small_disk / "kineto").iterdir()) == []
    del prof, failed
    gc.collect()
    stats = os.statvfs(small_disk)
    assert stats.f_bavail == stats.f_blocks
