"""diag's reader for torch.profiler (Kineto) Chrome traces.

Turns one trace file into GPU activities (kernels, copies, memsets) joined to the runtime or
driver call that launched them, the CPU op open at the launch and the user annotations around
it, plus the CPU ops, syncs and annotations themselves. HTA takes ~20x the time and ~5x the
memory on the same file and drops what we need (flows, the last step), so diag reads the file
itself (bench/ingest.py, docs/INGEST.md).

The file is streamed: gzip (or plain JSON) is decompressed in chunks, each chunk's events are
decoded by msgspec into a small typed struct (only the fields used here) and folded into
columns at once, so memory holds the result, not the document. Joins run at the end: kernel ->
launch by `args.correlation` (runtime and driver calls alike: cuLaunchKernelEx carries GEMMs
and Triton), launch -> CPU op by External id (lowercase `external id` in 2021 traces, else
containment on the launching thread), annotations by containment (a per-thread sweep).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import gc
import importlib
import itertools
import math
import operator
import os
import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar, Union, cast

import msgspec

from diag.errors import DiagError
from diag.trace.confine import MAX_WINDOW_JSON_BYTES, open_regular
from diag.trace.numerals import parse_int

# Bump when the parsed result changes for the same input: it invalidates derived caches.
PARSER_VERSION = 3
REGION_PREFIX = "diag.region:"

Progress = Callable[[int, int], None]
_T = TypeVar("_T")


class Activity(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One GPU-side activity and where on the CPU it came from."""

    kind: str  # "kernel" | "memcpy" | "memset"
    name: str
    ts: float  # µs, trace clock
    dur: float  # µs
    device: int
    stream: int
    correlation: int  # 0 when none
    bytes: int  # memcpy/memset bytes, else 0
    direction: str  # "HtoD" | "DtoH" | "DtoD" | "PtoP" | ""
    launcher: str  # runtime/driver call that launched it; "" unmatched
    launch_ts: float  # CPU time of the launch (µs); -1.0 unmatched
    op: str  # innermost CPU op at the launch; "" unknown
    region: str  # innermost diag.region around the launch, prefix stripped; "" none
    annotation: str  # innermost user annotation around the launch; "" none


class CpuOp(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A profiler CPU op (cat cpu_op; 2021: Operator)."""

    name: str
    ts: float
    dur: float
    tid: int
    depth: int  # nesting among CPU ops on its thread, 0 = outermost
    region: str  # innermost diag.region containing it on its thread; "" none


class Sync(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """CPU time blocked waiting for the GPU."""

    name: str
    ts: float
    dur: float
    tid: int
    kind: str  # "stream" | "device" | "event" | "other"


class Annotation(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A user annotation (record_function, diag.region, ProfilerStep) on the CPU side."""

    name: str
    ts: float
    dur: float
    tid: int


class CpuOpColumns(NamedTuple):
    """KinetoTrace.cpu_ops as columns, in the same order (read_kineto_with_columns): what
    diag.trace.kinetocache writes, without a pass over the structs to take them back."""

    names: list[str]
    ts: list[float]
    dur: list[float]
    thread_runs: list[tuple[int, int]]  # (tid, how many ops in a row)
    depth: list[int]
    region: list[str]
    region_labels: list[str]  # every value `region` can take, "" first


class KinetoTrace(msgspec.Struct):
    """One Kineto trace file, parsed and joined (read_kineto; kinetocache.load_kineto)."""

    path: str
    platform: str  # "cuda" | "rocm" | "cpu"
    base_ns: int  # unix ns = base_ns + round(ts * 1000); 0 when ts is already unix µs
    start_ts: float
    end_ts: float
    event_count: int  # raw events in the file
    activities: list[Activity]  # sorted by ts
    cpu_ops: list[CpuOp]  # sorted by ts
    syncs: list[Sync]  # sorted by ts
    annotations: list[Annotation]  # sorted by ts
    #: Complete events of categories the reader does not use, by category: what a notice
    #: names when the trace's own device work was not read (MTIA, CUPTI profiler ranges).
    unread: dict[str, int] = msgspec.field(default_factory=dict)
    #: GPU names from the file's deviceProperties ("NVIDIA A100-SXM4-80GB"), in its order.
    devices: list[str] = msgspec.field(default_factory=list)

    def unix_ns(self, ts: float) -> int:
        """Wall-clock ns of a trace timestamp (µs), to line it up with diag's events."""
        return self.base_ns + round(ts * 1000)


# --- raw events: only the fields used, unknown ones skipped by msgspec ---------------------

_Id = int | str | None


class _RawArgs(msgspec.Struct, gc=False):
    correlation: _Id = None
    external_id: _Id = msgspec.field(default=None, name="External id")
    external_id_2021: _Id = msgspec.field(default=None, name="external id")
    device: _Id = None
    stream: _Id = None
    bytes: int | float | str | None = None
    kind: _Id = None  # ROCm copies: "HtoD"
    size: int | float | str | None = None  # ROCm hipMemcpy* calls: bytes


class _RawEvent(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (`ph: "X"`), the only kind the reader uses."""

    cat: str = ""
    name: str = ""
    pid: _Id = None
    tid: _Id = None
    ts: float | None = None
    dur: float | None = None
    args: _RawArgs | None = None


class _Skipped(msgspec.Struct, tag_field="ph", gc=False):
    """Any other event (metadata, flows, instants, counters): counted, its fields never read,
    so nothing is allocated for them and no odd value in them refuses the trace."""

    cat = ""  # a class attribute, not a field: _Builder.feed reads every event's category


# Every phase of the Chrome trace format but X; an event of another phase, or without one,
# makes its chunk decode one event at a time (_decode_events), where it is skipped too.
_OTHER_PHASES = "B E i I C b n e s t f P N O D M V v R c ( ) T S F p".split()
_EVENT_TYPES: tuple[type, ...] = (
    _RawEvent,
    *(
        msgspec.defstruct(f"_Skipped_{ord(ph)}", [], bases=(_Skipped,), tag=ph, gc=False)
        for ph in _OTHER_PHASES
    ),
)
_Event = _RawEvent | _Skipped
_EVENT_UNION: Any = Union[_EVENT_TYPES]  # noqa: UP007 (a tuple of types: no | form)


class _NoPhase(_Skipped, tag="", gc=False):
    """An event of no known phase, skipped (made by _decode_events, never decoded)."""


_SKIPPED = _NoPhase()


class _RawDevice(msgspec.Struct, gc=False):
    name: str | None = None


class _RawDoc(msgspec.Struct):
    traceEvents: list[_EVENT_UNION] | None = None  # noqa: N815 (the file's key)
    baseTimeNanoseconds: int | float | None = None  # noqa: N815
    # Raw, decoded apart: a foreign layout of this optional key must not refuse the trace.
    deviceProperties: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # noqa: N815


class _RawDocEvents(msgspec.Struct):
    """The document with its events left raw: for one holding an event of no known phase."""

    traceEvents: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # noqa: N815


_CPU, _ANNOTATION, _RUNTIME, _KERNEL, _MEMCPY, _MEMSET, _SYNC = range(7)
_CATEGORIES = {
    "cpu_op": _CPU,
    "Operator": _CPU,
    "user_annotation": _ANNOTATION,
    "cuda_runtime": _RUNTIME,
    "cuda_driver": _RUNTIME,
    "Runtime": _RUNTIME,
    "Driver": _RUNTIME,
    "privateuse1_runtime": _RUNTIME,
    "privateuse1_driver": _RUNTIME,
    "kernel": _KERNEL,
    "Kernel": _KERNEL,
    "gpu_memcpy": _MEMCPY,
    "Memcpy": _MEMCPY,
    "gpu_memset": _MEMSET,
    "Memset": _MEMSET,
    "cuda_sync": _SYNC,
}
# Complete events that carry nothing the analyses use, on any platform: no notice for them.
_KNOWN_UNUSED = frozenset(
    {"python_function", "gpu_user_annotation", "overhead", "Trace", "ac2g", "", "fwdbwd",
     "cpu_instant_event", "Python", "python", "kineto", "Memory", "gpu_mem_alloc"}
)  # fmt: skip
_ACTIVITY_KIND = {_KERNEL: "kernel", _MEMCPY: "memcpy", _MEMSET: "memset"}
_DIRECTIONS = ("HtoD", "DtoH", "DtoD", "PtoP")
_DIGITS = re.compile(r"-?[0-9]+", re.ASCII)


def _as_int(value: object) -> int:
    """Ids and numbers as Kineto writes them: ints, or strings like "7", "stream 7", "0x0"."""
    if type(value) is int:
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 0
    if isinstance(value, str):
        if value.startswith("0x"):
            try:
                return int(value, 16)
            except ValueError:
                return 0
        found = _DIGITS.search(value)
        return (parse_int(found.group(), signed=True) or 0) if found else 0
    return 0


def _sync_kind(name: str) -> str | None:
    """Which wait a runtime call or cuda_sync activity is; None when it is not a CPU wait."""
    lower = name.lower()
    if "wait" in lower and "event" in lower:
        return None  # cudaStreamWaitEvent / "Stream Wait Event": the GPU waits, not the CPU
    if "synchronize" not in lower and not lower.endswith(" sync"):
        return None
    if "stream" in lower:
        return "stream"
    if "device" in lower or "ctx" in lower or "context" in lower:
        return "device"
    if "event" in lower:
        return "event"
    return "other"


def _direction(name: str) -> str:
    """`Memcpy HtoD (Pinned -> Device)` -> "HtoD"."""
    if name.startswith("Memcpy "):
        word = name[7:11]
        if word in _DIRECTIONS:
            return word
    return ""


# --- streaming the document ------------------------------------------------------------------

# 1 MiB pieces: a piece's decoded structs are still in cache when the fold reads them (16 MiB
# pieces spilled them: ~8% more CPU for decode + fold, bench/ingest.py at 259 MB).
_CHUNK = 1 << 20
_UTF8_BOM = b"\xef\xbb\xbf"
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_BYTE_OFFSET = re.compile(r" \(byte \d+\)")
_EVENT_INDEX = re.compile(r"(?:\$\.traceEvents|\$)\[(\d+)\]")
_DECODE_EVENTS = msgspec.json.Decoder(list[_EVENT_UNION])
_DECODE_EVENT = msgspec.json.Decoder(_EVENT_UNION)
_DECODE_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_DECODE_DOC = msgspec.json.Decoder(_RawDoc)
_DECODE_DOC_EVENTS = msgspec.json.Decoder(_RawDocEvents)
# msgspec's words for an event whose phase is not one of the tags, not a string, or missing.
_PHASE_IN_LIST = re.compile(
    r"(?:missing required field `ph` - at `\$(?:\.traceEvents)?\[\d+\]`"
    r"|at `\$(?:\.traceEvents)?\[\d+\]\.ph`)$"
)
_PHASE_ALONE = ("- at `$.ph`", "missing required field `ph`")


def _decode_events(data: Any) -> list[_Event]:
    """The events of a JSON array. A chunk whose events all have a known phase decodes in
    one call; otherwise event by event, an event of an unknown phase (or none, or one that
    is not a string) being skipped as every event but X is."""
    try:
        events: list[_Event] = _DECODE_EVENTS.decode(data)
        return events
    except msgspec.ValidationError as exc:
        if not _PHASE_IN_LIST.search(str(exc)):
            raise
    events = []
    for index, raw in enumerate(_DECODE_RAW_EVENTS.decode(data)):
        try:
            events.append(_DECODE_EVENT.decode(raw))
        except msgspec.ValidationError as exc:
            text = str(exc)
            if not text.endswith(_PHASE_ALONE):
                where = f"- at `$[{index}]"
                text = (
                    text.replace("- at `$", where, 1) if "- at `$" in text else f"{text} {where}`"
                )
                raise msgspec.ValidationError(text) from None
            events.append(_SKIPPED)
    return events


def _inflate_module() -> Any:
    """isal's zlib (ISA-L: ~3x stdlib zlib's inflate) when installed, else the stdlib's."""
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:
        return zlib


_INFLATE: Any = _inflate_module()
_GZIP_ERRORS: tuple[type[BaseException], ...] = (zlib.error, _INFLATE.error)
_COMPRESSED_READ = 1 << 20


def _inflated(raw: BinaryIO, module: Any) -> Iterator[bytes]:
    """The gzip file's content in pieces of at most _CHUNK bytes (a bomb stays bounded).

    zlib is fed 1 MiB reads and releases the GIL for each whole inflate: unlike GzipFile's
    8 KiB steps in Python, this overlaps with decoding on the main thread. Members follow
    one another (zero padding between them is skipped, as gzip does); a file that ends
    inside a member raises EOFError.
    """
    inflater = module.decompressobj(31)
    started = False
    data = b""
    while True:
        if not data:
            data = raw.read(_COMPRESSED_READ)
            if not data:
                if started and not inflater.eof:
                    raise EOFError("the gzip stream ends before its end marker")
                return
        if inflater.eof:
            data = data.lstrip(b"\x00")
            if not data:
                continue
            inflater = module.decompressobj(31)
        out = inflater.decompress(data, _CHUNK)
        started = True
        data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        if out:
            yield out


class _Source:
    """The file's decompressed bytes in chunks, with how far into the file it has read.

    A thread reads ahead: zlib and file reads release the GIL, so decompressing the next chunk
    overlaps with decoding this one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # Never a plain open(): a FIFO would block it, and a device has no end.
            self.raw: BinaryIO = open_regular(path)
        except FileNotFoundError:
            raise DiagError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise DiagError(f"{path}: is a directory, not a Kineto trace file") from None
        except OSError as exc:
            raise DiagError(f"{path}: cannot read ({exc.strerror})") from None
        self.size = os.fstat(self.raw.fileno()).st_size
        self.done = 0
        self.gzipped = self.raw.read(2) == b"\x1f\x8b"
        self.raw.seek(0)
        self._queue: queue.Queue[tuple[bytes | BaseException, int]] = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._eof = False
        self._thread = threading.Thread(target=self._pump, name="diag-kineto-read", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            if self.gzipped:
                pieces: Iterator[bytes] = _inflated(self.raw, _INFLATE)
            else:
                pieces = iter(functools.partial(self.raw.read, _CHUNK), b"")
            inflated = 0
            for data in pieces:
                if self._stop.is_set():
                    return
                inflated += len(data)
                if inflated > MAX_WINDOW_JSON_BYTES:
                    raise DiagError(
                        f"{self.path}: holds more than {MAX_WINDOW_JSON_BYTES >> 30} GiB of JSON "
                        "(diag's limit for one profiler trace)"
                    )
                self._offer((data, self.raw.tell()))
            self._offer((b"", self.raw.tell()))
        except BaseException as exc:  # handed to the reading thread, which raises it
            self._offer((exc, 0))

    def _offer(self, item: tuple[bytes | BaseException, int]) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.05)
                return

    def read(self) -> bytes:
        """The next chunk; b"" at the end."""
        if self._eof:
            return b""
        data, self.done = self._queue.get()
        if isinstance(data, EOFError):
            raise DiagError(f"{self.path}: truncated gzip file (it ends mid-stream)")
        if isinstance(data, _GZIP_ERRORS):
            raise DiagError(f"{self.path}: corrupt gzip data ({data})")
        if isinstance(data, OSError):
            raise DiagError(f"{self.path}: cannot read ({data})")
        if isinstance(data, BaseException):
            raise data
        self._eof = not data
        return data

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.raw.close()


def _event_chunks(
    source: _Source, doc: _RawDoc, progress: Progress | None
) -> Iterator[list[_Event]]:
    """Decoded traceEvents, a chunk at a time; fills `doc` with the top-level fields.

    The array is cut after a `}` `,` `{` sequence and each piece decoded as a list: a cut that
    falls inside a string or a nested object leaves the piece invalid JSON, so a decode that
    succeeds proves the cut was between two events; a failed cut just waits for more data.
    Anything unusual (no traceEvents key early, odd layout) falls back to decoding it whole.
    """
    buf = source.read()
    if buf.startswith(_UTF8_BOM):  # an editor's byte-order mark: JSON itself has none
        buf = buf[len(_UTF8_BOM) :]
    if not buf.strip():
        raise DiagError(f"{source.path}: empty file, not a Kineto trace")
    key = _EVENTS_KEY.search(buf)
    head: _RawDoc | None = None
    if key is not None:
        try:
            head = _DECODE_DOC.decode(buf[: key.end()] + b"]}")
        except msgspec.MsgspecError:
            head = None
    if key is None or head is None:  # no streaming: read it all and decode once
        while more := source.read():
            buf += more
        whole = _decode_doc(source.path, buf, 0, whole=True)
        del buf
        doc.baseTimeNanoseconds = whole.baseTimeNanoseconds
        doc.deviceProperties = whole.deviceProperties
        yield whole.traceEvents or []
        return
    doc.baseTimeNanoseconds = head.baseTimeNanoseconds
    doc.deviceProperties = head.deviceProperties
    pending = bytearray(b"[")
    pending += memoryview(buf)[key.end() :]
    del buf
    decoded = 0
    eof = False
    while not eof:
        more = source.read()
        eof = not more
        pending += more
        if progress is not None:
            progress(source.done, source.size)
        cut = None if eof else _last_boundary(pending)
        if cut is None:
            continue
        comma = pending.index(b",", cut)
        pending[comma] = ord("]")
        try:
            events = _decode_events(memoryview(pending)[: comma + 1])
        except msgspec.ValidationError as exc:
            raise _bad_event(source.path, exc, decoded) from None
        except msgspec.DecodeError:
            pending[comma] = ord(",")  # not a cut between events: read on
            continue
        decoded += len(events)
        yield events
        del events
        rest = pending.index(b"{", comma)
        pending = bytearray(b"[") + memoryview(pending)[rest:]
    data = b'{"traceEvents":' + bytes(pending)
    del pending
    tail = _decode_doc(source.path, data, decoded, whole=False)
    del data
    if tail.baseTimeNanoseconds is not None:
        doc.baseTimeNanoseconds = tail.baseTimeNanoseconds
    if tail.deviceProperties:
        doc.deviceProperties = tail.deviceProperties
    yield tail.traceEvents or []


def _last_boundary(buf: bytearray) -> int | None:
    window = 1 << 16
    while True:
        start = max(1, len(buf) - window)
        last = None
        for last in _BOUNDARY.finditer(buf, start):  # noqa: B007 (only the last one matters)
            pass
        if last is not None or start == 1:
            return last.start() if last is not None else None
        window *= 8


def _decode_doc(path: Path, data: bytes, offset: int, whole: bool) -> _RawDoc:
    """The document, or its remainder after streamed chunks (`offset` events decoded before)."""
    try:
        try:
            doc = _DECODE_DOC.decode(data)
        except msgspec.ValidationError as exc:
            if not _PHASE_IN_LIST.search(str(exc)):
                raise
            doc = _doc_event_by_event(data)
    except msgspec.ValidationError as exc:
        if "- at `$." in str(exc):
            raise _bad_event(path, exc, offset) from None
        raise DiagError(f"{path}: not a Kineto trace (expected a JSON object)") from None
    except msgspec.DecodeError as exc:
        reason = str(exc) if whole else _BYTE_OFFSET.sub("", str(exc))  # not the file's offset
        raise DiagError(f"{path}: not a Kineto trace: invalid JSON ({reason})") from None
    except RecursionError:
        raise DiagError(f"{path}: not a Kineto trace: invalid JSON (nested too deep)") from None
    if doc.traceEvents is None:
        raise DiagError(f"{path}: not a Kineto trace (no traceEvents list)")
    return doc


def _doc_event_by_event(data: bytes) -> _RawDoc:
    """The document, its events decoded one by one (an event of no known phase is skipped)."""
    raw = _DECODE_DOC_EVENTS.decode(data)
    try:
        events = _decode_events(raw.traceEvents)
    except msgspec.ValidationError as exc:
        text = str(exc).replace("- at `$[", "- at `$.traceEvents[", 1)
        raise msgspec.ValidationError(text) from None
    doc = _DECODE_DOC.decode(data.replace(bytes(raw.traceEvents), b"[]", 1))
    doc.traceEvents = events
    return doc


def _bad_event(path: Path, exc: msgspec.ValidationError, offset: int) -> DiagError:
    """One line naming the event by its index in the whole file, not in the chunk."""
    text = _EVENT_INDEX.sub(lambda m: f"traceEvents[{int(m.group(1)) + offset}]", str(exc))
    return DiagError(f"{path}: unexpected value in a trace event: {text}")


# --- folding events into columns -------------------------------------------------------------


class _Builder:
    """Columns of what the joins need, filled chunk by chunk; names interned once each."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        # CPU ops
        self.cpu_name: list[str] = []
        self.cpu_ts: list[float] = []
        self.cpu_dur: list[float] = []
        self.cpu_tid: list[int] = []
        self.cpu_ext_ids: list[_Id] = []  # as the file has them; ints in finish()
        self.cpu_ext: dict[int, int] = {}  # External id -> op index, made in finish()
        self.cpu_last_end: float | None = None  # the ops' last end, when _cpu_ops had it
        self.cpu_columns = CpuOpColumns([], [], [], [], [], [], [""])  # made in _cpu_ops
        # runtime and driver calls
        self.rt_name: list[str] = []
        self.rt_ts: list[float] = []
        self.rt_tid: list[int] = []
        self.rt_ext: list[int] = []
        self.rt_by_corr: dict[int, int] = {}
        self.rt_bytes: dict[int, int] = {}  # ROCm memcpy calls carry the size, the copy does not
        self.rt_sync: dict[str, str | None] = {}
        self.rt_kind: dict[str, tuple[str | None, bool]] = {}  # name -> (wait kind, launches)
        self.hip = False
        # GPU activities
        self.act_kind: list[int] = []
        self.act_name: list[str] = []
        self.act_ts: list[float] = []
        self.act_dur: list[float] = []
        self.act_device: list[int] = []
        self.act_stream: list[int] = []
        self.act_corr: list[int] = []
        self.act_bytes: list[int] = []
        self.act_direction: list[str] = []
        self.act_ext: list[int] = []
        self.annotations: list[Annotation] = []
        self.syncs: list[tuple[Sync, int]] = []  # runtime calls, with their correlation
        self.sync_activities: list[tuple[Sync, int]] = []  # cat cuda_sync, likewise
        self.event_count = 0
        self.unread: dict[str, int] = {}
        self.start = float("inf")
        self.end = float("-inf")

    def feed(self, events: list[_Event]) -> None:
        """Fold one decoded chunk into the columns.

        One loop with every path inline (a method call per event costs more than its body):
        CPU ops, most of a trace, first and shortest (their span is taken from the columns in
        finish(), not per op); runtime calls and GPU activities next, ids made ints only when
        the file does not have them as ints already. Skipped events read as category "".
        """
        self.event_count += len(events)
        categories = _CATEGORIES
        unread = self.unread
        names = self.names
        start, end = self.start, self.end
        cpu_name, cpu_ts, cpu_dur = self.cpu_name, self.cpu_ts, self.cpu_dur
        cpu_ext = self.cpu_ext_ids
        cpu_tid: list[Any] = self.cpu_tid  # a thread as the file has it: ints in finish()
        rt_name, rt_ts, rt_tid, rt_ext = self.rt_name, self.rt_ts, self.rt_tid, self.rt_ext
        rt_kind, rt_by_corr = self.rt_kind, self.rt_by_corr
        # Skipped events are read as category "" only (the class attribute), never further.
        for ev in cast(list[_RawEvent], events):
            cat = ev.cat
            if cat == "cpu_op":
                ts = ev.ts
                if ts is None:
                    continue
                args = ev.args
                if args is None:
                    cpu_ext.append(None)
                else:
                    ext = args.external_id
                    cpu_ext.append(ext if ext is not None else args.external_id_2021)
                name = ev.name
                try:
                    name = names[name]
                except KeyError:
                    names[name] = name
                cpu_name.append(name)
                cpu_ts.append(ts)
                cpu_dur.append(ev.dur or 0.0)
                cpu_tid.append(ev.tid)
                continue
            kind = categories.get(cat)
            if kind is None:
                if cat not in _KNOWN_UNUSED:
                    unread[cat] = unread.get(cat, 0) + 1
                continue
            ts = ev.ts
            if ts is None:
                continue
            dur = ev.dur or 0.0
            if ts < start:
                start = ts
            if ts + dur > end:
                end = ts + dur
            tid = ev.tid
            if type(tid) is not int:
                tid = _as_int(tid)
            args = ev.args
            name = ev.name
            try:
                name = names[name]
            except KeyError:
                names[name] = name
            if kind == _RUNTIME:
                known = rt_kind.get(name)
                if known is None:
                    known = self._runtime_kind(name)
                sync, launches = known
                if args is None:
                    corr = 0
                else:
                    corr = args.correlation  # type: ignore[assignment]
                    if type(corr) is not int:
                        corr = _as_int(corr)
                if sync is not None:
                    self.syncs.append((Sync(name, ts, dur, tid, sync), corr))
                if not corr or args is None:  # (no args: no correlation)
                    continue
                index = len(rt_name)
                if launches or corr not in rt_by_corr:
                    rt_by_corr[corr] = index
                rt_name.append(name)
                rt_ts.append(ts)
                rt_tid.append(tid)
                ext = args.external_id
                if ext is None:
                    ext = args.external_id_2021
                rt_ext.append(ext if type(ext) is int else _as_int(ext))
                if args.size is not None:
                    self.rt_bytes[index] = _as_int(args.size)
            elif kind == _CPU:
                cpu_ext.append(_external_id(args))
                cpu_name.append(name)
                cpu_ts.append(ts)
                cpu_dur.append(dur)
                cpu_tid.append(tid)
            elif kind == _ANNOTATION:
                self.annotations.append(Annotation(name, ts, dur, tid))
            elif kind == _SYNC:
                sync = _sync_kind(name)
                if sync is not None:
                    corr = _as_int(args.correlation) if args is not None else 0
                    self.sync_activities.append((Sync(name, ts, dur, tid, sync), corr))
            else:
                self._activity(kind, name, ts, dur, ev, tid, args)
        self.start, self.end = start, end

    def span(self) -> tuple[float, float]:
        """First start and last end over every event read, CPU ops included."""
        start, end = self.start, self.end
        if self.cpu_ts:
            start = min(start, min(self.cpu_ts))
            last = self.cpu_last_end
            if last is None:
                last = max(map(operator.add, self.cpu_ts, self.cpu_dur))
            end = max(end, last)
        return start, end

    def _runtime_kind(self, name: str) -> tuple[str | None, bool]:
        """Once per call name: which wait it is, whether it launches."""
        known = self.rt_kind[name] = (_sync_kind(name), "aunch" in name or "emcpy" in name)
        self.rt_sync[name] = known[0]
        self.hip = self.hip or name.startswith("hip")
        return known

    def _activity(
        self,
        kind: int,
        name: str,
        ts: float,
        dur: float,
        ev: _RawEvent,
        tid: int,
        args: _RawArgs | None,
    ) -> None:
        self.act_kind.append(kind)
        self.act_name.append(name)
        self.act_ts.append(ts)
        self.act_dur.append(dur)
        if args is None:
            args = _NO_ARGS
        device, stream, corr, size = args.device, args.stream, args.correlation, args.bytes
        if device is None:
            device = ev.pid
        self.act_device.append(device if type(device) is int else _as_int(device))
        if stream is None:
            stream = tid
        self.act_stream.append(stream if type(stream) is int else _as_int(stream))
        self.act_corr.append(corr if type(corr) is int else _as_int(corr))
        self.act_bytes.append(size if type(size) is int else _as_int(size))
        direction = ""
        if kind == _MEMCPY:
            direction = _direction(name)
            if not direction and isinstance(args.kind, str) and args.kind in _DIRECTIONS:
                direction = args.kind
        self.act_direction.append(direction)
        ext = args.external_id
        if ext is None:
            ext = args.external_id_2021
        self.act_ext.append(ext if type(ext) is int else _as_int(ext))

    # --- joins ---------------------------------------------------------------------------------

    def finish(self, path: str, base_ns: int) -> KinetoTrace:
        self.cpu_tid = _ints(self.cpu_tid)
        # Each activity's launching call (0 is never a key of rt_by_corr: no correlation, no
        # launch), looked up once for both joins.
        launch_rows = list(map(self.rt_by_corr.get, self.act_corr, itertools.repeat(-1)))
        used = set(launch_rows)
        used.discard(-1)
        self.cpu_ext = self._ops_by_external_id(used, launch_rows)
        annotations = _by_thread(self.annotations)
        regions = {
            tid: [
                (a.ts, a.ts + a.dur, a.name[len(REGION_PREFIX) :])
                for a in items
                if a.name.startswith(REGION_PREFIX)
            ]
            for tid, items in annotations.items()
        }
        cpu_ops, cpu_rows = self._cpu_ops(regions)
        launches = self._launches(annotations, regions, cpu_rows, used)
        activities = self._activities(launches, launch_rows)
        activities.sort(key=_TS)
        syncs = self._syncs()
        self.annotations.sort(key=_TS)
        if self.hip:
            platform = "rocm"
        elif activities or self.rt_sync:
            platform = "cuda"
        else:
            platform = "cpu"
        first, last = self.span()
        empty = first > last
        return KinetoTrace(
            path=path,
            platform=platform,
            base_ns=base_ns,
            start_ts=0.0 if empty else first,
            end_ts=0.0 if empty else last,
            event_count=self.event_count,
            unread=self.unread,
            activities=activities,
            cpu_ops=cpu_ops,
            syncs=syncs,
            annotations=self.annotations,
        )

    def _ops_by_external_id(self, used: set[int], launch_rows: list[int]) -> dict[int, int]:
        """External id -> index of the (last) CPU op with it, for the ids that a join looks up:
        those of the launches used and of activities without one (a dict of every op's id was
        a tenth of the first open's peak memory at 1 GB, and its time to build)."""
        needed = set(map(self.rt_ext.__getitem__, used))
        needed.update(
            itertools.compress(self.act_ext, map(operator.lt, launch_rows, itertools.repeat(0)))
        )
        needed.discard(0)  # 0: no External id
        external = _ints(self.cpu_ext_ids)
        self.cpu_ext_ids = []
        if not needed:
            return {}
        keep = list(map(needed.__contains__, external))
        rows = itertools.compress(range(len(external)), keep)
        return dict(zip(itertools.compress(external, keep), rows, strict=True))  # the last op wins

    def _cpu_ops(self, regions: dict[int, list[_Interval]]) -> tuple[list[CpuOp], _Rows]:
        """CPU ops with depth and region; and per thread, its ops sorted outer first."""
        names, all_ts, all_dur, all_tid = self.cpu_name, self.cpu_ts, self.cpu_dur, self.cpu_tid
        tids = sorted(set(all_tid))
        ops: list[CpuOp] = []
        threads: _Rows = {}
        # The ops' fields in their output order, for the cache (CpuOpColumns).
        col_names: list[str] = []
        col_ts: list[float] = []
        col_dur: list[float] = []
        col_tid: list[int] = []
        col_depth: list[int] = []
        col_region: list[str] = []
        for tid in tids:
            if len(tids) == 1:  # the usual case: the columns as they are
                op_names, starts, durs = names, all_ts, all_dur
            else:
                index = list(itertools.compress(range(len(names)), map(tid.__eq__, all_tid)))
                op_names = list(map(names.__getitem__, index))
                starts = list(map(all_ts.__getitem__, index))
                durs = list(map(all_dur.__getitem__, index))
            if not _outer_first(starts, durs):  # (start, longer first, file order)
                order = sorted(zip(starts, [-d for d in durs], range(len(starts)), strict=True))
                op_names = [op_names[row[2]] for row in order]
                starts = [row[0] for row in order]
                durs = [-row[1] for row in order]
                del order
            ends = list(map(operator.add, starts, durs))
            if starts is all_ts and durs is all_dur:  # the file's order: span() can use ends
                self.cpu_last_end = max(ends, default=-math.inf)
            depths = _depths(starts, ends)
            threads[tid] = (starts, ends, op_names)
            inner = _innermost(regions.get(tid, []), starts)
            ops.extend(map(CpuOp, op_names, starts, durs, itertools.repeat(tid), depths, inner))
            if len(tids) == 1:
                col_names, col_ts, col_dur, col_depth, col_region = (
                    op_names, starts, durs, depths, inner
                )  # fmt: skip
            else:
                col_names += op_names
                col_ts += starts
                col_dur += durs
                col_tid += itertools.repeat(tid, len(starts))
                col_depth += depths
                col_region += inner
        if len(tids) > 1:  # by start, threads interleaved (a stable sort, as ops.sort would be)
            by_start = sorted(range(len(ops)), key=col_ts.__getitem__)
            ops = _permuted(ops, by_start)
            col_names, col_ts = _permuted(col_names, by_start), _permuted(col_ts, by_start)
            col_dur, col_tid = _permuted(col_dur, by_start), _permuted(col_tid, by_start)
            col_depth, col_region = _permuted(col_depth, by_start), _permuted(col_region, by_start)
            runs = [(tid, len(list(run))) for tid, run in itertools.groupby(col_tid)]
        else:
            runs = [(tid, len(ops)) for tid in tids]
        labels = ["", *(label for intervals in regions.values() for _, _, label in intervals)]
        self.cpu_columns = CpuOpColumns(
            col_names, col_ts, col_dur, runs, col_depth, col_region, list(dict.fromkeys(labels))
        )
        return ops, threads

    def _launches(
        self,
        annotations: dict[int, list[Annotation]],
        regions: dict[int, list[_Interval]],
        cpu_rows: _Rows,
        used: set[int],
    ) -> dict[int, tuple[str, float, str, str, str]]:
        """Per launching call used by an activity: (name, ts, op, region, annotation)."""
        names, starts, exts, rt_tid = self.rt_name, self.rt_ts, self.rt_ext, self.rt_tid
        threads: dict[int, list[int]] = {}
        if len(set(map(rt_tid.__getitem__, used))) == 1:  # the usual case: one launching thread
            threads[rt_tid[next(iter(used))]] = list(used)
        else:
            for index in used:
                threads.setdefault(rt_tid[index], []).append(index)
        cpu_ext = self.cpu_ext
        op_name = [*self.cpu_name, None].__getitem__  # index -1: no op with that External id
        result: dict[int, tuple[str, float, str, str, str]] = {}
        for tid, order in threads.items():
            order.sort(key=starts.__getitem__)
            times = list(map(starts.__getitem__, order))
            marks = [(a.ts, a.ts + a.dur, a.name) for a in annotations.get(tid, [])]
            inner_region = _innermost(regions.get(tid, []), times)
            inner_mark = _innermost(marks, times)
            ops: list[str | None] = list(
                map(op_name, map(cpu_ext.get, map(exts.__getitem__, order), itertools.repeat(-1)))
            )
            if None in ops:  # no External id to follow: the innermost op around the launch
                # (found below for each: no None is left in ops)
                missing = [k for k, op in enumerate(ops) if op is None]
                starts_ends_names = cpu_rows.get(tid, ([], [], []))
                spans = list(zip(*starts_ends_names, strict=True))
                found = _innermost(spans, [times[k] for k in missing])
                for k, op in zip(missing, found, strict=True):
                    ops[k] = op
            rows = zip(
                map(names.__getitem__, order), times, ops, inner_region, inner_mark, strict=True
            )
            result.update(zip(order, rows, strict=True))  # type: ignore[arg-type]
        return result

    def _activities(
        self, launches: dict[int, tuple[str, float, str, str, str]], index: list[int]
    ) -> list[Activity]:
        """The activities with their launch, in C-level maps over the columns: a Python step
        only for those without a launch but with an External id, and for ROCm copy sizes."""
        corrs = self.act_corr
        rows = list(map(launches.get, index, itertools.repeat(("", -1.0, "", "", ""))))
        launcher, launch_ts, op, region, mark = (
            list(map(operator.itemgetter(k), rows)) for k in range(5)
        )
        cpu_ext, cpu_name, act_ext = self.cpu_ext, self.cpu_name, self.act_ext
        for i in itertools.compress(
            range(len(index)), map(operator.lt, index, itertools.repeat(0))
        ):
            if act_ext[i]:
                op_index = cpu_ext.get(act_ext[i], -1)
                op[i] = cpu_name[op_index] if op_index >= 0 else ""
        sizes = self.act_bytes
        if self.rt_bytes:  # ROCm: a copy's size is on its runtime call
            rt_bytes, kinds = self.rt_bytes, self.act_kind
            sizes = [
                size or (rt_bytes.get(at, 0) if kind != _KERNEL and at >= 0 else size)
                for size, kind, at in zip(sizes, kinds, index, strict=True)
            ]
        return list(
            map(
                Activity,
                map(_ACTIVITY_KIND.__getitem__, self.act_kind),
                self.act_name,
                self.act_ts,
                self.act_dur,
                self.act_device,
                self.act_stream,
                corrs,
                sizes,
                self.act_direction,
                launcher,
                launch_ts,
                op,
                region,
                mark,
            )
        )

    def _syncs(self) -> list[Sync]:
        """Runtime sync calls, plus cuda_sync activities that no runtime call already covers."""
        seen = {corr for _, corr in self.syncs if corr}
        syncs = [sync for sync, _ in self.syncs]
        for sync, corr in self.sync_activities:
            if corr and corr in seen:
                continue
            index = self.rt_by_corr.get(corr, -1) if corr else -1
            tid = self.rt_tid[index] if index >= 0 else sync.tid
            syncs.append(Sync(sync.name, sync.ts, sync.dur, tid, sync.kind))
        syncs.sort(key=_TS)
        return syncs


_Interval = tuple[float, float, str]  # start, end, label
_Rows = dict[
    int, tuple[list[float], list[float], list[str]]
]  # tid -> starts, ends, names, outer first


def _permuted(column: list[_T], order: list[int]) -> list[_T]:
    return list(map(column.__getitem__, order))


def _depths(starts: list[float], ends: list[float]) -> list[int]:
    """Each op's nesting depth: the ops still open at its start (a stack of their ends; an op
    ends before one that starts at its end). The end on top is kept in a local, out of the
    stack, and starts as a bottom that never closes: a pop is one call, with no emptiness
    check and no read of the new top."""
    depths: list[int] = []
    below: list[float] = []  # the ends under the top one
    pop, push = below.pop, below.append
    top = math.inf
    depth = 0
    try:
        for start, end in zip(starts, ends, strict=True):
            while top <= start:
                top = pop()
                depth -= 1
            depths.append(depth)
            push(top)
            top = end
            depth += 1
    except IndexError:  # a start of +inf passed the bottom too: the checked sweep
        return _depths_checked(starts, ends)
    return depths


def _depths_checked(starts: list[float], ends: list[float]) -> list[int]:
    depths: list[int] = []
    open_ends: list[float] = []
    for start, end in zip(starts, ends, strict=True):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        depths.append(len(open_ends))
        open_ends.append(end)
    return depths


def _outer_first(starts: list[float], durs: list[float]) -> bool:
    """Whether a thread's ops are already sorted by start, longer first on ties (Kineto
    writes them so): then no sort, and no tuple per op, is needed."""
    if all(map(operator.lt, starts, itertools.islice(starts, 1, None))):
        return True  # strictly increasing: no ties to look at either
    if sorted(starts) != starts:  # timsort's float compare: one fast pass when in order
        return False
    following = itertools.islice(starts, 1, None)
    ties = list(itertools.compress(itertools.count(), map(operator.eq, starts, following)))
    later = durs[1:]
    return all(map(operator.ge, map(durs.__getitem__, ties), map(later.__getitem__, ties)))


_NO_ARGS = _RawArgs()


def _ints(values: list[Any]) -> list[int]:
    """The values as ints (_as_int), without a Python step per value when all are ints.

    They are ids as decoded (int | str | None): sum() runs at C speed over ints and raises
    on a str or None, which then get the Python step.
    """
    try:
        sum(values)
    except TypeError:
        return [v if type(v) is int else _as_int(v) for v in values]
    return values


def _external_id(args: _RawArgs | None) -> int:
    if args is None:
        return 0
    ext = args.external_id if args.external_id is not None else args.external_id_2021
    return ext if type(ext) is int else _as_int(ext)


_TS = operator.attrgetter("ts")


def _by_thread(annotations: list[Annotation]) -> dict[int, list[Annotation]]:
    """Annotations per thread, outer first: sorted by start, longer first on ties."""
    threads: dict[int, list[Annotation]] = {}
    for item in annotations:
        threads.setdefault(item.tid, []).append(item)
    for items in threads.values():
        items.sort(key=lambda a: (a.ts, -a.dur))
    return threads


def _innermost(intervals: list[_Interval], times: list[float]) -> list[str]:
    """For each time (ascending), the label of the innermost interval holding it, else "".

    `intervals` are sorted by start, outer first on ties; a stack of the open ones makes it one
    pass. Intervals that overlap without nesting (clock rounding) resolve to the later one.
    The answer only changes where an interval starts or the top one ends, so the times in
    between are found by bisection and filled at once: a step per interval, not per time.
    """
    if not intervals:
        return [""] * len(times)
    out: list[str] = []
    ends: list[float] = []
    labels: list[str] = []
    i, n = 0, len(intervals)
    j, m = 0, len(times)
    while j < m:
        t = times[j]
        while i < n and intervals[i][0] <= t:
            start, end, label = intervals[i]
            while ends and ends[-1] < start:
                ends.pop()
                labels.pop()
            ends.append(end)
            labels.append(label)
            i += 1
        while ends and ends[-1] < t:
            ends.pop()
            labels.pop()
        # Unchanged while no interval starts (t < the next start) and the top one is open.
        k = bisect.bisect_left(times, intervals[i][0], j + 1) if i < n else m
        if ends:
            k = min(k, bisect.bisect_right(times, ends[-1], j + 1))
        out += itertools.repeat(labels[-1] if labels else "", k - j)
        j = k
    return out


def read_kineto(path: Path, progress: Progress | None = None) -> KinetoTrace:
    """Parse one Kineto trace (gzip or plain JSON); bad input raises a one-line DiagError.

    `progress(done_bytes, total_bytes)` is called after each chunk of the file.
    """
    return read_kineto_with_columns(path, progress)[0]


def read_kineto_with_columns(
    path: Path, progress: Progress | None = None
) -> tuple[KinetoTrace, CpuOpColumns]:
    """read_kineto, and the trace's CPU ops as columns too (for the cache)."""
    path = Path(path)
    source = _Source(path)
    builder = _Builder()
    doc = _RawDoc()
    with _gc_paused():
        try:
            for events in _event_chunks(source, doc, progress):
                builder.feed(events)
        finally:
            source.close()
        if progress is not None:
            progress(source.size, source.size)
        base = doc.baseTimeNanoseconds
        trace = builder.finish(str(path), int(base) if isinstance(base, int | float) else 0)
        trace.devices = _device_names(doc.deviceProperties)
        return trace, builder.cpu_columns


_DECODE_DEVICES = msgspec.json.Decoder(list[_RawDevice])


def _device_names(raw: msgspec.Raw) -> list[str]:
    if not raw:
        return []
    try:
        devices = _DECODE_DEVICES.decode(raw)
    except msgspec.MsgspecError:
        return []
    return [d.name[:200] for d in devices if d.name]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Millions of acyclic tuples and lists would trigger full collections that free nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
