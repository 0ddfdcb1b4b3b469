"""Whether a run's recording stopped early, as the launcher finishes the manifest.

A process whose write failed ends its events.jsonl with a `recording_stopped` event (diag/trace/
events.py). The launcher reads only the end of each process's file for it, so finishing the
manifest of a long recording stays quick, and sums the processes up in the run's `truncated`
entry (docs/FORMAT.md). When a process could not even write that event (the disk filled again
before it could), the launcher's own evidence stands in: the filesystem full at the end, and a
process whose file does not end with diag's exit event.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from diag.trace import jsontext
from diag.trace.confine import OutsideTrace, open_regular
from diag.trace.format import EVENTS_FILE
from diag.trace.numerals import parse_int

#: The stop event is the last line a process writes; its exit event, the last but a few.
TAIL_BYTES = 16 << 10
#: Below this much free space the filesystem counts as full.
FULL_BELOW = 256 << 10


def _tail(path: Path) -> bytes:
    try:
        with open_regular(path, follow=False) as handle:  # never a FIFO nor a link
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            return handle.read()
    except (OSError, OutsideTrace):
        return b""


def _stop_event(tail: bytes) -> dict[str, Any] | None:
    for raw in reversed(tail.splitlines()):
        if b'"recording_stopped"' in raw:
            try:
                event = jsontext.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("ev") == "recording_stopped":
                return event
    return None


def _pid_of(folder: Path) -> int | None:
    digits = folder.name.rpartition("pid")[2]
    return parse_int(digits)


def _disk_free(folder: Path) -> int | None:
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def run_truncation(run_folder: Path) -> dict[str, Any] | None:
    """The run's `truncated` entry: why and in which processes the recording stopped early;
    None when every process recorded to its end (as far as the launcher can tell)."""
    stopped: list[tuple[int | None, dict[str, Any]]] = []
    unended: list[int | None] = []
    try:
        folders = sorted(f for f in run_folder.iterdir() if f.is_dir() and _pid_of(f) is not None)
    except OSError:
        folders = []
    for folder in folders:
        tail = _tail(folder / EVENTS_FILE)
        event = _stop_event(tail)
        if event is not None:
            stopped.append((_pid_of(folder), event))
        elif b'"process_end"' not in tail:
            unended.append(_pid_of(folder))
    if stopped:
        reasons = Counter(str(event.get("reason") or "a write failed") for _, event in stopped)
        first = stopped[0][1]
        return {
            "reason": reasons.most_common(1)[0][0],
            "processes": [pid for pid, _ in stopped],
            "error": first.get("error"),
            "file": first.get("file"),
        }
    free = _disk_free(run_folder)
    if free is not None and free < FULL_BELOW and unended:
        return {
            "reason": "disk full",
            "processes": [pid for pid in unended if pid is not None],
            "error": None,
            "file": None,
            "detail": (
                f"the trace's filesystem was full when the run ended ({free} bytes free) and "
                f"{len(unended)} process(es) did not write diag's exit event"
            ),
        }
    return None
