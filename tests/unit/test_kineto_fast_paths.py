"""The Kineto reader's fast paths give what the plain algorithms give.

gzip is inflated in large pieces by isal or zlib (members, padding and damage as gzip treats
them); CPU ops skip the sort when the file has them in order; the innermost-interval lookup
jumps over runs of times. Each is checked against a plain computation on inputs made to hit
the cases the fast path must not get wrong (ties, unsorted threads, overlaps, several members).
"""

from __future__ import annotations

import gzip
import io
import json
import random
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

import diag.trace.kineto as kineto
from diag.errors import DiagError
from diag.trace.kineto import read_kineto

REPO = Path(__file__).resolve().parents[2]
WAN = REPO / "tests" / "data" / "h200" / "wan-compiled.json.gz"


def _document() -> bytes:
    return gzip.decompress(WAN.read_bytes())


# --- gzip --------------------------------------------------------------------------------------


def test_gzip_members_and_zero_padding_read_as_one_document(tmp_path: Path) -> None:
    """Two members (a document split anywhere) with zero padding after each, as gzip allows."""
    data = _document()
    cut = len(data) // 3
    joined = gzip.compress(data[:cut]) + bytes(7) + gzip.compress(data[cut:]) + bytes(3)
    path = tmp_path / "members.json.gz"
    path.write_bytes(joined)
    assert read_kineto(path) == msgspec.structs.replace(read_kineto(WAN), path=str(path))


def test_trailing_garbage_after_the_member_is_corrupt_data(tmp_path: Path) -> None:
    """As GzipFile said it (a few stray bytes, shorter than a header, read as truncated)."""
    path = tmp_path / "garbage.json.gz"
    path.write_bytes(WAN.read_bytes() + b"garbage" * 4)
    with pytest.raises(DiagError, match=r"corrupt gzip data") as caught:
        read_kineto(path)
    assert caught.value.message.startswith(f"{path}: ") and "\n" not in caught.value.message


def test_a_bomb_is_inflated_in_bounded_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 MiB of zeros from a 64 KiB file: never one piece bigger than the chunk size."""
    monkeypatch.setattr(kineto, "_CHUNK", 1 << 20)
    packed = gzip.compress(bytes(64 << 20), compresslevel=9)
    pieces = [len(p) for p in kineto._inflated(io.BytesIO(packed), kineto._INFLATE)]
    assert sum(pieces) == 64 << 20
    assert max(pieces) <= 1 << 20


def test_a_file_ending_inside_a_member_raises_eof() -> None:
    packed = gzip.compress(_document())
    with pytest.raises(EOFError):
        for _ in kineto._inflated(io.BytesIO(packed[: len(packed) // 2]), zlib):
            pass


def test_isal_and_zlib_give_the_same_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    isal = pytest.importorskip("isal.isal_zlib", reason="isal is an optional speed-up")
    monkeypatch.setattr(kineto, "_INFLATE", isal)
    with_isal = read_kineto(WAN)
    monkeypatch.setattr(kineto, "_INFLATE", zlib)
    assert read_kineto(WAN) == with_isal


def test_isal_damage_reads_as_corrupt_gzip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isal = pytest.importorskip("isal.isal_zlib", reason="isal is an optional speed-up")
    monkeypatch.setattr(kineto, "_INFLATE", isal)
    data = bytearray(WAN.read_bytes())
    data[-6] ^= 0xFF  # the CRC-32 in the trailer
    path = tmp_path / "crc.json.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(DiagError, match=r"corrupt gzip data"):
        read_kineto(path)


# --- CPU ops: order, ties and nesting ---------------------------------------------------------


def _nested_ops(rng: random.Random, tid: int | str, base: float) -> list[dict[str, Any]]:
    """A tree of ops: children inside their parent, some starting at the parent's start."""
    ops: list[dict[str, Any]] = []

    def grow(start: float, dur: float, depth: int) -> None:
        ops.append({"ph": "X", "cat": "cpu_op", "name": f"{tid}-op{len(ops)}", "pid": 1, "tid": tid,
                    "ts": start, "dur": dur, "args": {"External id": len(ops) + 1},
                    "depth": depth})  # fmt: skip
        if depth < 3:
            t = start
            for _ in range(rng.randrange(0, 4)):
                child = dur / 5
                if t + child > start + dur:
                    break
                grow(t, child, depth + 1)  # the first child shares the parent's start: a tie
                t += child + rng.choice([0.0, dur / 50])

    t = base
    for _ in range(30):
        grow(t, 100.0, 0)
        t += 100.0 + rng.choice([0.0, 1.0])
    return ops


@pytest.mark.parametrize("shuffled", [False, True], ids=["file-order", "shuffled"])
def test_cpu_op_depth_and_region_match_the_nesting(tmp_path: Path, shuffled: bool) -> None:
    """Depth is the op's place in its tree, on each thread; the region is the innermost
    diag.region around it; file order (sorted or not, mixed threads) does not matter."""
    rng = random.Random(7)
    ops = _nested_ops(rng, 11, 1000.0) + _nested_ops(rng, "12", 1000.5)
    regions = [
        {"ph": "X", "cat": "user_annotation", "name": f"diag.region:block#{i}", "pid": 1,
         "tid": 11, "ts": 1000.0 + 700 * i, "dur": 650.0}
        for i in range(4)
    ]  # fmt: skip
    events = [{k: v for k, v in op.items() if k != "depth"} for op in ops] + regions
    if shuffled:
        rng.shuffle(events)
    path = tmp_path / "ops.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_kineto(path)
    expected_depth = {op["name"]: op["depth"] for op in ops}
    assert {op.name: op.depth for op in trace.cpu_ops} == expected_depth
    for op in trace.cpu_ops:
        holding = [r for r in regions if op.tid == 11 and r["ts"] <= op.ts <= r["ts"] + r["dur"]]
        assert op.region == (holding[-1]["name"].split(":", 1)[1] if holding else "")
    starts = [op.ts for op in trace.cpu_ops]
    assert starts == sorted(starts)
    # Ties at one start on one thread: the longer (outer) op first.
    for a, b in zip(trace.cpu_ops, trace.cpu_ops[1:], strict=False):
        if a.ts == b.ts and a.tid == b.tid:
            assert a.dur >= b.dur


# --- innermost interval ------------------------------------------------------------------------


def _innermost_per_time(intervals: list[tuple[float, float, str]], times: list[float]) -> list[str]:
    """The plain stack sweep, one step per time: the oracle for the bisecting one."""
    out: list[str] = []
    ends: list[float] = []
    labels: list[str] = []
    i = 0
    for t in times:
        while i < len(intervals) and intervals[i][0] <= t:
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
        out.append(labels[-1] if labels else "")
    return out


@pytest.mark.parametrize("seed", range(40))
def test_innermost_matches_the_per_time_sweep(seed: int) -> None:
    """Nested, overlapping (unnested) and touching intervals; times on their edges."""
    rng = random.Random(seed)
    intervals = []
    for k in range(rng.randrange(0, 30)):
        start = float(rng.randrange(0, 100))
        intervals.append((start, start + rng.choice([0.0, 1.0, 5.0, 20.0]), f"r{k}"))
    intervals.sort(key=lambda iv: (iv[0], -(iv[1] - iv[0])))
    edges = [x for start, end, _ in intervals for x in (start, end)]
    times = sorted(
        [float(rng.randrange(-5, 130)) for _ in range(rng.randrange(0, 200))]
        + rng.sample(edges, min(len(edges), 10))
    )
    assert kineto._innermost(intervals, times) == _innermost_per_time(intervals, times)


def test_a_cache_written_with_isal_is_read_without_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The cache's CRC-32 is the same number whichever library computed it."""
    isal = pytest.importorskip("isal.isal_zlib", reason="isal is an optional speed-up")
    from diag.trace import kinetocache

    source = tmp_path / "trace.json.gz"
    source.write_bytes(WAN.read_bytes())
    cache = tmp_path / ".diag-cache"
    monkeypatch.setattr(kinetocache, "_CRC32", isal.crc32)
    written = kinetocache.load_kineto(source, cache)
    monkeypatch.setattr(kinetocache, "_CRC32", zlib.crc32)
    monkeypatch.setattr(kinetocache, "read_kineto", None)  # a rebuild would fail loudly
    monkeypatch.setattr(kinetocache, "read_kineto_with_columns", None)
    assert kinetocache.load_kineto(source, cache) == written


# --- events by phase ---------------------------------------------------------------------------


def _with_odd_phases(events: list[dict[str, Any]], where: int) -> list[dict[str, Any]]:
    """Events of no known phase (a made-up one, none, a number) and a flow whose fields are
    of the wrong types, put in at `where`: none of them is a complete event."""
    odd = [
        {"ph": "Q", "cat": "cpu_op", "name": "not X", "ts": 1.0, "dur": 1.0},
        {"cat": "cpu_op", "name": "no phase", "ts": 1.0, "dur": 1.0},
        {"ph": 5, "cat": "cpu_op", "name": "numeric phase"},
        {"ph": "f", "cat": "ac2g", "id": 1, "pid": [1], "tid": {}, "ts": "late", "args": []},
    ]
    return [*events[:where], *odd, *events[where:]]


@pytest.mark.parametrize("chunk", [None, 8192], ids=["whole", "chunked"])
def test_events_of_no_known_phase_are_skipped_and_counted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, chunk: int | None
) -> None:
    """Read past one by one, in a streamed chunk or the document's tail alike; the trace is
    the same as without them, and they count in event_count as every other event does."""
    if chunk is not None:
        monkeypatch.setattr(kineto, "_CHUNK", chunk)
    events = json.loads(_document())["traceEvents"][:3000]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"traceEvents": events}))
    expected = read_kineto(plain)
    for where in (0, 1500, len(events)):
        odd = tmp_path / f"odd-{where}.json"
        odd.write_text(json.dumps({"traceEvents": _with_odd_phases(events, where)}))
        trace = read_kineto(odd)
        assert trace.event_count == expected.event_count + 4
        assert msgspec.structs.replace(trace, path="", event_count=0) == msgspec.structs.replace(
            expected, path="", event_count=0
        )


@pytest.mark.parametrize("chunk", [None, 8192], ids=["whole", "chunked"])
def test_a_bad_complete_event_after_an_odd_phase_is_named_by_its_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, chunk: int | None
) -> None:
    """The event-by-event path names a refused value as the one-call path does."""
    if chunk is not None:
        monkeypatch.setattr(kineto, "_CHUNK", chunk)
    events = json.loads(_document())["traceEvents"][:2000]
    events = _with_odd_phases(events, 1490)
    events[1500] = {**events[1500], "ph": "X", "dur": "long"}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(DiagError, match=r"traceEvents\[1500\]\.dur") as caught:
        read_kineto(path)
    assert "\n" not in caught.value.message


def test_deep_nesting_after_an_odd_phase_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "Q"}, ' + b"[" * 100_000 + b"]" * 100_000 + b"]}")
    with pytest.raises(DiagError) as caught:
        read_kineto(path)
    assert caught.value.message.startswith(f"{path}: ") and "\n" not in caught.value.message


@pytest.mark.parametrize("seed", range(20))
def test_depths_match_the_checked_sweep(seed: int) -> None:
    """The sentinel-bottom sweep against the one that checks for an empty stack, on sorted
    starts with ties, touching ends and zero durations (and a start of +inf, made by hand:
    msgspec refuses one in a file)."""
    rng = random.Random(seed)
    starts = sorted(float(rng.randrange(0, 60)) for _ in range(rng.randrange(0, 120)))
    if seed % 5 == 0:
        starts.append(float("inf"))
    ends = [s + rng.choice([0.0, 1.0, 3.0, 10.0, 40.0]) for s in starts]
    assert kineto._depths(starts, ends) == kineto._depths_checked(starts, ends)
