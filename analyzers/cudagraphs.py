"""cudagraphs: CUDA graphs recorded in live traffic, skipped at run time, and the pool they hold.

Why: under `mode="reduce-overhead"` a compiled frame's first call at a new input runs eagerly,
the second records a CUDA graph (a synchronize, a capture, a private-pool allocation), and only
then do calls replay. A graph that is dynamic in any dim records once per distinct size, and one
whose static inputs move records again. So a live request can stall on recordings although
Dynamo never recompiled, and live-compile, which reads compiles, stays silent. This analyzer
reads the recordings (collectors/cudagraphs.py) and reports one in a live request like a live
compile, with the graphs, the step time they added and the memory reserved after; skips
logged at run time (never in compilation_metrics, which compile-time reads); and an INFO
summary per process.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass

from diag.evidence.claims import claim
from diag.findings.model import Finding
from diag.trace.run import Compile, Event, Request, RunData, Trace

from .common import format_seconds as _secs
from .common import id_suffix, process_lines, warmup_known

ANALYZER = "cudagraphs"
_MB = 1024 * 1024
_WARM_FIX = (
    "warm every size traffic sends through the compiled path before serving, two calls per "
    "size (cudagraph trees run a new graph eagerly once, then record it); or serve static "
    "graphs: compile with dynamic=False (or torch._dynamo.mark_static on the varying dims) so "
    "each warmed size has its own graph, or pad inputs to the warmed sizes. "
    "torch._inductor.config.triton.cudagraph_skip_dynamic_graphs = True runs dynamic graphs "
    "without CUDA graphs instead"
)
#: Skip reasons and what to do about each (the first that matches).
_SKIP_FIXES = (
    (
        re.compile(r"mutat", re.IGNORECASE),
        "the compiled function mutates an input that is neither a parameter/buffer nor a "
        "CUDA-graph output: clone it inside the function, or move the in-place update outside "
        "the compiled region",
    ),
    (
        re.compile(r"rerecord|re-record", re.IGNORECASE),
        "the graph keeps re-recording because its inputs change address or its static inputs "
        "move: keep inputs in persistent buffers (copy_ into them) and call "
        "torch.compiler.cudagraph_mark_step_begin() once per step",
    ),
    (
        re.compile(r"cpu|device", re.IGNORECASE),
        "keep every tensor of the compiled region on the GPU (CPU tensors and scalars read "
        "from CPU tensors cannot be captured)",
    ),
)
_SIZES = re.compile(r"observed (\d+) distinct sizes")


@dataclass(frozen=True)
class _Record:
    compile_id: str
    phase: str
    request_id: str | None
    step: int | None
    seconds: float
    t: int


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        by_pid: dict[int, list[Event]] = defaultdict(list)
        for kind in ("cudagraph_record", "cudagraph_skip", "cudagraph_log"):
            for event in run.of(kind):
                by_pid[event.pid].append(event)
        for pid, events in sorted(by_pid.items()):
            findings.extend(_analyze_process(run, pid, events))
    return findings


def _analyze_process(run: RunData, pid: int, events: list[Event]) -> list[Finding]:
    records = [_record(e) for e in events if e.kind == "cudagraph_record"]
    logs = [e for e in events if e.kind == "cudagraph_log"]
    findings: list[Finding] = []
    live: dict[str, list[_Record]] = defaultdict(list)
    for item in records:
        if item.phase == "live" and item.request_id is not None:
            live[item.request_id].append(item)
    if live:
        requests = {r.request_id: r for r in run.requests if r.pid == pid}
        reserved = _StepReserved(run, pid)
    for request_id, items in live.items():
        findings.append(
            _live_finding(
                run, pid, request_id, items, records, logs, requests.get(request_id), reserved
            )
        )
    findings.extend(_skip_findings(run, pid, [e for e in events if e.kind == "cudagraph_skip"]))
    if records:
        findings.append(_summary(run, pid, records, bool(live)))
    return findings


def _record(event: Event) -> _Record:
    data = event.data
    seconds = data.get("duration_s")
    step = data.get("step")
    request_id = data.get("request_id")
    return _Record(
        compile_id=str(data.get("compile_id") or "?"),
        phase=str(data.get("phase") or "live"),
        request_id=request_id if isinstance(request_id, str) else None,
        step=step if isinstance(step, int) else None,
        seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        t=event.t,
    )


# --- a live request that recorded graphs ------------------------------------------------------


def _live_finding(
    run: RunData,
    pid: int,
    request_id: str,
    items: list[_Record],
    records: list[_Record],
    logs: list[Event],
    request: Request | None,
    reserved: _StepReserved,
) -> Finding:
    shape = "x".join(str(d) for d in request.shape) if request and request.shape else None
    ids = _ids(items)
    seconds = sum(i.seconds for i in items)
    first = request.start_t if request is not None else min(i.t for i in items)
    grew = reserved.around(first, request_id)
    steps = sorted({i.step for i in items if i.step is not None})
    steps_text = ("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps))
    compiled = [
        c
        for c in run.compiles
        if c.pid == pid and c.request_id == request_id and c.result not in ("failed",)
    ]
    cost = _step_cost(request, steps, compiled)
    title = (
        f"{len(items)} CUDA graph(s) recorded during live request {request_id}"
        + (f" (shape {shape})" if shape else "")
        + f" at {steps_text}"
        + (f": {_secs(cost[0])} added to the request" if cost else "")
        + (" with no recompile" if not compiled else "")
    )
    evidence = [
        f"live request {request_id}: {len(items)} recording(s) of compile(s) {', '.join(ids)} "
        f"at {steps_text}, {_secs(seconds)} inside the captures"
    ]
    if cost:
        evidence.append(cost[1])
    if grew is not None:
        evidence.append(
            f"memory reserved at step ends: {_mb(grew[0])} before the request, "
            f"{_mb(grew[1])} after the request ({_signed_mb(grew[1] - grew[0])}; each size's "
            "graphs keep their private pool until the process ends)"
        )
    evidence.extend(_record_lines(items))
    warm = [r for r in records if r.phase == "warmup"]
    if warm:
        evidence.append(
            f"warmup recorded {len(warm)} graph(s) of compile(s) {', '.join(_ids(warm))}; "
            f"this request needed graphs warmup did not record"
        )
    elif not warmup_known(run, pid):
        evidence.append(
            "diag identified no warmup phase in this process: if earlier requests were "
            "warmup, mark them (diag record --warmup-requests N) so they are not counted live"
        )
    else:
        evidence.append("warmup recorded no CUDA graph in this process")
    if compiled:
        evidence.append(
            f"the request also compiled ({', '.join(c.compile_id for c in compiled[:4])}): "
            "live-compile reports the compile; its new graph then recorded here"
        )
    else:
        evidence.append(
            "Dynamo did not recompile: an existing graph served the request, and cudagraph "
            "trees record a new CUDA graph for each distinct input size of a graph that is "
            "dynamic in any dim (and again when a static input moves)"
        )
    reasons = [_log_text(e) for e in logs if e.data.get("request_id") == request_id]
    if reasons:
        evidence.extend(f"torch (TORCH_LOGS=cudagraphs): {r}" for r in reasons[:4])
    else:
        evidence.append(
            "TORCH_LOGS=cudagraphs makes torch log each recording's size key and why a graph "
            "was re-recorded"
        )
    evidence.extend(process_lines(run, pid))
    return Finding(
        id=f"{ANALYZER}:live-record:{request_id}{id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="error",
        title=title,
        evidence=evidence,
        fix=_WARM_FIX,
        run=run.label,
        data={
            "request_id": request_id,
            "shape": shape,
            "recordings": len(items),
            "recorded_compile_ids": ids,
            # The request's own compiles (grouping: live-compile heads when it compiled).
            "compile_ids": [c.compile_id for c in compiled],
            "steps": steps,
            "recording_s": round(seconds, 6),
            "added_s": round(cost[0], 6) if cost else None,
            "reserved_growth_bytes": grew[1] - grew[0] if grew is not None else None,
            "recompiled": bool(compiled),
        },
        claims=[
            claim(
                "cudagraph-record",
                run,
                pid,
                phase="live",
                request=request_id,
                step=step,
                compile_ids=sorted({i.compile_id for i in items if i.step == step}),
                count=sum(1 for i in items if i.step == step),
                recompiled=bool(compiled),
            )
            for step in sorted({i.step for i in items}, key=lambda s: -1 if s is None else s)
        ],
    )


def _record_lines(items: list[_Record]) -> list[str]:
    """One line per compile and step: how many captures and how long each took."""
    groups: dict[tuple[str, int | None], list[float]] = defaultdict(list)
    for item in items:
        groups[(item.compile_id, item.step)].append(item.seconds)
    lines = []
    for (compile_id, step), seconds in groups.items():
        where = f"step {step}" if step is not None else "outside a step"
        spread = _secs(min(seconds)) + (
            f" to {_secs(max(seconds))}" if max(seconds) > min(seconds) else ""
        )
        lines.append(f"compile {compile_id} at {where}: {len(seconds)} capture(s), {spread} each")
    return lines


def _step_cost(
    request: Request | None, steps: list[int], compiled: list[Compile]
) -> tuple[float, str] | None:
    """What the recordings added to the request: its steps up to the last recording step
    (cudagraph trees run a new graph eagerly the call before it records) against the median of
    its later steps, which replay, less the seconds those steps spent compiling."""
    if request is None or not steps:
        return None
    timed = [(s.index, s.wall_s) for s in request.steps if isinstance(s.wall_s, (int, float))]
    slow = [(i, w) for i, w in timed if i <= steps[-1]]
    steady = sorted(w for i, w in timed if i > steps[-1])
    if not slow or not steady:
        return None
    median = statistics.median(steady)
    compiling = sum(c.duration_s or 0.0 for c in compiled if c.step is None or c.step <= steps[-1])
    added = max(0.0, sum(w - median for _, w in slow) - compiling)
    text = ", ".join(
        f"step {i} {_secs(w)}" + (" (the recordings)" if i in steps else " (the eager warm-up run)")
        for i, w in slow
    )
    less = f", less {_secs(compiling)} of compile in them" if compiling else ""
    return added, (
        f"{text}, against {_secs(median)} for the request's {len(steady)} later step(s) "
        f"(median), which replay{less}: {_secs(added)} added"
    )


class _StepReserved:
    """Reserved bytes at the step ends of one process, in time order, read once: each live
    request's growth is looked up here, not by a scan of every step per request."""

    def __init__(self, run: RunData, pid: int) -> None:
        timed = sorted(
            (s.end_t, int(s.memory["reserved"]), s.request_id)
            for r in run.requests
            if r.pid == pid
            for s in r.steps
            if s.end_t is not None
            and isinstance(s.memory, dict)
            and isinstance(s.memory.get("reserved"), int)
        )
        self.ends = [end for end, _, _ in timed]
        self.values = [value for _, value, _ in timed]
        self.last: dict[str, int] = {rid: value for _, value, rid in timed}

    def around(self, first: int, request_id: str) -> tuple[int, int] | None:
        """At the end of the last step before `first` (the request's start), and at the end of
        the request's last step (torch.cuda.graph() empties the cache as a capture begins, so
        reserved bytes read around one recording move both ways)."""
        before = bisect.bisect_left(self.ends, first)
        after = self.last.get(request_id)
        if before == 0 or after is None:
            return None
        return self.values[before - 1], after


# --- skips logged at run time -----------------------------------------------------------------


def _skip_findings(run: RunData, pid: int, skips: list[Event]) -> list[Finding]:
    at_compile = {
        str(e.data.get("cudagraph_skip_reason"))
        for e in run.of("compile_timing")
        if e.pid == pid and e.data.get("cudagraph_skip_reason")
    }
    groups: dict[str, list[Event]] = defaultdict(list)
    for event in skips:
        text = str(event.data.get("message") or "")
        if text and text not in at_compile:  # compile-time reports those from the metrics
            groups[_first_line(text)].append(event)
    findings = []
    for headline, events in groups.items():
        first = events[0].data
        sizes = _SIZES.search(headline)
        ids = sorted({str(e.data.get("compile_id")) for e in events if e.data.get("compile_id")})
        where = _where(first)
        if sizes:
            kind, title = (
                "many-sizes",
                (
                    f"CUDA graphs recorded for {sizes.group(1)} distinct sizes"
                    + (f" of compile {', '.join(ids)}" if ids else "")
                    + f" (torch's warning, first {where})"
                ),
            )
            fix = (
                "each distinct size holds its own graph and pool memory: pad inputs to a few "
                "sizes, or set torch._inductor.config.triton.cudagraph_skip_dynamic_graphs = "
                "True to run dynamic graphs without CUDA graphs"
            )
        else:
            kind = "skipped"
            title = (
                f"CUDA graphs skipped at run time ({len(events)}x, first {where}): "
                + (headline[:160])
            )
            fix = next((f for pattern, f in _SKIP_FIXES if pattern.search(headline)), None) or (
                "remove what torch's message names from the compiled region"
            )
        evidence = [
            f"torch's cudagraphs log at WARNING, {len(events)} time(s)"
            + (f", compile(s) {', '.join(ids)}" if ids else "")
            + f": {str(first.get('message'))[:600]}",
            "the affected calls run without CUDA graphs: each kernel is launched from Python",
            *process_lines(run, pid),
        ]
        findings.append(
            Finding(
                id=f"{ANALYZER}:{kind}:{_slug(headline)}{id_suffix(run, pid)}",
                analyzer=ANALYZER,
                severity="warning",
                title=title,
                evidence=evidence,
                fix=fix,
                run=run.label,
                data={"message": first.get("message"), "count": len(events), "compile_ids": ids},
                claims=[
                    claim(
                        "cudagraph-skip",
                        run,
                        pid,
                        phase=_text(first.get("phase")),
                        request=_text(first.get("request_id")),
                        step=first.get("step") if isinstance(first.get("step"), int) else None,
                        reason=headline,
                        count=len(events),
                        compile_ids=ids,
                    )
                ],
            )
        )
    return findings


# --- the per-process summary ------------------------------------------------------------------


def _summary(run: RunData, pid: int, records: list[_Record], any_live: bool) -> Finding:
    warm = [r for r in records if r.phase == "warmup"]
    live = [r for r in records if r.phase == "live"]
    per_compile: dict[str, int] = defaultdict(int)
    for item in records:
        per_compile[item.compile_id] += 1
    title = f"{len(records)} CUDA graph(s) recorded: {len(warm)} in warmup, {len(live)} live"
    evidence = [
        "graphs per compile: "
        + ", ".join(f"{cid} x{n}" for cid, n in sorted(per_compile.items()))
        + f"; {_secs(sum(r.seconds for r in records))} of recording in all",
    ]
    reserved = _step_reserved(run, pid)
    if reserved is not None:
        evidence.append(
            f"reserved memory at step ends: {_mb(reserved[0])} after the first step, "
            f"{_mb(reserved[1])} after the last"
        )
    if not any_live:
        evidence.append("no graph was recorded in a live request: traffic replayed warmup's graphs")
    evidence.extend(process_lines(run, pid))
    return Finding(
        id=f"{ANALYZER}:summary{id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity="info",
        title=title,
        evidence=evidence,
        fix="" if not any_live else "see the live-record finding(s)",
        run=run.label,
        data={
            "recordings": len(records),
            "warmup": len(warm),
            "live": len(live),
            "per_compile": dict(per_compile),
        },
    )


# --- helpers ----------------------------------------------------------------------------------


def _ids(items: list[_Record]) -> list[str]:
    return sorted({i.compile_id for i in items}, key=_compile_order)


def _compile_order(compile_id: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", compile_id)) or (1 << 30,)


def _step_reserved(run: RunData, pid: int) -> tuple[int, int] | None:
    values = [
        int(s.memory["reserved"])
        for r in run.requests
        if r.pid == pid
        for s in r.steps
        if isinstance(s.memory, dict) and isinstance(s.memory.get("reserved"), int)
    ]
    return (values[0], values[-1]) if values else None


def _signed_mb(value: int) -> str:
    return ("+" if value >= 0 else "-") + _mb(abs(value))


def _mb(value: int | None) -> str:
    return f"{(value or 0) / _MB:.1f} MB"


def _where(data: dict[str, object]) -> str:
    request_id, step = data.get("request_id"), data.get("step")
    if isinstance(request_id, str):
        return f"in {data.get('phase') or 'live'} request {request_id}" + (
            f" step {step}" if isinstance(step, int) else ""
        )
    return "outside any request"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _log_text(event: Event) -> str:
    return str(event.data.get("message") or "")[:300]


def _slug(text: str) -> str:
    words = re.findall(r"[a-z]+", re.sub(r"\d+", "", text.lower()))
    return "-".join(words[:6]) or "unknown"
