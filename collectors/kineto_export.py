"""A profiler window written to disk as `.json.gz` without ever filling the disk to do it.

torch.profiler writes a Chrome trace only as plain JSON (kineto writes `<path>.tmp`, then
renames it; `export_chrome_trace("x.json.gz")` writes an uncompressed temporary file too, in
the temp folder), and a window's JSON is 10-15 times its gzip. On a disk short of room that
temporary file is what fills it: kineto then prints "Failed to write to log file!" on the
program's stderr and the program's own writes fail. So the export is budgeted: before writing,
the window's JSON is estimated from its event count (BYTES_PER_EVENT, above the 270-650 bytes
measured per event on CPU and H200 traces), and a window whose JSON and gzip would leave less
than KEEP_FREE on the filesystem is skipped, with why, instead of written. Nothing is left
behind when a write fails. The JSON is written on the program's thread (save_json: Kineto
holds the GIL for it) and gzipped on diag's own (compress), where it costs the program nothing.
"""

from __future__ import annotations

import errno
import gzip
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
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


def check_room(prof: Any, folder: Path, pending: int = 0) -> None:
    """Raise WindowSkipped when writing the window could take the disk below keep_free.

    `pending`: bytes that windows already written still need (their gzip, written in the
    background): counted against the room as if already taken."""
    free, total = _free_and_total(folder)
    keep = keep_free(total)
    room = free - keep - pending
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
            + (f" and {_mb(pending)} to windows still being compressed" if pending else "")
        )


def save_json(prof: Any, folder: Path, window: str, pending: int = 0) -> Path:
    """Write the stopped profiler's trace as plain `folder/<window>.json`; the path written.

    Kineto's save holds the GIL for its whole length (measured: a Python thread beside it
    stalls for all of it), so running it on another thread would only move the stall into
    the program's steps, where nobody could tell it from the program's time. It runs on the
    thread that stopped the window, between steps, and is timed there.

    Raises WindowSkipped (nothing written) or OSError (the write failed; nothing left behind)."""
    check_room(prof, folder.parent, pending)
    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / f"{window}.json"
    try:
        prof.export_chrome_trace(str(raw))
        if not raw.is_file():
            # kineto reports a failed write on stderr and returns: find out why.
            free, _ = _free_and_total(folder)
            if free < FULL_BELOW:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(raw))
            raise WindowSkipped("torch.profiler could not write the trace")
    except BaseException:
        _remove(raw, folder / f"{window}.json.tmp")
        raise
    return raw


def compress(raw: Path) -> Path:
    """gzip `<window>.json` into `<window>.json.gz` and remove the JSON; the path written.

    zlib and the file reads and writes release the GIL, so this runs on diag's own thread
    (WindowExporter). The gzip is written under a temporary name and renamed, so a reader (or
    an exit that cuts it short) never sees half a file. Raises OSError, leaving nothing."""
    packed = raw.with_name(raw.name + ".gz")
    partial = raw.with_name(raw.name + ".gz.tmp")
    try:
        with open(raw, "rb") as src, gzip.open(partial, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(partial, packed)
    except BaseException:
        _remove(partial, packed, raw)
        raise
    _remove(raw)
    return packed


def export_window(prof: Any, folder: Path, window: str) -> Path:
    """save_json then compress, on the calling thread: `folder/<window>.json.gz`."""
    return compress(save_json(prof, folder, window))


#: What a compressed window reports back: (the .json.gz written or None, the error or None,
#: seconds the gzip took).
Done = Callable[[Path | None, BaseException | None, float], None]


class _Job:
    def __init__(self, raw: Path, done: Done) -> None:
        self.raw = raw
        self.done = done
        self.size = _size(raw)
        self.claimed = False  # its outcome was reported (by the worker, or by drain at exit)


class WindowExporter:
    """diag's own thread, started at the first window, that gzips written windows in turn.

    `drain` waits for it at exit, within a bound: a window still being compressed then is
    reported as not written (the caller says why) rather than holding the program's exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._jobs: deque[_Job] = deque()
        self._busy: _Job | None = None
        self._thread: threading.Thread | None = None

    def pending_bytes(self) -> int:
        """Room the gzips still to be written will take."""
        with self._lock:
            jobs = [*self._jobs, *([self._busy] if self._busy is not None else [])]
        return int(sum(job.size for job in jobs) * GZIP_SHARE)

    def submit(self, raw: Path, done: Done) -> None:
        with self._lock:
            self._jobs.append(_Job(raw, done))
            self._changed.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="diag-window-export", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    self._changed.wait()
                job = self._busy = self._jobs.popleft()
            started = time.monotonic()
            packed: Path | None = None
            error: BaseException | None = None
            try:
                packed = compress(job.raw)
            except Exception as exc:  # noqa: BLE001 - reported through `done`
                error = exc.with_traceback(None)
            with self._lock:
                mine = not job.claimed
                job.claimed = True
            if mine:  # reported before `drain` may return: its event lands before the last one
                try:
                    job.done(packed, error, time.monotonic() - started)
                except Exception:  # noqa: BLE001,S110 - `done` reports its own failures
                    pass
            with self._lock:
                self._busy = None
                self._changed.notify_all()

    def drain(self, timeout_s: float) -> list[Path]:
        """Wait up to `timeout_s` for every window to be compressed; the JSON files of those
        that were not (now the caller's to report; their compression may still finish)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._jobs or self._busy is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            waiting = [*([self._busy] if self._busy is not None else []), *self._jobs]
            self._jobs.clear()
            late = [job for job in waiting if not job.claimed]
            for job in late:
                job.claimed = True
        return [job.raw for job in late]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove(*paths: Path) -> None:
    for path in paths:
        try:
            path.unlink()
        except OSError:
            pass


def _mb(size: float) -> str:
    return f"{size / (1 << 20):.1f} MiB"
