"""warmup-hygiene: calls during live requests that undo what warmup prepared.

Why: warmup runs every shape once so that compiles, autotuning and the CUDA caching allocator's
pools are in place before traffic. `torch.cuda.empty_cache()` after a request hands the
allocator's cached blocks back to the driver, so the next request pays cudaMalloc again (and,
with CUDA graphs, may lose the private pools' memory); `gc.collect()` in the request path is a
full collection on the serving thread. Both are cheap to call and expensive in effect, and both
often sit in a `finally:` of the pipeline call.

Calls in warmup are harmless and not reported. Dynamo itself calls gc.collect() while it
compiles: calls that fall inside a compile of the same process are torch's and not counted.
"""

from __future__ import annotations

from diag.claims import claim
from diag.findings import Finding
from diag.trace.run import Event, RunData, Trace

ANALYZER = "warmup-hygiene"


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run))
    return findings


def _analyze_run(run: RunData) -> list[Finding]:
    findings: list[Finding] = []
    suffix = "" if run.label == "compiled" else f"@{run.label}"
    recording = _recording_windows(run)
    by_torch = [e for e in run.of("empty_cache") if _live(e) and _inside(recording, e)]
    empty = [e for e in run.of("empty_cache") if _live(e) and not _inside(recording, e)]
    if empty:
        requests = _requests(empty)
        warm = [e for e in run.of("empty_cache") if e.position[0] == "warmup"]
        evidence = [
            f"{len(empty)} call(s) of torch.cuda.empty_cache() during live requests: "
            f"{', '.join(requests)}",
            f"where: {_where_list(empty)}",
            f"time inside the calls: {_ms(empty)} (the cost shows up later, as cudaMalloc in "
            "the next request)",
        ]
        if warm:
            evidence.append(f"also {len(warm)} call(s) in warmup (harmless, not counted)")
        if by_torch:
            evidence.append(_by_torch_line(by_torch))
        findings.append(
            Finding(
                id=f"{ANALYZER}:empty_cache{suffix}",
                analyzer=ANALYZER,
                severity="warning",
                title="torch.cuda.empty_cache() after every request undoes warmup's allocations "
                f"({len(empty)} call(s) in live requests {', '.join(requests)})",
                evidence=evidence,
                fix="Remove torch.cuda.empty_cache() from the request path: the caching "
                "allocator reuses the blocks warmup allocated. Call it only when memory must "
                "go back to the driver (a model swap, another process on the GPU).",
                run=run.label,
                data={
                    "calls": len(empty),
                    "requests": requests,
                    "warmup_calls": len(warm),
                    "duration_s": round(sum(_duration(e) for e in empty), 6),
                },
                claims=_claims("empty-cache", run, empty),
            )
        )
    collects = [e for e in run.of("gc_collect") if _live(e)]
    program = [e for e in collects if not _inside_compile(run, e) and not _inside(recording, e)]
    if program:
        requests = _requests(program)
        findings.append(
            Finding(
                id=f"{ANALYZER}:gc_collect{suffix}",
                analyzer=ANALYZER,
                severity="info",
                title=f"gc.collect() ran {len(program)} time(s) during live requests "
                f"{', '.join(requests)}",
                evidence=[
                    f"{len(program)} call(s) of gc.collect() during live requests, outside any "
                    f"Dynamo compile: {', '.join(requests)}",
                    f"where: {_where_list(program)}",
                    f"time inside the calls: {_ms(program)}",
                    f"not counted: {len(collects) - len(program)} call(s) made by Dynamo while "
                    "it compiled; torch itself may call gc.collect() elsewhere too (e.g. when "
                    "capturing CUDA graphs), so check that these calls are the program's",
                ],
                fix="Keep gc.collect() out of the request path (run it between requests or "
                "in idle time), or rely on the automatic collector.",
                run=run.label,
                data={
                    "calls": len(program),
                    "requests": requests,
                    "inside_compiles": len(collects) - len(program),
                    "duration_s": round(sum(_duration(e) for e in program), 6),
                },
                claims=_claims("gc-collect", run, program),
            )
        )
    return findings


def _claims(kind: str, run: RunData, events: list[Event]) -> list[dict[str, object]]:
    """One claim per process: the live calls it made, where, and how many."""
    by_pid: dict[int, list[Event]] = {}
    for event in events:
        by_pid.setdefault(event.pid, []).append(event)
    return [
        claim(
            kind,
            run,
            pid,
            phase="live",
            calls=[{"request": e.position[1], "step": e.position[2]} for e in mine],
            count=len(mine),
        )
        for pid, mine in by_pid.items()
    ]


def _recording_windows(run: RunData) -> dict[int, list[tuple[int, int]]]:
    """Each process's CUDA-graph recordings as (start, end): torch.cuda.graph() itself calls
    gc.collect() and torch.cuda.empty_cache() as a capture begins, so calls inside a recording
    are torch's, not the program's (collectors/cudagraphs.py times the recordings)."""
    windows: dict[int, list[tuple[int, int]]] = {}
    for event in run.of("cudagraph_record"):
        start = event.data.get("start_t")
        if isinstance(start, int):
            windows.setdefault(event.pid, []).append((start, event.t))
    return windows


def _inside(windows: dict[int, list[tuple[int, int]]], event: Event) -> bool:
    return any(start <= event.t <= end for start, end in windows.get(event.pid, ()))


def _by_torch_line(events: list[Event]) -> str:
    return (
        f"not counted: {len(events)} call(s) torch made itself while recording CUDA graphs "
        "(torch.cuda.graph() empties the cache as a capture begins; the cudagraphs analyzer "
        "reports the recordings)"
    )


def _live(event: Event) -> bool:
    phase, request_id, _ = event.position
    return phase == "live" and request_id is not None


def _inside_compile(run: RunData, event: Event) -> bool:
    return any(
        c.pid == event.pid and c.start_t is not None and c.start_t <= event.t <= c.t
        for c in run.compiles
    )


def _requests(events: list[Event]) -> list[str]:
    return list(dict.fromkeys(str(e.position[1]) for e in events))


def _where_list(events: list[Event]) -> str:
    spots: list[str] = []
    for event in events:
        _, request_id, step = event.position
        spots.append(f"{request_id} " + (f"step {step}" if step is not None else "outside a step"))
    shown = spots[:10]
    return ", ".join(shown) + (f" and {len(spots) - 10} more" if len(spots) > 10 else "")


def _duration(event: Event) -> float:
    value = event.data.get("duration_s")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _ms(events: list[Event]) -> str:
    return f"{sum(_duration(e) for e in events) * 1000:.2f} ms"
