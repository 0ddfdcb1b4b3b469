"""Run a command as a child with diag's collectors injected, and finish its manifest.

The child gets diag's bootstrap first on PYTHONPATH (a sitecustomize that chains to the user's
and starts the collectors on the first `import torch`) and the DIAG_* variables; its stdin,
stdout and stderr are the launcher's own, untouched. The launcher, not the child, finishes the
manifest, so a child killed by SIGKILL still leaves a readable trace marked `killed`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from diag.errors import DiagError
from diag.manifest import new_manifest, write_manifest
from diag.traceformat import (
    ENV_PROFILE,
    ENV_REQUEST_FN,
    ENV_RUN_LABEL,
    ENV_STANCE,
    ENV_STEP_FN,
    ENV_TRACE_DIR,
    ENV_WARMUP_FN,
    MANIFEST,
    STATUS_COMPLETE,
    STATUS_CRASHED,
    STATUS_KILLED,
    STATUS_RUNNING,
    TORCH_TRACE_DIR,
    run_dir,
    safe_name,
)


def _bootstrap_dir() -> Path:
    """Where sitecustomize.py lives, for an installed or an editable diag."""
    spec = importlib.util.find_spec("diag.collectors")
    if spec is None or spec.origin is None:
        raise DiagError("diag is not installed correctly: diag.collectors is missing")
    return Path(spec.origin).resolve().parent / "bootstrap"


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


@dataclass
class RunOutcome:
    label: str
    exit_code: int | None
    signal_name: str | None
    status: str
    duration_s: float

    @property
    def shell_code(self) -> int:
        """The exit code a shell would report: the child's code, or 128+N for signal N."""
        if self.signal_name is not None:
            return 128 + int(getattr(signal, self.signal_name, 0) or 0)
        return self.exit_code or 0


def program_name(command: list[str]) -> str:
    """A short name for the default output folder: the module of -m, the script, or argv[0]."""
    args = command[1:] if Path(command[0]).name.startswith("python") else command
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return safe_name(args[i + 1])
        if arg.endswith(".py"):
            return safe_name(Path(arg).stem)
    return safe_name(Path(command[0]).name)


def default_output(command: list[str]) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(f"diag-{program_name(command)}-{stamp}")


def prepare_output(path: Path, force: bool) -> None:
    """Refuse to overwrite; with --force replace only an earlier diag trace or an empty folder."""
    if path.exists():
        if not force:
            raise DiagError(f"{path} already exists; use --force to replace it")
        if not path.is_dir():
            raise DiagError(f"{path} exists and is not a folder")
        if any(path.iterdir()) and not (path / MANIFEST).exists():
            raise DiagError(f"{path} exists and is not a diag trace directory; not replacing it")
        shutil.rmtree(path)
    path.mkdir(parents=True)


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
    if options.torch_trace:
        env["TORCH_TRACE"] = str((run_dir(trace_dir, label) / TORCH_TRACE_DIR).resolve())
    return env


def _terminal_delivers_sigint() -> bool:
    """Ctrl-C in a terminal signals the whole foreground group, the child included."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:
        return False


def run_child(command: list[str], env: dict[str, str], label: str) -> RunOutcome:
    started = time.monotonic()
    try:
        child = subprocess.Popen(command, env=env)
    except FileNotFoundError:
        raise DiagError(f"command not found: {command[0]}", exit_code=127) from None
    except PermissionError:
        raise DiagError(f"command not executable: {command[0]}", exit_code=126) from None

    def forward(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and _terminal_delivers_sigint():
            return  # the child got this Ctrl-C itself; let it stop cleanly
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    previous = {sig: signal.signal(sig, forward) for sig in forwarded}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    duration = time.monotonic() - started
    if code < 0:
        name = signal.Signals(-code).name
        return RunOutcome(label, None, name, STATUS_KILLED, duration)
    return RunOutcome(label, code, None, STATUS_COMPLETE if code == 0 else STATUS_CRASHED, duration)


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def record(options: RecordOptions) -> tuple[Path, list[RunOutcome]]:
    """Run the command (and its eager baseline if asked), writing the trace directory."""
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
        },
    )
    manifest["started"] = _iso_now()
    write_manifest(trace_dir, manifest)
    labels = ["compiled"] + (["eager"] if options.baseline == "eager" else [])
    outcomes: list[RunOutcome] = []
    for label in labels:
        run_dir(trace_dir, label).mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {
            "label": label,
            "stance": "force_eager" if label == "eager" else "default",
            "started": _iso_now(),
            "status": STATUS_RUNNING,
        }
        manifest["runs"].append(entry)
        write_manifest(trace_dir, manifest)
        outcome = run_child(options.command, child_environment(options, trace_dir, label), label)
        entry.update(
            ended=_iso_now(),
            status=outcome.status,
            exit_code=outcome.exit_code,
            signal=outcome.signal_name,
            duration_s=round(outcome.duration_s, 3),
        )
        outcomes.append(outcome)
        write_manifest(trace_dir, manifest)
        if outcome.status != STATUS_COMPLETE:
            break  # no baseline of a run that failed
    manifest["status"] = outcomes[0].status if len(outcomes) == 1 else _overall(outcomes)
    manifest["ended"] = _iso_now()
    from diag.summary import process_versions

    manifest["versions"] = process_versions(trace_dir)
    write_manifest(trace_dir, manifest)
    return trace_dir, outcomes


def _overall(outcomes: list[RunOutcome]) -> str:
    for status in (STATUS_KILLED, STATUS_CRASHED):
        if any(o.status == status for o in outcomes):
            return status
    return STATUS_COMPLETE
