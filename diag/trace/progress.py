"""Progress of long loads on stderr: a bar when stderr is a terminal, nothing when it is piped.

Readers take a plain `callback(done, total)`; this module turns one into a bar that redraws at
most ten times a second, so a caller never pays for drawing on every event.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from diag.trace.printable import printable

ProgressCallback = Callable[[int, int], None]

_WIDTH = 30


class ProgressBar:
    """`with ProgressBar("reading kernels") as bar: read(..., progress=bar.callback(name))`."""

    def __init__(self, label: str, stream: TextIO | None = None, force: bool = False) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = force or self.stream.isatty()
        self._last_draw = 0.0
        self._drawn = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def callback(self, item: str) -> ProgressCallback | None:
        """A callback that reports on `item`, or None when nothing would be shown."""
        if not self.enabled:
            return None

        def report(done: int, total: int) -> None:
            now = time.monotonic()
            if now - self._last_draw < 0.1 and done < total:
                return
            self._last_draw = now
            self._draw(item, done, total)

        return report

    def _draw(self, item: str, done: int, total: int) -> None:
        fraction = min(1.0, done / total) if total > 0 else 0.0
        filled = int(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        line = printable(f"{self.label} [{bar}] {fraction:4.0%} {item}", one_line=True)
        self.stream.write(f"\r\x1b[2K{line}"[:160])
        self.stream.flush()
        self._drawn = True
