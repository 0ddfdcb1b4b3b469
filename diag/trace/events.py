"""The append-only event file each recorded process writes.

One JSON object per line, each written with a single `os.write` on an O_APPEND descriptor: no
Python buffering, so a SIGKILL loses nothing that was written, and concurrent writers (threads)
never interleave inside a line. Every event carries `t`, the monotonic clock in nanoseconds,
which is system-wide on Linux and so lines up across processes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

#: One encoder for every event: json.dumps with these options builds a new JSONEncoder per
#: call, a third of an event's cost (same output).
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


class EventWriter:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._closed = False

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event now; `t` (monotonic ns) is added unless given."""
        record = {"t": fields.pop("t", None) or time.monotonic_ns(), "ev": event, **fields}
        line = (_encode(record) + "\n").encode()
        with self._lock:
            if not self._closed:
                os.write(self._fd, line)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)
