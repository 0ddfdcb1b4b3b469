"""Big Kineto traces for benchmarks, made by replicating a real one.

A real torch.profiler trace is repeated back to back in time until it holds enough events; each
copy gets its own correlation ids, External ids, flow ids and ProfilerStep numbers, so every
kernel -> launch -> CPU op join stays as correct as in the source. `make_trace_dir` wraps such a
trace in a diag trace directory (a copy of tests/data/h200/record-wan-routing's compiled run
whose `r0-s2-steady` window is the big trace) for the TUI and report benchmarks.

    python bench/synth_kineto.py OUT.json.gz --events 1500000
    python bench/synth_kineto.py OUT_DIR --trace-dir --events 1500000
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED_KINETO = REPO.parent / "shared" / "data" / "kineto"
RECORD_SOURCE = REPO / "tests" / "data" / "h200" / "record-wan-routing"
WINDOW = "r0-s2-steady"

_ID_ARGS = ("correlation", "External id", "external id", "Python id", "Python parent id")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def default_source() -> Path:
    """The biggest H200 trace in shared/data/kineto, else the repo's wan-compiled trace."""
    shared = sorted(SHARED_KINETO.glob("h200_*.json.gz"), key=lambda p: p.stat().st_size)
    return shared[-1] if shared else REPO / "tests" / "data" / "h200" / "wan-compiled.json.gz"


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:
        data: dict[str, Any] = json.loads(handle.read())
    return data


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def replicate(src: Path, dst: Path, min_events: int) -> int:
    """Write `src` repeated (shifted in time, ids remapped) to gzip `dst`; returns events written.

    Metadata events (ph M) and the once-per-trace markers (the profiler span, the window
    instants) are written once, the span stretched over all copies.
    """
    data = _load(src)
    events: list[dict[str, Any]] = data["traceEvents"]
    once = [e for e in events if e.get("ph") == "M"]
    markers = [e for e in events if e.get("cat") == "Trace" or e.get("ph") == "i"]
    marker_ids = {id(e) for e in markers}
    body = [e for e in events if e.get("ph") != "M" and id(e) not in marker_ids]

    starts = [t for e in body if (t := _number(e.get("ts"))) is not None]
    ends = [(_number(e.get("ts")) or 0.0) + (_number(e.get("dur")) or 0.0) for e in body]
    first, last = min(starts), max(ends)
    period = (last - first) + 1000.0  # copies 1 ms apart
    id_span = 1 + max(
        [0]
        + [int(v) for e in body for k in _ID_ARGS if isinstance(v := e.get("args", {}).get(k), int)]
        + [int(e["id"]) for e in body if isinstance(e.get("id"), int)]
    )
    step_span = 1 + max(
        [-1] + [int(m.group(1)) for e in body if (m := _STEP.match(str(e.get("name", ""))))]
    )
    copies = max(1, -(-(min_events - len(once) - len(markers)) // max(1, len(body))))

    dst.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with gzip.open(dst, "wt", compresslevel=6, encoding="utf-8") as out:
        meta = {k: v for k, v in data.items() if k != "traceEvents"}
        out.write("{\n")
        for key, value in meta.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
        out.write('  "traceEvents": [\n')
        separator = ""
        for event in once:
            out.write(separator + json.dumps(event))
            separator = ",\n"
            written += 1
        for k in range(copies):
            shift, id_shift = k * period, k * id_span
            for event in body:
                out.write(separator + json.dumps(_shifted(event, shift, id_shift, k * step_span)))
                written += 1
        for event in markers:
            moved = dict(event)
            if moved.get("cat") == "Trace" and _number(moved.get("dur")) is not None:
                moved["dur"] = float(moved["dur"]) + (copies - 1) * period
            elif moved.get("ph") == "i" and "End" in str(moved.get("name")):
                moved["ts"] = float(moved["ts"]) + (copies - 1) * period
            out.write(separator + json.dumps(moved))
            written += 1
        out.write("\n  ]\n}\n")
    return written


def _shifted(event: dict[str, Any], shift: float, id_shift: int, step_shift: int) -> dict[str, Any]:
    if not shift and not id_shift:
        return event
    copy = dict(event)
    ts = _number(copy.get("ts"))
    if ts is not None:
        copy["ts"] = round(ts + shift, 3)
    if isinstance(copy.get("id"), int):
        copy["id"] = copy["id"] + id_shift
    args = copy.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in _ID_ARGS:
            if isinstance(args.get(key), int) and args[key] > 0:
                args[key] += id_shift
        copy["args"] = args
    match = _STEP.match(str(copy.get("name", "")))
    if match:
        copy["name"] = f"ProfilerStep#{int(match.group(1)) + step_shift}"
    return copy


def make_trace_dir(dst: Path, min_events: int) -> Path:
    """A diag trace directory whose compiled run's `r0-s2-steady` window holds >= min_events.

    Copies record-wan-routing's manifest (compiled run only) and its compiled process folder;
    the window's Kineto file is replaced by its own replication, so regions and kernel names
    stay those of a real recording and events.jsonl still points at the file.
    """
    if dst.exists() and any(dst.iterdir()):
        raise SystemExit(f"{dst} exists and is not empty")
    manifest = json.loads((RECORD_SOURCE / "manifest.json").read_text())
    manifest["runs"] = [r for r in manifest["runs"] if r.get("label") == "compiled"]
    manifest["options"]["baseline"] = None
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=1))
    source_proc = next((RECORD_SOURCE / "runs" / "compiled").glob("pid*"))
    proc = dst / "runs" / "compiled" / source_proc.name
    shutil.copytree(source_proc, proc)
    window = proc / "kineto" / f"{WINDOW}.json.gz"
    replicate(source_proc / "kineto" / f"{WINDOW}.json.gz", window, min_events)
    return dst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output .json.gz (or folder with --trace-dir)")
    parser.add_argument("--events", type=int, default=1_500_000, help="minimum event count")
    parser.add_argument("--source", type=Path, default=None, help="trace to replicate")
    parser.add_argument("--trace-dir", action="store_true", help="write a diag trace directory")
    args = parser.parse_args(argv)
    if args.trace_dir:
        print(make_trace_dir(args.out, args.events))
        return 0
    count = replicate(args.source or default_source(), args.out, args.events)
    print(f"{args.out}: {count} events, {args.out.stat().st_size / 1e6:.1f} MB gzip")
    return 0


if __name__ == "__main__":
    sys.exit(main())
