"""A seeded corpus of damaged inputs for diag's readers, made in memory from small real files.

Seeds are third-party test inputs (tests/data/third_party: tlparse's TORCH_TRACE logs, HTA's
Kineto traces). Each damaged input is (name, reader, file suffix, bytes): truncations, byte
flips, gzip damage, odd ProfilerStep names, values of the wrong type, byte-order marks, huge
lines, deep nesting and non-finite numbers. The same seed gives the same corpus on every
machine, so a failure names an input that can be made again (`damaged_inputs(seed)[i]`).
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

THIRD_PARTY = Path(__file__).resolve().parent / "data" / "third_party"
KINETO_SEEDS = ("trace_compare_base.json.gz", "triton_example.json.gz", "cpu_only.json.gz")
TORCH_TRACE_SEEDS = ("comp_failure.log.gz", "comp_metrics.log.gz", "export_guard_added.log.gz")

KINETO, TORCH_TRACE = "kineto", "torch-trace"
_STEP_NAMES = (
    "ProfilerStep#abc",
    "ProfilerStep#1.5",
    "ProfilerStep#" + "9" * 5000,
    "ProfilerStep#",
    "ProfilerStep#-1",
    "ProfilerStep#\u0663",
    "ProfilerStep#1#2",
    "ProfilerStep# 7",
    "ProfilerStep#0x10",
    "ProfilerStep#" + "\x00" * 3,
)
_ODD_VALUES: tuple[Any, ...] = (
    None,
    "x",
    "7",
    "",
    [],
    [1, 2],
    {},
    {"a": 1},
    True,
    -1,
    0,
    2**70,
    -(2**70),
    1e308,
    -0.0,
    "\u202e\ufeff",
)


@dataclass(frozen=True)
class Damaged:
    name: str
    reader: str  # KINETO | TORCH_TRACE
    suffix: str  # ".json", ".json.gz", ".log", ".log.gz"
    data: bytes


def _seeds() -> list[tuple[str, str, bytes]]:
    seeds = [
        (n, KINETO, gzip.decompress((THIRD_PARTY / "hta" / n).read_bytes())) for n in KINETO_SEEDS
    ]
    seeds += [
        (n, TORCH_TRACE, gzip.decompress((THIRD_PARTY / "tlparse" / n).read_bytes()))
        for n in TORCH_TRACE_SEEDS
    ]
    return seeds


# --- byte-level damage (any reader) ------------------------------------------------------------


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 24)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def _drop_lines(rng: random.Random, data: bytes) -> bytes:
    return b"\n".join(line for line in data.split(b"\n") if rng.random() > 0.15)


def _bom(rng: random.Random, data: bytes) -> bytes:
    mark = rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf\xef\xbb\xbf"])
    return mark if rng.random() < 0.1 else mark + data


def _utf16(rng: random.Random, data: bytes) -> bytes:
    return data.decode("utf-8", "replace").encode(rng.choice(["utf-16", "utf-16-le", "utf-32"]))


def _crlf(_rng: random.Random, data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def _huge_line(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data))
    filler = rng.choice([b"x", b"\t", b"{", b"[", b"\\", b'"']) * rng.choice([1 << 16, 1 << 21])
    return data[:at] + filler + data[at:]


def _nul_block(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + b"\x00" * rng.randint(1, 4096) + data[at:]


_BYTE_DAMAGE: tuple[Callable[[random.Random, bytes], bytes], ...] = (
    _truncate,
    _flip,
    _drop_lines,
    _bom,
    _utf16,
    _crlf,
    _huge_line,
    _nul_block,
)


# --- Kineto structure damage -------------------------------------------------------------------


def _events(document: Any) -> list[Any]:
    if isinstance(document, dict) and isinstance(document.get("traceEvents"), list):
        events: list[Any] = document["traceEvents"]
        return events
    return []


def _kineto_step_names(rng: random.Random, document: Any) -> Any:
    marks = [e for e in _events(document) if str(e.get("name", "")).startswith("ProfilerStep")]
    if not marks:  # add one around the whole trace
        events = [e for e in _events(document) if isinstance(e.get("ts"), int | float)]
        start = min((e["ts"] for e in events), default=0)
        mark = {"ph": "X", "cat": "user_annotation", "name": "", "ts": start, "dur": 10**6}
        document.setdefault("traceEvents", []).append(mark)
        marks = [mark]
    for mark in marks:
        mark["name"] = rng.choice(_STEP_NAMES)
    return document


def _kineto_wrong_type(rng: random.Random, document: Any) -> Any:
    if isinstance(document, dict) and rng.random() < 0.2:
        document["deviceProperties"] = rng.choice([*_ODD_VALUES, [{"name": 5}], [None, {}]])
    events = [e for e in _events(document) if isinstance(e, dict)]
    for _ in range(rng.randint(1, 4)):
        if not events:
            break
        event = rng.choice(events)
        key = rng.choice(["ts", "dur", "name", "cat", "ph", "pid", "tid", "args"])
        event[key] = rng.choice(_ODD_VALUES)
        if isinstance(event.get("args"), dict):
            arg = rng.choice(["correlation", "External id", "device", "stream", "bytes", "kind"])
            event["args"][arg] = rng.choice(_ODD_VALUES)
    return document


def _kineto_top_level(rng: random.Random, document: Any) -> Any:
    choice = rng.randrange(8)
    if choice == 0:
        return {"traceEvents": []}
    if choice == 1:
        return {"traceEvents": rng.choice(_ODD_VALUES)}
    if choice == 2:
        return _events(document)  # a bare list
    if choice == 3:
        document["baseTimeNanoseconds"] = rng.choice(_ODD_VALUES)
        return document
    if choice == 4:
        return {"traceEvents": [rng.choice(_ODD_VALUES) for _ in range(5)]}
    if choice == 5:
        document["traceEvents"] = _events(document) * 3  # duplicated events
        return document
    if choice == 6:
        for event in _events(document):
            if isinstance(event, dict) and isinstance(event.get("ts"), int | float):
                event["ts"] = -event["ts"]
        return document
    for event in _events(document):
        if isinstance(event, dict) and "dur" in event:
            event["dur"] = rng.choice([0, -5, 1e30])
    return document


def _kineto_nesting(rng: random.Random, _document: Any) -> bytes:
    depth = rng.choice([200, 5000, 100_000])
    return b'{"traceEvents": [' + b"[" * depth + b"]" * depth + b"]}"


def _kineto_nonfinite(rng: random.Random, document: Any) -> bytes:
    text = json.dumps(document)
    return text.replace(
        '"dur": ', '"dur": ' + rng.choice(["NaN", "Infinity", "-Infinity"]) + "+0*", 3
    ).encode()


# --- TORCH_TRACE structure damage --------------------------------------------------------------


def _records(data: bytes) -> list[tuple[int, bytes, dict[str, Any]]]:
    out = []
    for index, line in enumerate(data.split(b"\n")):
        brace = line.find(b"{")
        if brace < 0 or line.startswith(b"\t"):
            continue
        try:
            meta = json.loads(line[brace:])
        except ValueError:
            continue
        if isinstance(meta, dict):
            out.append((index, line[:brace], meta))
    return out


def _torch_trace_wrong_type(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    records = _records(data)
    for _ in range(rng.randint(1, 5)):
        index, prefix, meta = rng.choice(records)
        target = meta
        inner = [k for k, v in meta.items() if isinstance(v, dict)]
        if inner and rng.random() < 0.7:
            target = meta[rng.choice(inner)]
        keys = list(target) or ["frame_id"]
        extra = ["frame_id", "frame_compile_id", "rank", "compiled_autograd_id", "has_payload"]
        target[rng.choice(keys + extra)] = rng.choice(_ODD_VALUES)
        lines[index] = prefix + json.dumps(meta).encode()
    return b"\n".join(lines)


def _torch_trace_prefix(rng: random.Random, data: bytes) -> bytes:
    """glog prefixes torch never writes: month 13, hour 99, a pid of 40 digits, a rank tag."""
    lines = data.split(b"\n")
    odd = [
        b"V1399 99:99:99.999999 1 x.py:1] ",
        b"V0229 00:00:00.000000 " + b"9" * 40 + b" x.py:1] ",
        b"[rank99999999999999999999]:V1129 22:40:29.692000 1 x.py:1] ",
        b"V1129 22:40:29.692000 -5 x.py:1] ",
    ]
    for index, prefix, meta in rng.sample(_records(data), k=min(6, len(_records(data)))):
        lines[index] = rng.choice(odd) + json.dumps(meta).encode()
        del prefix
    return b"\n".join(lines)


def _torch_trace_payload(rng: random.Random, data: bytes) -> bytes:
    """Payload lines moved, duplicated or orphaned (a tab line before any record)."""
    lines = data.split(b"\n")
    tabbed = [i for i, line in enumerate(lines) if line.startswith(b"\t")]
    if not tabbed:
        return data
    for _ in range(rng.randint(1, 6)):
        source = rng.choice(tabbed)
        lines.insert(rng.randrange(len(lines)), lines[source])
    return b"\t{orphan}\n" + b"\n".join(lines)


def _torch_trace_stack(rng: random.Random, data: bytes) -> bytes:
    """dynamo_start stacks and string tables that point nowhere, compile ids that repeat."""
    lines = data.split(b"\n")
    for index, prefix, meta in _records(data):
        if "dynamo_start" in meta:
            meta["dynamo_start"] = {
                "stack": rng.choice(
                    [[{"filename": 10**9, "line": "x", "name": None}], "stack", [None, 3], {}]
                )
            }
        elif "str" in meta:
            meta["str"] = rng.choice([["a", "b"], [1, 2, 3], "s", [None, -1]])
        elif "compilation_metrics" in meta and rng.random() < 0.5:
            meta["frame_compile_id"] = 0
        lines[index] = prefix + json.dumps(meta).encode()
    return b"\n".join(lines)


def _structure(rng: random.Random, reader: str, data: bytes) -> tuple[str, bytes]:
    if reader == KINETO:
        document = json.loads(data)
        how = rng.choice(
            [
                _kineto_step_names,
                _kineto_wrong_type,
                _kineto_top_level,
                _kineto_nesting,
                _kineto_nonfinite,
            ]
        )
        result = how(rng, document)
        return how.__name__, result if isinstance(result, bytes) else json.dumps(result).encode()
    how_tt = rng.choice(
        [_torch_trace_wrong_type, _torch_trace_prefix, _torch_trace_payload, _torch_trace_stack]
    )
    return how_tt.__name__, how_tt(rng, data)


def _gzip_damage(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    packed = bytearray(gzip.compress(data, mtime=0))
    choice = rng.randrange(5)
    if choice == 0:
        return "gzip-truncated", bytes(packed[: rng.randrange(2, len(packed))])
    if choice == 1:
        packed[rng.randrange(10, len(packed))] ^= 1 << rng.randrange(8)
        return "gzip-bitflip", bytes(packed)
    if choice == 2:
        return "gzip-crc", bytes(packed[:-8]) + b"\x00" * 8
    if choice == 3:
        return "gzip-trailing-garbage", bytes(packed) + b"garbage"
    return "gzip-header-only", bytes(packed[:10])


def damaged_inputs(seed: int = 1, count: int = 1000) -> Iterator[Damaged]:
    """`count` damaged inputs, the same ones for the same seed."""
    rng = random.Random(seed)
    seeds = _seeds()
    for number in range(count):
        name, reader, data = seeds[number % len(seeds)]
        gz = rng.random() < 0.3
        kind = rng.randrange(3)
        if kind == 0:
            how = rng.choice(_BYTE_DAMAGE)
            label, damaged = how.__name__.lstrip("_"), how(rng, data)
        else:
            label, damaged = _structure(rng, reader, data)
            label = label.lstrip("_")
        if kind == 2 or (gz and rng.random() < 0.5):
            extra, damaged = _gzip_damage(rng, damaged)
            label, gz = f"{label}+{extra}", False  # already gzip bytes: no second compression
            suffix = ".json.gz" if reader == KINETO else ".log.gz"
        else:
            suffix = ".json" if reader == KINETO else ".log"
            if gz:
                damaged, suffix = gzip.compress(damaged, mtime=0), suffix + ".gz"
        yield Damaged(f"{number:04d}-{name.split('.')[0]}-{label}", reader, suffix, damaged)
