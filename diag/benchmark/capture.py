"""Keep a copy of a recorded program's stdout and stderr while passing both on unchanged.

Why: LightX2V times its own steps and logs them (`[Profile] ... 🚀 infer_main cost 0.13
seconds`), and that is the clock the posts' sign-off uses; diag bench reads it from the copy.

What the program sees stays what it would have seen: where diag's own stream is a terminal the
child gets a pseudo-terminal (so `isatty()`, colours, line buffering and terminal width are
unchanged; output post-processing is switched off so bytes pass through as written), else a
pipe (a file or pipe was not a terminal either). Each byte is written to diag's own file
descriptor (1 or 2, where the child's would have gone) and appended to
`runs/<label>/stdout.log` / `stderr.log` in the trace directory. A write error on the copy stops
the copy, never the passing on; a grandchild that keeps the stream open after the program
ended is not waited for longer than DRAIN_S.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import sys
import termios
import threading
from pathlib import Path
from typing import Any, BinaryIO

from diag.trace.format import run_dir

#: How long to keep draining after the program ended (a grandchild may hold the stream).
DRAIN_S = 5.0
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
_CHUNK = 65536
#: Signals the launcher takes with sigtimedwait: the copying threads must never take them.
_LAUNCHER_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD}


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


class _Stream:
    """One of the child's two streams: the child's end, ours, and the thread that copies."""

    def __init__(self, target_fd: int, log: Path) -> None:
        self.target_fd = target_fd
        self.log = log
        self.child_fd: int | None = None
        self.read_fd: int | None = None
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()

    def open(self) -> None:
        if _is_terminal(self.target_fd):
            self.read_fd, self.child_fd = os.openpty()
            _copy_terminal_settings(self.target_fd, self.child_fd)
        else:
            self.read_fd, self.child_fd = os.pipe()

    def start(self) -> None:
        if self.child_fd is not None:
            os.close(self.child_fd)  # the child holds its own copy now
            self.child_fd = None
        self.thread = threading.Thread(target=self._copy, name="diag-capture", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        assert self.read_fd is not None
        copy: BinaryIO | None
        try:
            copy = open(self.log, "ab")  # noqa: SIM115 (closed below, after the loop)
        except OSError:
            copy = None
        try:
            while not self.stop.is_set():
                try:
                    chunk = os.read(self.read_fd, _CHUNK)
                except OSError:  # EIO: the pseudo-terminal's other side closed
                    break
                if not chunk:
                    break
                _write_all(self.target_fd, chunk)
                if copy is not None:
                    try:
                        copy.write(chunk)
                        copy.flush()
                    except OSError:
                        copy = None
        finally:
            if copy is not None:
                with contextlib.suppress(OSError):
                    copy.close()

    def finish(self, wait_s: float) -> None:
        if self.child_fd is not None:
            os.close(self.child_fd)
            self.child_fd = None
        if self.thread is not None:
            self.thread.join(wait_s)
            if self.thread.is_alive():
                self.stop.set()  # a grandchild holds the stream: stop copying, leave it be
                return
        if self.read_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
            self.read_fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return  # diag's own stream is gone (a closed pipe): nothing left to show it to
        view = view[written:]


def _copy_terminal_settings(source_fd: int, pty_fd: int) -> None:
    """The pseudo-terminal gets the real one's size, and passes bytes through as written."""
    with contextlib.suppress(OSError):
        size = fcntl.ioctl(source_fd, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        fcntl.ioctl(pty_fd, termios.TIOCSWINSZ, size)
    with contextlib.suppress(termios.error):
        attrs = termios.tcgetattr(pty_fd)
        attrs[1] &= ~termios.OPOST  # no \n -> \r\n: the real terminal does that once
        termios.tcsetattr(pty_fd, termios.TCSANOW, attrs)


class TeeOutput:
    """An OutputCapture for diag.record.launcher: one per recording."""

    def __init__(self) -> None:
        self._streams: list[_Stream] = []

    def popen_kwargs(self, trace_dir: Path, run_label: str) -> dict[str, Any]:
        folder = run_dir(trace_dir, run_label)
        folder.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self._streams = [_Stream(1, folder / STDOUT_LOG), _Stream(2, folder / STDERR_LOG)]
        for stream in self._streams:
            stream.open()
        out, err = self._streams
        return {"stdout": out.child_fd, "stderr": err.child_fd}

    def child_started(self) -> None:
        # Threads inherit the signal mask they are started with: the launcher takes these
        # signals with sigtimedwait on the main thread, and a copying thread must not eat one.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _LAUNCHER_SIGNALS)
        try:
            for stream in self._streams:
                stream.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def child_ended(self) -> None:
        for stream in self._streams:
            stream.finish(DRAIN_S)
        self._streams = []


def read_output(trace_dir: Path, run_label: str = "compiled") -> tuple[str, str] | None:
    """The program's captured (stdout, stderr), or None when the trace has no copy."""
    folder = run_dir(trace_dir, run_label)
    texts: list[str] = []
    found = False
    for name in (STDOUT_LOG, STDERR_LOG):
        path = folder / name
        try:
            texts.append(path.read_bytes().decode("utf-8", errors="replace"))
            found = True
        except OSError:
            texts.append("")
    return (texts[0], texts[1]) if found else None
