"""Whether a recorded pid is still the process that recorded: pids are reused, start times not.

A trace stays `running` when its launcher was killed; any process that later gets the same pid
would make it read as "still recording" forever. The launcher and each recorded process write
their start time (the kernel's, in clock ticks since boot: /proc/<pid>/stat field 22) and the
boot id, and a pid counts as the same process only while both match. Standard library only.
"""

from __future__ import annotations

import os

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and ')')."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot; None where there is no /proc."""
    fields = _stat_fields(pid)
    # Field 22 of stat(5); the first field after the name is field 3 (the state).
    if fields is None or len(fields) < 20 or not fields[19].isdigit():
        return None
    return int(fields[19])


def boot_id() -> str | None:
    try:
        with open(_BOOT_ID, encoding="ascii") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def is_alive(pid: int, start_ticks: int | None = None) -> bool:
    """The process exists, has not exited (a zombie waiting to be reaped has), and, when its
    start time is known, is the same process (not a later one that got its pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    except OSError:
        return False
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no /proc (not Linux): kill(pid, 0) is all there is
    if fields[:1] == ["Z"]:
        return False
    if start_ticks is not None:
        return len(fields) >= 20 and fields[19] == str(start_ticks)
    return True
