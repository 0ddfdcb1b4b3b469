"""warmup-hygiene: calls during live requests that undo what warmup prepared.

Why: warmup runs every shape once so that compiles, autotuning and the CUDA caching allocator's
pools are in place before traffic. `torch.cuda.empty_cache()` after a request hands the
allocator's cached blocks back to the driver, so the next request pays cudaMalloc again (and,
with CUDA graphs, may lose the private pools' memory); `gc.collect()` in the request path is a
full collection on the serving thread. Both are cheap to call and expensive in effect, and both
often sit in a `finally:` of the pipeline call.

Calls in warmup are harmless and not reported. Dynamo itself calls gc.collect() while it
compiles: calls that fall inside a compile of the same process are torch's and not counted.

Whose call it is decides the fix (each event names its caller; diag.evidence.libraries says whose
code
that is). A call in the program's own code: remove it from the request path. A library's call
(diffusers' `enable_model_cpu_offload()` empties the cache after every request, LightX2V's
runner when memory runs low) is not the person's to remove: its own finding names the
library's switch, and under diffusers' model offload it heads the step-0 reloads the offload
causes (diag.findings.grouping). Events recorded before callers were (no `caller`) count as the
program's, and say that the caller is not known.
"""

from __future__ import annotations

from diag.evidence.claims import claim
from diag.evidence.libraries import DIFFUSERS, LIGHTX2V, Library, library_of, library_path
from diag.findings.model import Finding
from diag.trace.run import Event, RunData, Trace

ANALYZER = "warmup-hygiene"


def analyze(trace: Trace) -> list[Finding]:
    cwd = trace.manifest.get("cwd")
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run, cwd if isinstance(cwd, str) else None))
    return findings


def _analyze_run(run: RunData, cwd: str | None) -> list[Finding]:
    findings: list[Finding] = []
    suffix = "" if run.label == "compiled" else f"@{run.label}"
    recording = _recording_windows(run)
    by_torch = [e for e in run.of("empty_cache") if _live(e) and _inside(recording, e)]
    live = [e for e in run.of("empty_cache") if _live(e) and not _inside(recording, e)]
    warm = [e for e in run.of("empty_cache") if e.position[0] == "warmup"]
    by_library: dict[Library, list[Event]] = {}
    for event in live:
        library = library_of(_caller_file(event))
        if library is not None:
            by_library.setdefault(library, []).append(event)
    empty = [e for e in live if library_of(_caller_file(e)) is None]
    for library, events in by_library.items():
        findings.append(_library_empty_cache(run, library, events, suffix, warm, by_torch))
    if empty:
        requests = _requests(empty)
        evidence = [
            f"{len(empty)} call(s) of torch.cuda.empty_cache() during live requests: "
            f"{', '.join(requests)}",
            f"where: {_where_list(empty)}",
            _callers_line(empty, cwd),
            f"time inside the calls: {_ms(empty)} (the cost shows up later, as cudaMalloc in "
            "the next request)",
        ]
        offload = _model_offload(run, {e.pid for e in empty})
        if offload is not None and any(_caller_file(e) is None for e in empty):
            evidence.append(
                f"the pipeline ({offload}) uses diffusers' enable_model_cpu_offload(), which "
                "empties the cache after every request itself: these may be its calls (record "
                "again with this diag to know)"
            )
        if warm and not by_library:
            evidence.append(f"also {len(warm)} call(s) in warmup (harmless, not counted)")
        if by_torch and not by_library:
            evidence.append(_by_torch_line(by_torch))
        findings.append(
            Finding(
                id=f"{ANALYZER}:empty_cache{suffix}",
                analyzer=ANALYZER,
                severity="warning",
                title="torch.cuda.empty_cache() after every request undoes warmup's allocations "
                f"({len(empty)} call(s) in live requests {', '.join(requests)})",
                evidence=evidence,
                fix=_own_fix(offload is not None and any(_caller_file(e) is None for e in empty)),
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
        libraries = {library_of(_caller_file(e)) for e in program}
        owner = next(iter(libraries)) if len(libraries) == 1 else None
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
                    _callers_line(program, cwd),
                    f"time inside the calls: {_ms(program)}",
                    f"not counted: {len(collects) - len(program)} call(s) made by Dynamo while "
                    "it compiled; torch itself may call gc.collect() elsewhere too (e.g. when "
                    "capturing CUDA graphs), so check that these calls are the program's",
                ],
                fix=(
                    f"{owner.owner} own call, not yours to remove: look for the {owner.name} "
                    "option that leads there (the callers above), or accept it."
                    if owner is not None
                    else "Keep gc.collect() out of the request path (run it between requests or "
                    "in idle time), or rely on the automatic collector."
                ),
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


def _library_empty_cache(
    run: RunData,
    library: Library,
    events: list[Event],
    suffix: str,
    warm: list[Event],
    by_torch: list[Event],
) -> Finding:
    """A library's own empty_cache() calls: not the person's to remove; the library's switch."""
    requests = _requests(events)
    callers = _callers(events)
    where = ", ".join(callers[:3]) + (f" and {len(callers) - 3} more" if len(callers) > 3 else "")
    pids = {e.pid for e in events}
    offload = _model_offload(run, pids) if library is DIFFUSERS else None
    evidence = [
        f"{len(events)} call(s) of torch.cuda.empty_cache() during live requests: "
        f"{', '.join(requests)}",
        f"where: {_where_list(events)}",
        f"called from {library.owner} own code: {where}",
        f"time inside the calls: {_ms(events)} (the cost shows up later, as cudaMalloc in the "
        "next request)",
    ]
    names = {_caller_name(e) for e in events}
    if offload is not None:
        cause = "model-offload"
        title = (
            f"diffusers empties the CUDA cache after every request: the pipeline's "
            f"enable_model_cpu_offload() ({len(events)} call(s) in live requests "
            f"{', '.join(requests)})"
        )
        evidence.append(
            f"the pipeline ({offload}) uses enable_model_cpu_offload(): after each request "
            "diffusers moves its models back to the CPU and empties the cache, so the next "
            "request copies them in and allocates again at its first step"
        )
        fix = (
            "Not yours to remove: diffusers' enable_model_cpu_offload() does it. If the GPU has "
            "room for the pipeline, keep it there (pipe.to('cuda') instead of "
            "enable_model_cpu_offload()): no request reloads the weights and the cache stays; "
            "otherwise accept it. step0-spike says what each request's reload costs."
        )
    elif library is LIGHTX2V and names == {"maybe_empty_cache"}:
        cause = "lightx2v-memory-pressure"
        title = (
            f"LightX2V's runner empties the CUDA cache during live requests "
            f"({len(events)} call(s) in {', '.join(requests)})"
        )
        evidence.append(
            "LightX2V's maybe_empty_cache() empties the cache when free GPU memory is under the "
            "config's empty_cache_min_free_gib (4 GiB by default) and at least "
            "empty_cache_min_reclaimable_gib (2 GiB) is reclaimable, or when forced"
        )
        fix = (
            "Not yours to remove: LightX2V's runner does it when free memory runs low. Lower "
            "empty_cache_min_free_gib in the config (or leave the model more room: offload, "
            "quantization) so that it does not trigger in requests, or accept it."
        )
    else:
        cause = "library"
        title = (
            f"{library.name} calls torch.cuda.empty_cache() during live requests "
            f"({len(events)} call(s) in {', '.join(requests)})"
        )
        fix = (
            f"Not yours to remove: it is {library.owner} own call. Look for the "
            f"{library.name} option that leads there (an offload or memory-saving mode) and "
            "turn it off if the GPU has room, or accept it."
        )
    if warm:
        evidence.append(f"also {len(warm)} call(s) in warmup (harmless, not counted)")
    if by_torch:
        evidence.append(_by_torch_line(by_torch))
    return Finding(
        id=f"{ANALYZER}:empty_cache:{library.package}{suffix}",
        analyzer=ANALYZER,
        severity="warning",
        title=title,
        evidence=evidence,
        fix=fix,
        run=run.label,
        data={
            "calls": len(events),
            "requests": requests,
            "warmup_calls": len(warm),
            "duration_s": round(sum(_duration(e) for e in events), 6),
            "library": library.package,
            "callers": callers,
            "cause": cause,
        },
        claims=_claims("empty-cache", run, events),
    )


def _own_fix(maybe_diffusers: bool) -> str:
    remove = (
        "Remove torch.cuda.empty_cache() from the request path: the caching allocator reuses the "
        "blocks warmup allocated. Call it only when memory must go back to the driver (a model "
        "swap, another process on the GPU)."
    )
    if not maybe_diffusers:
        return remove
    return (
        f"If the calls are your own: {remove[0].lower()}{remove[1:]} If they are diffusers' "
        "(enable_model_cpu_offload()), they are not yours to remove: keep the pipeline on the "
        "GPU if it fits (pipe.to('cuda')), or accept them."
    )


def _caller(event: Event) -> dict[str, object]:
    caller = event.data.get("caller")
    return caller if isinstance(caller, dict) else {}


def _caller_file(event: Event) -> str | None:
    file = _caller(event).get("file")
    return file if isinstance(file, str) and file else None


def _caller_name(event: Event) -> str | None:
    name = _caller(event).get("name")
    return name if isinstance(name, str) else None


def _callers(events: list[Event], cwd: str | None = None) -> list[str]:
    """Distinct callers as `file:line (function)`, in the order they first called: a library's
    file from its package folder on, the program's relative to the recording's directory."""
    spots: list[str] = []
    for event in events:
        file = _caller_file(event)
        if file is None:
            continue
        line = _caller(event).get("line")
        where = library_path(_relative(file, cwd))
        where = where if not isinstance(line, int) else f"{where}:{line}"
        name = _caller_name(event)
        spots.append(f"{name}() at {where}" if name else where)
    return list(dict.fromkeys(spots))


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _callers_line(events: list[Event], cwd: str | None) -> str:
    callers = _callers(events, cwd)
    unknown = sum(1 for e in events if _caller_file(e) is None)
    if not callers:
        return "called from: not recorded (a trace written before diag recorded callers)"
    more = f" and {len(callers) - 5} more" if len(callers) > 5 else ""
    line = f"called from: {', '.join(callers[:5])}{more}"
    return line + (f"; {unknown} call(s) with no caller recorded" if unknown else "")


def _model_offload(run: RunData, pids: set[int]) -> str | None:
    """The pipeline class that uses diffusers' enable_model_cpu_offload() in one of these
    processes, if one does."""
    for event in run.of("pipeline_offload"):
        if event.pid in pids and event.data.get("model") is True:
            return str(event.data.get("pipeline") or "a diffusers pipeline")
    return None


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
