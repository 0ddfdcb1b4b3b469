"""Read torch's own structured compile logs (TORCH_TRACE) into the Run model, without diag.

People often hold `TORCH_TRACE=/dir python ...` logs already (one `dedicated_log_torch_trace_*.log`
per process, the input of tlparse); re-running a service under `diag record` to see why it
recompiles can cost hours. This reader turns such a directory (or one log, gzip'd or not) into a
Trace whose single run, `compiled`, holds one Process per log file, its compiles (with the failing
guards of each recompile), graph breaks and recompile-limit hits, named exactly as the recorder
names them (collectors/compiles.py), so the compile analyzers work unchanged.

The logs know nothing of requests or steps: every compile and event has phase `unknown` and no
request (`Compile.live` is False). There is no monotonic clock either: `t` is the log's glog wall
clock (local time, no year in the log, so counted from 2000 and rolled over at a new year); each
Process anchors it to unix time through the first compile's `start_time` (`Process.unix_ns`).

Format (torch/_logging/_internal.py, `TorchLogsFormatter` with trace=True): one record per line,
`<glog prefix> <json metadata>`, the prefix `V1129 22:40:29.692000 13178 torch/x.py:12]` (the
number is the pid on current torch, a thread id on old ones); the payload, if any, follows on
lines that start with a tab, and `has_payload` is the md5 of those lines joined by newlines.
Files are read in binary blocks of _BLOCK bytes (memory stays flat whatever the log's size): one
regex iteration finds each line that does not open with a tab and matches its glog prefix (the C
search steps over the payload lines between), and only record lines are parsed one by one
(msgspec, with json deciding what msgspec refuses). Only the payloads of the few
artifacts used here (_KEPT_ARTIFACTS: recompile reasons, graph-break reasons, the torch version)
are read: their tabs stripped and md5 checked in a few C calls. Every other payload (graphs,
Inductor's code, chromium events: nearly all of a log's bytes) is stepped over unread and
unhashed, as nothing here depends on it. Lines that are not records and read payloads whose md5
does not match are skipped and counted (`Trace.manifest["torch_trace"]`), never fatal.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import math
import re
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import msgspec

from diag.errors import DiagError
from diag.trace import jsontext
from diag.trace.confine import open_regular
from diag.trace.numerals import parse_int
from diag.trace.run import Compile, Event, Frame, Guard, Process, RunData, Trace

FORMAT_NAME = "torch-trace"
RUN_LABEL = "compiled"
PHASE = "unknown"

_LOG_PREFIX = "dedicated_log_torch_trace_"
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
# One line that does not open with a tab: a record's glog prefix, if it has one, and the rest of
# the line (its JSON). `[rankN]:` only precedes the prefix in TORCH_LOGS output, accepted for logs
# copied from it. `minute` is `MMDD HH:MM`.
_PREFIX = (
    rb"(?:(?:\[rank(?P<rank>\d+)\]:)?[VIWEC](?P<minute>\d{4} \d\d:\d\d):(?P<s>\d\d)\.(?P<us>\d{6})"
    rb" +(?P<pid>\d+) [^\]\n]*\][^{\n]*)?(?P<body>[^\n]*)"
)
# The first line of a buffer, matched where it starts.
_FIRST_LINE = re.compile(_PREFIX)
# Every other such line, from the newline before it: the C search steps over the payload lines
# (a newline followed by a tab) between two of them, so payloads cost no Python work.
_NEXT_LINE = re.compile(rb"\n(?=[^\t])" + _PREFIX)
# tlparse's rule: `dedicated_log_torch_trace_rank_<N>[_<anything>].log`.
_RANK_IN_NAME = re.compile(r"rank_(\d+)(?:_|\.log)")
_BASE_YEAR = 2000  # a leap year, so a log written on 29 February still parses
_EPOCH_DAY = datetime.date(1970, 1, 1).toordinal()
# The payloads read (and checked against their md5); every other payload is stepped over.
_GUARD_TREE = "dynamo_cpp_guards_str"
_KEPT_ARTIFACTS = frozenset(
    {"recompile_reasons", "dynamo_graph_break_reason", "torch_version", _GUARD_TREE}
)
# A file is "not a TORCH_TRACE log" when this many lines in a row open with no valid record.
_SNIFF_LINES = 200
_MAX_LINE = 64 << 20
# Read size: memory stays a few blocks whatever the log's size (2 * _BLOCK <= _MAX_LINE).
_BLOCK = 1 << 20
_JSON = msgspec.json.Decoder()

# Same rules as the recorder (collectors/compiles.py), so both readers agree on every compile.
_LIMIT_RE = re.compile(r"recompile[_ ]limit|cache_size_limit|cache size limit", re.IGNORECASE)
_LIMIT_TYPES = ("CacheLimitExceeded", "RecompileLimitExceeded")
_BREAK_AT_RE = re.compile(r"Graph break in user code at (?P<where>\S+)")
_BREAK_REASON_RE = re.compile(r"Graph Break Reason:\s*(?P<reason>.+)")
_RESUME_RE = re.compile(r"^torch_dynamo_resume_in_(?P<fn>.+)_at_(?P<line>\d+)$")
# Frames of torch itself in a dynamo_start stack (eval_frame, convert_frame, nn.Module calls).
_TORCH_FRAME = re.compile(r"(?:^|/)torch/(?:_[A-Za-z_]+(?:/|\.py$)|nn/modules/)")

Progress = Callable[[int, int], None]


@dataclass
class TorchTraceStats:
    """What the reader skipped: kept in the manifest so a caller can say the input was damaged."""

    files: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    records: int = 0
    skipped_lines: int = 0
    corrupt_payloads: int = 0
    unfinished_compiles: int = 0
    replaced_bytes: int = 0  # records whose metadata held bytes that are not UTF-8
    rank_notes: list[str] = field(default_factory=list)  # logs that claimed the same rank
    compiles: int = 0
    exports: int = 0  # torch.export records (exported_program)

    def warnings(self) -> list[str]:
        lines = [f"{name}: not a TORCH_TRACE log, skipped" for name in self.skipped_files]
        if self.skipped_lines:
            lines.append(f"{self.skipped_lines} line(s) that are not trace records were skipped")
        if self.corrupt_payloads:
            lines.append(
                f"{self.corrupt_payloads} payload(s) that diag reads (recompile reasons, "
                "graph-break reasons, torch version) did not match their md5 (truncated or "
                "corrupt) and were skipped"
            )
        if self.replaced_bytes:
            lines.append(
                f"{self.replaced_bytes} record(s) held bytes that are not UTF-8; read with "
                "U+FFFD in their place"
            )
        lines.extend(self.rank_notes)
        if not self.compiles:
            lines.append(
                "no compilation_metrics record: no torch.compile compile finished in the log"
                + (
                    f" (a torch.export log: {self.exports} exported_program record(s), which "
                    "diag does not analyze)"
                    if self.exports
                    else ""
                )
                + "; the compile analyses had nothing to read"
            )
        if self.unfinished_compiles:
            lines.append(
                f"{self.unfinished_compiles} compile(s) started but never finished in the log "
                "(process killed, or the log was cut)"
            )
        return lines


def load_torch_trace(path: Path, progress: Progress | None = None) -> Trace:
    """A directory of TORCH_TRACE logs (or one log, `.gz` too) as a Trace with one run.

    Raises DiagError (one line) for a missing path, a directory without logs, or files that hold
    no TORCH_TRACE record at all. `progress(done, total)` counts bytes read from disk.
    """
    files = _log_files(path)
    stats = TorchTraceStats()
    run = RunData(RUN_LABEL, path, None)
    run.profiles = []  # no torch.profiler windows in these logs: nothing for Kineto analyses
    total = sum(f.stat().st_size for f in files)
    done = 0
    used_pids: set[int] = set()
    for log in files:
        process = _read_log(log, run, stats, used_pids, _offset(progress, done, total))
        done += log.stat().st_size
        if process is None:
            stats.skipped_files.append(log.name)
        else:
            stats.files.append(log.name)
        if progress is not None:
            progress(done, total)
    if not run.processes:
        what = files[0] if len(files) == 1 else path
        raise DiagError(f"{what}: not a TORCH_TRACE log (no structured trace record found)")
    stats.rank_notes = _settle_ranks(run.processes)
    stats.compiles = len(run.compiles)
    run.compiles.sort(key=lambda c: c.t)
    run.events.sort(key=lambda e: e.t)
    versions = {k: v for p in run.processes for k, v in p.versions.items()}
    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "status": None,
        "versions": versions,
        "runs": [{"label": RUN_LABEL, "status": None}],
        "torch_trace": {**asdict(stats), "warnings": stats.warnings()},
    }
    return Trace(path, manifest, {RUN_LABEL: run})


def _name_rank(log: Path) -> int | None:
    match = _RANK_IN_NAME.search(log.name)
    return parse_int(match.group(1)) if match else None


def _settle_ranks(processes: list[Process]) -> list[str]:
    """One rank per log. Logs that claim the same rank (copies renamed per rank, logs of two
    jobs in one folder) would merge in every per-rank view: when their file names give them
    distinct ranks, those are used, as tlparse does; otherwise only the first keeps the rank.
    Returns one line per rank claimed twice, for the reader's warnings."""
    notes: list[str] = []
    claims: dict[int, list[Process]] = {}
    for process in processes:
        if process.rank is not None:
            claims.setdefault(process.rank, []).append(process)
    taken = {rank for rank, group in claims.items() if len(group) == 1}
    for rank, group in sorted(claims.items()):
        if len(group) < 2:
            continue
        names = [p.folder.name for p in group]
        by_name = [_name_rank(p.folder) for p in group]
        usable = [r for r in by_name if r is not None]
        if len(usable) == len(group) and len(set(usable)) == len(group) and not taken & set(usable):
            for process, number in zip(group, usable, strict=True):
                process.rank = number
            taken.update(usable)
            notes.append(
                f"{len(group)} logs say rank {rank} inside ({', '.join(names)}): read as ranks "
                f"{', '.join(map(str, usable))} from their file names, as tlparse does"
            )
            continue
        for process in group[1:]:
            process.rank = None
        taken.add(rank)
        notes.append(
            f"{len(group)} logs claim rank {rank} ({', '.join(names)}): {names[0]} keeps it, "
            "the others are read as processes of unknown rank"
        )
    return notes


def _log_files(path: Path) -> list[Path]:
    if not path.exists():
        raise DiagError(f"{path}: no such TORCH_TRACE log or directory")
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DiagError(f"{path}: not a file or directory")
    files = sorted(p for p in path.iterdir() if p.is_file() and _is_log_name(p.name))
    if not files:
        # A diag trace recorded with --torch-trace keeps them under runs/<label>/torch_trace/.
        files = sorted(p for p in path.rglob(f"{_LOG_PREFIX}*") if p.is_file())
    if not files:
        raise DiagError(f"{path}: no TORCH_TRACE logs (*.log, *.log.gz) in this directory")
    return files


def _is_log_name(name: str) -> bool:
    return name.endswith((".log", ".log.gz"))


def _offset(progress: Progress | None, done: int, total: int) -> Progress | None:
    if progress is None:
        return None
    return lambda value, _total: progress(done + value, total)


# --- one log file --------------------------------------------------------------------------------


@dataclass
class _Record:
    """A record whose payload is read (_KEPT_ARTIFACTS): its metadata, and its payload's md5 and
    text as its lines stream.

    Payload lines arrive a run at a time (all the tab lines of one read block): the tabs that open
    the lines are stripped from the run in one C call, so a payload costs a few calls per block,
    not one per line.
    """

    meta: dict[str, Any]
    t: int
    expect_md5: str | None
    md5: Any = None  # made with the first payload line: no payload is not the empty payload
    kept: list[bytes] = field(default_factory=list)
    tail: bytes = b""  # the newline held back until another line follows it
    overlong: bool = False

    def feed(self, lines: bytes) -> None:
        """Whole payload lines as read: each opens with its tab; the last may lack its newline
        only at the end of the file."""
        if lines == b"\t" and self.tail:
            # A file cut just after a payload line's tab: that empty last line adds nothing
            # (not even the newline before it), as this reader has always read such a cut.
            return
        count = lines.count(b"\n") + (lines[-1] != 10)  # 10: "\n"
        text = lines.translate(None, b"\t")
        if len(lines) - len(text) != count:
            # A tab inside a line: strip only the tab that opens each line.
            text = lines.replace(b"\r\n", b"\n").replace(b"\n\t", b"\n")[1:]
        elif b"\r" in text:
            # Logs that went through a CRLF checkout (tlparse's own test logs did).
            text = text.replace(b"\r\n", b"\n")
        if text.endswith(b"\n"):
            body, tail = memoryview(text)[:-1], b"\n"
        else:
            body, tail = memoryview(text), b""
        if self.md5 is None:
            self.md5 = hashlib.md5(usedforsecurity=False)
        self.md5.update(self.tail)
        self.md5.update(body)
        self.kept.append(self.tail + body.tobytes())
        self.tail = tail

    def payload(self) -> tuple[str | None, bool]:
        """(text, corrupt): None when there is no payload or it does not match its md5."""
        if self.expect_md5 is None and self.md5 is None:
            return None, False
        if self.overlong:
            return None, True
        digest = (self.md5 or hashlib.md5(usedforsecurity=False)).hexdigest()
        if self.expect_md5 is not None and digest != self.expect_md5:
            return None, True
        return b"".join(self.kept).decode("utf-8", errors="replace"), False


# The open record when its payload, if any, is not read: its lines are stepped over unhashed.
_UNREAD = _Record({}, 0, None)


class _NotALog(Exception):
    """The file's first lines hold no record: stop reading it."""


class _Scan:
    """The line rules of one log, fed whole lines a block at a time.

    A line that opens with a tab is payload: the run of such lines up to the next line that does
    not (the gap between two matches of _NEXT_LINE) is handed to the open record if it reads its
    payload, stepped over if it does not, or counted as skipped lines when no record is open.
    Every other line closes the open record; a blank one is ignored, anything else is parsed as a
    record or counted as skipped. A record whose payload is not read is handled as soon as it is
    parsed.
    """

    def __init__(self, builder: _ProcessBuilder, stats: TorchTraceStats) -> None:
        self.builder = builder
        self.stats = stats
        self.clock = _Clock()
        self.current: _Record | None = None
        self.found = False
        self.misses = 0
        self.clean = False  # the last line read ended with a newline

    def lines(self, buf: bytes, pos: int, end: int) -> None:
        """buf[pos:end]: whole lines (the last may lack its newline at the end of the file); pos
        is 0 or just after a newline.

        One regex iteration per line that does not open with a tab finds it, matches its glog
        prefix and gives its JSON; the payload runs are the gaps between such lines."""
        if pos >= end:
            return
        line = self._line
        if pos and buf[pos - 1] == 10:  # 10: "\n"
            cursor, start = pos, pos - 1
        elif buf[pos] == 9:  # "\t"
            cursor, start = pos, pos
        else:
            first = _FIRST_LINE.match(buf, pos, end)
            assert first is not None  # the pattern matches any line
            cursor = line(first, buf, pos, end)
            start = cursor - 1
        for match in _NEXT_LINE.finditer(buf, start, end):
            begin = match.start() + 1
            if begin > cursor and self.current is not _UNREAD:
                self._payload(buf, cursor, begin)
            cursor = line(match, buf, begin, end)
        if cursor < end and self.current is not _UNREAD:
            self._payload(buf, cursor, end)
        self.clean = buf[end - 1] == 10

    def _payload(self, buf: bytes, pos: int, stop: int) -> None:
        """A run of payload lines, buf[pos:stop], for the open record (not _UNREAD)."""
        if self.current is None:
            self._miss(buf.count(b"\n", pos, stop) + (buf[stop - 1] != 10))
        else:
            self.current.feed(buf[pos:stop])

    def overlong(self, start: bytes) -> None:
        """A line longer than _MAX_LINE, known by its first _MAX_LINE bytes; the rest is
        dropped unread."""
        self.clean = False
        if start[0] == 9:
            if self.current is None:
                self._miss(1)
            elif self.current is not _UNREAD:
                self.current.overlong = True
            return
        self._close()
        if not start.isspace():
            self._miss(1)

    def close(self) -> None:
        self._close()

    def _line(self, match: re.Match[bytes], buf: bytes, begin: int, end: int) -> int:
        """One line that does not open with a tab, from buf[begin], as `_PREFIX` matched it;
        returns where the next line begins. Most records are of kinds not read here (chromium
        events, graphs, describe_*): they cost this match, one msgspec decode and a few dict
        lookups."""
        stop = match.end() + 1
        if stop > end:  # the file's last line, without its newline
            stop = end
        current = self.current
        if current is not None:
            self.current = None
            if current is not _UNREAD:
                self.builder.artifact(current, self.stats)
        if match.group(5) is None:  # 5: pid, no glog prefix
            text = buf[begin : match.end()]
            if text and not text.isspace():  # tlparse: stray blank lines are never records
                self._miss(1)
            return stop
        body = match.group(6)  # 6: body
        try:
            meta = _JSON.decode(body)
        except (msgspec.DecodeError, RecursionError):
            meta = _decode_slow(body, self.stats)
        if not isinstance(meta, dict):
            self._miss(1)
            return stop
        self.found = True
        stats = self.stats
        stats.records += 1
        clock = self.clock
        if match.group(2) != clock.minute:  # 2: minute
            clock.turn(match.group(2))
        builder = self.builder
        if builder.pid is None:
            builder.pid = parse_int(match.group(5).decode("ascii"))  # 5: pid
        if buf[begin] == 91 and "rank" not in meta:  # 91: "[", the `[rankN]:` prefix matched
            meta["rank"] = parse_int(match.group(1).decode("ascii"))  # 1: rank
        if builder.rank is None:
            rank = meta.get("rank")
            if isinstance(rank, int) and not isinstance(rank, bool):
                builder.rank = rank
        if (
            "str" in meta
            or "dynamo_start" in meta
            or "exported_program" in meta
            or "compilation_metrics" in meta
        ):
            builder.handle(meta, clock.ns(match), stats)
        elif "artifact" in meta or "dynamo_cpp_guards_str" in meta:
            artifact = meta.get("artifact")
            name = artifact.get("name") if isinstance(artifact, dict) else None
            if "dynamo_cpp_guards_str" in meta:
                name = _GUARD_TREE  # each entry's guard tree: what it was compiled for
            if isinstance(name, str) and name in _KEPT_ARTIFACTS:
                expect = meta.get("has_payload")
                self.current = _Record(
                    meta, clock.ns(match), expect if isinstance(expect, str) else None
                )
                return stop
        self.current = _UNREAD
        return stop

    def _close(self) -> None:
        current = self.current
        if current is not None:
            self.current = None
            if current is not _UNREAD:
                self.builder.artifact(current, self.stats)

    def _miss(self, lines: int) -> None:
        self.stats.skipped_lines += lines
        self.misses += lines
        if not self.found and self.misses >= _SNIFF_LINES:
            raise _NotALog


def _open(log: Path) -> tuple[IO[bytes], IO[bytes]]:
    """(reader, raw file): the raw file's position is the progress, gzip or not."""
    raw: IO[bytes] = open_regular(log)  # never a FIFO or a device; closed by the caller
    if raw.read(2) == _GZIP_MAGIC:
        raw.seek(0)
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")), raw
    raw.seek(0)
    return raw, raw


def _read_log(
    log: Path, run: RunData, stats: TorchTraceStats, used_pids: set[int], progress: Progress | None
) -> Process | None:
    builder = _ProcessBuilder(log, run)
    local = TorchTraceStats()  # merged into `stats` only if the file is a log
    scan = _Scan(builder, local)
    try:
        reader, raw = _open(log)
    except OSError as exc:
        raise DiagError(f"{log}: cannot read ({exc.strerror or exc})") from None
    try:
        _scan_blocks(reader, raw, scan, progress)
        scan.close()
    except _NotALog:
        return None
    except EOFError:
        # The Kineto reader's words for the same damage: a cut gzip is a damaged copy, not a
        # killed process (torch writes these logs plain; someone gzipped them afterwards).
        raise DiagError(f"{log}: truncated gzip file (it ends mid-stream)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise DiagError(f"{log}: corrupt gzip data ({exc})") from None
    except OSError as exc:
        raise DiagError(f"{log}: cannot read ({exc.strerror or exc})") from None
    finally:
        reader.close()
        raw.close()
    if not scan.found:
        return None
    process = builder.finish(local, used_pids, clean=scan.clean)
    stats.records += local.records
    stats.skipped_lines += local.skipped_lines
    stats.corrupt_payloads += local.corrupt_payloads
    stats.unfinished_compiles += local.unfinished_compiles
    stats.replaced_bytes += local.replaced_bytes
    stats.exports += local.exports
    return process


def _scan_blocks(reader: IO[bytes], raw: IO[bytes], scan: _Scan, progress: Progress | None) -> None:
    """The file to `scan` in whole lines, _BLOCK bytes at a time, so memory stays flat whatever
    the log's size. A line longer than a block is gathered in pieces; one longer than _MAX_LINE
    is known by its start and the rest is skipped unread, which bounds what one line can hold.
    Each block is scanned in place: only a line cut by the block's end is copied."""
    rest = b""  # the start of the block's last line, carried to the next block
    long: list[bytes] = []  # a line that spans blocks, gathered
    size = 0
    skipping = False  # inside an overlong line: drop up to its end
    block = _first_block(reader, scan)
    while block:
        if progress is not None:
            progress(raw.tell(), 0)
        start = 0
        if long or skipping:
            newline = block.find(b"\n")
            if newline < 0:
                if not skipping:
                    long.append(block)
                    size += len(block)
                    if size > _MAX_LINE:
                        scan.overlong(b"".join(long)[:_MAX_LINE])
                        long, skipping = [], True
                block = reader.read(_BLOCK)
                continue
            if not skipping:
                long.append(block[: newline + 1])
                line = b"".join(long)
                if len(line) > _MAX_LINE:
                    scan.overlong(line[:_MAX_LINE])
                else:
                    scan.lines(line, 0, len(line))
            long, skipping = [], False
            start = newline + 1
        if rest:
            newline = block.find(b"\n", start)
            if newline < 0:
                long, rest = [rest + block[start:]], b""
                size = len(long[0])
                block = reader.read(_BLOCK)
                continue
            # rest is less than a block and so is the line's end here: no overlong check needed.
            line, rest = rest + block[start : newline + 1], b""
            scan.lines(line, 0, len(line))
            start = newline + 1
        cut = block.rfind(b"\n", start) + 1
        if cut:
            scan.lines(block, start, cut)
            rest = block[cut:]
        elif start < len(block):
            long, size = [block[start:]], len(block) - start
        block = reader.read(_BLOCK)
    if long:
        rest = b"".join(long)
    if rest:
        # The last line, without its newline.
        if len(rest) >= _MAX_LINE:
            scan.overlong(rest[:_MAX_LINE])
        else:
            scan.lines(rest, 0, len(rest))


def _first_block(reader: IO[bytes], scan: _Scan) -> bytes:
    """The first block, past a UTF-8 byte-order mark (an editor's: no record has one).

    A line is read at most _MAX_LINE bytes at a time counting the mark, so a first line longer
    than that less the mark is read as two lines, its first piece not overlong."""
    block = reader.read(_BLOCK)
    while 0 < len(block) < len(_UTF8_BOM):
        more = reader.read(_BLOCK)
        if not more:
            break
        block += more
    if not block.startswith(_UTF8_BOM):
        return block
    limit = _MAX_LINE - len(_UTF8_BOM)
    pieces, size = [block[len(_UTF8_BOM) :]], len(block) - len(_UTF8_BOM)
    while size <= limit and b"\n" not in pieces[-1]:
        more = reader.read(_BLOCK)
        if not more:
            break
        pieces.append(more)
        size += len(more)
    head = b"".join(pieces)
    newline = head.find(b"\n")
    if (newline + 1 if newline >= 0 else len(head)) > limit:
        scan.lines(head, 0, limit)
        return head[limit:]
    return head


def _decode_slow(body: bytes, stats: TorchTraceStats) -> object:
    """The record's JSON, as json.loads reads it, for what msgspec refused. msgspec decodes valid
    records 3-5x faster and gives the same value for every document it accepts; what it refuses
    (NaN, Infinity, 1e400, lone surrogates, bytes that are not UTF-8) comes here: json decides."""
    try:
        return jsontext.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        # One stray byte (a path or a reason in another encoding) must not drop the record
        # and the compile it finishes with it: decode it with U+FFFD in place of the byte.
        try:
            meta = jsontext.loads(body)
        except (ValueError, RecursionError):
            return None
        stats.replaced_bytes += 1
        return meta
    except (ValueError, RecursionError):  # bad JSON, "[[[[..." nested too deep
        return None


class _Clock:
    """glog time (`MMDD HH:MM:SS.micros`, no year) as ns; a month going back is a new year.

    `turn` runs for every record whose minute differs from the one before (the year can only
    turn there); `ns` only for the records whose time is used."""

    def __init__(self) -> None:
        self.year = _BASE_YEAR
        self.month = 0
        self.minute = b""
        self.seconds = 0  # unix seconds of `minute`

    def turn(self, minute: bytes) -> None:
        """A record's `MMDD HH:MM`, other than the one before."""
        month = int(minute[:2])
        if month < self.month:
            self.year += 1
        self.month = month
        day, hour, mins = int(minute[2:4]), int(minute[5:7]), int(minute[8:10])
        try:
            # calendar.timegm's arithmetic: a day or an hour past its range carries over.
            days = datetime.date(self.year, month, 1).toordinal() - _EPOCH_DAY + day - 1
            seconds = ((days * 24 + hour) * 60 + mins) * 60
        except (ValueError, OverflowError):
            seconds = 0
        self.minute, self.seconds = minute, seconds

    def ns(self, match: re.Match[bytes]) -> int:
        """The record's time; `turn` has seen its minute."""
        return (self.seconds + int(match.group(3))) * 1_000_000_000 + int(  # 3: s
            match.group(4)  # 4: us
        ) * 1000


# --- records -> compiles and events ----------------------------------------------------------


class _Start:
    __slots__ = ("t", "frame")

    def __init__(self, t: int, frame: Frame | None) -> None:
        self.t = t
        self.frame = frame


class _ProcessBuilder:
    """The recorder's logic (collectors/compiles.py) replayed over one process's log."""

    def __init__(self, log: Path, run: RunData) -> None:
        self.log = log
        self.run = run
        self.pid: int | None = None
        self.rank: int | None = None
        self.name_rank = _name_rank(log)
        self.versions: dict[str, Any] = {}
        self.strings: dict[int, str] = {}
        self.epoch = 0
        self.ended: set[str] = set()  # compile ids finished in this epoch
        self.frames: dict[str, Frame] = {}  # frame id -> frame, in this epoch
        self.starts: dict[str, _Start] = {}
        self.guards: dict[str, list[Guard]] = {}
        self.broke: set[tuple[int, str]] = set()  # (epoch, compile id) with a break artifact
        self.restarts: list[tuple[Compile, list[str]]] = []
        self.compiles: list[Compile] = []
        self.events: list[Event] = []
        self.anchor: tuple[int, int] | None = None  # (t, unix ns)
        # Guard-tree strings and tensor descriptions already held (_shared).
        self._strings: dict[str, str] = {}
        self._tensors: dict[str, Any] = {}

    def handle(self, meta: dict[str, Any], t: int, stats: TorchTraceStats) -> None:
        """A record of one of the kinds read here other than an artifact."""
        if "str" in meta:
            item = meta["str"]
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], int):
                self.strings[item[1]] = str(item[0])
        elif "dynamo_start" in meta:
            self._start(meta, t)
        elif "exported_program" in meta:
            stats.exports += 1
        elif "compilation_metrics" in meta:
            metrics = meta["compilation_metrics"]
            if isinstance(metrics, dict):
                self._metrics(meta, metrics, t)

    def artifact(self, record: _Record, stats: TorchTraceStats) -> None:
        """A record of one of _KEPT_ARTIFACTS, once its payload has been read and checked."""
        payload, corrupt = record.payload()
        if corrupt:
            stats.corrupt_payloads += 1
        elif payload is not None:
            meta = record.meta
            artifact = meta.get("artifact")
            name = _GUARD_TREE if "dynamo_cpp_guards_str" in meta else None
            if name is None and isinstance(artifact, dict):
                name = str(artifact.get("name"))
            self._artifact(meta, str(name), payload, record.t)

    # -- one kind of record each

    def _new_epoch_if_seen(self, compile_id: str) -> None:
        """Compile ids restart after torch._dynamo.reset(), which the log does not mark: an id
        that already finished starts a new epoch, as the recorder's reset hook would."""
        if compile_id in self.ended:
            self.epoch += 1
            self.ended.clear()
            self.frames.clear()
            self.starts.clear()
            self.guards.clear()

    def _start(self, meta: dict[str, Any], t: int) -> None:
        compile_id = _envelope_id(meta)
        self._new_epoch_if_seen(compile_id)
        info = meta["dynamo_start"]
        stack = info.get("stack") if isinstance(info, dict) else None
        self.starts[compile_id] = _Start(t, self._stack_frame(stack))

    def _artifact(self, meta: dict[str, Any], name: str, payload: str, t: int) -> None:
        if name == "recompile_reasons":
            # Torch logs the reasons before dynamo_start: they may be a new epoch's first sign.
            compile_id = _envelope_id(meta)
            self._new_epoch_if_seen(compile_id)
            self.guards[compile_id] = _guards(payload)
        elif name == "dynamo_graph_break_reason":
            compile_id = _envelope_id(meta)
            self._new_epoch_if_seen(compile_id)
            self.broke.add((self.epoch, compile_id))
            at = _BREAK_AT_RE.search(payload)
            reason = _BREAK_REASON_RE.search(payload)
            self._event(
                "graph_break",
                t,
                compile_id=compile_id,
                epoch=self.epoch,
                user_location=at.group("where") if at else None,
                reason=reason.group("reason").strip()[:500] if reason else _first_line(payload),
                raw=payload[:4000],
            )
        elif name == _GUARD_TREE:
            # As the recorder's guard_sources event: per entry, what it was compiled for
            # (diag.evidence.causes reads which entry could have served a recompiling call).
            from diag.trace.guards import (
                guard_tree_locations,
                guard_tree_tensors,
                guard_tree_values,
            )

            compile_id = _envelope_id(meta)
            self._new_epoch_if_seen(compile_id)
            lines = guard_tree_locations(payload)
            tensors = guard_tree_tensors(payload)
            values = guard_tree_values(payload)
            if lines or tensors or values:
                self._event(
                    "guard_sources",
                    t,
                    compile_id=compile_id,
                    epoch=self.epoch,
                    sources=self._shared(lines),
                    tensors=self._shared(tensors),
                    values=self._shared(values),
                )
        elif name == "torch_version":
            try:
                version = json.loads(payload).get("pytorch_version")
            except (ValueError, AttributeError, RecursionError):
                version = None
            if isinstance(version, str):
                self.versions["torch"] = version

    def _shared(self, mapping: dict[str, Any]) -> dict[str, Any]:
        """`mapping` with each key and value the object an earlier entry already holds when
        equal: a model's parameters are guarded alike in every entry, and a day-long log
        keeps hundreds of entries (the reader's memory stays near one entry's, not the log's)."""
        strings, tensors = self._strings, self._tensors
        shared: dict[str, Any] = {}
        for key, value in mapping.items():
            key = strings.setdefault(key, key)
            if isinstance(value, dict):
                value = tensors.setdefault(json.dumps(value, sort_keys=True), value)
            elif isinstance(value, str):
                value = strings.setdefault(value, value)
            shared[key] = value
        return shared

    def _metrics(self, meta: dict[str, Any], metrics: dict[str, Any], t: int) -> None:
        # The record's envelope (frame_id/frame_compile_id) is the id, as tlparse reads it: the
        # metrics' own compile_id is a copy that hand-edited and merged logs leave stale.
        compile_id = _envelope_id(meta)
        if compile_id == "?":
            fallback = metrics.get("compile_id")
            compile_id = fallback if isinstance(fallback, str) and fallback else compile_id
        if compile_id not in self.starts:
            self._new_epoch_if_seen(compile_id)
        start = self.starts.pop(compile_id, None)
        frame_key = _frame_key(meta, compile_id)
        frame: Frame | None = None
        if metrics.get("co_name"):
            line = metrics.get("co_firstlineno")
            file = _text(metrics.get("co_filename"))
            frame = Frame(
                str(metrics["co_name"]),
                file,
                line if isinstance(line, int) else None,
                called_from=_call_site(file, start),
            )
            self.frames[frame_key] = frame
        else:
            frame = self.frames.get(frame_key) or (start.frame if start else None)
        fail_type = metrics.get("fail_type")
        fail_reason = _first_line(metrics.get("fail_reason"))
        if fail_type and (str(fail_type) in _LIMIT_TYPES or _LIMIT_RE.search(fail_reason or "")):
            result = "recompile_limit"
        elif fail_type:
            result = "failed"
        else:
            result = "ok"
        duration = _duration(metrics, start, t)
        cache_size = metrics.get("cache_size")
        guards = self.guards.pop(compile_id, None)
        if guards is None:
            # No artifact (older torch, or a corrupt payload): torch 2.5+ keeps the first reason.
            reason = metrics.get("recompile_reason")
            guards = _guards(reason) if isinstance(reason, str) else []
        item = Compile(
            compile_id=compile_id,
            epoch=self.epoch,
            frame=frame,
            result=result,
            duration_s=duration,
            t=t,
            start_t=start.t if start else (t - int(duration * 1e9) if duration else None),
            phase=PHASE,
            request_id=None,
            step=None,
            pid=0,  # set in finish(), once the file's pid is settled
            guards=guards,
            # The whole reason (8 KiB at most), as the recorder keeps it: the backend's own
            # exception is on its second line, a ConstraintViolationError's user stack at its end.
            fail_reason=_whole_reason(metrics.get("fail_reason"))
            if result == "failed"
            else fail_reason,
            fail_type=str(fail_type) if fail_type else None,
            fail_user_frame=_user_frame(metrics),
            cache_size=cache_size if isinstance(cache_size, int) and cache_size >= 0 else None,
        )
        self.compiles.append(item)
        self.ended.add(compile_id)
        self._anchor(metrics, item)
        restarts = metrics.get("restart_reasons")
        if isinstance(restarts, list) and restarts and (self.epoch, compile_id) not in self.broke:
            self.restarts.append((item, [str(r) for r in restarts]))
        if result == "recompile_limit":
            self._event(
                "recompile_limit",
                t,
                compile_id=compile_id,
                epoch=self.epoch,
                frame=_frame_dict(frame),
                reason=fail_reason,
            )

    def _anchor(self, metrics: dict[str, Any], item: Compile) -> None:
        """Place the glog clock in unix time with the first compile that says when it began."""
        if self.anchor is not None or item.start_t is None:
            return
        start_us, start_s = (
            _number(metrics.get("start_time_us")),
            _number(metrics.get("start_time")),
        )
        if start_us is not None and 0 < start_us < 1e20:
            self.anchor = (item.start_t, int(start_us * 1000))
        elif start_s is not None and 0 < start_s < 1e14:
            self.anchor = (item.start_t, int(start_s * 1e9))

    def _event(self, kind: str, t: int, **data: Any) -> None:
        data.update(phase=PHASE, request_id=None, step=None)
        self.events.append(Event(kind, t, 0, data))

    def _stack_frame(self, stack: Any) -> Frame | None:
        """The frame Dynamo started on: the stack's last frame outside torch's own files."""
        if not isinstance(stack, list):
            return None
        for entry in reversed(stack):
            if not isinstance(entry, dict):
                continue
            name = entry.get("filename")
            file = self.strings.get(name) if isinstance(name, int) else _text(name)
            if file is not None and _TORCH_FRAME.search(file):
                continue
            line = entry.get("line")
            return Frame(str(entry.get("name")), file, line if isinstance(line, int) else None)
        return None

    # -- the end of the file

    def finish(self, stats: TorchTraceStats, used_pids: set[int], clean: bool) -> Process:
        self._restart_breaks()
        pid = self.pid if self.pid is not None and self.pid not in used_pids else None
        if pid is None:
            pid = next(n for n in range(1, len(used_pids) + 2) if n not in used_pids)
        used_pids.add(pid)
        stats.unfinished_compiles += len(self.starts)
        for item in self.compiles:
            item.pid = pid
        for event in self.events:
            event.pid = pid
        process = Process(
            pid,
            self.rank if self.rank is not None else self.name_rank,
            self.log,
            [],
            dict(self.versions),
            ended=clean and not self.starts,
        )
        if self.anchor is not None:
            process.start_t, process.wall_ns = self.anchor
        self.run.processes.append(process)
        self.run.compiles.extend(self.compiles)
        self.run.events.extend(self.events)
        return process

    def _restart_breaks(self) -> None:
        """Old torch logs no dynamo_graph_break_reason artifact: a compile restarted by a graph
        break is followed by its resume frame, `torch_dynamo_resume_in_<fn>_at_<line>`, whose
        name gives the line that broke."""
        resumes: dict[tuple[int, str | None, str], list[int]] = {}
        for item in self.compiles:
            match = _RESUME_RE.match(item.frame.name) if item.frame else None
            if match is not None and item.frame is not None:
                key = (item.epoch, item.frame.file, match.group("fn"))
                line = parse_int(match.group("line"))
                if line is not None:
                    resumes.setdefault(key, []).append(line)
        for item, reasons in self.restarts:
            location: str | None = None
            frame = item.frame
            if frame is not None:
                base = _RESUME_RE.match(frame.name)
                fn = base.group("fn") if base else frame.name
                after = frame.line or 0
                lines = [n for n in resumes.get((item.epoch, frame.file, fn), []) if n > after]
                if lines:
                    location = f"{frame.file}:{min(lines)}"
            raw = "\n".join(reasons)
            self._event(
                "graph_break",
                item.t,
                compile_id=item.compile_id,
                epoch=item.epoch,
                user_location=location,
                reason=_first_line(reasons[0].strip("'\"")),
                raw=raw[:4000],
                source="restart_reasons",
            )


# --- small helpers -------------------------------------------------------------------------------


def _guards(payload: str) -> list[Guard]:
    # Imported here: its many patterns take milliseconds to compile, and a log without
    # recompiles never needs them.
    from diag.trace.guards import parse_recompile_reasons

    return [
        Guard(g.kind, g.source, g.expected, g.actual, g.user_location, g.raw, g.compile_id)
        for g in parse_recompile_reasons(payload)
    ]


def _call_site(file: str | None, start: _Start | None) -> str | None:
    """For a frame in torch's own files (wrap_inline's `inner`), the user line that entered
    it: the dynamo_start stack's last frame outside torch."""
    if file is None or not _TORCH_FRAME.search(file) or start is None or start.frame is None:
        return None
    user = start.frame
    if user.file is None or _TORCH_FRAME.search(user.file):
        return None
    return f"{user.file}:{user.line}"


def _envelope_id(meta: dict[str, Any]) -> str:
    """`frame/attempt` from the record's context, as torch's CompileId prints it."""
    frame, attempt = meta.get("frame_id"), meta.get("frame_compile_id")
    base = f"{frame}/{attempt}" if frame is not None and attempt is not None else None
    autograd = meta.get("compiled_autograd_id")
    if autograd is not None:
        return f"!{autograd}" + (f"/{base}" if base else "")
    return base or "?"


def _frame_key(meta: dict[str, Any], compile_id: str) -> str:
    frame = meta.get("frame_id")
    if frame is not None:
        return str(frame)
    return compile_id.rsplit("/", 1)[0]


def _duration(metrics: dict[str, Any], start: _Start | None, t: int) -> float | None:
    """Seconds, from the first field this torch version wrote; never negative or absurd."""
    value = _number(metrics.get("entire_frame_compile_time_s"))
    if value is None:
        micros = _number(metrics.get("duration_us"))
        value = micros / 1e6 if micros is not None else None
    if value is None:
        begin, end = _number(metrics.get("start_time_us")), _number(metrics.get("end_time_us"))
        if begin is not None and end is not None:
            value = (end - begin) / 1e6
    if value is None and start is not None:
        value = (t - start.t) / 1e9
    if value is None or not 0 <= value < 1e7:
        return None
    return value


def _number(value: object) -> float | None:
    """A finite JSON number (the log may say NaN or Infinity, which json accepts), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value) if abs(value) < 1e300 else math.inf
    return number if math.isfinite(number) else None


def _first_line(text: object) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip().splitlines()[0][:500]


def _whole_reason(text: object) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    if len(text) <= 8192:
        return text
    return text[:8192] + f"\n... ({len(text) - 8192} more characters)"


def _user_frame(metrics: dict[str, Any]) -> str | None:
    name, line = metrics.get("fail_user_frame_filename"), metrics.get("fail_user_frame_lineno")
    return f"{name}:{line}" if isinstance(name, str) and name and isinstance(line, int) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _frame_dict(frame: Frame | None) -> dict[str, Any] | None:
    if frame is None:
        return None
    return {"name": frame.name, "file": frame.file, "line": frame.line}
