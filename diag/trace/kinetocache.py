"""Parsed Kineto traces kept as msgpack inside the trace directory, so a second open is fast.

The cache is derived data, trusted no further than its stamp. A file is rebuilt from the
source and rewritten atomically (temporary file, then rename) when its header does not match
the source (size, mtime or first 64 KiB changed; another parser or cache version) or its body
fails its size and crc32 (not ours, truncated, corrupt). Reading never fails because of the
cache, and a read-only trace directory is simply not written. msgspec decodes typed structs:
no pickle, nothing in the file is executed.

    <trace dir>/.diag-cache/<source path relative to the trace dir, '/' as '__'>.msgpack
    = MAGIC, u32 stamp length, msgpack stamp (source header, body size and crc32), msgpack body

The body is the trace with its GPU activities and CPU ops as columns, their strings as indices
into tables and the ops' threads as runs: a kernel or op name is written once, not once per
event, and the cached open builds the structs with C-level maps that share one string per name
(as the first open does) instead of decoding a string per field (at 1 GB: 0.73 -> 0.60 s and
589 -> 425 MB).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import itertools
import mmap
import operator
import os
import struct
import tempfile
import types
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from diag.trace.confine import OutsideTrace, open_regular, writable_cache
from diag.trace.format import CACHE_DIR
from diag.trace.kineto import (
    PARSER_VERSION,
    Activity,
    CpuOp,
    CpuOpColumns,
    KinetoTrace,
    Progress,
    read_kineto,
    read_kineto_with_columns,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer  # (3.12's collections.abc.Buffer)

__all__ = ["CACHE_DIR", "CACHE_FORMAT", "cache_path", "load_kineto"]

# Bump when the file layout or the KinetoTrace structs change shape.
CACHE_FORMAT = 3
MAGIC = b"DIAGKTC\x00"
_LENGTH = struct.Struct("<I")
_HEAD_BYTES = 64 << 10


class _Header(msgspec.Struct, frozen=True):
    cache_format: int
    parser_version: int
    source: str  # the source's path relative to the cache's root folder
    size: int
    mtime_ns: int
    head_sha256: str  # of the source's first 64 KiB


class _Stamp(msgspec.Struct, frozen=True):
    """What the cache file says about itself: the source it came from and its own body."""

    header: _Header
    body_size: int
    body_crc32: int  # a flipped byte in the body can still decode: check it


def _crc32_function() -> Callable[[Buffer], int]:
    """CRC-32 of the body: isal's (the same checksum, ~10x faster) when installed."""
    try:
        crc32: Callable[[Buffer], int] = importlib.import_module("isal.isal_zlib").crc32
    except ImportError:
        return zlib.crc32
    return crc32


_ACTIVITY_FIELDS = Activity.__struct_fields__
_ACTIVITY_TYPES = msgspec.structs.fields(Activity)
_STRING_FIELDS = frozenset(field.name for field in _ACTIVITY_TYPES if field.type is str)
# One typed list per Activity field, in field order (a str field's holds string indices).
_Columns: Any = msgspec.defstruct(
    "_Columns",
    [
        (f.name, types.GenericAlias(list, int if f.name in _STRING_FIELDS else f.type))
        for f in _ACTIVITY_TYPES
    ],  # fmt: skip
    array_like=True,
    frozen=True,
)


class _Ops(msgspec.Struct, frozen=True, array_like=True):
    """The CPU ops as columns: names and regions as indices into their tables, threads as runs
    (the cached open then shares one string per name and one int per thread, as the first
    open does, instead of allocating them per op)."""

    names: list[str]
    name: list[int]
    ts: list[float]
    dur: list[float]
    tid: list[int]  # the thread of each run
    run: list[int]  # how many ops in a row are on it
    depth: list[int]
    regions: list[str]
    region: list[int]


class _Body(msgspec.Struct, frozen=True, array_like=True):
    """The cached trace: `trace` without its activities and CPU ops, which are columns."""

    trace: KinetoTrace
    strings: list[str]
    columns: _Columns
    ops: _Ops


def _op_columns(ops: CpuOpColumns) -> _Ops:
    names = list(dict.fromkeys(ops.names))
    name_index = {name: i for i, name in enumerate(names)}.__getitem__
    region_index = {label: i for i, label in enumerate(ops.region_labels)}.__getitem__
    return _Ops(
        names,
        list(map(name_index, ops.names)),
        ops.ts,
        ops.dur,
        [tid for tid, _ in ops.thread_runs],
        [count for _, count in ops.thread_runs],
        ops.depth,
        ops.region_labels,
        list(map(region_index, ops.region)),
    )


def _cpu_ops(ops: _Ops) -> list[CpuOp]:
    """The CPU ops back from their columns; ValueError or IndexError when not ours."""
    count = len(ops.name)
    if min(ops.run, default=0) < 0 or sum(ops.run) != count or len(ops.tid) != len(ops.run):
        raise ValueError("CPU op thread runs that do not cover the ops")
    if any(len(column) != count for column in (ops.ts, ops.dur, ops.depth, ops.region)):
        raise ValueError("CPU op columns of different lengths")
    tids = itertools.chain.from_iterable(map(itertools.repeat, ops.tid, ops.run))
    return list(
        map(
            CpuOp,
            map(ops.names.__getitem__, ops.name),
            ops.ts,
            ops.dur,
            tids,
            ops.depth,
            map(ops.regions.__getitem__, ops.region),
        )
    )


def _activity_columns(activities: list[Activity]) -> tuple[list[str], list[list[Any]]]:
    columns = [list(map(operator.attrgetter(name), activities)) for name in _ACTIVITY_FIELDS]
    strings = list(
        dict.fromkeys(
            itertools.chain.from_iterable(
                column
                for name, column in zip(_ACTIVITY_FIELDS, columns, strict=True)
                if name in _STRING_FIELDS
            )
        )
    )
    index = {text: i for i, text in enumerate(strings)}.__getitem__
    for i, name in enumerate(_ACTIVITY_FIELDS):
        if name in _STRING_FIELDS:
            columns[i] = list(map(index, columns[i]))
    return strings, columns


def _activities(strings: list[str], table: Any) -> list[Activity]:
    """The activities back from their columns; ValueError or IndexError when not ours."""
    columns = msgspec.structs.astuple(table)
    if len(set(map(len, columns))) > 1:
        raise ValueError("activity columns of different lengths")
    text = strings.__getitem__
    fields = [
        map(text, column) if name in _STRING_FIELDS else column
        for name, column in zip(_ACTIVITY_FIELDS, columns, strict=True)
    ]
    return list(map(Activity, *fields))


_CRC32 = _crc32_function()
_ENCODE = msgspec.msgpack.Encoder()
_DECODE_STAMP = msgspec.msgpack.Decoder(_Stamp)
_DECODE_BODY = msgspec.msgpack.Decoder(_Body)


def load_kineto(
    path: Path, cache_dir: Path | None, progress: Progress | None = None
) -> KinetoTrace:
    """`read_kineto(path)`, through the cache in `cache_dir` when one is given."""
    path = Path(path)
    if cache_dir is None:
        return read_kineto(path, progress)
    cache_dir = Path(cache_dir)
    relative = _relative(path, cache_dir)
    try:
        header = _header(path, relative)
    except OSError:
        return read_kineto(path, progress)  # it raises the DiagError that names the problem
    target = cache_dir / _file_name(relative)
    cached = _read(target, header)
    if cached is not None:
        cached.path = str(path)
        if progress is not None:
            progress(header.size, header.size)
        return cached
    trace, ops = read_kineto_with_columns(path, progress)
    _write(target, header, trace, ops)
    return trace


def cache_path(path: Path, cache_dir: Path) -> Path:
    """Where `load_kineto` keeps the parsed form of `path`."""
    return Path(cache_dir) / _file_name(_relative(Path(path), Path(cache_dir)))


def _relative(path: Path, cache_dir: Path) -> str:
    """The source's path from the nearest folder that holds both it and the cache.

    Stable when the trace directory moves, and distinct for the same window name in different
    runs and processes (runs/compiled/pid1/kineto/x.json.gz vs runs/eager/pid2/...).
    """
    source = Path(os.path.abspath(path))
    for base in Path(os.path.abspath(cache_dir)).parents:
        if source.is_relative_to(base):
            return source.relative_to(base).as_posix()
    return source.as_posix()


def _file_name(relative: str) -> str:
    name = relative.strip("/").replace("/", "__")
    if len(name) > 180:  # keep under file-name limits; the header still holds the full path
        digest = hashlib.sha256(relative.encode()).hexdigest()[:16]
        name = f"{name[-120:]}-{digest}"
    return f"{name}.msgpack"


def _header(path: Path, relative: str) -> _Header:
    with open_regular(path) as handle:
        info = os.fstat(handle.fileno())
        head = handle.read(_HEAD_BYTES)
    return _Header(
        cache_format=CACHE_FORMAT,
        parser_version=PARSER_VERSION,
        source=relative,
        size=info.st_size,
        mtime_ns=info.st_mtime_ns,
        head_sha256=hashlib.sha256(head).hexdigest(),
    )


def _read(target: Path, expected: _Header) -> KinetoTrace | None:
    """The cached trace if the file is ours and matches the source; else None (rebuild).

    The body is decoded from a read-only map of the file, not a copy of it: at 1 GB of trace
    the copy was 85 MB of fresh pages to fault in, for bytes that are only read once.
    """
    try:
        # diag writes cache files by rename, never as links: a symlink, FIFO or device here
        # is not its cache, and is not followed or waited on.
        with open_regular(target, follow=False) as handle:
            prefix = handle.read(len(MAGIC) + _LENGTH.size)
            if len(prefix) != len(MAGIC) + _LENGTH.size or not prefix.startswith(MAGIC):
                return None
            (length,) = _LENGTH.unpack_from(prefix, len(MAGIC))
            stamp = _DECODE_STAMP.decode(handle.read(length))
            if stamp.header != expected:
                return None
            offset = len(prefix) + length
            if os.fstat(handle.fileno()).st_size != offset + stamp.body_size:
                return None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                with memoryview(mapped)[offset:] as body:
                    if _CRC32(body) != stamp.body_crc32:
                        return None
                    cached = _DECODE_BODY.decode(body)
        trace = cached.trace
        trace.activities = _activities(cached.strings, cached.columns)
        trace.cpu_ops = _cpu_ops(cached.ops)
        return trace
    except (
        OSError,
        OutsideTrace,
        msgspec.MsgspecError,
        ValueError,
        TypeError,
        IndexError,
        BufferError,
    ):
        return None


def _write(target: Path, header: _Header, trace: KinetoTrace, ops: CpuOpColumns) -> None:
    """Write atomically; any failure (read-only folder, full disk) just leaves no cache."""
    temporary: str | None = None
    try:
        # Never through a symlink, never outside the trace (diag.trace.confine's one rule):
        # before making the folder (mkdir follows a linked parent) and after.
        if not writable_cache(target.parent):
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        if not writable_cache(target.parent) or target.is_symlink():
            return
        strings, columns = _activity_columns(trace.activities)
        rest = msgspec.structs.replace(trace, activities=[], cpu_ops=[])
        body = _ENCODE.encode(_Body(rest, strings, _Columns(*columns), _op_columns(ops)))
        head = _ENCODE.encode(_Stamp(header, len(body), _CRC32(body)))
        descriptor, temporary = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        os.fchmod(descriptor, 0o644)  # mkstemp's 0600 would hide the cache from other readers
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(MAGIC + _LENGTH.pack(len(head)) + head)
            handle.write(body)
        os.replace(temporary, target)
        temporary = None
    except OSError:
        return
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
