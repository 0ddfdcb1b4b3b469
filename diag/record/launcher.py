"""Run a command as a child with diag's collectors injected, and finish its manifest.

The child gets diag's bootstrap first on PYTHONPATH (a sitecustomize that chains to the user's
and starts the collectors on the first `import torch`) and the DIAG_* variables; its stdin,
stdout and stderr are the launcher's own, untouched. The launcher, not the child, finishes the
manifest, so a child killed by SIGKILL still leaves a readable trace marked `killed`, and a
command that cannot start leaves one marked `failed-to-start` (never `running`). Signals sent to
the launcher's pid are passed on to the child; a terminal's own Ctrl-C, which the child got
too, is not sent twice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from diag.errors import DiagError
from diag.record.output import default_output, prepare_output, start_trace
from diag.trace.format import (
    ENV_GUARD_CHECKS,
    ENV_MAX_SIZE,
    ENV_PROFILE,
    ENV_REQUEST_FN,
    ENV_RUN_LABEL,
    ENV_STANCE,
    ENV_STEP_FN,
    ENV_TRACE_DIR,
    ENV_WARMUP_FN,
    ENV_WARMUP_REQUESTS,
    STATUS_COMPLETE,
    STATUS_CRASHED,
    STATUS_FAILED_TO_START,
    STATUS_KILLED,
    STATUS_RUNNING,
    TORCH_TRACE_DIR,
    run_dir,
)
from diag.trace.manifest import ManifestWriter, new_manifest
from diag.trace.processes import boot_id, process_start_ticks
from diag.trace.reserve import free_all_reserves, free_reserve
from diag.trace.stops import run_truncation


def _bootstrap_dir() -> Path:
    """Where sitecustomize.py lives, for an installed or an editable diag."""
    spec = importlib.util.find_spec("diag.collectors")
    if spec is None or spec.origin is None:
        raise DiagError("diag is not installed correctly: diag.collectors is missing")
    return Path(spec.origin).resolve().parent / "bootstrap"


class OutputCapture(Protocol):
    """Where the child's stdout and stderr go when someone keeps a copy (diag bench): the
    streams are still passed on unchanged; `run_label` names the run whose output follows."""

    def popen_kwargs(self, trace_dir: Path, run_label: str) -> dict[str, Any]: ...

    def child_started(self) -> None: ...

    def child_ended(self) -> None: ...


@dataclass
class RecordOptions:
    command: list[str]
    output: Path | None = None
    force: bool = False
    baseline: str | None = None
    profile: str = "default"
    torch_trace: bool = False
    step_fn: str | None = None
    request_fn: str | None = None
    warmup_fn: str | None = None
    warmup_requests: int | None = None
    #: Check magi's captured guards on sampled calls (off under diag bench: the checks' own
    #: time would land in the very steps whose time is measured).
    guard_checks: bool = True
    #: None (the default): the child's stdout and stderr are diag's own, untouched.
    capture: OutputCapture | None = None
    #: Bytes of per-step events each process keeps (--max-size); 0: no bound.
    max_size: int = 0


class LaunchError(DiagError):
    """The command could not be started; the trace is finished as `failed-to-start`."""

    trace_dir: Path | None = None


@dataclass
class RunOutcome:
    label: str
    exit_code: int | None
    signal_name: str | None
    status: str
    duration_s: float
    #: Why the recording stopped before the program ended (`disk full`), or None.
    truncated: str | None = None

    @property
    def shell_code(self) -> int:
        """The exit code a shell would report: the child's code, or 128+N for signal N."""
        if self.signal_name is not None:
            return 128 + int(getattr(signal, self.signal_name, 0) or 0)
        return self.exit_code or 0


def child_environment(options: RecordOptions, trace_dir: Path, label: str) -> dict[str, str]:
    env = dict(os.environ)
    bootstrap = str(_bootstrap_dir())
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = bootstrap + (os.pathsep + existing if existing else "")
    env[ENV_TRACE_DIR] = str(trace_dir.resolve())
    env[ENV_RUN_LABEL] = label
    env[ENV_PROFILE] = options.profile
    env[ENV_STANCE] = "force_eager" if label == "eager" else "default"
    for name, value in (
        (ENV_STEP_FN, options.step_fn),
        (ENV_REQUEST_FN, options.request_fn),
        (ENV_WARMUP_FN, options.warmup_fn),
    ):
        if value:
            env[name] = value
        else:
            env.pop(name, None)
    if options.warmup_requests:
        env[ENV_WARMUP_REQUESTS] = str(options.warmup_requests)
    else:
        env.pop(ENV_WARMUP_REQUESTS, None)
    if options.guard_checks:
        env.pop(ENV_GUARD_CHECKS, None)
    else:
        env[ENV_GUARD_CHECKS] = "0"
    env[ENV_MAX_SIZE] = str(options.max_size)
    if options.torch_trace:
        env["TORCH_TRACE"] = str((run_dir(trace_dir, label) / TORCH_TRACE_DIR).resolve())
    return env


def _terminal_delivers_sigint() -> bool:
    """Ctrl-C in a terminal signals the whole foreground group, the child included."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:
        return False


#: Signals the launcher passes on to the child: a supervisor or `timeout` signals diag's pid.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: si_code of a signal the kernel sent: a terminal's Ctrl-C, Ctrl-\ or hang-up.
_SI_KERNEL = 0x80


def _already_delivered(si_code: int) -> bool:
    """A terminal's own signal went to the whole foreground group, the child included: sending
    it again would interrupt the child's clean-up. A signal sent to diag's pid (kill, timeout,
    a supervisor) reached diag alone and must be passed on."""
    return si_code == _SI_KERNEL and _terminal_delivers_sigint()


def _launch(
    command: list[str], env: dict[str, str], stdio: dict[str, Any] | None = None
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(command, env=env, **(stdio or {}))
    except FileNotFoundError:
        raise LaunchError(f"command not found: {command[0]}", exit_code=127) from None
    except PermissionError:
        raise LaunchError(f"command not executable: {command[0]}", exit_code=126) from None
    except OSError as exc:  # ENOEXEC (not a program), a bad interpreter line...
        raise LaunchError(
            f"cannot run {command[0]}: {exc.strerror or exc}", exit_code=126
        ) from None


def _wait_forwarding(child: subprocess.Popen[bytes]) -> int:
    """Wait for the child, passing on the signals diag receives meanwhile.

    The signals are blocked and taken with sigtimedwait, which tells who sent each one
    (`si_code`): a handler cannot tell a terminal's Ctrl-C, which the child got too, from
    `kill -INT <diag's pid>`, which only diag got. A signal diag was started with ignored stays
    ignored (the child inherited that too). SIGCHLD wakes the wait when the child ends."""
    if not hasattr(signal, "sigtimedwait"):  # not Linux: handlers, and the terminal guess
        return _wait_with_handlers(child)
    wanted = {sig for sig in FORWARDED if signal.getsignal(sig) is not signal.SIG_IGN}
    waited = wanted | {signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        while True:
            code = child.poll()
            if code is not None:
                return code
            info = signal.sigtimedwait(waited, 1.0)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            if not _already_delivered(info.si_code):
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(info.si_signo)
    finally:
        while signal.sigtimedwait(waited, 0) is not None:
            pass  # a signal that came as the child ended: it has no one left to reach
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _wait_with_handlers(child: subprocess.Popen[bytes]) -> int:
    def forward(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and _terminal_delivers_sigint():
            return  # most likely the terminal's Ctrl-C, which the child got itself
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_child(
    command: list[str],
    env: dict[str, str],
    label: str,
    capture: OutputCapture | None = None,
    trace_dir: Path | None = None,
) -> RunOutcome:
    started = time.monotonic()
    if capture is None or trace_dir is None:
        child = _launch(command, env)
        code = _wait_forwarding(child)
    else:
        try:
            child = _launch(command, env, capture.popen_kwargs(trace_dir, label))
            capture.child_started()
            code = _wait_forwarding(child)
        finally:
            capture.child_ended()
    duration = time.monotonic() - started
    if code < 0:
        name = signal.Signals(-code).name
        return RunOutcome(label, None, name, STATUS_KILLED, duration)
    return RunOutcome(label, code, None, STATUS_COMPLETE if code == 0 else STATUS_CRASHED, duration)


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def record(options: RecordOptions) -> tuple[Path, list[RunOutcome]]:
    """Run the command (and its eager baseline if asked), writing the trace directory.

    Once the program has started, nothing here raises for a write that failed: the manifest is
    finished as far as the disk allows (ManifestWriter), and the program's exit code stands."""
    if not options.command:
        raise DiagError("no command to record: put it after --, e.g. diag record -- python app.py")
    trace_dir = options.output or default_output(options.command)
    prepare_output(trace_dir, options.force)
    manifest = new_manifest(
        options.command,
        {
            "profile": options.profile,
            "baseline": options.baseline,
            "torch_trace": options.torch_trace,
            "step_fn": options.step_fn,
            "request_fn": options.request_fn,
            "warmup_fn": options.warmup_fn,
            "warmup_requests": options.warmup_requests,
            "max_size": options.max_size or None,
        },
    )
    manifest["started"] = _iso_now()
    # Lets a reader tell "still recording" from "the launcher died", and a later process that
    # got the same pid from the launcher (docs/FORMAT.md).
    manifest["launcher_pid"] = os.getpid()
    manifest["launcher_start_ticks"] = process_start_ticks(os.getpid())
    manifest["host"]["boot_id"] = boot_id()
    reserve = start_trace(trace_dir, manifest)
    writer = ManifestWriter(trace_dir, manifest)
    labels = ["compiled"] + (["eager"] if options.baseline == "eager" else [])
    outcomes: list[RunOutcome] = []
    for label in labels:
        with contextlib.suppress(OSError):  # the collectors make it too, or say why they could not
            run_dir(trace_dir, label).mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {
            "label": label,
            "stance": "force_eager" if label == "eager" else "default",
            "started": _iso_now(),
            "status": STATUS_RUNNING,
        }
        manifest["runs"].append(entry)
        writer.write()
        try:
            outcome = run_child(
                options.command,
                child_environment(options, trace_dir, label),
                label,
                options.capture,
                trace_dir,
            )
        except LaunchError as exc:
            free_reserve(reserve)
            _finish_failed_launch(writer, manifest, entry, exc)
            exc.trace_dir = trace_dir
            raise
        entry.update(
            ended=_iso_now(),
            status=outcome.status,
            exit_code=outcome.exit_code,
            signal=outcome.signal_name,
            duration_s=round(outcome.duration_s, 3),
        )
        truncated = run_truncation(run_dir(trace_dir, label))
        if truncated is not None:
            entry["truncated"] = truncated
            outcome.truncated = str(truncated.get("reason") or "a write failed")
        outcomes.append(outcome)
        writer.write()
        if outcome.status != STATUS_COMPLETE or outcome.truncated is not None:
            break  # no baseline of a run that failed, nor onto a disk that is full
    manifest["status"] = outcomes[0].status if len(outcomes) == 1 else _overall(outcomes)
    manifest["ended"] = _iso_now()
    from diag.record.summary import process_versions

    with contextlib.suppress(OSError):  # an unreadable event file: the versions stay unknown
        manifest["versions"] = process_versions(trace_dir)
    free_all_reserves(trace_dir)
    writer.write(final=True)
    return trace_dir, outcomes


def _finish_failed_launch(
    writer: ManifestWriter, manifest: dict[str, Any], entry: dict[str, Any], error: LaunchError
) -> None:
    """Nothing ran: the trace says so (`failed-to-start`) rather than staying `running`."""
    entry.update(
        ended=_iso_now(),
        status=STATUS_FAILED_TO_START,
        exit_code=error.exit_code,
        signal=None,
        duration_s=0.0,
        error=str(error),
    )
    manifest["status"] = STATUS_FAILED_TO_START
    manifest["ended"] = entry["ended"]
    writer.write(final=True)


def _overall(outcomes: list[RunOutcome]) -> str:
    for status in (STATUS_KILLED, STATUS_CRASHED):
        if any(o.status == status for o in outcomes):
            return status
    return STATUS_COMPLETE
