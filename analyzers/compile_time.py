"""compile-time: where compile time went (Dynamo, AOTAutograd, Inductor, Triton, autotuning,
CUDA-graph capture), what the compile caches did, and what a warm start would save.

Why: first-request latency and warmup length are mostly compile time, and most of that is
Inductor's code generation and Triton's compiles, which a warm FX-graph cache skips. Users ask
to see cache hits and misses and the cold-against-warm difference (pytorch #141788, #166012,
#149957). Inductor keeps its cache in TORCHINDUCTOR_CACHE_DIR (by default under /tmp, which a
container or a reboot wipes), and `torch.compiler.save_cache_artifacts()` /
`load_cache_artifacts()` carry it to another machine.

Evidence: `compile_timing` events (diag.trace.compile_metrics' reading of torch's
`compilation_metrics`). Runs without Inductor (aot_eager, eager) get no finding; CUDA graphs
that `mode="reduce-overhead"` asked for and torch skipped get a warning with torch's reason.
"""

from __future__ import annotations

from collections import defaultdict

from diag.findings.model import Finding
from diag.trace.run import Event, Frame, RunData, Trace

from .common import format_seconds, id_suffix, process_lines

ANALYZER = "compile-time"
_PHASES = (
    ("dynamo_s", "Dynamo tracing"),
    ("aot_s", "AOTAutograd (with Inductor inside)"),
    ("inductor_s", "Inductor (with codegen inside)"),
    ("codegen_s", "Inductor codegen"),
    ("triton_s", "Triton compiles"),
    ("autotune_s", "autotuning while compiling"),
    ("runtime_autotune_s", "autotuning at the first call"),
    ("cudagraphify_s", "CUDA-graph capture"),
)


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run))
    return findings


def _number(event: Event, key: str) -> float:
    value = event.data.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _analyze_run(run: RunData) -> list[Finding]:
    timings = run.of("compile_timing")
    if not timings:
        return []
    frames = {(c.pid, c.epoch, c.compile_id): c.frame for c in run.compiles}
    findings: list[Finding] = []
    summary = _summary(run, timings)
    if summary is not None:
        findings.append(summary)
    findings.extend(_cudagraph_skips(run, timings, frames))
    return findings


def _summary(run: RunData, timings: list[Event]) -> Finding | None:
    compiles = [e for e in timings if not e.data.get("runtime")]
    inductor = any(
        _number(e, "inductor_s") or e.data.get("caches") or _number(e, "triton_s") for e in timings
    )
    if not compiles or not inductor:
        return None  # no Inductor: no code generation to cache (aot_eager, eager)
    totals: dict[str, float] = defaultdict(float)
    for event in timings:
        for key, _ in _PHASES:
            totals[key] += _number(event, key)
    total = sum(_number(e, "total_s") for e in compiles)
    caches: dict[str, dict[str, int]] = defaultdict(lambda: {"hit": 0, "miss": 0})
    for event in compiles:
        for name, counts in (event.data.get("caches") or {}).items():
            if isinstance(counts, dict):
                caches[name]["hit"] += int(counts.get("hit") or 0)
                caches[name]["miss"] += int(counts.get("miss") or 0)
    fx = caches.get("fx_graph", {"hit": 0, "miss": 0})
    cold = [e for e in compiles if ((e.data.get("caches") or {}).get("fx_graph") or {}).get("miss")]
    # What a warm FX-graph cache skips: Inductor's work for the graphs that missed it.
    could_save = sum(_number(e, "inductor_s") or _number(e, "backend_s") for e in cold)
    saved = sum(_number(e, "saved_s") for e in compiles if e not in cold)
    start = "cold" if fx["miss"] and not fx["hit"] else "warm" if fx["hit"] else "mixed"
    if fx["miss"] and fx["hit"]:
        start = "partly warm"
    title = f"{len(compiles)} compile(s) took {format_seconds(total)}"
    if fx["miss"] or fx["hit"]:
        title += f"; FX-graph cache {fx['hit']} hit(s), {fx['miss']} miss(es): a {start} start"
    if cold:
        title += f"; a warm cache would save up to {format_seconds(could_save)}"
    evidence = [
        "by phase (nested as torch measures them, not adding up): "
        + ", ".join(
            f"{label} {format_seconds(totals[key])}" for key, label in _PHASES if totals[key] > 0
        )
    ]
    for name, counts in sorted(caches.items()):
        evidence.append(
            f"{name.replace('_', ' ')} cache: {counts['hit']} hit(s), {counts['miss']} miss(es)"
        )
    if saved:
        evidence.append(f"cache hits saved {format_seconds(saved)} by torch's own count")
    evidence.extend(
        f"compile {event.data.get('compile_id')} missed the FX-graph cache: "
        f"{format_seconds(_number(event, 'total_s'))}, of which Inductor "
        f"{format_seconds(_number(event, 'inductor_s'))}"
        for event in sorted(cold, key=lambda e: -_number(e, "total_s"))[:3]
    )
    pids = {e.pid for e in compiles}
    if len(pids) == 1:
        evidence.extend(process_lines(run, next(iter(pids))))
    fix = (
        "keep Inductor's cache between processes: point TORCHINDUCTOR_CACHE_DIR at a persistent "
        "volume (it defaults to /tmp), or ship it with torch.compiler.save_cache_artifacts() "
        "after warmup and torch.compiler.load_cache_artifacts() before the first compile"
        if cold
        else ""
    )
    return Finding(
        id=f"{ANALYZER}:summary{id_suffix(run, next(iter(pids)) if len(pids) == 1 else None)}",
        analyzer=ANALYZER,
        severity="info",
        title=title,
        evidence=evidence,
        fix=fix,
        run=run.label,
        data={
            "compiles": len(compiles),
            "total_s": round(total, 6),
            "phases": {key: round(totals[key], 6) for key, _ in _PHASES if totals[key] > 0},
            "caches": {k: dict(v) for k, v in caches.items()},
            "start": start,
            "could_save_s": round(could_save, 6),
            "saved_s": round(saved, 6),
        },
    )


def _cudagraph_skips(
    run: RunData, timings: list[Event], frames: dict[tuple[int, int, str], Frame | None]
) -> list[Finding]:
    """CUDA graphs asked for (`mode="reduce-overhead"`) and skipped: the steps run un-graphed."""
    by_frame: dict[tuple[int, Frame | None, str], list[Event]] = defaultdict(list)
    for event in timings:
        reason = event.data.get("cudagraph_skip_reason")
        if isinstance(reason, str) and reason:
            epoch = event.data.get("epoch")
            key = (
                event.pid,
                epoch if isinstance(epoch, int) else 0,
                str(event.data.get("compile_id")),
            )
            by_frame[(event.pid, frames.get(key), reason)].append(event)
    findings = []
    for (pid, frame, reason), events in by_frame.items():
        name = frame.name if frame is not None else "a compiled frame"
        ids = [str(e.data.get("compile_id")) for e in events]
        findings.append(
            Finding(
                id=f"{ANALYZER}:cudagraph-skipped:"
                + (f"{frame.name}@{frame.file}:{frame.line}" if frame else "?")
                + id_suffix(run, pid),
                analyzer=ANALYZER,
                severity="warning",
                title=f"CUDA graphs skipped for {name}: {reason.splitlines()[0][:160]}",
                evidence=[
                    f"torch's cudagraph_skip_reason for compile(s) {', '.join(ids[:5])}: {reason}",
                    "the frame runs un-graphed: each kernel is launched from Python as without "
                    "mode='reduce-overhead'",
                    *process_lines(run, pid),
                ],
                fix=(
                    "remove what the reason names from the compiled region (CPU tensors, "
                    "mutated inputs, dynamic shapes without cudagraph_dynamic_shape_warn_limit, "
                    "ops that cannot be captured), or move it outside the compiled function"
                ),
                location=frame.location if frame is not None and frame.file else None,
                run=run.label,
                data={"frame": name, "reason": reason, "compile_ids": ids},
            )
        )
    return findings
