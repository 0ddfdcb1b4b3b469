"""Kineto ingest speed and memory: diag's reader (first open, cached open) against HTA, by size.

Traces of about 50, 250 and 1000 MB of JSON are made by replicating the real H200 trace
(bench/synth_kineto.py; kept in --work between runs), plus the biggest real public traces in
shared/data/kineto. Each measurement runs in its own child process, the variants alternating,
so that one process's heap or page cache does not favour the next. diag's children are pinned
to one CPU (sched_setaffinity; the gunzip thread shares it), HTA's are not. The table gives
the median wall time of the ingest call itself, the child's peak RSS (ru_maxrss from wait4),
and, for diag's first open, where the time goes: process start and imports, gunzip (on the
reader thread), JSON decoding, folding events into columns, the joins, the cache write, and
cutting the trace into profiler steps (what `diag analyze --kineto` does next).

    python bench/ingest.py                                  # 50, 250, 1000 MB; 3 repeats
    python bench/ingest.py --sizes 50,250 --repeats 1 --hta-repeats 1
    python bench/ingest.py --trace big.json.gz --json
    git archive COMMIT diag | tar -x -C /tmp/base && python bench/ingest.py --baseline /tmp/base

--baseline DIR also opens each trace with the diag package in DIR (first open and cached, in
the same alternation, its own cache folder): a before/after measured side by side, which on a
shared machine is the comparison to trust more than either table on its own.

HTA is `TraceAnalysis(trace_dir=...)` with HTA_DISABLE_NS_ROUNDING=1, what an HTA user runs
first; it takes minutes at 1 GB, so it runs --hta-repeats times (default 1) at each size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth_kineto import SHARED_KINETO, default_source, replicate  # noqa: E402 (sibling script)

CHILD = r"""
import json, os, sys, time
started = time.time()
mode, path, cache, spawned = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
if mode == "hta":
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis
    imported = time.time()
    start = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=os.path.dirname(path))
    seconds = time.perf_counter() - start
    frame = analysis.t.get_trace(0)
    rows = len(frame)
    symbols = analysis.t.symbol_table.get_sym_id_map()
    kernel_id = symbols.get("kernel", symbols.get("Kernel"))  # 2021 traces: "Kernel"
    kernels = -1 if kernel_id is None else int((frame["cat"] == kernel_id).sum())
    print(json.dumps({"seconds": seconds, "rows": rows, "kernels": kernels,
                      "start_s": started - spawned, "import_s": imported - started}))
    sys.exit(0)
from pathlib import Path
from diag.trace import kineto, kinetocache
from diag.trace.profiles import profiles_from_kineto
imported = time.time()
parts = {}
def timed(owner, name, label):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            parts[label] = parts.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, name, wrapper)
class Decoder:
    def __init__(self, inner, label):
        self.inner, self.label = inner, label
    def decode(self, data):
        t = time.perf_counter()
        try:
            return self.inner.decode(data)
        finally:
            parts["decode"] = parts.get("decode", 0.0) + time.perf_counter() - t
kineto._DECODE_EVENTS = Decoder(kineto._DECODE_EVENTS, "decode")
kineto._DECODE_DOC = Decoder(kineto._DECODE_DOC, "decode")
inflated = kineto._inflated
def gunzip(*args):
    t = time.thread_time()  # the reader thread's own CPU time
    for piece in inflated(*args):
        parts["gunzip_cpu"] = parts.get("gunzip_cpu", 0.0) + time.thread_time() - t
        yield piece
        t = time.thread_time()
kineto._inflated = gunzip
for name, label in [("feed", "fold"), ("_cpu_ops", "join_cpu"), ("_launches", "join_launch"),
                    ("_activities", "join_activity"), ("finish", "finish")]:
    timed(kineto._Builder, name, label)
timed(kinetocache, "_write", "cache_write")
timed(kinetocache, "_read", "cache_read")
start, cpu_start = time.perf_counter(), time.process_time()
if mode == "diag-read":
    trace = kineto.read_kineto(Path(path))
else:
    trace = kinetocache.load_kineto(Path(path), Path(cache))
seconds = time.perf_counter() - start
ingest_cpu_s = time.process_time() - cpu_start  # both threads: the core's share of the call
t = time.perf_counter()
profiles = profiles_from_kineto("trace", trace)
parts["steps"] = time.perf_counter() - t
kernels = sum(1 for a in trace.activities if a.kind == "kernel")
print(json.dumps({"seconds": seconds, "rows": trace.event_count, "kernels": kernels,
                  "steps": len(profiles), "cpu_s": time.process_time(),
                  "ingest_cpu_s": ingest_cpu_s,
                  "start_s": started - spawned, "import_s": imported - started, "parts": parts,
                  "inflate": kineto._INFLATE.__name__, "module": kineto.__file__}))
"""

VARIANTS = {
    "hta": "HTA TraceAnalysis",
    "diag-first": "diag first open (parse + cache write)",
    "diag-cached": "diag cached open",
}
BASELINE_VARIANTS = {
    "base-first": "baseline diag first open",
    "base-cached": "baseline diag cached open",
}


def run_child(
    mode: str, trace: Path, cache: Path, cpu: int | None, baseline: Path | None = None
) -> dict[str, Any]:
    """One ingest in a fresh interpreter: its own timing, and its peak RSS from wait4.
    A base-* mode imports diag from `baseline` (first on PYTHONPATH)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if mode.startswith("base-"):
        assert baseline is not None
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(baseline), env.get("PYTHONPATH")]))

    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        spawned = time.time()
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, mode, os.path.abspath(trace), os.path.abspath(cache)]
            + [repr(spawned)],
            stdout=out,
            stderr=err,
            env=env,
            preexec_fn=pin if cpu is not None else None,  # noqa: PLW1509 (no threads here)
            cwd=baseline if mode.startswith("base-") else None,  # sys.path[0] is the cwd
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} failed:\n{err.read().decode(errors='replace')[-2000:]}")
        result: dict[str, Any] = json.loads(out.read().decode().strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


def json_mb(trace: Path) -> float:
    """Size of the trace's JSON, decompressed."""
    size = 0
    opener = gzip.open if trace.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(trace, "rb") as handle:
        while chunk := handle.read(16 << 20):
            size += len(chunk)
    return size / 1e6


def make_traces(work: Path, sizes: list[int], extra: list[Path]) -> list[tuple[str, Path]]:
    """One folder per trace (HTA reads every trace file in its folder): replicated sizes, kept
    in `work` between runs, then the given real traces (linked)."""
    source = default_source()
    probe = work / "probe.json.gz"  # one copy: the bytes per event that replicate() writes
    work.mkdir(parents=True, exist_ok=True)
    written = replicate(source, probe, 1)
    per_event = json_mb(probe) * 1e6 / written
    traces = []
    for mb in sizes:
        target = work / f"synth-{mb}mb" / "trace.json.gz"
        if not target.exists():
            print(f"making a ~{mb} MB trace from {source.name}", file=sys.stderr)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")
            replicate(source, partial, int(mb * 1e6 / per_event))
            partial.rename(target)
        traces.append((f"{source.name} x{mb} MB", target))
    for path in extra:
        link = work / f"real-{path.name.split('.')[0]}" / "trace.json.gz"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            os.symlink(path.resolve(), link)
        traces.append((path.name, link))
    return traces


def measure(
    trace: Path, repeats: int, hta_repeats: int, cpu: int | None, baseline: Path | None = None
) -> dict[str, Any]:
    caches = {"diag": trace.parent / ".diag-cache", "base": trace.parent / ".diag-cache-base"}
    modes = {**VARIANTS, **(BASELINE_VARIANTS if baseline is not None else {})}
    samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for repeat in range(max(repeats, hta_repeats)):
        for mode in modes:
            if repeat >= (hta_repeats if mode == "hta" else repeats):
                continue
            cache = caches["base" if mode.startswith("base-") else "diag"]
            if mode.endswith("-first"):
                shutil.rmtree(cache, ignore_errors=True)
            try:
                sample = run_child(mode, trace, cache, None if mode == "hta" else cpu, baseline)
            except RuntimeError as exc:
                if mode != "hta":
                    raise SystemExit(str(exc)) from None
                print(f"  HTA failed on this trace: {str(exc)[-300:]}", file=sys.stderr)
                continue
            samples[mode].append(sample)
            print(
                f"  [{repeat + 1}] {modes[mode]:<40} {sample['seconds']:8.2f} s "
                f"{sample['peak_rss_mb']:8.0f} MB  load {os.getloadavg()[0]:.2f}",
                file=sys.stderr,
            )
    for cache in caches.values():
        shutil.rmtree(cache, ignore_errors=True)
    summary: dict[str, Any] = {}
    for mode, runs in samples.items():
        if not runs:
            continue
        summary[mode] = {
            "median_s": statistics.median(s["seconds"] for s in runs),
            "runs_s": [round(s["seconds"], 3) for s in runs],
            "peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in runs),
            "kernels": runs[0]["kernels"],
            "rows": runs[0]["rows"],
            "start_s": statistics.median(s["start_s"] for s in runs),
            "import_s": statistics.median(s["import_s"] for s in runs),
        }
        if mode != "hta":
            keys = sorted({k for s in runs for k in s["parts"]})
            summary[mode]["parts"] = {
                k: statistics.median(s["parts"].get(k, 0.0) for s in runs) for k in keys
            }
            summary[mode]["cpu_s"] = statistics.median(s["cpu_s"] for s in runs)
            summary[mode]["ingest_cpu_s"] = statistics.median(s["ingest_cpu_s"] for s in runs)
            summary[mode]["steps"] = runs[0]["steps"]
            summary[mode]["inflate"] = runs[0]["inflate"]
            summary[mode]["module"] = runs[0]["module"]
    return summary


def breakdown(v: dict[str, Any]) -> list[tuple[str, float]]:
    """The first open's wall time by part (medians over repeats; they need not add up exactly)."""
    p = v["parts"]
    joins = p.get("finish", 0.0)
    parse = v["median_s"] - p.get("cache_write", 0.0) - p.get("cache_read", 0.0)
    rest = parse - p.get("decode", 0.0) - p.get("fold", 0.0) - joins
    return [
        ("process start (interpreter)", v["start_s"]),
        ("imports (diag.trace, msgspec)", v["import_s"]),
        ("JSON decode (msgspec -> structs)", p.get("decode", 0.0)),
        ("fold events into columns", p.get("fold", 0.0)),
        ("joins: CPU op nesting, regions", p.get("join_cpu", 0.0)),
        ("joins: launch -> op, region (External id)", p.get("join_launch", 0.0)),
        ("joins: kernel -> launch (correlation)", p.get("join_activity", 0.0)),
        (
            "joins: the rest (sort, syncs, annotations)",
            joins
            - p.get("join_cpu", 0.0)
            - p.get("join_launch", 0.0)
            - p.get("join_activity", 0.0),
        ),  # fmt: skip
        ("chunking, freeing, waiting on gunzip", rest),
        ("cache write (msgpack, crc32, rename)", p.get("cache_write", 0.0)),
        ("= first open (the ingest call)", v["median_s"]),
        ("gunzip CPU (reader thread, same core)", p.get("gunzip_cpu", 0.0)),
        ("step cutting (profiles_from_kineto)", p.get("steps", 0.0)),
    ]


def table(info: dict[str, Any]) -> str:
    lines = [
        f"machine: {info['cpus']} CPUs, diag pinned to CPU {info['cpu']}, load average "
        f"{info['load_before']} before, {info['load_after']} after; python {info['python']}, "
        f"msgspec {info['msgspec']}, traceinsight {info['traceinsight']}, gunzip by "
        f"{info['inflate']}; diag {info['repeats']} repeat(s), HTA {info['hta_repeats']}",
        "",
        f"{'trace':<44} {'JSON MB':>8} {'events':>10} {'HTA s':>8} {'HTA MB':>7} "
        f"{'first s':>8} {'MB/s':>6} {'CPU MB/s':>8} {'cached s':>9} {'diag MB':>8} "
        f"{'HTA/diag':>9} {'RSS d/H':>8} {'first/cached':>12}",
    ]
    for row in info["traces"]:
        v = row["variants"]
        hta, first, cached = v.get("hta"), v["diag-first"], v["diag-cached"]
        hta_s = f"{hta['median_s']:8.2f}" if hta else f"{'-':>8}"
        hta_mb = f"{hta['peak_rss_mb']:7.0f}" if hta else f"{'-':>7}"
        speed = f"{hta['median_s'] / first['median_s']:8.1f}x" if hta else f"{'-':>9}"
        rss = f"{first['peak_rss_mb'] / hta['peak_rss_mb']:8.2f}" if hta else f"{'-':>8}"
        lines.append(
            f"{row['name'][:44]:<44} {row['json_mb']:8.1f} {first['rows']:10,} {hta_s} {hta_mb} "
            f"{first['median_s']:8.2f} {row['json_mb'] / first['median_s']:6.0f} "
            f"{row['json_mb'] / first['ingest_cpu_s']:8.0f} "
            f"{cached['median_s']:9.3f} {first['peak_rss_mb']:8.0f} {speed} {rss} "
            f"{first['median_s'] / cached['median_s']:11.1f}x"
        )
    lines += ["", "MB/s: JSON MB over the first open's wall time; CPU MB/s: over its CPU time "
              "(both threads; what one core gives when no one else is on it)",
              "targets: first open >= 200 MB/s; HTA/diag >= 10x; RSS diag/HTA <= 0.5; "
              "first/cached >= 10x", ""]  # fmt: skip
    lines.append("where diag's first open goes (median s; diag pinned to one CPU):")
    names = [label for label, _ in breakdown(info["traces"][0]["variants"]["diag-first"])]
    header = f"{'part':<44}" + "".join(f" {row['json_mb']:>8.0f}MB" for row in info["traces"])
    lines.append(header)
    columns = [dict(breakdown(row["variants"]["diag-first"])) for row in info["traces"]]
    for label in names:
        lines.append(f"{label:<44}" + "".join(f" {c[label]:10.3f}" for c in columns))
    lines.append(
        f"{'first open CPU s (all threads)':<44}"
        + "".join(
            f" {row['variants']['diag-first']['ingest_cpu_s']:10.3f}" for row in info["traces"]
        )
    )
    lines.append(
        f"{'process CPU s (all threads)':<44}"
        + "".join(f" {row['variants']['diag-first']['cpu_s']:10.3f}" for row in info["traces"])
    )
    lines.append("")
    for row in info["traces"]:
        v = row["variants"]
        hta = v.get("hta")
        lines.append(
            f"{row['name']}: kernels diag {v['diag-first']['kernels']:,}"
            + (f", HTA {hta['kernels']:,}" if hta else "")
            + f"; steps cut {v['diag-first']['steps']}; runs (s): first "
            + " ".join(f"{s:.2f}" for s in v["diag-first"]["runs_s"])
            + ", cached "
            + " ".join(f"{s:.3f}" for s in v["diag-cached"]["runs_s"])
            + (", HTA " + " ".join(f"{s:.1f}" for s in hta["runs_s"]) if hta else "")
        )
    if all("base-first" in row["variants"] for row in info["traces"]):
        lines += [
            "",
            "against the baseline (side by side, same alternation; medians; baseline "
            f"{info['traces'][0]['variants']['base-first']['module']}):",
            f"{'trace':<44} {'base CPU MB/s':>13} {'CPU MB/s':>9} {'CPU base/this':>13} "
            f"{'base first/cached':>17} {'first/cached':>12} {'base MB':>8} {'diag MB':>8}",
        ]
        for row in info["traces"]:
            v, mb = row["variants"], row["json_mb"]
            base, this = v["base-first"], v["diag-first"]
            lines.append(
                f"{row['name'][:44]:<44} {mb / base['ingest_cpu_s']:13.0f} "
                f"{mb / this['ingest_cpu_s']:9.0f} "
                f"{base['ingest_cpu_s'] / this['ingest_cpu_s']:13.2f} "
                f"{base['median_s'] / v['base-cached']['median_s']:16.1f}x "
                f"{this['median_s'] / v['diag-cached']['median_s']:11.1f}x "
                f"{base['peak_rss_mb']:8.0f} {this['peak_rss_mb']:8.0f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,250,1000", help="made traces, MB of JSON")
    parser.add_argument("--trace", type=Path, action="append", default=[], help="a real trace")
    parser.add_argument("--no-real", action="store_true", help="skip shared/data's real traces")
    parser.add_argument("--repeats", type=int, default=3, help="diag runs per variant")
    parser.add_argument("--hta-repeats", type=int, default=1, help="HTA runs per trace")
    parser.add_argument("--hta-max-mb", type=float, default=2000, help="no HTA above this")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin diag to (last)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "diag-ingest")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--baseline", type=Path, help="a folder holding another diag package, run beside this one"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    real = list(args.trace)
    if not args.no_real and not args.trace:
        shared = sorted(SHARED_KINETO.glob("*.json.gz"), key=lambda p: p.stat().st_size)
        real = [p for p in shared if p.stat().st_size > 1_000_000][-2:]
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    info: dict[str, Any] = {
        "repeats": args.repeats,
        "hta_repeats": args.hta_repeats,
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "msgspec": metadata.version("msgspec"),
        "traceinsight": metadata.version("traceinsight"),
        "traces": [],
        "baseline": str(args.baseline) if args.baseline else None,
    }
    traces = make_traces(args.work, sizes, real)
    info["load_before"] = round(os.getloadavg()[0], 2)
    for name, trace in traces:
        mb = json_mb(trace)
        print(f"{name}: {mb:.1f} MB JSON", file=sys.stderr)
        hta_repeats = args.hta_repeats if mb <= args.hta_max_mb else 0
        variants = measure(trace, args.repeats, hta_repeats, cpu, args.baseline)
        info["traces"].append(
            {
                "name": name,
                "file": str(trace.resolve()),
                "json_mb": round(mb, 1),
                "gzip_mb": round(trace.stat().st_size / 1e6, 1),
                "variants": variants,
            }
        )
        (args.work / "last-run.json").write_text(json.dumps(info, indent=1))  # a crash keeps these
    info["load_after"] = round(os.getloadavg()[0], 2)
    info["inflate"] = info["traces"][0]["variants"]["diag-first"]["inflate"]
    print(json.dumps(info, indent=1) if args.json else table(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
