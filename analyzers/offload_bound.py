"""offload-bound: profiled steps where weight copies and syncs, not compute, set the step time.

Why: with CPU offload, each block's weights are copied in before the block runs. When the copy
stream is slower than compute, or a `synchronize()` per swap serialises the two, the step takes
as long as its copies; compiling the blocks then speeds up the part that was already waiting.
The breakdown (diag.offload) says how long the GPU copied, computed and sat idle, and so the most
compiling could still gain in that step.
"""

from __future__ import annotations

from statistics import median

from diag.findings import Finding
from diag.offload import StepOffload, offload_breakdown
from diag.trace.run import RunData, Trace

from .common import format_seconds, id_suffix, process_lines

ANALYZER = "offload-bound"


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    run = trace.compiled
    if run is None:
        return findings
    rows = offload_breakdown(run)
    for pid in sorted({r.pid for r in rows}):
        bound = [r for r in rows if r.pid == pid and r.bound]
        if bound:
            findings.append(_finding(run, pid, bound, [r for r in rows if r.pid == pid]))
    return findings


def _gb(value: int) -> str:
    return f"{value / 1e9:.2f} GB" if value >= 1e8 else f"{value / 1e6:.1f} MB"


def _step_line(row: StepOffload) -> str:
    copies = ", ".join(
        f"{way} {format_seconds(row.copy_s[way])} ({_gb(row.copy_bytes.get(way, 0))})"
        for way in sorted(row.copy_s)
    )
    return (
        f"{row.request_id} step {row.step}: span {format_seconds(row.span_s)}; copies {copies}; "
        f"compute kernels {format_seconds(row.kernel_s)}; CPU in syncs "
        f"{format_seconds(row.sync_s)}; GPU idle {format_seconds(row.idle_s)}"
    )


def _finding(run: RunData, pid: int, bound: list[StepOffload], rows: list[StepOffload]) -> Finding:
    span = median(r.span_s for r in bound)
    copy = median(r.copy_total_s for r in bound)
    kernel = median(r.kernel_s for r in bound)
    gain = median(r.max_gain_s for r in bound)
    evidence = [
        *process_lines(run, pid),
        f"{len(bound)} of {len(rows)} profiled step(s) are bound by copies (medians: span "
        f"{format_seconds(span)}, copies {format_seconds(copy)}, compute "
        f"{format_seconds(kernel)})",
        *(_step_line(r) for r in bound[:5]),
        # Compiling shrinks compute only, and a step cannot end before its copies: the gain is
        # bounded by the compute share, never by the copies that dominate.
        f"compiling shrinks only the compute: at most {format_seconds(gain)} of such a step "
        f"({gain / span:.0%} of its {format_seconds(span)}), even if compute took no time; the "
        f"copies alone take {format_seconds(copy)}",
    ]
    return Finding(
        id=f"{ANALYZER}:copies{id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="warning",
        title=f"Weight copies dominate {len(bound)} profiled step(s): "
        f"{format_seconds(copy)} of copies against {format_seconds(kernel)} of compute per step",
        evidence=evidence,
        fix="Overlap the copies with compute: prefetch block i+1 on a side stream while block i "
        "runs, wait with an event (not stream.synchronize()) only before the block that needs "
        "the weights, keep weights in pinned memory, and keep more blocks resident (coarser "
        "offload granularity) if memory allows. Compiling speeds up only the compute share.",
        run=run.label,
        data={
            "steps": [
                {
                    "request_id": r.request_id,
                    "step": r.step,
                    "span_s": round(r.span_s, 6),
                    "kernel_s": round(r.kernel_s, 6),
                    "copy_s": {k: round(v, 6) for k, v in r.copy_s.items()},
                    "copy_bytes": r.copy_bytes,
                    "sync_s": round(r.sync_s, 6),
                    "idle_s": round(r.idle_s, 6),
                    "max_gain_s": round(r.max_gain_s, 6),
                }
                for r in bound
            ],
        },
    )
