"""What a recording can and cannot show: how it ended, and what diag could not see in it.

Findings are only as good as what was observed. A crashed or still-running recording, a process
that ran torch without diag's collectors, a program whose steps or warmup diag could not
identify: each leaves analyzers quiet for lack of evidence, not because all was well. This
module turns a Trace into its status and a list of visibility notices, each with how to show
what was not seen; every output (analyze's text and JSON, the TUI, the report) puts them first,
and no output gives an all-clear while one stands.

Standard library only: `diag check` and the end of `diag record` import it.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from diag.evidence.endings import UNFINISHED, handler_exits, shutdown_detail, unfinished_messages
from diag.trace.format import (
    BOOTSTRAP_ERRORS,
    FORMAT_NAME,
    STATUS_COMPLETE,
    STATUS_CRASHED,
    STATUS_FAILED_TO_START,
    STATUS_KILLED,
    STATUS_RUNNING,
)
from diag.trace.numerals import parse_int
from diag.trace.printable import one_line
from diag.trace.processes import boot_id, is_alive
from diag.trace.run import Event, Process, RunData, Trace

# Notice kinds (docs/FINDINGS.md).
RECORDING_INCOMPLETE = "recording-incomplete"
COLLECTORS_MISSING = "collectors-missing"
NO_PROCESS = "no-process"
PROCESS_CUT_SHORT = "process-cut-short"
NO_STEPS = "no-steps"
NO_WARMUP = "no-warmup"
COLLECTORS_PAUSED = "collectors-paused"
REFERENCE_MISALIGNED = "reference-misaligned"
RECORDING_TRUNCATED = "recording-truncated"
STEPS_ROTATED = "steps-rotated"
PROFILE_SKIPPED = "profile-skipped"
STEPS_INFERRED = "steps-inferred"
HOOKS_OFF = "hooks-off"
DIAG_PAUSED = "diag-paused"

#: The adapters that infer steps and requests (collectors/adapters/inferred.py) rather than
#: being told them.
INFERRING_ADAPTERS = frozenset({"compiled-calls (inferred)", "diffusers model calls (inferred)"})

#: How to show diag a program's steps and requests, and its warmup (shared with the summary).
HOW_STEPS = (
    "name them: diag record --step-fn MOD:QUALNAME (one call = one step) and --request-fn "
    "MOD:QUALNAME (one call = one request), or annotate the loop with diag.api "
    "(`with diag.request(): ... with diag.step(): ...`)"
)
HOW_WARMUP = (
    "mark it: diag record --warmup-requests N (the first N requests of each process are "
    'warmup), --warmup-fn MOD:QUALNAME, or `with diag.phase("warmup"):` from diag.api'
)

#: The events a writer leaves when the recording stopped early, and when --max-size dropped
#: the oldest step segment (diag/trace/events.py).
STOPPED = "recording_stopped"
DROPPED = "steps_dropped"
#: A profiler window diag did not write (it would not fit on the disk).
WINDOW_SKIPPED = "profile_window_skipped"

#: Statuses of an imported input (a TORCH_TRACE log, a profiler trace): not a recording.
IMPORTED = "imported"


@dataclass(frozen=True)
class Notice:
    """Something diag could not see, what that means for the findings, and how to show it."""

    kind: str
    message: str
    how: str
    run: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "run": self.run, "message": self.message, "how": self.how}


@dataclass(frozen=True)
class RecordingStatus:
    """How the recording ended: the manifest's status, and for the run that decided it the exit
    code or signal, in words (`detail`)."""

    status: str
    complete: bool
    detail: str
    exit_code: int | None = None
    signal: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    #: Why the recording stopped before the program ended (`disk full`), or None: `complete`
    #: still says how the program ended.
    truncated: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "recording": self.status,
            "complete": self.complete,
            "detail": self.detail,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "truncated": self.truncated,
            "runs": self.runs,
        }


@dataclass(frozen=True)
class Visibility:
    status: RecordingStatus
    notices: list[Notice]
    #: How long diag itself paused the program (profiler windows), per run: shown with the
    #: notices but no notice (the trace misses nothing), so it never stands in an all-clear's way.
    paused: list[Notice] = field(default_factory=list)

    @property
    def all_clear_possible(self) -> bool:
        """True when nothing stands between "no findings" and "nothing went wrong"."""
        return self.status.complete and not self.notices

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.as_dict(),
            "notices": [n.as_dict() for n in self.notices],
            "diag_paused": [n.as_dict() for n in self.paused],
        }


def assess(trace: Trace) -> Visibility:
    """The recording's status and what diag could not see in it, most serious first."""
    imported = _is_imported(trace)
    status = _imported_status(trace) if imported else _recording_status(trace)
    status = _with_shutdowns(trace, status)
    notices: list[Notice] = []
    if not status.complete:
        notices.append(_teardown_notice(trace, status) or _incomplete_notice(status))
    for run in trace.subject_runs:
        notices.extend(_run_notices(trace, run, imported))
    misaligned = _reference_notice(trace)
    if misaligned is not None:
        notices.append(misaligned)
    paused = [n for n in map(_diag_paused_notice, trace.subject_runs) if n is not None]
    return Visibility(status, notices, paused)


def _served(run: RunData) -> dict[tuple[str, tuple[int, ...] | None], list[int]]:
    """(phase, request shape) -> each request's step count, in order."""
    served: dict[tuple[str, tuple[int, ...] | None], list[int]] = {}
    for request in run.requests:
        shape = tuple(request.shape) if isinstance(request.shape, list) else None
        served.setdefault((request.phase, shape), []).append(len(request.steps))
    return served


def _reference_notice(trace: Trace) -> Notice | None:
    """The run compiled code is compared with does not line up with it: other request shapes
    or other step counts. Kernel comparisons align steps by request and step, so those not on
    both sides are not compared."""
    compiled, reference = trace.compiled, trace.reference
    if compiled is None or reference is None or not compiled.requests:
        return None
    mine, theirs = _served(compiled), _served(reference)
    if mine == theirs:
        return None
    differ = [
        f"{phase} {'x'.join(map(str, shape)) if shape else 'no shape'}: "
        f"{_counts(mine.get((phase, shape)))} here, {_counts(theirs.get((phase, shape)))} in "
        f"{reference.label}"
        for phase, shape in dict.fromkeys([*mine, *theirs])
        if mine.get((phase, shape)) != theirs.get((phase, shape))
    ]
    return Notice(
        REFERENCE_MISALIGNED,
        f"run {reference.label} does not line up with the compiled run (requests and steps per "
        f"shape): {'; '.join(differ[:4])}{' ...' if len(differ) > 4 else ''}; comparisons "
        "with it cover only the requests and steps both runs have",
        "record both runs with the same inputs and step boundaries (an adapter or diag.api "
        "marks them alike in both)",
        reference.label,
    )


def _counts(steps: list[int] | None) -> str:
    if not steps:
        return "no request"
    return f"{len(steps)} request(s) of {'/'.join(map(str, steps[:6]))} step(s)"


# --- status ------------------------------------------------------------------------------------


def _is_imported(trace: Trace) -> bool:
    manifest = trace.manifest
    return manifest.get("format") != FORMAT_NAME or "torch_trace" in manifest


def _imported_status(trace: Trace) -> RecordingStatus:
    what = "a TORCH_TRACE log" if "torch_trace" in trace.manifest else "a torch.profiler trace"
    return RecordingStatus(IMPORTED, True, f"imported from {what}, not recorded by diag")


def _manifest_runs(trace: Trace) -> list[dict[str, Any]]:
    runs = trace.manifest.get("runs")
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


def _recording_status(trace: Trace) -> RecordingStatus:
    manifest = trace.manifest
    status = str(manifest.get("status") or "unknown")
    entries = _manifest_runs(trace)
    runs = [
        {k: r.get(k) for k in ("label", "status", "exit_code", "signal", "error")} for r in entries
    ]
    for run, entry in zip(runs, entries, strict=True):
        run["truncated"] = _truncated_reason(entry)
    # The run that decided the overall status: the first that did not complete.
    deciding = next((r for r in entries if r.get("status") != STATUS_COMPLETE), None)
    if deciding is None and entries:
        deciding = entries[-1]
    exit_code = deciding.get("exit_code") if deciding else None
    sig = deciding.get("signal") if deciding else None
    exit_code = exit_code if isinstance(exit_code, int) else None
    sig = str(sig) if sig else None
    label = f"run {deciding.get('label')}" if deciding and len(entries) > 1 else "the program"
    if status == STATUS_COMPLETE:
        detail = "complete (exit code 0)"
    elif status == STATUS_CRASHED:
        detail = f"crashed: {label} exited with code {exit_code}"
    elif status == STATUS_KILLED:
        detail = f"killed: {label} was ended by {sig or 'a signal'}"
    elif status == STATUS_FAILED_TO_START:
        error = deciding.get("error") if deciding else None
        detail = f"failed to start: {error or 'the command could not be run'}; nothing ran"
    elif status == STATUS_RUNNING:
        detail = _running_detail(trace)
    else:
        detail = f"status {status!r}: this diag does not know how the recording ended"
    truncated = next((r["truncated"] for r in runs if r["truncated"]), None)
    if truncated is None:
        stopped = [run for run in trace.runs.values() if run.of(STOPPED)]
        truncated = _stop_reason(stopped[0]) if stopped else None
    if truncated is not None:
        detail += f"; the recording stopped early ({truncated}): later events are missing"
    return RecordingStatus(
        status, status == STATUS_COMPLETE, detail, exit_code, sig, runs, truncated
    )


def _truncated_reason(entry: dict[str, Any]) -> str | None:
    truncated = entry.get("truncated")
    if not isinstance(truncated, dict):
        return None
    return str(truncated.get("reason") or "a write failed")


def _stop_reason(run: RunData) -> str:
    return str(run.of(STOPPED)[0].data.get("reason") or "a write failed")


def _running_detail(trace: Trace) -> str:
    """A manifest still `running`: recording now, or the launcher died before finishing it."""
    manifest = trace.manifest
    raw_host = manifest.get("host")
    host: dict[str, Any] = raw_host if isinstance(raw_host, dict) else {}
    here = host.get("hostname") == socket.gethostname()
    recorded_boot, current_boot = host.get("boot_id"), boot_id()
    if here and isinstance(recorded_boot, str) and current_boot not in (None, recorded_boot):
        return (
            "never finished: the manifest was left `running` and the host has restarted since, "
            "so nothing of the recording is alive"
        )
    launcher = manifest.get("launcher_pid")
    launcher_ticks = _ticks(manifest.get("launcher_start_ticks"))
    processes = [p for run in trace.runs.values() for p in run.processes if not p.ended and p.pid]
    if here and isinstance(launcher, int) and is_alive(launcher, launcher_ticks):
        return f"still running: diag record (pid {launcher}) is recording; analyze it when it ends"
    alive = [p.pid for p in processes if is_alive(p.pid, p.start_ticks)] if here else []
    if alive:
        shown = ", ".join(map(str, alive[:4]))
        return f"still running: recorded process(es) {shown} are alive; analyze again when they end"
    if not here:
        return (
            "running, as far as the manifest says: recorded on another host "
            f"({host.get('hostname') or '?'}), so diag cannot tell whether it is still going"
        )
    if not any(run.processes for run in trace.runs.values()):
        return (
            "never finished: the manifest was left `running` and no process was recorded (the "
            "command never started, or diag record was killed before it ended)"
        )
    return (
        "never finished: the manifest was left `running` and no recorded process is alive "
        "(diag record itself was killed, so how the program ended is unknown)"
    )


def _ticks(value: Any) -> int | None:
    """A recorded start time (clock ticks), or None in a trace from before they were kept."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _incomplete_notice(status: RecordingStatus) -> Notice:
    if status.status == STATUS_FAILED_TO_START:
        message = "the recording is empty: the command never started, so nothing was observed"
        how = "fix the command (is it installed and on PATH?) and record again"
    elif status.status == STATUS_RUNNING and status.detail.startswith("still running"):
        message = f"the recording is incomplete: {status.detail}"
        how = "wait for the program to end (or stop it with Ctrl-C), then analyze again"
    else:
        message = (
            f"the recording is incomplete: {status.detail}; findings cover only what happened "
            "before the program stopped"
        )
        how = (
            "the program's own output (its traceback) says why it stopped; record again once it "
            "runs to the end"
        )
    return Notice(RECORDING_INCOMPLETE, message, how)


#: Signals a process raises on itself in native code (abort, a bad access), not sent by a user;
#: torchrun reports a worker's as the negative exit code.
_FAULT_SIGNALS = {6: "SIGABRT", 11: "SIGSEGV", 7: "SIGBUS", 4: "SIGILL", 8: "SIGFPE"}
#: torchrun's ChildFailedError message: the failed rank and its exit code.
ROOT_CAUSE = re.compile(r"rank\s*:\s*(?P<rank>\d+).*?exitcode\s*:\s*(?P<code>-?\d+)", re.S)
TEARDOWN_FIX = (
    "A torch.distributed process group left alive at exit is the usual cause (gloo's threads "
    "abort the process with `terminate called without an active exception`; NCCL warns that "
    "destroy_process_group() was not called): call torch.distributed.destroy_process_group() at "
    "the end of every rank's program (in a finally). The program's stderr names what terminated."
)


def root_cause(message: str) -> re.Match[str] | None:
    """The failed rank and exit code of torchrun's report: its "Root Cause" entry (the ranks
    listed before it under "Failures" are the ones torchrun stopped after it)."""
    at = message.find("Root Cause")
    return ROOT_CAUSE.search(message, at if at >= 0 else 0)


def is_launcher_report(crash: Event) -> bool:
    """torchrun's own exception when a worker failed (the elastic agent's ChildFailedError)."""
    return str(crash.data.get("type") or "").endswith("ChildFailedError")


def worker_teardown(run: RunData, message: str) -> tuple[int, int, str, int] | None:
    """(rank, exit code, signal, pid) when torchrun's report (a ChildFailedError `message`) names
    a rank that died of a fault signal after it reached diag's exit hook, with no crash of its
    own: its work ran to the end and it died in interpreter teardown."""
    root = root_cause(message)
    code = parse_int(root.group("code"), signed=True) if root else None
    rank = parse_int(root.group("rank")) if root else None
    if code is None or rank is None or -code not in _FAULT_SIGNALS:
        return None
    ended = [p for p in run.processes if p.rank == rank and p.ended]
    if not ended or any(c.pid == ended[0].pid for c in run.of("crash")):
        return None
    return rank, code, _FAULT_SIGNALS[-code], ended[0].pid


def teardown_notice(trace: Trace) -> Notice | None:
    """`_teardown_notice` of a recorded trace (for `diag check`'s recording rule)."""
    return None if _is_imported(trace) else _teardown_notice(trace, _recording_status(trace))


def _teardown_notice(trace: Trace, status: RecordingStatus) -> Notice | None:
    """The program failed only in interpreter teardown: killed by a fault signal after every
    recorded process reached diag's exit hook, or (under torchrun) a rank that did. Its work
    ran to the end, so the findings are not cut short; still a notice, since it failed."""
    if status.status not in (STATUS_KILLED, STATUS_CRASHED):
        return None
    labels = {str(r.get("label")) for r in status.runs if r.get("status") == status.status}
    runs = [trace.runs[label] for label in labels if label in trace.runs]
    if not runs or len(runs) != len(labels):
        return None
    processes = [p for run in runs for p in run.processes]
    if status.status == STATUS_KILLED:
        signals = {str(r.get("signal")) for r in status.runs if r.get("status") == STATUS_KILLED}
        if not signals <= set(_FAULT_SIGNALS.values()):
            return None  # a Ctrl-C (SIGINT runs the exit hooks too) or a kill is not this
        if not processes or not all(p.ended for p in processes):
            return None
        if any(run.of("crash") for run in runs):
            return None  # an uncaught exception on the way out: the crash finding says which
        message = (
            f"the program was ended by {status.signal} after its work: all {len(processes)} "
            "recorded process(es) reached diag's exit hook first, so it died in interpreter "
            "teardown (a C++ destructor, or a thread still running at exit); the findings cover "
            "the whole run"
        )
        distributed = any(p.rank is not None for p in processes)
    else:  # torchrun exits 1 when a worker dies: its report names the rank
        found = []
        for run in runs:
            for crash in run.of("crash"):
                if not is_launcher_report(crash):
                    return None  # a crash of its own: the crash finding says what it was
                found.append(worker_teardown(run, str(crash.data.get("message") or "")))
        workers = [p for p in processes if p.rank is not None]
        first = found[0] if found else None
        if first is None or None in found or not all(p.ended for p in workers):
            return None
        rank, _, signal, _ = first
        message = (
            f"the program failed after its work: torchrun reported rank {rank} ended by {signal}, "
            f"and every one of the {len(workers)} recorded rank(s) had reached diag's exit hook "
            "first, so it died in interpreter teardown; the findings cover the whole run"
        )
        distributed = True
    how = (
        TEARDOWN_FIX
        if distributed
        else "the program's stderr names what terminated at exit (a native extension's "
        "destructor, a thread left running); run it without diag to confirm it fails the same way"
    )
    return Notice(RECORDING_INCOMPLETE, message, how)


# --- per run -----------------------------------------------------------------------------------


def bootstrap_errors(run: RunData) -> list[str]:
    from diag.trace.lines import read_notes

    return read_notes(run.folder, run.root)


def _run_exit(trace: Trace, label: str) -> dict[str, Any] | None:
    return next((r for r in _manifest_runs(trace) if r.get("label") == label), None)


def _paused_notice(run: RunData) -> Notice | None:
    """Session.pause() spans: requests and steps served then were not recorded (compiles
    were), so "no live compile" covers only the recorded requests."""
    switches = run.of("collectors_paused")
    if not switches:
        return None
    spans, seconds = 0, 0.0
    since: dict[int, int] = {}
    for event in switches:
        if event.data.get("paused") is True:
            since.setdefault(event.pid, event.t)
            spans += 1
        elif event.pid in since:
            seconds += (event.t - since.pop(event.pid)) / 1e9
    left = f"; {len(since)} process(es) still paused at the end" if since else ""
    return Notice(
        COLLECTORS_PAUSED,
        f"per-step collection was paused {spans} time(s) in run {run.label} ({seconds:.1f} s "
        f"in all{left}): requests and steps served while paused are not in the trace, only "
        "their compiles",
        "leave the session running (Session.pause() is for overhead benches) to see every request",
        run.label,
    )


def _diag_paused_notice(run: RunData) -> Notice | None:
    """How long diag's profiler windows held the program's thread (diag/evidence/own_pauses.py), and
    which steps a program's own timer charges it to (left out of bench figures)."""
    from diag.evidence.own_pauses import window_pauses

    pauses = window_pauses(run)
    if not pauses:
        return None
    total = sum(p.export_s for p in pauses)
    longest = max(pauses, key=lambda p: p.export_s)
    where = f"window {longest.window}" + (
        f", after step {longest.after[2]} of request {longest.after[1]}" if longest.after else ""
    )
    paid = sorted({key for p in pauses for key in p.paid_by}, key=lambda k: (k[0], k[1], k[2]))
    shown = ", ".join(f"{r} step {i}" for _, r, i in paid[:6]) + (
        f" and {len(paid) - 6} more" if len(paid) > 6 else ""
    )
    steps = (
        f"; a program's own step timer may hold it in the step a window ended at or the next "
        f"one of its request ({shown}): bench figures leave those {len(paid)} step(s) out"
        if paid
        else ""
    )
    return Notice(
        DIAG_PAUSED,
        f"diag's profiler windows paused the program {len(pauses)} time(s) in run {run.label}, "
        f"{total:.3f} s in all (longest {longest.export_s:.3f} s: {where}): each window's stop "
        f"and trace write run on the program's thread between steps, in no step's time here{steps}",
        "fewer or shorter windows pause it less (--profile none, or a smaller steady:N); each "
        "pause is profile_window_end.export_s",
        run.label,
    )


#: What a hook records, by the first part of its name (collectors/hooks.py): what is missing
#: from a trace once that hook failed and was turned off.
_HOOK_RECORDS = {
    "compiles": "compiles, recompiles and their guard failures",
    "compile_timing": "compile times by phase",
    "cudagraphs": "CUDA-graph recordings and skips",
    "profiling": "profiler windows",
    "shapes": "call shapes and shape specialisations",
    "limit_calls": "eager calls after a recompile-limit hit",
    "cache": "cache-entry counts",
    "gc_pauses": "garbage-collector pauses",
    "hygiene": "empty_cache() and gc.collect() calls",
    "crash": "crashes",
    "shutdown": "os._exit endings",
    "trace_boundary": "code Dynamo traced outside the model",
    "magi": "MagiCompiler's compiles and guard checks",
    "adapter": "steps and requests",
    "steps": "steps and requests",
    "inferred": "steps and requests",
    "end": "the process's final snapshot (cache entries, call shapes)",
}


def _hooks_off_notice(run: RunData) -> Notice | None:
    """diag's own hooks that failed inside the program and were turned off (the program never
    saw it): what they record is missing from that point on."""
    if not run.collector_errors:
        return None
    hooks: dict[str, None] = {}
    for error in run.collector_errors:
        hooks.setdefault(str(error.get("where", "?")), None)
    missing: dict[str, None] = {}
    for hook in hooks:
        records = _HOOK_RECORDS.get(hook.split(".")[0])
        if records is not None:
            missing.setdefault(records, None)
    shown = ", ".join(list(hooks)[:6]) + (f" and {len(hooks) - 6} more" if len(hooks) > 6 else "")
    what = "; ".join(missing) if missing else "what those hooks record"
    return Notice(
        HOOKS_OFF,
        f"{len(hooks)} of diag's hook(s) failed inside the program in run {run.label} and were "
        f"turned off there ({shown}); the program was not affected, but from then on this trace "
        f"lacks: {what}",
        "the collector_error events in the process's events.jsonl say why (the TUI lists them); "
        "please report them",
        run.label,
    )


def _run_notices(trace: Trace, run: RunData, imported: bool) -> list[Notice]:
    notices: list[Notice] = []
    paused = _paused_notice(run)
    if paused is not None:
        notices.append(paused)
    hooks_off = _hooks_off_notice(run)
    if hooks_off is not None:
        notices.append(hooks_off)
    errors = bootstrap_errors(run)
    if errors:
        notices.append(
            Notice(
                COLLECTORS_MISSING,
                f"{len(errors)} process(es) ran torch without diag's collectors, so nothing they "
                f"compiled or ran was recorded: {errors[0][:300]}",
                "the line above (in runs/"
                f"{run.label}/{BOOTSTRAP_ERRORS}) says why they could not start; fix it and "
                "record again",
                run.label,
            )
        )
    entry = _run_exit(trace, run.label)
    ran = entry is not None and entry.get("status") not in (STATUS_FAILED_TO_START, STATUS_RUNNING)
    truncated = _truncated_notice(run, entry)
    if truncated is not None:
        notices.append(truncated)
    if not run.processes and not imported:
        if ran and not errors and truncated is None:
            notices.append(
                Notice(
                    NO_PROCESS,
                    f"no process was recorded in run {run.label} although the command ran: "
                    "either it never imported torch, or torch ran where diag's bootstrap could "
                    "not reach it, so nothing it compiled was seen",
                    "diag starts in every Python process that imports torch through the "
                    "PYTHONPATH it sets: a program that resets PYTHONPATH, runs python -S/-I, or "
                    "starts its workers with a clean environment is not recorded",
                    run.label,
                )
            )
        return notices
    rotated = _rotated_notice(run)
    if rotated is not None:
        notices.append(rotated)
    skipped = run.of(WINDOW_SKIPPED)
    if skipped:
        notices.append(
            Notice(
                PROFILE_SKIPPED,
                f"{len(skipped)} profiler window(s) of run {run.label} were not written "
                f"({', '.join(str(e.data.get('window')) for e in skipped[:3])}): "
                f"{skipped[0].data.get('reason') or 'no reason recorded'}; kernel-level "
                "findings (routing, offload, kernels) cannot be judged on those steps",
                "make room on the trace's disk, or record to another disk with -o"
                if "disk space" in str(skipped[0].data.get("reason"))
                else "each window's reason is in its profile_window_skipped event",
                run.label,
            )
        )
    stopped = {event.pid for event in run.of(STOPPED)} | _truncated_pids(entry)
    stopped |= set(handler_exits(run))  # a shutdown handler's os._exit is not a cut-short process
    cut = [p for p in run.processes if not p.ended and p.pid not in stopped]
    if cut and (entry is None or entry.get("status") == STATUS_COMPLETE):
        shown = ", ".join(str(p.pid) for p in cut[:4])
        notices.append(
            Notice(
                PROCESS_CUT_SHORT,
                f"{len(cut)} process(es) of run {run.label} ({shown}) ended without reaching "
                "diag's exit hook (killed, or os._exit): their last moments may be missing",
                "let worker processes exit normally, or read their events as partial",
                run.label,
            )
        )
    notices.extend(_unfinished_notices(trace, run))
    if not run.requests:
        compiled = len(run.compiles)
        seen = f"{compiled} compile(s) were recorded, but" if compiled else "nothing compiled and"
        notices.append(
            Notice(
                NO_STEPS,
                f"no steps or requests identified in run {run.label} (no adapter reported "
                f"any): {seen} diag cannot tell warmup from live traffic, so it judges no "
                "compile as live and no step time",
                "record it with diag record and " + HOW_STEPS if imported else HOW_STEPS,
                run.label,
            )
        )
    elif not imported:
        notices.extend(_warmup_notice(run))
        notices.extend(_inferred_notice(run))
    return notices


def _inferred_notice(run: RunData) -> list[Notice]:
    """Steps and requests diag inferred: where the evidence for a request boundary can be
    missing, said once (the program's own loop may differ)."""
    inferred = sorted(run.adapters & INFERRING_ADAPTERS)
    if not inferred:
        return []
    return [
        Notice(
            STEPS_INFERRED,
            f"steps and requests of run {run.label} were inferred ({', '.join(inferred)}): a "
            "step is one model call, or one period of the compiled calls a loop repeats; a "
            "request starts at a new input shape, a timestep that turns back, a scheduler's "
            "set_timesteps or a long pause, so requests of one shape served back to back with "
            "no timestep diag can read are counted as one",
            HOW_STEPS,
            run.label,
        )
    ]


def truncated_notice(trace: Trace, run: RunData) -> Notice | None:
    """`_truncated_notice` of one run of a trace (for `diag check`'s recording rule)."""
    return _truncated_notice(run, _run_exit(trace, run.label))


def _truncated_notice(run: RunData, entry: dict[str, Any] | None) -> Notice | None:
    """The recording stopped before the program did (a full disk): where, and why."""
    stops = run.of(STOPPED)
    how = (
        "make room where the trace is written (or record to another disk with -o) and record "
        "again; diag record --max-size bounds what a long run keeps"
    )
    if stops:
        first = stops[0]
        others = len({e.pid for e in stops}) - 1
        more = f" (and in {others} other process(es))" if others > 0 else ""
        data = first.data
        file = f", writing {data.get('file')}" if data.get("file") else ""
        error = f" ({data.get('error')}{file})" if data.get("error") else ""
        return Notice(
            RECORDING_TRUNCATED,
            f"the recording of run {run.label} stopped {_when(run, first)}{more}: "
            f"{data.get('reason') or 'a write failed'}{error}; later events are missing, so "
            "findings cover only what happened before (the program ran on unchanged)",
            how,
            run.label,
        )
    truncated = entry.get("truncated") if entry is not None else None
    if not isinstance(truncated, dict):
        return None
    detail = truncated.get("detail") or truncated.get("error") or ""
    return Notice(
        RECORDING_TRUNCATED,
        f"the recording of run {run.label} stopped early: {truncated.get('reason') or '?'}"
        f"{f' ({detail})' if detail else ''}; later events may be missing, so findings cover "
        "only what was recorded",
        how,
        run.label,
    )


def _truncated_pids(entry: dict[str, Any] | None) -> set[int]:
    """The processes the launcher found cut short by the recording's stop (not by a kill)."""
    truncated = entry.get("truncated") if entry is not None else None
    pids = truncated.get("processes") if isinstance(truncated, dict) else None
    return {p for p in pids if isinstance(p, int)} if isinstance(pids, list) else set()


def _when(run: RunData, event: Event) -> str:
    """`in process 1234, 12.3 s after it started (2026-12-01 20:50:01 UTC), in live request r1,
    step 2`: where a stop event says the program was."""
    process: Process | None = next((p for p in run.processes if p.pid == event.pid), None)
    text = f"in process {event.pid}" if event.pid else "in a process"
    if process is not None and process.start_t:
        text += f", {(event.t - process.start_t) / 1e9:.1f} s after it started"
        unix = process.unix_ns(event.t)
        if unix is not None:
            stamp = datetime.fromtimestamp(unix / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            text += f" ({stamp})"
    phase, request, step = event.position
    if request is not None:
        text += f", in {phase} request {request}"
        if step is not None:
            text += f", step {step}"
    elif "phase" in event.data:
        text += f", outside any request ({phase})"
    return text


def _rotated_notice(run: RunData) -> Notice | None:
    """--max-size dropped the oldest step segments: those steps' times are gone, not their
    compiles or request boundaries."""
    drops = run.of(DROPPED)
    if not drops:
        return None
    steps = sum(d.data["steps"] for d in drops if isinstance(d.data.get("steps"), int))
    spans = [
        (d.data["first_t"], d.data["last_t"])
        for d in drops
        if isinstance(d.data.get("first_t"), int) and isinstance(d.data.get("last_t"), int)
    ]
    touched = sum(
        1
        for request in run.requests
        if any(
            request.start_t <= last and (request.end_t is None or request.end_t >= first)
            for first, last in spans
        )
    )
    requests = f" of {touched} request(s)" if touched else ""
    return Notice(
        STEPS_ROTATED,
        f"{steps} older step(s){requests} of run {run.label} were rotated away to keep the trace "
        "within --max-size: their step times are not in the trace, so step-time findings cover "
        "the steps kept; every compile, recompile, graph break and request boundary is kept",
        "record with a larger --max-size (or --max-size none) to keep every step",
        run.label,
    )


def _with_shutdowns(trace: Trace, status: RecordingStatus) -> RecordingStatus:
    """A process stopped by its own shutdown handler (diag.evidence.endings) is how it ended: say
    so."""
    details = [d for run in trace.subject_runs if (d := shutdown_detail(run))]
    if not details:
        return status
    return dataclasses.replace(status, detail=f"{status.detail}; {'; '.join(details)}")


def _unfinished_notices(trace: Trace, run: RunData) -> list[Notice]:
    """What a process began and never ended (a request, a step, a compile): named."""
    running = trace.manifest.get("status") == STATUS_RUNNING
    return [
        Notice(
            UNFINISHED,
            message,
            "the request is still being served; analyze again when it ends"
            if running
            else "what these would have recorded at their end is missing (step time, the "
            "compile's result); a server that finishes or cancels its requests before it exits "
            "keeps them",
            run.label,
        )
        for message in unfinished_messages(run, running)
    ]


def _warmup_notice(run: RunData) -> list[Notice]:
    """Processes (ranks, workers) whose requests include no warmup: `--warmup-requests` counts
    per process, so each one is judged alone."""
    by_pid: dict[int, list[str]] = {}
    for request in run.requests:
        by_pid.setdefault(request.pid, []).append(request.phase)
    unwarmed = [pid for pid, phases in by_pid.items() if "warmup" not in phases]
    if not unwarmed:
        return []
    count = sum(len(by_pid[pid]) for pid in unwarmed)
    where = (
        f" (process(es) {', '.join(map(str, unwarmed[:4]))} of {len(by_pid)})"
        if len(by_pid) > 1
        else ""
    )
    return [
        Notice(
            NO_WARMUP,
            f"no warmup identified in run {run.label}{where}: all {count} request(s) count as "
            "live, so a compile in a request the program meant as warmup reads as a live compile",
            HOW_WARMUP,
            run.label,
        )
    ]


def status_lines(visibility: Visibility) -> list[str]:
    """The head of a text rendering: the status, then each notice with how to show it."""
    # Each on its own line, whatever a trace's name in it holds (diag.trace.printable).
    lines = [f"recording: {one_line(visibility.status.detail)}"]
    for notice in visibility.notices:
        lines.append(f"NOTICE  {one_line(notice.message)}")
        lines.append(f"        how: {one_line(notice.how)}")
    for note in visibility.paused:
        lines.append(f"INFO    {one_line(note.message)}")
        lines.append(f"        how: {one_line(note.how)}")
    return lines


def not_seen_summary(visibility: Visibility) -> str:
    """What a "no findings" line must add when an all-clear is not possible."""
    kinds = {n.kind for n in visibility.notices}
    parts = []
    if visibility.status.status == STATUS_FAILED_TO_START:
        return "the command never started, nothing was recorded"
    if not visibility.status.complete:
        parts.append("the recording is incomplete")
    if kinds & {COLLECTORS_MISSING, NO_PROCESS}:
        parts.append("some processes were not recorded")
    if NO_STEPS in kinds:
        parts.append("no steps or requests were identified")
    elif NO_WARMUP in kinds:
        parts.append("no warmup was identified")
    if PROCESS_CUT_SHORT in kinds:
        parts.append("some processes ended early")
    if UNFINISHED in kinds:
        parts.append("some requests or compiles never finished")
    if COLLECTORS_PAUSED in kinds:
        parts.append("some requests were served while collection was paused")
    if RECORDING_TRUNCATED in kinds:
        parts.append("the recording stopped early")
    if STEPS_ROTATED in kinds:
        parts.append("older steps were rotated away")
    if PROFILE_SKIPPED in kinds:
        parts.append("some profiler windows were not written")
    if STEPS_INFERRED in kinds:
        parts.append("step and request boundaries were inferred")
    return "; ".join(parts) or "see the notices above"
