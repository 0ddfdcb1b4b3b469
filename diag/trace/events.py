"""The append-only event files each recorded process writes.

One JSON object per line, each written with a single `os.write` on an O_APPEND descriptor: no
Python buffering, so a SIGKILL loses nothing that was written, and concurrent writers (threads)
never interleave inside a line. Every event carries `t`, the monotonic clock in nanoseconds,
which is system-wide on Linux and so lines up across processes.

The writer runs inside the user's program, so nothing it does may raise there. The first write
that fails (a full disk, a quota, an I/O error, a descriptor the program closed) stops the
recording in this process: the room kept at start (diag/trace/reserve.py) is freed so that a last
`recording_stopped` event can still say why and where, one `diag:` line goes to the program's
stderr, and every later event is dropped.

Bounded: with a size limit (diag record --max-size), once events.jsonl holds a segment's worth,
per-step events (ROTATED_EVENTS) continue in `steps-<n>.jsonl` segments and the oldest segment
is deleted when SEGMENTS_KEPT are open; a `steps_dropped` event in events.jsonl counts what went.
Everything else (compiles, guards, breaks, limits, crashes, request and phase boundaries) stays
in events.jsonl, so the analysis of live compiles never loses its evidence.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diag.trace.confine import open_for_write
from diag.trace.format import step_segment_name
from diag.trace.reserve import PROCESS_RESERVE_BYTES, free_reserve, make_reserve

#: One encoder for every event: json.dumps with these options builds a new JSONEncoder per
#: call, a third of an event's cost (same output).
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
#: Events written at every step, whose fields the step tracker builds from numbers and
#: strings: msgspec encodes them about 5x faster than json (2 against 10 us on a 2-core host),
#: to text a reader decodes to the same values (non-ASCII left as UTF-8 rather than escaped);
#: it is imported at the first of them, once the program has made its own imports.
FAST_EVENTS = frozenset({"step_start", "step_end", "step_gpu"})
_fast_encode: Callable[[Any], bytes] | None = None
_fast_tried = False


def _fast_encoder() -> Callable[[Any], bytes] | None:
    """msgspec's encoder, made once; None (json then) where msgspec cannot be had: tried once."""
    global _fast_encode, _fast_tried
    if _fast_encode is None and not _fast_tried:
        _fast_tried = True
        try:
            import msgspec.json

            _fast_encode = msgspec.json.Encoder(enc_hook=_as_json_would).encode
        except Exception:  # noqa: BLE001 - diag's dependency, but the program's Python decides
            return None
    return _fast_encode


def _as_json_would(value: Any) -> Any:
    """What json writes for a value msgspec does not know: a subclass of int or float (an
    IntFlag, numpy.float64) as the number, anything else as its str(), as `default=str`."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def encode_line(event: str, record: dict[str, Any]) -> bytes:
    """One event's line. A step event goes through msgspec unless it holds what msgspec writes
    otherwise than json (a NaN, bytes, a set: those it refuses or spells differently are then
    written by json, as every other event is)."""
    if event in FAST_EVENTS:
        fast = _fast_encode or _fast_encoder()
        if fast is not None:
            try:
                line = fast(record)
            except Exception:  # noqa: BLE001, S110 - json writes it below
                pass
            else:
                if b"null" not in line or _same_nulls(record, line):
                    return line + b"\n"
    return (_encode(record) + "\n").encode()


def _same_nulls(record: dict[str, Any], line: bytes) -> bool:
    """msgspec writes NaN and infinities as null where json writes NaN: true when every null
    in `line` is a None of the record (so the two agree)."""
    return line.count(b"null") == _count_none(record)


def _count_none(value: Any) -> int:
    if value is None:
        return 1
    if isinstance(value, dict):
        return sum(_count_none(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_count_none(item) for item in value)
    return 0


#: Events that come per step (or per call inside steps): the ones --max-size rotates.
ROTATED_EVENTS = frozenset(
    {"step_start", "step_end", "step_gpu", "empty_cache", "gc_collect", "gc_pause"}
)
#: Step segments kept at once, the one being written included; events.jsonl is about one more.
SEGMENTS_KEPT = 7
MIN_SEGMENT_BYTES = 64 << 10

_REASONS = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
    errno.EIO: "I/O error",
    errno.EROFS: "read-only filesystem",
    errno.EBADF: "the event file was closed under diag",
}


def write_failure_reason(exc: BaseException) -> str:
    """A failed write in a few words: `disk full`, `disk quota exceeded`, ..."""
    if isinstance(exc, OSError) and exc.errno in _REASONS:
        return _REASONS[exc.errno]
    if isinstance(exc, OSError) and exc.strerror:
        return str(exc.strerror)
    return type(exc).__name__


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{name}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def segment_limit(max_bytes: int) -> int:
    """Bytes per step segment (and of events.jsonl before rotation starts) for --max-size."""
    return max(max_bytes // (SEGMENTS_KEPT + 1), MIN_SEGMENT_BYTES)


class _Segment:
    __slots__ = ("number", "fd", "size", "steps", "first_t", "last_t")

    def __init__(self, number: int, fd: int, t: int) -> None:
        self.number = number
        self.fd = fd
        self.size = 0
        self.steps = 0
        self.first_t = t
        self.last_t = t


class EventWriter:
    def __init__(
        self,
        path: Path,
        max_bytes: int = 0,
        position: Callable[[], dict[str, Any]] | None = None,
        reserve_bytes: int = PROCESS_RESERVE_BYTES,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.folder = path.parent
        self._lock = threading.Lock()
        self._open = False
        #: Set when a write failed: the recording of this process stopped (`stop_reason` says why).
        self.stopped = False
        self.stop_reason: str | None = None
        self._position = position
        self._on_stop = on_stop
        # No bound: a limit events.jsonl never reaches, so the hot path tests one number.
        self._limit = segment_limit(max_bytes) if max_bytes > 0 else sys.maxsize
        self._head_bytes = 0
        self._rotating = False
        self._segment: _Segment | None = None
        self._closed_segments: deque[_Segment] = deque()
        self._segment_count = 0
        self._torn: int | None = None  # the descriptor a partial write left mid-line
        self._failed_fd = -1
        self._reserve: Path | None = None
        self._reserve_bytes = reserve_bytes
        self._fd = -1
        self._open_file()

    def _open_file(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._fd = open_for_write(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        except OSError as exc:
            self.stopped = True
            self.stop_reason = write_failure_reason(exc)
            _announce(self.stop_reason, exc, self.path)
            return
        self._open = True
        self._make_reserve(self._reserve_bytes)

    def forked(self, path: Path) -> None:
        """In a child made by os.fork(): write its events to `path`, its own file, from now on.

        The child holds copies of the parent's descriptors and state: they are dropped here
        without touching the parent's files (no segment unlinked, no reserve freed, nothing
        written), and the lock is a new one (another thread of the parent may have held the
        old one at the fork; that thread does not exist in the child)."""
        self._lock = threading.Lock()
        for fd in (self._fd, self._segment.fd if self._segment is not None else -1):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.path, self.folder = path, path.parent
        self._open, self._fd, self._segment = False, -1, None
        self._closed_segments = deque()
        self._segment_count, self._head_bytes, self._rotating = 0, 0, False
        self._torn, self._failed_fd, self._reserve = None, -1, None
        if not self.stopped:
            self._open_file()

    # -- writing ----------------------------------------------------------------------------------

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event now; `t` (monotonic ns) is added unless given. Never raises."""
        t = fields.pop("t", None) or time.monotonic_ns()
        try:
            line = encode_line(event, {"t": t, "ev": event, **fields})
        except Exception as exc:  # noqa: BLE001 - a value json cannot hold (a cycle, a bad __str__)
            line = _unencodable(t, event, exc)
        with self._lock:
            if not self._open:
                return
            try:
                if self._rotating and event in ROTATED_EVENTS:
                    self._write_step(line, event, t)
                else:  # inline: this is most events, and every step's when unbounded
                    size = len(line)
                    written = os.write(self._fd, line)
                    if written != size:
                        self._write_rest(self._fd, line, written)
                    self._head_bytes += size
                    if self._head_bytes >= self._limit and event != "step_start":
                        self._rotating = True  # from the next step on: a step is never split
            except OSError as exc:
                self._stop(exc, self._file_of(self._failed_fd))

    def _write(self, fd: int, line: bytes) -> None:
        """Write a whole line to a step segment or (dropped counts) events.jsonl; on failure
        `_failed_fd` says which (events.jsonl's inline writes leave it at -1)."""
        try:
            written = os.write(fd, line)
            if written != len(line):
                self._write_rest(fd, line, written)
        except OSError:
            self._failed_fd = fd
            raise

    def _write_rest(self, fd: int, line: bytes, written: int) -> None:
        """A regular file writes short only when it runs out of room: finish the line, or
        leave it torn (marked, so that the last event starts a line of its own)."""
        self._torn = fd
        view = memoryview(line)[written:]
        while view:
            view = view[os.write(fd, view) :]
        self._torn = None

    def _write_step(self, line: bytes, event: str, t: int) -> None:
        segment = self._segment
        if segment is None or (segment.size >= self._limit and event == "step_start"):
            segment = self._next_segment(t)  # at a step's start: its events stay together
        self._write(segment.fd, line)
        segment.size += len(line)
        segment.last_t = t
        if event == "step_start":
            segment.steps += 1

    def _next_segment(self, t: int) -> _Segment:
        """Close the full segment, delete the oldest beyond SEGMENTS_KEPT, open the next."""
        if self._segment is not None:
            os.close(self._segment.fd)
            self._closed_segments.append(self._segment)
            self._segment = None
        while len(self._closed_segments) >= SEGMENTS_KEPT:
            self._drop(self._closed_segments.popleft())
        self._segment_count += 1
        path = self.folder / step_segment_name(self._segment_count)
        try:
            fd = open_for_write(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC)
        except OSError:
            self._failed_fd = self._fd
            raise
        self._segment = _Segment(self._segment_count, fd, t)
        return self._segment

    def _drop(self, segment: _Segment) -> None:
        name = step_segment_name(segment.number)
        try:
            (self.folder / name).unlink()
        except FileNotFoundError:
            pass
        record = {
            "t": time.monotonic_ns(),
            "ev": "steps_dropped",
            "segment": name,
            "steps": segment.steps,
            "first_t": segment.first_t,
            "last_t": segment.last_t,
            "bytes": segment.size,
        }
        line = (_encode(record) + "\n").encode()
        self._write(self._fd, line)
        self._head_bytes += len(line)

    def _file_of(self, fd: int) -> Path:
        segment = self._segment
        if segment is not None and fd == segment.fd:
            return self.folder / step_segment_name(segment.number)
        return self.path

    # -- stopping ---------------------------------------------------------------------------------

    def stop(self, exc: BaseException, where: Path | str) -> None:
        """Another of diag's writes in this process failed (a profiler window, TORCH_TRACE):
        stop recording here, as a failed event write does."""
        with self._lock:
            if self._open:
                self._stop(exc, where)

    def _stop(self, exc: BaseException, where: Path | str) -> None:
        """Called with the lock held, once: free the reserve, leave the last word, go quiet."""
        self._open = False
        self.stopped = True
        reason = write_failure_reason(exc)
        self.stop_reason = reason
        self._free_reserve()
        record: dict[str, Any] = {
            "t": time.monotonic_ns(),
            "ev": "recording_stopped",
            "reason": reason,
            "error": _error_text(exc),
            "file": _relative(where, self.folder),
        }
        try:
            record.update(self._position() if self._position is not None else {})
            line = (_encode(record) + "\n").encode()
        except Exception:  # noqa: BLE001 - the marker is best effort
            line = (_encode({k: record[k] for k in ("t", "ev", "reason", "error")}) + "\n").encode()
        if self._torn == self._fd:
            line = b"\n" + line  # end the line the failed write left half-written
        try:
            os.write(self._fd, line)
        except OSError:
            pass  # the reserve's room was taken first: the launcher says the disk was full
        self._close_files()
        _announce(reason, exc, where)
        if self._on_stop is not None:
            try:
                self._on_stop()
            except Exception:  # noqa: BLE001,S110 - the program must not see it
                pass

    # -- the reserve ------------------------------------------------------------------------------

    def _make_reserve(self, size: int) -> None:
        if size > 0:
            self._reserve = make_reserve(self.folder, size)

    def _free_reserve(self) -> None:
        free_reserve(self._reserve)
        self._reserve = None

    # -- the end ----------------------------------------------------------------------------------

    def _close_files(self) -> None:
        for fd in (self._fd, self._segment.fd if self._segment is not None else -1):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fd = -1
        self._segment = None

    def close(self) -> None:
        with self._lock:
            if self._open:
                self._open = False
                self._close_files()
            self._free_reserve()


def _unencodable(t: int, event: str, exc: Exception) -> bytes:
    try:
        text = str(exc)[:200]
    except Exception:  # noqa: BLE001 - an exception whose text cannot be built either
        text = ""
    record = {
        "t": t,
        "ev": "collector_error",
        "where": f"encode {event}",
        "error": f"{type(exc).__name__}: {text}",
    }
    return (_encode(record) + "\n").encode()


def _relative(path: Path | str, folder: Path) -> str:
    try:
        return str(Path(path).relative_to(folder))
    except ValueError:
        return str(path)


def _announce(reason: str, exc: BaseException, where: Path | str) -> None:
    """One line on the program's stderr (the descriptor: sys.stderr may be the program's own
    object), once per process."""
    line = (
        f"diag: recording stopped in process {os.getpid()}: {reason} ({_error_text(exc)}) "
        f"writing {where}; the program runs on unchanged, diag records nothing more in it\n"
    )
    try:
        os.write(2, line.encode("utf-8", "replace"))
    except OSError:
        pass
