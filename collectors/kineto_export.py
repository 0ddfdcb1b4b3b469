"""A profiler window written to disk as `.json.gz` without ever filling the disk to do it.

torch.profiler writes a Chrome trace only as plain JSON (kineto writes `<path>.tmp`, then
renames it; `export_chrome_trace("x.json.gz")` writes an uncompressed temporary file too, in
the temp folder), and a window's JSON is 10-15 times its gzip. On a disk short of room that
temporary file is what fills it: kineto then prints "Failed to write to log file!" on the
program's stderr and the program's own writes fail. So the export is budgeted: before writing,
the window's JSON is estimated from its event count (BYTES_PER_EVENT, above the 270-650 bytes
measured per event on CPU and H200 traces), and a window whose JSON and gzip would leave less
than KEEP_FREE on the filesystem is skipped, with why, instead of written. Nothing is left
behind when a write fails.
"""

from __future__ import annotations

import errno
import gzip
import os
import shutil
from pathlib import Path
from typing import Any

#: Upper bound of a Chrome-trace event's JSON size (measured 267 B per CPU op on this CPU,
#: 344-650 B per kernel or op in the H200 windows of tests/data/h200).
BYTES_PER_EVENT = 1024
#: Device properties and metadata on top of the events.
FIXED_BYTES = 256 << 10
#: gzip output beside its source while it is written (measured 12-15x smaller).
GZIP_SHARE = 0.15
#: Counting a window's events costs about a third of its export: done only when the disk is
#: within this much of the room the export could need.
COUNT_BELOW = 4 << 30
#: When torch could not write a window and less than this is free, the disk is full.
FULL_BELOW = 1 << 20


class WindowSkipped(Exception):
    """The window was not written; the message says why."""


def keep_free(total: int) -> int:
    """Room left for the program on a filesystem of `total` bytes: 5%, at least 16 MiB, at most
    1 GiB."""
    return max(16 << 20, min(total // 20, 1 << 30))


def _free_and_total(folder: Path) -> tuple[int, int]:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize


def estimated_bytes(prof: Any) -> int | None:
    """The window's JSON plus its gzip, from the profiler's event count; None when unknown."""
    try:
        events = len(prof.profiler.kineto_results.events())
    except Exception:  # noqa: BLE001 - a torch without this API: the free-space check alone
        return None
    return int((events * BYTES_PER_EVENT + FIXED_BYTES) * (1 + GZIP_SHARE))


def check_room(prof: Any, folder: Path) -> None:
    """Raise WindowSkipped when writing the window could take the disk below keep_free."""
    free, total = _free_and_total(folder)
    keep = keep_free(total)
    room = free - keep
    if room >= COUNT_BELOW:
        return
    need = estimated_bytes(prof)
    if need is None:
        need = FIXED_BYTES
    if need > room:
        raise WindowSkipped(
            f"not enough disk space: its export needs about {_mb(need)} (uncompressed JSON, "
            f"then gzip) and the trace's filesystem has {_mb(free)} free, of which diag leaves "
            f"{_mb(keep)} to the program"
        )


def export_window(prof: Any, folder: Path, window: str) -> Path:
    """Write the stopped profiler's trace as `folder/<window>.json.gz`; the path written.

    Raises WindowSkipped (nothing written) or OSError (a write failed; nothing left behind)."""
    check_room(prof, folder.parent)
    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / f"{window}.json"
    packed = folder / f"{window}.json.gz"
    try:
        prof.export_chrome_trace(str(raw))
        if not raw.is_file():
            # kineto reports a failed write on stderr and returns: find out why.
            free, _ = _free_and_total(folder)
            if free < FULL_BELOW:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(raw))
            raise WindowSkipped("torch.profiler could not write the trace")
        with open(raw, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
    except BaseException:
        for leftover in (packed, raw, folder / f"{window}.json.tmp"):
            try:
                leftover.unlink()
            except OSError:
                pass
        raise
    try:
        raw.unlink()
    except OSError:
        pass
    return packed


def _mb(size: float) -> str:
    return f"{size / (1 << 20):.1f} MiB"
