"""Reading an events.jsonl file: each line decoded and validated once, against its kind's schema
(diag.trace.schema), or skipped and counted.

Lines are decoded in chunks: 128 KB of lines joined into one JSON array and decoded by
msgspec in one call into the schema's tagged union, so the per-line cost is msgspec's alone.
A chunk that does not decode whole (a corrupt line, a kind this diag does not know, a value
only the json module reads) is decoded line by line, where each line is kept, or skipped and
counted: not JSON, not an object, no kind, or a known field of the wrong type or out of range
(docs/FORMAT.md: corrupt lines are skipped). A last line without its newline is a process
killed mid-write: skipped, counted apart (`torn`), and not a warning.

No line can stop a read: nesting 10 000 deep, a 5000-digit integer, `1e999`, NaN, invalid
UTF-8 or a line of gigabytes (skipped past MAX_LINE_BYTES) each end as one corrupt line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import msgspec

from diag.trace import jsontext
from diag.trace.confine import MAX_NOTES_BYTES, OutsideTrace, open_regular, read_small
from diag.trace.format import BOOTSTRAP_ERRORS
from diag.trace.schema import SCHEMAS, EventBase, Nanos

#: A line longer than this is corrupt (the longest diag writes are tens of KB: an 8 KiB fail
#: reason, 256 guard sources); reading skips to the next newline without holding it.
MAX_LINE_BYTES = 16 << 20
#: Bytes read and decoded at a time: the events of one read (about 300 KB of objects) are still
#: in the CPU's cache when the reader walks them (with 4 MB reads a day of steps took a third
#: longer to read).
_CHUNK = 128 << 10


class Unknown(EventBase, tag="?"):
    """An event of a kind this diag does not know (a newer diag's): kept whole, `t` checked."""

    kind: str = ""
    data: dict[str, Any] = msgspec.field(default_factory=dict)


class _Time(msgspec.Struct):
    t: Nanos = 0


_KNOWN: Any = Union[tuple(SCHEMAS.values())]  # noqa: UP007 - a runtime union of classes
_CHUNK_DECODER = msgspec.json.Decoder(list[_KNOWN])
_LINE_DECODER = msgspec.json.Decoder()


@dataclass
class Tally:
    """What reading a file skipped: corrupt lines (and why the first was), and a torn end."""

    corrupt: int = 0
    torn: int = 0
    first: str | None = None  # "line N: why"

    def skip(self, number: int, why: str) -> None:
        self.corrupt += 1
        if self.first is None:
            self.first = f"line {number}: {why}"


class Batch(list[EventBase]):
    """The valid events of one chunk of a file, in order, and a way back to the line each came
    from: `written(event)` is the line as written (a dict: its key order kept, and fields this
    diag does not list, a newer diag's, kept). Found on demand, for the few events a reader
    keeps whole: their `{"t":T,"ev":"KIND"` prefix (how diag writes every line) searched in
    the chunk, else the chunk split into lines once."""

    def __init__(self, events: Iterable[EventBase] = (), body: bytes | None = None) -> None:
        super().__init__(events)
        self.body = body
        self.lines: dict[int, dict[str, Any]] = {}  # id(event) -> its line, when decoded alone
        self._cursor = 0
        self._split: list[bytes] | None = None

    def written(self, event: EventBase) -> dict[str, Any] | None:
        known = self.lines.get(id(event))
        if known is not None or self.body is None:
            return known
        body = self.body
        prefix = b'{"t":%d,"ev":"%s"' % (event.t, str(event.__struct_config__.tag).encode())
        at = body.find(prefix, self._cursor)
        if at < 0:
            at = body.find(prefix)
        if at >= 0:
            end = body.find(b"\n", at)
            end = len(body) if end < 0 else end
            self._cursor = end
            found = decode_object(body[at:end])
            return found if isinstance(found, dict) else None
        if self._split is None:  # not diag's own writing (a hand-made trace): by position
            self._split = body.split(b"\n")
        for index, item in enumerate(self):
            if item is event:
                found = decode_object(self._split[index])
                return found if isinstance(found, dict) else None
        return None


def read_events(path: Path, tally: Tally) -> Iterator[Batch]:
    """The valid events of one file, in order, in batches (one per chunk read); what is
    skipped is counted in `tally`. OSError (and OutsideTrace) as opening the file raises them."""
    with open_regular(path) as handle:
        lines = _LineCounter(handle.fileno())
        rest = b""
        start = 0  # where `rest` begins in the file
        longer: list[bytes] = []  # reads of one line that has gone on for more than a read
        held = 0
        while True:
            data = handle.read(_CHUNK)
            if not data:
                break
            cut = data.rfind(b"\n")
            if cut < 0:
                longer.append(data)
                held += len(data)
                if len(rest) + held > MAX_LINE_BYTES:
                    tally.skip(lines.before(start) + 1, f"longer than {MAX_LINE_BYTES >> 20} MiB")
                    longer.clear()
                    held = 0
                    after = _skip_line(handle)
                    if after is None:
                        return
                    rest, start = after, handle.tell() - len(after)
                continue
            if longer:
                rest = b"".join([rest, *longer])
                longer.clear()
                held = 0
            body, rest = rest + data[:cut], data[cut + 1 :]
            yield _chunk(body, start, lines, tally)
            start += len(body) + 1
        if longer:
            rest = b"".join([rest, *longer])
        cut = rest.rfind(b"\n")
        if cut >= 0:  # whole lines after an overlong one
            yield _chunk(rest[:cut], start, lines, tally)
            rest = rest[cut + 1 :]
        if rest.strip():
            last = Batch()
            _line(rest, 0, Tally(), last)
            if last:
                yield last
            else:
                tally.torn += 1


class _LineCounter:
    """The lines of a file before an offset, counted only when a skipped line needs its number:
    a clean file is never counted (counting every chunk's newlines was a tenth of reading
    it). Counts on from its last answer (offsets only grow), reading the file again."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self.offset = 0
        self.lines = 0

    def before(self, offset: int) -> int:
        while self.offset < offset:
            block = os.pread(self.descriptor, min(_CHUNK * 8, offset - self.offset), self.offset)
            if not block:
                break
            self.lines += block.count(b"\n")
            self.offset += len(block)
        return self.lines


def _skip_line(handle: Any) -> bytes | None:
    """Read past the rest of an overlong line; what follows its newline (None at the end)."""
    while True:
        data = handle.read(_CHUNK)
        if not data:
            return None
        cut = data.find(b"\n")
        if cut >= 0:
            return bytes(data[cut + 1 :])


def _chunk(body: bytes, start: int, lines: _LineCounter, tally: Tally) -> Batch:
    """Whole lines (newline-separated, no trailing newline; `start`: the first one's offset
    in the file): one decode, else line by line."""
    try:
        return Batch(_CHUNK_DECODER.decode(b"".join((b"[", body.replace(b"\n", b","), b"]"))), body)
    except (msgspec.DecodeError, RecursionError):
        pass
    kept = Batch()
    for offset, raw in enumerate(body.split(b"\n"), start=lines.before(start) + 1):
        _line(raw, offset, tally, kept)
    return kept


def _line(raw: bytes, number: int, tally: Tally, into: Batch) -> None:
    """One line, as its kind's Struct (or Unknown), added to `into` with the dict it was; or
    counted as corrupt (a blank line is not counted)."""
    if not raw.strip():
        return
    if len(raw) > MAX_LINE_BYTES:
        tally.skip(number, f"longer than {MAX_LINE_BYTES >> 20} MiB")
        return
    data = decode_object(raw)
    if isinstance(data, str):
        tally.skip(number, data)
        return
    kind = data.get("ev")
    if not isinstance(kind, str):
        tally.skip(number, "no event kind (`ev`)")
        return
    schema = SCHEMAS.get(kind)
    try:
        if schema is None:
            t = msgspec.convert(data, _Time, strict=True).t
            event: EventBase = Unknown(t=t, kind=kind, data=data)
        else:
            event = msgspec.convert(data, schema, strict=True)
    except (msgspec.ValidationError, RecursionError) as exc:
        tally.skip(number, f"{kind}: {_reason(exc)}")
        return
    into.append(event)
    into.lines[id(event)] = data


def decode_object(raw: bytes) -> dict[str, Any] | str:
    """A line's JSON object, or why it is none. Invalid UTF-8 inside a string and NaN or
    Infinity (which json.dumps writes) are read as the json module reads them; the schema then
    decides whether the value makes sense where it is."""
    try:
        data = _LINE_DECODER.decode(raw)
    except RecursionError:
        return "nested too deep"
    except msgspec.DecodeError:
        try:
            data = jsontext.loads(raw)
        except RecursionError:
            return "nested too deep"
        except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
            if "integer string conversion" in str(exc):
                return "an integer of more than 4300 digits"
            return f"not JSON ({_reason(exc)})"
    return data if isinstance(data, dict) else "not a JSON object"


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:160] if text else type(exc).__name__


def iter_events(path: Path) -> Iterator[dict[str, Any]]:
    """Each event of a JSONL event file as the dict written, when it is valid against its
    kind's schema (diag.trace.schema); a torn or corrupt line is skipped."""
    try:
        handle = open_regular(path, follow=False)  # a FIFO or a link is not an event file
    except (OSError, OutsideTrace):
        return
    with handle:
        for line in handle:
            event = decode_event(line)
            if event is not None:
                yield event


def decode_event(line: bytes) -> dict[str, Any] | None:
    """One event line as the dict written, or None for a torn or corrupt line."""
    event = decode_object(line)
    if isinstance(event, str):
        return None
    schema = SCHEMAS.get(str(event.get("ev")))
    try:
        if schema is not None:
            msgspec.convert(event, schema, strict=True)
    except (msgspec.ValidationError, RecursionError):
        return None
    return event


def read_notes(run_path: Path, root: Path | None = None) -> list[str]:
    """The lines of a run's bootstrap-errors.txt (none when absent), read only when it is a
    regular file inside the trace (diag.trace.confine)."""
    path = run_path / BOOTSTRAP_ERRORS
    if not path.exists():
        return []
    try:
        text = read_small(root or run_path, path, MAX_NOTES_BYTES, BOOTSTRAP_ERRORS)
    except OutsideTrace:
        return []
    return [line for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
