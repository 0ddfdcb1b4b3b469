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
import re
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


# --- events.jsonl: type confusion over every event kind's fields ------------------------------

H200 = Path(__file__).resolve().parent / "data" / "h200"
LIGHTX2V = Path(__file__).resolve().parent / "data" / "lightx2v"
#: The fuzzed trace: the compiled run of a real H200 recording (a warmup, live requests, a live
#: recompile, profile windows), then one line of every other event kind from the committed
#: recordings that hold it (magi, CUDA graphs, a crash, LightX2V's config).
EVENT_BASE = H200 / "record-wan-routing"
EVENT_DONORS = (
    H200 / "magi-guard-bypass",
    H200 / "magi-compile-sizes",
    H200 / "magi-specialized-dim",
    H200 / "cudagraph-rerecord-logged",
    H200 / "record-cudagraph-overwrite",
    LIGHTX2V / "warm-width",
)
#: Kinds no committed recording holds (docs/FORMAT.md gives their fields), written as the
#: collectors write them.
_POSITION = {"phase": "live", "request_id": "r0", "step": 0}
_FRAME = {"name": "block_forward", "file": "/srv/model/blocks.py", "line": 87}
HAND_WRITTEN_EVENTS: tuple[dict[str, Any], ...] = (
    {"ev": "graph_break", "compile_id": "0/1", "epoch": 0, "reason": "call to print",
     "user_location": "/srv/model/blocks.py:90", "raw": "Graph break: print", **_POSITION},
    {"ev": "cudagraph_skip", "compile_id": "0/1", "message": "skipping cudagraphs due to "
     "mutated inputs", **_POSITION},
    {"ev": "traced_code", "compile_id": "0/1", "attempt": 0, "epoch": 0, "at": "graph_break",
     "codes": [{"name": "load", "file": "/srv/kernels.py", "line": 3, "module": "kernels",
                "boundary": "functools.lru_cache", "count": 1}],
     "chain": [{"name": "forward", "file": "/srv/model/blocks.py", "line": 88,
                "module": "model.blocks", "boundary": None}], **_POSITION},
    {"ev": "recompile_limit", "compile_id": "0/8", "epoch": 0, "frame": _FRAME,
     "reason": "hit config.recompile_limit (8)", **_POSITION},
    {"ev": "eager_fallback", "frame": _FRAME, **_POSITION},
    {"ev": "dynamo_reset", "epoch": 1},
    {"ev": "collector_error", "where": "steps.end", "error": "RuntimeError: x",
     "traceback": "Traceback (most recent call last):\n  ..."},
    {"ev": "collectors_paused", "paused": True},
    {"ev": "collectors_paused", "paused": False},
)  # fmt: skip
#: Values put where a known field goes: strings, huge and negative numbers, non-finite
#: floats, containers, escapes; RAW ones are JSON text json.dumps cannot write.
_RAW_DEEP = "[" * 10_000 + "]" * 10_000
_RAW_VALUES = ("1e999", "-1e999", "9" * 5000, "-" + "9" * 5000, _RAW_DEEP, "NaN", "Infinity")
_EVENT_VALUES: tuple[Any, ...] = (
    *_ODD_VALUES,
    -(2**63),
    2**63,
    2**64 + 1,
    1.5,
    -0.5,
    float("inf"),
    float("nan"),
    [[[]]],
    {"a": {"b": [1, "x"]}},
    [None, {"k": []}],
    "x" * 100_000,
    "\x1b[2J\x1b]0;PWNED\x07",
    "../../../etc/passwd",
    "/dev/zero",
    *(
        # Numerals int() refuses or misreads, lone surrogates, and text diag parses numbers
        # out of (a location's line, a guard's sizes, torchrun's rank and exit code).
        "²",
        "٣",
        "9" * 5000,
        "-" + "9" * 5000,
        "\ud800",
        "\udfff\ud800",
        "x\ud83d",
        "\n1",
        "/srv/model.py:²",
        "/srv/model.py:" + "9" * 5000,
        "tensor 'x' size mismatch at index ². expected ٣, actual " + "9" * 5000,
        "L['x'].size()[" + "9" * 5000 + "]",
        "rank: ² (local_rank: 0)\n  exitcode  : -" + "9" * 5000,
        'File "/srv/m.py", line ' + "9" * 5000 + ", in forward",
        "torch_dynamo_resume_in_forward_at_" + "9" * 5000,
        "ProfilerStep#\u00b2",
    ),
)
_MANIFEST_KEYS = (
    "format", "version", "status", "command", "cwd", "started", "ended", "host",
    "launcher_pid", "options", "versions", "runs", "diag_version",
)  # fmt: skip


@dataclass(frozen=True)
class ConfusedTrace:
    name: str
    manifest: bytes
    events: bytes


def event_base() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The fuzzed trace's manifest and its event lines (one process)."""
    manifest = json.loads((EVENT_BASE / "manifest.json").read_text(encoding="utf-8"))
    path = next((EVENT_BASE / "runs" / "compiled").glob("*/events.jsonl"))
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    kinds = {e["ev"] for e in events}
    for donor in EVENT_DONORS:
        for file in sorted(donor.glob("runs/*/*/events.jsonl")):
            for line in file.read_text(encoding="utf-8").splitlines():
                event = json.loads(line)
                if event["ev"] not in kinds:
                    kinds.add(event["ev"])
                    events.append(event)
    t = max(e["t"] for e in events)
    for offset, event in enumerate(HAND_WRITTEN_EVENTS, start=1):
        events.append({"t": t + offset, **event})
    return manifest, events


def _odd(rng: random.Random) -> tuple[Any, str | None]:
    """A value for a known field: (a JSON value, None) or (a placeholder, its raw text)."""
    if rng.random() < 0.2:
        return "\u0000RAW\u0000", rng.choice(_RAW_VALUES)
    return rng.choice(_EVENT_VALUES), None


_ODD_DIGITS = ("²", "٣", "9" * 5000, "1" * 25, "\ud800", "٣\ud800")
_DIGIT_RUN = re.compile(r"[0-9]+")


def _odd_numerals(rng: random.Random, value: Any) -> Any:
    """`value` with every run of ASCII digits in its strings (keys kept) replaced by one odd
    numeral: the text diag parses numbers out of, in the shape torch writes it."""
    if isinstance(value, str):
        odd = rng.choice(_ODD_DIGITS)
        return _DIGIT_RUN.sub(lambda _m: odd, value)
    if isinstance(value, list):
        return [_odd_numerals(rng, item) for item in value]
    if isinstance(value, dict):
        return {k: v if k == "ev" else _odd_numerals(rng, v) for k, v in value.items()}
    return value


def _confuse(rng: random.Random, event: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """One known field of the event (or of a nested object in it) given an odd value; or, one
    time in four, every number written inside its strings replaced by an odd numeral."""
    if rng.random() < 0.25:
        return _odd_numerals(rng, event), None
    target = event
    nested = [v for v in event.values() if isinstance(v, dict) and v]
    nested += [i for v in event.values() if isinstance(v, list) for i in v if isinstance(i, dict)]
    if nested and rng.random() < 0.35:
        target = rng.choice(nested)
    keys = [k for k in target if k != "ev"] or ["t"]
    if target is event and rng.random() < 0.05:
        keys = ["ev"]
    value, raw = _odd(rng)
    target[rng.choice(keys)] = value
    return event, raw


def _line(event: dict[str, Any], raw: str | None) -> bytes:
    text = json.dumps(event, separators=(",", ":"))
    if raw is not None:
        text = text.replace('"\\u0000RAW\\u0000"', raw)
    return text.encode()


def confused_traces(seed: int = 1, count: int = 1000) -> Iterator[ConfusedTrace]:
    """`count` copies of the event base, each with 1-3 known fields of random lines (every
    kind in turn) given values of the wrong type or range, some whole lines that are not
    events, and in one case of twenty a manifest field of the wrong type."""
    rng = random.Random(seed)
    manifest, events = event_base()
    by_kind: dict[str, list[int]] = {}
    for index, event in enumerate(events):
        by_kind.setdefault(event["ev"], []).append(index)
    kinds = sorted(by_kind)
    for number in range(count):
        lines = [json.dumps(e, separators=(",", ":")).encode() for e in events]
        labels = []
        for turn in range(rng.randint(1, 3)):
            kind = kinds[(number + turn * 7) % len(kinds)]
            index = rng.choice(by_kind[kind])
            if rng.random() < 0.05:
                lines[index] = rng.choice([b"[]", b'"x"', b"1", b"{", b"null", b"{}"])
                labels.append(f"{kind}:whole-line")
                continue
            event, raw = _confuse(rng, json.loads(json.dumps(events[index])))
            lines[index] = _line(event, raw)
            labels.append(kind)
        manifest_bytes = json.dumps(manifest).encode()
        if rng.random() < 0.05:
            changed = dict(manifest)
            key = rng.choice(_MANIFEST_KEYS)
            value, raw = _odd(rng)
            changed[key] = value
            text = json.dumps(changed)
            manifest_bytes = (
                text.replace('"\\u0000RAW\\u0000"', raw) if raw is not None else text
            ).encode()
            labels.append(f"manifest.{key}")
        name = f"{number:04d}-" + "+".join(labels)
        yield ConfusedTrace(name, manifest_bytes, b"\n".join(lines) + b"\n")
