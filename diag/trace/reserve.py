"""Room kept on the trace's disk so that a recording that fills it can still say so.

Each recorded process keeps a small file of random bytes (RESERVE_FILE) beside its events, and
the launcher one at the trace's root. A process whose write fails deletes its own to write the
`recording_stopped` event; the launcher deletes its own before the manifest's last rewrite.
Random bytes, not zeros: a compressing filesystem would store zeros in no room at all.
"""

from __future__ import annotations

import os
from pathlib import Path

from diag.trace.format import RESERVE_FILE, RUNS_DIR

#: A process's reserve: its last event is a few hundred bytes, a block or two.
PROCESS_RESERVE_BYTES = 32 << 10
#: The launcher's: the manifest's last rewrite (a few KiB) and its temporary copy.
LAUNCHER_RESERVE_BYTES = 64 << 10


def make_reserve(folder: Path, size: int) -> Path | None:
    """Write `folder/RESERVE_FILE` of `size` bytes; None when there was no room for it."""
    path = folder / RESERVE_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written = os.write(fd, os.urandom(size))
        finally:
            os.close(fd)
    except OSError:
        written = -1
    if written != size:  # a disk nearly full already: holding its last bytes would starve others
        free_reserve(path)
        return None
    return path


def free_reserve(path: Path | None) -> None:
    if path is None:
        return
    try:
        path.unlink()
    except OSError:
        pass


def free_all_reserves(trace_dir: Path) -> None:
    """The launcher's, and those of processes that were killed before they freed theirs."""
    free_reserve(trace_dir / RESERVE_FILE)
    try:
        leftovers = list((trace_dir / RUNS_DIR).glob(f"*/*/{RESERVE_FILE}"))
    except OSError:
        return
    for path in leftovers:
        free_reserve(path)
