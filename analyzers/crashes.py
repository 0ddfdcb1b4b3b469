"""crash: the program died of an uncaught exception (the `crash` event of collectors/crash.py).

Why: a crash ends the run, and every other finding is about the part that ran before it; an
analysis that does not lead with it is a false all-clear. One finding per crash: the exception,
the user line it came from, where the run was (phase, request, step, compiles in flight), and
whether it was raised inside compiled code, a CUDA-graph replay or a collective, with the fix
for the known crashes. A crash that is a failed compile's own exception is reported by
compile-failure, with the compile's whole reason, and not again here.
"""

from __future__ import annotations

import re
from typing import Any

from diag.evidence.claims import claim
from diag.evidence.status import TEARDOWN_FIX, is_launcher_report, root_cause, worker_teardown
from diag.findings.model import Finding
from diag.trace.run import Event, RunData, Step, Trace

from .common import id_suffix, process_lines
from .failures import compile_crash

ANALYZER = "crash"

_CUDAGRAPH_OVERWRITTEN = re.compile(
    r"accessing tensor output of CUDAGraphs that has been overwritten", re.I
)
_OOM = re.compile(r"out of memory|OutOfMemoryError", re.I)
_COLLECTIVE_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout|timed? ?out", re.I)


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        # Numbered per process and kind, so each rank's first crash keeps the plain id.
        seen: dict[str, int] = {}
        crashes = run.of("crash")
        for crash in crashes:
            if compile_crash(run, crash) is not None:
                continue
            if is_launcher_report(crash) and any(
                not is_launcher_report(other) for other in crashes
            ):
                continue  # torchrun's echo of a worker's crash, which is the headline
            finding = _finding(trace, run, crash, 0)
            index = seen.get(finding.id, 0)
            seen[finding.id] = index + 1
            findings.append(_finding(trace, run, crash, index) if index else finding)
    return findings


def _finding(trace: Trace, run: RunData, crash: Event, index: int) -> Finding:
    data = crash.data
    kind_name = str(data.get("type") or "an exception")
    short = kind_name.rsplit(".", 1)[-1]
    message = str(data.get("message") or "")
    headline = message.strip().splitlines()[0][:300] if message.strip() else "(no message)"
    inside = [str(i) for i in data.get("inside") or [] if isinstance(i, str)]
    thread = data.get("thread")
    user = _frame_text(data.get("user_frame"))
    location = _frame_text(data.get("user_frame"), with_name=False)
    where = _position(run, crash)
    phase, request_id, step = _claimed_position(run, crash)
    kind, title, fix, severity = _explain(short, message, headline, inside, location, thread)
    evidence = [
        f"uncaught {kind_name}" + (f" in thread {thread!r}" if thread else "") + f": {headline}",
        f"where the run was: {where}",
    ]
    teardown = _worker_teardown(run, message) if kind == "worker-failed" else None
    if teardown is not None:
        kind, title, fix, line = teardown
        evidence.append(line)
    rest = message.strip().splitlines()[1:]
    if rest:
        evidence.append("message: " + "\n          ".join(line.rstrip() for line in rest[:20]))
    if user:
        evidence.append(f"raised from the program's own code at {user}")
    stack = [text for f in data.get("user_stack") or [] if (text := _frame_text(f))]
    if len(stack) > 1:
        evidence.append("user stack (outermost first): " + " -> ".join(stack))
    if not user:
        innermost = _frame_text((data.get("frames") or [None])[-1])
        evidence.append(
            "no frame of the program's own code in the traceback"
            + (f"; innermost frame {innermost}" if innermost else "")
        )
    if inside:
        evidence.append("raised inside: " + ", ".join(_INSIDE.get(i, i) for i in inside))
    compiling = [str(c) for c in data.get("compiling") or []]
    if compiling:
        evidence.append(f"Dynamo was compiling {', '.join(compiling)} when it was raised")
    cause = data.get("cause")
    if isinstance(cause, dict) and cause.get("type"):
        evidence.append(f"caused by {cause.get('type')}: {_first(cause.get('message'))}")
    exit_text = _exit_text(trace, run)
    if data.get("seen_by") == "multiprocessing.Process":
        # A child's exception: multiprocessing printed it and ended the child with code 1;
        # the manifest's code is the launched command's, not this process's.
        evidence.append(
            "raised in a multiprocessing child's run(): multiprocessing printed the traceback "
            "and ended that process with exit code 1"
            + (
                f"; the launched command: {exit_text.replace('the process ', '', 1)}"
                if exit_text
                else ""
            )
        )
    elif exit_text and not thread:
        evidence.append(exit_text)
    if data.get("seen_by") == "sys.last_value":
        evidence.append(
            "the program replaced sys.excepthook; diag read the exception at interpreter exit"
        )
    evidence.extend(process_lines(run, crash.pid))
    return Finding(
        id=f"{ANALYZER}:{kind}:{short}"
        + (f":{index + 1}" if index else "")
        + id_suffix(run, crash.pid),
        analyzer=ANALYZER,
        severity=severity,
        title=title,
        evidence=evidence,
        fix=fix,
        location=location,
        run=run.label,
        data={
            "kind": kind,
            "type": kind_name,
            "message": message,
            "thread": thread,
            "user_frame": user,
            "inside": inside,
            "position": list(crash.position),
            "compiling": compiling,
        },
        claims=[
            claim(
                "crash",
                run,
                crash.pid,
                phase=phase,
                request=request_id,
                step=step,
                type=kind_name,
                inside=inside,
                thread=thread if isinstance(thread, str) else None,
            )
        ],
    )


_INSIDE = {
    "compiled_code": "compiled code (a torch.compile'd graph was running)",
    "compiling": "a compile (Dynamo or the backend was compiling)",
    "cudagraph": "a CUDA-graph replay or its outputs",
    "collective": "a collective (torch.distributed)",
}


def _worker_teardown(run: RunData, message: str) -> tuple[str, str, str, str] | None:
    """(kind, title, fix, evidence) when torchrun's failed rank died of a fault signal after it
    reached diag's exit hook (diag.evidence.status.worker_teardown)."""
    found = worker_teardown(run, message)
    if found is None:
        return None
    rank, code, signal, pid = found
    return (
        "worker-teardown",
        f"A worker process died after its work: rank {rank} was ended by {signal} in "
        "interpreter teardown (torchrun's report)",
        "The rank finished (every step it ran is in the trace) and died while the interpreter "
        f"shut down. {TEARDOWN_FIX} The findings cover the whole run.",
        f"rank {rank} (pid {pid}) reached diag's exit hook before it died (exit code {code}, "
        f"{signal}): it died in teardown, not during its work",
    )


def _explain(
    short: str,
    message: str,
    headline: str,
    inside: list[str],
    user: str | None,
    thread: Any,
) -> tuple[str, str, str, str]:
    """(kind, title, fix, severity) for the known crashes, else the generic one."""
    at = f" at {user}" if user else ""
    if _CUDAGRAPH_OVERWRITTEN.search(message):
        return (
            "cudagraph-overwritten",
            "The program crashed: it read a CUDA-graph output that a later replay had "
            f"overwritten{at}",
            "CUDA graphs (mode='reduce-overhead') reuse their output buffers on every replay: "
            "call torch.compiler.cudagraph_mark_step_begin() before each step (each model "
            "invocation) so the previous outputs are released on purpose, or clone the output "
            "outside the compiled region (out = model(x).clone()) when it must outlive the "
            "next call. In a denoise loop with guidance passes, mark once per step so the "
            "passes of one step are one generation (diffusers: callback_on_step_end); once it "
            "runs, diag's cudagraphs findings say which requests record graphs live.",
            "error",
        )
    if short == "ChildFailedError":
        root = root_cause(message)
        who = f"rank {root.group('rank')} exited with code {root.group('code')}" if root else ""
        return (
            "worker-failed",
            "A worker process failed" + (f": {who}" if who else "") + " (torchrun's report)",
            "diag recorded no crash in the worker itself: it was killed by a signal (a negative "
            "exit code: -9 is often the kernel's OOM killer), called os._exit, or crashed in "
            "native code; read that rank's own output, and record again with "
            "TORCHELASTIC_ERROR_FILE or @record (torch.distributed.elastic) for its traceback.",
            "error",
        )
    if short in ("KeyboardInterrupt",):
        return (
            "interrupted",
            f"The program was interrupted (KeyboardInterrupt){at}",
            "Nothing to fix in the program: the run was stopped by hand, so findings cover only "
            "what ran before it.",
            "info",
        )
    if _OOM.search(short) or _OOM.search(headline):
        during = " while compiling" if "compiling" in inside else ""
        return (
            "oom",
            f"The program crashed: out of GPU memory{during}{at}",
            "Find what holds memory at that point (the step's allocator figures in diag tui, "
            "torch.cuda.memory_summary()); compiled code and CUDA graphs keep pools of their "
            "own: leave headroom, lower the resolution or batch, or offload weights.",
            "error",
        )
    if "collective" in inside:
        timeout = bool(_COLLECTIVE_TIMEOUT.search(message))
        return (
            "collective",
            "The program crashed inside a collective"
            + (" (timeout)" if timeout else "")
            + f": {short}{at}",
            "A collective fails or times out when the ranks do not reach it together: check "
            "that every rank calls the same collectives in the same order with the same shapes "
            "(a rank that recompiled, took another branch or crashed first stalls the others; "
            "see rank-divergence), and read the first rank's error, not the timeouts it caused.",
            "error",
        )
    if "compiled_code" in inside:
        return (
            "compiled-code",
            f"The program crashed inside compiled code: {short}: {headline}"[:200] + at,
            "Run the same program eagerly (torch.compiler.set_stance('force_eager'), or diag "
            "record --baseline eager): if eager fails too, the error is the program's own"
            f"{at}; if only compiled code fails, it is a compiler bug: narrow it with "
            "backend='aot_eager' and TORCHDYNAMO_REPRO_AFTER='aot'.",
            "error",
        )
    if thread:
        return (
            "thread",
            f"Thread {thread!r} died of an uncaught {short}{at}; the process went on",
            "A worker thread that dies leaves its work undone (a prefetch, an offload stream, "
            "a request queue): catch and report errors in the thread's target, or fix the "
            f"error{at}.",
            "warning",
        )
    return (
        "uncaught",
        f"The program crashed: {short}: {headline}"[:200] + at,
        f"The exception is the program's own{at} (its traceback is on the program's stderr); "
        "every other finding covers only what ran before it.",
        "error",
    )


def _position(run: RunData, crash: Event) -> str:
    phase, rid, step = crash.position
    if rid is not None:
        return f"{phase} {rid}" + (f" step {step}" if step is not None else "")
    # diag.api and the adapters close their step as the exception unwinds through them, before
    # the hook sees it: the step the exception ended is the last one started before the crash.
    last = _last_step(run, crash)
    if last is not None:
        return f"{last.phase} {last.request_id} step {last.index} (the last step started before it)"
    if run.steps:
        return f"{phase}, before any step"
    return "unknown: no steps were identified in this run"


def _claimed_position(run: RunData, crash: Event) -> tuple[str | None, str | None, int | None]:
    """Where the claim puts the crash: the recorded position, else the request of the last step
    started before it, with the step left unknown (the exception may have come after it)."""
    phase, rid, step = crash.position
    if rid is not None:
        return phase, rid, step
    last = _last_step(run, crash)
    if last is not None:
        return last.phase, last.request_id, None
    return None, None, None


def _last_step(run: RunData, crash: Event) -> Step | None:
    started = [s for s in run.steps if s.pid == crash.pid and s.start_t <= crash.t]
    return max(started, key=lambda s: s.start_t) if started else None


def _frame_text(frame: Any, with_name: bool = True) -> str | None:
    if not isinstance(frame, dict) or not frame.get("file"):
        return None
    text = f"{frame['file']}:{frame.get('line')}"
    return text + (f" in {frame['name']}" if with_name and frame.get("name") else "")


def _first(text: Any) -> str:
    return str(text or "").strip().splitlines()[0][:200] if str(text or "").strip() else ""


def _exit_text(trace: Trace, run: RunData) -> str:
    for entry in trace.manifest.get("runs") or []:
        if isinstance(entry, dict) and entry.get("label") == run.label:
            if isinstance(entry.get("exit_code"), int):
                return f"the process exited with code {entry['exit_code']}"
            if entry.get("signal"):
                return f"the process was ended by {entry['signal']}"
    return ""
