"""Ingest speed and memory: diag's Kineto reader (and its cache) against HTA on one big trace.

Each measurement runs in its own child process, the variants alternating, so that one
process's heap or page cache does not favour the next; the table gives median wall time of the
ingest call itself (imports excluded) and the child's peak RSS (ru_maxrss from wait4).

    python bench/ingest.py                        # makes a >= 1.5 M-event trace, 3 repeats
    python bench/ingest.py --trace big.json.gz --repeats 1 --json

Variants: `read_kineto` (parse only), first open through the cache (parse + write the
msgpack), cached open, and HTA's `TraceAnalysis(trace_dir=...)` with HTA_DISABLE_NS_ROUNDING=1,
which is what an HTA user runs first.
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
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth_kineto import default_source, replicate  # noqa: E402 (the sibling bench script)

CHILD = r"""
import json, os, sys, time
mode, path, cache = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "hta":
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis
    start = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=os.path.dirname(path))
    seconds = time.perf_counter() - start
    frame = analysis.t.get_trace(0)
    rows = len(frame)
    kernels = int((frame["cat"] == analysis.t.symbol_table.get_sym_id_map()["kernel"]).sum())
else:
    from diag.trace.kineto import read_kineto
    from diag.trace.kinetocache import load_kineto
    from pathlib import Path
    start = time.perf_counter()
    if mode == "diag-read":
        trace = read_kineto(Path(path))
    else:
        trace = load_kineto(Path(path), Path(cache))
    seconds = time.perf_counter() - start
    rows = trace.event_count
    kernels = sum(1 for a in trace.activities if a.kind == "kernel")
print(json.dumps({"seconds": seconds, "rows": rows, "kernels": kernels}))
"""

VARIANTS = {
    "hta": "HTA TraceAnalysis",
    "diag-read": "diag read_kineto",
    "diag-first": "diag first open (cache write)",
    "diag-cached": "diag cached open",
}


def run_child(mode: str, trace: Path, cache: Path) -> dict[str, Any]:
    """One ingest in a fresh interpreter: its own timing, and its peak RSS from wait4."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, mode, str(trace), str(cache)],
            stdout=out,
            stderr=err,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{mode} failed:\n{err.read().decode(errors='replace')[-2000:]}")
        result: dict[str, Any] = json.loads(out.read().decode().strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


def describe(trace: Path) -> dict[str, Any]:
    with gzip.open(trace, "rb") as handle:
        size = 0
        while chunk := handle.read(16 << 20):
            size += len(chunk)
    return {
        "file": str(trace),
        "json_mb": round(size / 1e6, 1),
        "gzip_mb": round(trace.stat().st_size / 1e6, 1),
    }


def measure(trace: Path, repeats: int) -> dict[str, Any]:
    cache = trace.parent / ".diag-cache"
    samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in VARIANTS}
    for repeat in range(repeats):
        for mode in VARIANTS:
            if mode == "diag-first":
                shutil.rmtree(cache, ignore_errors=True)
            sample = run_child(mode, trace, cache)
            samples[mode].append(sample)
            print(
                f"  [{repeat + 1}/{repeats}] {VARIANTS[mode]:<32} {sample['seconds']:8.2f} s "
                f"{sample['peak_rss_mb']:8.0f} MB",
                file=sys.stderr,
            )
    summary = {
        mode: {
            "median_s": statistics.median(s["seconds"] for s in runs),
            "runs_s": [round(s["seconds"], 3) for s in runs],
            "peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in runs),
            "kernels": runs[0]["kernels"],
        }
        for mode, runs in samples.items()
    }
    return {
        "events": samples["diag-read"][0]["rows"],
        "variants": summary,
        "ratios": {
            "hta_over_diag_time": summary["hta"]["median_s"] / summary["diag-read"]["median_s"],
            "diag_over_hta_rss": summary["diag-read"]["peak_rss_mb"]
            / summary["hta"]["peak_rss_mb"],
            "first_over_cached_open": summary["diag-first"]["median_s"]
            / summary["diag-cached"]["median_s"],
        },
    }


def table(info: dict[str, Any]) -> str:
    trace = info["trace"]
    lines = [
        f"trace {trace['file']}: {info['events']:,} events, {trace['json_mb']} MB JSON, "
        f"{trace['gzip_mb']} MB gzip",
        f"machine: {info['cpus']} CPUs, load average {info['load_before']} before, "
        f"{info['load_after']} after; python {info['python']}, msgspec {info['msgspec']}, "
        f"traceinsight {info['traceinsight']}; {info['repeats']} repeat(s)",
        "",
        f"{'variant':<32} {'median s':>9} {'peak RSS MB':>12}  runs (s)",
    ]
    for mode, label in VARIANTS.items():
        v = info["variants"][mode]
        runs = " ".join(f"{s:.2f}" for s in v["runs_s"])
        lines.append(f"{label:<32} {v['median_s']:9.2f} {v['peak_rss_mb']:12.0f}  {runs}")
    r = info["ratios"]
    lines += [
        "",
        f"HTA / diag time        {r['hta_over_diag_time']:6.1f}x   (target >= 10x)",
        f"diag / HTA peak RSS    {r['diag_over_hta_rss']:6.2f}    (target <= 0.5)",
        f"first / cached open    {r['first_over_cached_open']:6.1f}x   (target >= 5x)",
        f"kernels: diag {info['variants']['diag-read']['kernels']}, "
        f"HTA {info['variants']['hta']['kernels']} (HTA drops the last profiler step)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, help="a Kineto .json.gz to use (else one is made)")
    parser.add_argument("--events", type=int, default=1_500_000, help="size of the made trace")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="diag-ingest-") as tmp:
        folder = Path(tmp) / "trace"  # HTA parses every trace file in the folder: just this one
        folder.mkdir()
        trace = folder / "trace.json.gz"
        if args.trace:
            os.symlink(args.trace.resolve(), trace)
        else:
            print(f"making a {args.events:,}-event trace from {default_source()}", file=sys.stderr)
            replicate(default_source(), trace, args.events)
        load_before = round(os.getloadavg()[0], 2)
        info: dict[str, Any] = {
            "trace": describe(trace),
            "repeats": args.repeats,
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "msgspec": metadata.version("msgspec"),
            "traceinsight": metadata.version("traceinsight"),
            "load_before": load_before,
        }
        info.update(measure(trace, args.repeats))
        info["load_after"] = round(os.getloadavg()[0], 2)
        if args.trace:
            info["trace"]["file"] = str(args.trace)
    print(json.dumps(info, indent=1) if args.json else table(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
