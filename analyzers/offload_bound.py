"""offload-bound: profiled steps where weight copies and syncs, not compute, set the step time.

Why: with CPU offload, each block's weights are copied in before the block runs. When the copy
stream is slower than compute, or a `synchronize()` per swap serialises the two, the step takes
as long as its copies; compiling the blocks then speeds up the part that was already waiting.
The breakdown (diag.evidence.offload) says how long the GPU copied, computed and sat idle, and so
the most
compiling could still gain in that step.

The fix names the switch of the offload in use when diffusers does it (the `pipeline_offload`
event): `enable_model_cpu_offload()` reloads the whole model at each request's first step;
`enable_group_offload(..., use_stream=False)` copies every group in and writes it back in line
with compute, where `use_stream=True` overlaps the copies and writes nothing back. The share of
copy time that went device-to-host is said whenever the profile shows some: weights written back
to the CPU are copies inference never needed.
"""

from __future__ import annotations

from statistics import median

from diag.evidence.offload import StepOffload, offload_breakdown
from diag.findings.model import Finding
from diag.trace.run import Event, RunData, Trace

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
    offload = _pipeline_offload(run, pid)
    dtoh = _dtoh_share(bound)
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
    if dtoh is not None:
        evidence.append(_dtoh_line(bound, dtoh, offload))
    if offload is not None:
        evidence.append(_offload_line(offload))
    return Finding(
        id=f"{ANALYZER}:copies{id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="warning",
        title=f"Weight copies dominate {len(bound)} profiled step(s): "
        f"{format_seconds(copy)} of copies against {format_seconds(kernel)} of compute per step",
        evidence=evidence,
        fix=_fix(offload, dtoh),
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
            "dtoh_share": round(dtoh, 4) if dtoh is not None else None,
            "diffusers_offload": _offload_kind(offload),
            "group_stream": offload.data.get("group_stream") if offload is not None else None,
        },
    )


def _pipeline_offload(run: RunData, pid: int) -> Event | None:
    """The process's diffusers pipeline offload (model or group), if one is on."""
    return next(
        (
            e
            for e in run.of("pipeline_offload")
            if e.pid == pid and (e.data.get("model") is True or e.data.get("group") is True)
        ),
        None,
    )


def _offload_kind(offload: Event | None) -> str | None:
    if offload is None:
        return None
    return "group" if offload.data.get("group") is True else "model"


#: Device-to-host copies below this share of the copy time are not worth a line (a model
#: offload's step 0 copies a few bytes back: 0.0 ms of 163 ms on the H200).
DTOH_MIN_SHARE = 0.01


def _dtoh_share(bound: list[StepOffload]) -> float | None:
    """Device-to-host copy time over all copy time in the bound steps; None when (almost)
    nothing went back to the host."""
    back = sum(r.copy_s.get("DtoH", 0.0) for r in bound)
    total = sum(r.copy_total_s for r in bound)
    share = back / total if total > 0 else 0.0
    return share if share >= DTOH_MIN_SHARE else None


def _dtoh_line(bound: list[StepOffload], share: float, offload: Event | None) -> str:
    back = median(r.copy_s.get("DtoH", 0.0) for r in bound)
    size = median(r.copy_bytes.get("DtoH", 0) for r in bound)
    line = (
        f"{share:.0%} of the copy time is device-to-host (DtoH: {format_seconds(back)}, "
        f"{_gb(int(size))} per step): data written back to the CPU"
    )
    if _offload_kind(offload) == "group" and offload is not None:
        if offload.data.get("group_stream") is False:
            return line + (
                "; diffusers' group offloading with use_stream=False writes every group's "
                "weights back after it runs, though inference does not change them"
            )
        return line + (
            " (diffusers' group offloading writes weights back when it runs without a stream, "
            "use_stream=False)"
        )
    return line + (
        "; if these are offloaded weights, inference did not change them and the copy back is "
        "not needed"
    )


def _offload_line(offload: Event) -> str:
    pipeline = str(offload.data.get("pipeline") or "the pipeline")
    if _offload_kind(offload) == "model":
        return (
            f"the pipeline ({pipeline}) uses diffusers' enable_model_cpu_offload(): each "
            "request's first step copies the whole model in"
        )
    stream = offload.data.get("group_stream")
    how = f"use_stream={stream}" if isinstance(stream, bool) else "use_stream not recorded"
    return f"the pipeline ({pipeline}) uses diffusers' group offloading ({how})"


_GENERIC = (
    "Overlap the copies with compute: prefetch block i+1 on a side stream while block i runs, "
    "wait with an event (not stream.synchronize()) only before the block that needs the "
    "weights, keep weights in pinned memory, and keep more blocks resident (coarser offload "
    "granularity) if memory allows."
)
_COMPUTE_ONLY = " Compiling speeds up only the compute share."


def _fix(offload: Event | None, dtoh: float | None) -> str:
    """diffusers' own switch when diffusers offloads, else the general recipe."""
    kind = _offload_kind(offload)
    if kind == "model":
        return (
            "diffusers' enable_model_cpu_offload() copies the whole model in at each request's "
            "first step: if the GPU has room, keep the pipeline on it (pipe.to('cuda')); else "
            "enable_group_offload(..., use_stream=True) overlaps the copies with compute; or "
            "accept it." + _COMPUTE_ONLY
        )
    if kind == "group" and offload is not None:
        stream = offload.data.get("group_stream")
        if stream is True:
            return (
                "diffusers' group offloading already copies on a side stream (use_stream=True) "
                "and the copies still outlast compute: keep more of the model on the GPU per "
                "group (a larger num_blocks_per_group), or all of it if it fits." + _COMPUTE_ONLY
            )
        written = (
            f" and nothing is written back ({dtoh:.0%} of the copy time here)"
            if dtoh is not None
            else ""
        )
        switch = (
            "Pass use_stream=True to enable_group_offload(...)"
            if stream is False
            else "If enable_group_offload(...) runs with use_stream=False, pass use_stream=True"
        )
        return (
            f"{switch}: diffusers keeps a pinned CPU copy of each group and prefetches the next "
            f"one on a side stream, so the copies overlap compute{written}. Keep more of the "
            "model on the GPU per group (num_blocks_per_group) if memory allows." + _COMPUTE_ONLY
        )
    back = (
        " If the device-to-host copies are weights going back, keep a CPU copy and drop the GPU "
        "one instead (inference does not change them)."
        if dtoh is not None
        else ""
    )
    return _GENERIC + back + _COMPUTE_ONLY
