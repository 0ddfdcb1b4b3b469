"""Run the reference service over a matrix of configurations and report what each did.

Each case runs in its own process (fresh Dynamo and allocator state): the full service (warmup,
then the live requests) under the fixtures' CompileObserver, then one extra profiled request at
the first live shape whose second step is traced with torch.profiler. The table gives live step
times, compiles by phase, recompile-limit hits, cache entries and, from the trace, kernel, copy
and sync time and which RMSNorm kernels ran.

    python bench/fixture_matrix.py --device cuda --size large --set wan-a --out /tmp/matrix

Traces (gzip'd Kineto JSON) and one JSON line per case are written under --out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# (name, model, compile, backend, plants, offload)
Case = tuple[str, str, bool, str, tuple[str, ...], str]

SETS: dict[str, list[Case]] = {
    "wan-a": [
        ("wan-eager", "wan", False, "inductor", (), "none"),
        ("wan-compiled", "wan", True, "inductor", (), "none"),
        ("wan-routing-eager", "wan", False, "inductor", ("routing",), "none"),
        ("wan-routing", "wan", True, "inductor", ("routing",), "none"),
        ("wan-guard-churn", "wan", True, "inductor", ("guard-churn",), "none"),
        ("wan-unwarmed-shape", "wan", True, "inductor", ("unwarmed-shape",), "none"),
    ],
    "wan-b": [
        ("wan-recompile-limit", "wan", True, "inductor", ("recompile-limit",), "none"),
        ("wan-cache-bloat", "wan", True, "inductor", ("cache-bloat",), "none"),
        ("wan-empty-cache", "wan", True, "inductor", ("empty-cache",), "none"),
        ("wan-offload-block", "wan", True, "inductor", (), "block"),
        ("wan-offload-bound-eager", "wan", False, "inductor", ("offload-bound",), "none"),
        ("wan-offload-bound", "wan", True, "inductor", ("offload-bound",), "none"),
    ],
    "others": [
        ("qwen-eager", "qwen", False, "inductor", (), "none"),
        ("qwen-compiled", "qwen", True, "inductor", (), "none"),
        ("qwen-guard-churn", "qwen", True, "inductor", ("guard-churn",), "none"),
        ("ltx-eager", "ltx", False, "inductor", (), "none"),
        ("ltx-compiled", "ltx", True, "inductor", (), "none"),
        ("ltx-guard-churn", "ltx", True, "inductor", ("guard-churn",), "none"),
    ],
    "cpu": [
        ("wan-eager", "wan", False, "aot_eager", (), "none"),
        ("wan-compiled", "wan", True, "aot_eager", (), "none"),
        ("wan-routing", "wan", True, "aot_eager", ("routing",), "none"),
        ("wan-guard-churn", "wan", True, "aot_eager", ("guard-churn",), "none"),
        ("wan-offload-bound", "wan", True, "aot_eager", ("offload-bound",), "none"),
    ],
}


def summarize_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """Kernel, copy and sync totals of one traced step (times in ms)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    syncs = [
        e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "Synchronize" in e.get("name", "")
    ]
    gpu = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels + copies)
    busy, end = 0.0, None
    for start, stop in gpu:
        if end is None or start > end:
            busy += stop - start
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    span = (gpu[-1][1] - gpu[0][0]) if gpu else 0.0
    htod = [e for e in copies if "HtoD" in e.get("name", "")]
    rms = sorted(
        {
            e["name"][:60]
            for e in kernels
            if "rms" in e["name"].lower() or "rsqrt" in e["name"].lower()
        }
    )
    cpu_rms = sorted(
        {e["name"] for e in events if e.get("cat") == "cpu_op" and "rms_norm" in e.get("name", "")}
    )
    return {
        "kernel_ms": sum(e["dur"] for e in kernels) / 1e3,
        "kernels": len(kernels),
        "htod_ms": sum(e["dur"] for e in htod) / 1e3,
        "htod_gb": sum(e.get("args", {}).get("bytes", 0) for e in htod) / 1e9,
        "sync_ms": sum(e["dur"] for e in syncs) / 1e3,
        "gpu_idle_ms": max(span - busy, 0.0) / 1e3,
        "rms_kernels": rms,
        "rms_cpu_ops": cpu_rms,
    }


def run_one(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    import torch

    from diag.fixtures.config import FixtureConfig, Request
    from diag.fixtures.dynamo_stats import cache_entries
    from diag.fixtures.observe import CompileObserver
    from diag.fixtures.runner import FixtureRunner

    config = FixtureConfig(
        model=spec["model"],
        size=spec["size"],
        device=spec["device"],
        compile=spec["compile"],
        backend=spec["backend"],
        plants=frozenset(spec["plants"]),
        offload=spec["offload"],
    )
    runner = FixtureRunner(config)
    started = time.perf_counter()
    with CompileObserver(runner) as observer:
        results = runner.run()
    total = time.perf_counter() - started
    live = [r for r in results if r.phase == "live"]
    row: dict[str, Any] = {
        "case": spec["name"],
        "total_s": total,
        "live": [
            {
                "id": r.request_id,
                "shape": r.shape,
                "step0_ms": r.step_seconds[0] * 1e3,
                "steady_ms": statistics.median(r.step_seconds[1:]) * 1e3,
            }
            for r in live
        ],
        "compiles_warmup": sum(1 for r in observer.records if r.phase == "warmup"),
        "compiles_live": sum(1 for r in observer.records if r.phase == "live"),
        "live_reasons": sorted(
            {r.reasons[0].splitlines()[0][:90] for r in observer.live() if r.reasons}
        ),
        "limit_hits": [(r.request_id, r.step) for r in observer.limit_hits()],
        "cache_entries": {s.name: s.entries for s in cache_entries()},
        "latents": live[-1].latents_sha256[:16] if live else "",
    }
    # One more request at the first live shape, its second step traced (the first pays the
    # profiler's own start-up).
    activities = [torch.profiler.ProfilerActivity.CPU]
    if config.device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    shape = config.live_requests()[0].shape
    trace_path = out / f"{spec['name']}.json"
    prof = torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace_path)),
    )
    original_post = runner.step_post

    def step_post() -> None:
        original_post()
        runner._synchronize()
        prof.step()

    runner.step_post = step_post  # type: ignore[method-assign]
    with torch.no_grad(), prof:
        runner.run_pipeline(Request("profiled", shape, 2))
    with open(trace_path, encoding="utf-8") as handle:
        trace = json.load(handle)
    with open(trace_path, "rb") as src, gzip.open(str(trace_path) + ".gz", "wb") as dst:
        dst.write(src.read())
    trace_path.unlink()
    row["profiled"] = summarize_trace(trace)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--set", dest="sets", action="append", choices=sorted(SETS), default=[])
    parser.add_argument("--out", type=Path, default=Path("fixture-matrix"))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one:
        print(json.dumps(run_one(json.loads(args.one), args.out)))
        return 0
    rows = []
    for set_name in args.sets or ["cpu"]:
        for name, model, compile_, backend, plants, offload in SETS[set_name]:
            spec = {
                "name": name,
                "model": model,
                "compile": compile_,
                "backend": backend,
                "plants": list(plants),
                "offload": offload,
                "device": args.device,
                "size": args.size,
            }
            started = time.perf_counter()
            try:
                proc = subprocess.run(
                    [sys.executable, __file__, "--one", json.dumps(spec), "--out", str(args.out)],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    env=os.environ.copy(),
                )
            except subprocess.TimeoutExpired:
                print(f"{name}: timed out after {args.timeout:.0f}s", flush=True)
                continue
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                print(f"{name}: failed rc={proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
                continue
            row = json.loads(lines[-1])
            rows.append(row)
            with open(args.out / "results.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            print(_format_row(row) + f"  [{time.perf_counter() - started:.0f}s]", flush=True)
    return 0


def _format_row(row: dict[str, Any]) -> str:
    live = " ".join(f"{lv['id']}:{lv['step0_ms']:.1f}/{lv['steady_ms']:.1f}" for lv in row["live"])
    p = row["profiled"]
    text = (
        f"{row['case']:24} live(step0/steady ms) {live} | compiles warm={row['compiles_warmup']} "
        f"live={row['compiles_live']} limit={row['limit_hits']} entries={row['cache_entries']} | "
        f"traced step: kernels {p['kernel_ms']:.1f}ms "
        f"htod {p['htod_ms']:.1f}ms/{p['htod_gb']:.2f}GB "
        f"sync {p['sync_ms']:.1f}ms idle {p['gpu_idle_ms']:.1f}ms "
        f"rms={p['rms_kernels'] or p['rms_cpu_ops']}"
    )
    if row["live_reasons"]:
        text += f"\n{'':24} live reasons: {row['live_reasons']}"
    return text


if __name__ == "__main__":
    sys.exit(main())
