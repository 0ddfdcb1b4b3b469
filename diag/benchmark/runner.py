"""Run a bench: every configuration's trials interleaved (A B A B ...), each under `diag record`.

Interleaving spreads slow drifts of the machine (another job, thermal state, a filling cache)
over all configurations instead of handing them to whichever ran last. Each trial is a full
`diag record` (diag.record.launcher.record, in process) with the program's output passed through
and a
copy kept in its trace (diag.benchmark.capture). Reused recordings are copied in (events,
manifest, captured output; no Kineto windows) so the bench directory stands alone.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from diag.benchmark.capture import TeeOutput
from diag.benchmark.layout import (
    STATUS_COMPLETE,
    STATUS_INTERRUPTED,
    BenchManifest,
    ConfigEntry,
    TrialEntry,
    now_iso,
)
from diag.benchmark.spec import ConfigSpec
from diag.errors import DiagError
from diag.trace.format import EVENTS_FILE, MANIFEST, RUNS_DIR

#: A trial ended by one of these was stopped by the person or a supervisor, not by its own fault.
_STOPPING = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")


def prepare_dir(path: Path, force: bool) -> None:
    """Refuse to overwrite; with --force replace only an earlier bench or an empty folder."""
    if path.exists():
        if not force:
            raise DiagError(f"{path} already exists; use --force to replace it")
        if not path.is_dir():
            raise DiagError(f"{path} exists and is not a folder")
        if any(path.iterdir()) and not (path / "bench.json").exists():
            raise DiagError(f"{path} exists and is not a diag bench directory; not replacing it")
        shutil.rmtree(path)
    path.mkdir(parents=True)


def plan(specs: list[ConfigSpec], trials: int, out: Path) -> BenchManifest:
    """The run order: trial 1 of every configuration, then trial 2 of every one, ..."""
    manifest = BenchManifest(
        path=out,
        configs=[ConfigEntry(s.name, list(s.command) if s.command else None) for s in specs],
        trials=trials,
        started=now_iso(),
    )
    order = 0
    rounds = max([trials] + [len(s.traces) for s in specs])
    for number in range(1, rounds + 1):
        for spec in specs:
            if spec.command is None and number > len(spec.traces):
                continue
            if spec.command is not None and number > trials:
                continue
            order += 1
            reused = str(spec.traces[number - 1].resolve()) if spec.command is None else None
            manifest.entries.append(
                TrialEntry(spec.name, number, f"{spec.name}-{number}", order, reused_from=reused)
            )
    return manifest


def run_bench(
    manifest: BenchManifest, profile: str, quiet: bool, warmup_requests: int | None = None
) -> BenchManifest:
    """Record or copy every trial in order; bench.json is rewritten after each."""
    from diag.record.launcher import LaunchError, RecordOptions, record

    commands = {c.name: c.command for c in manifest.configs}
    manifest.write()
    try:
        for entry in manifest.entries:
            target = manifest.trace_path(entry)
            command = commands[entry.config]
            if command is None:
                assert entry.reused_from is not None
                _copy_trace(Path(entry.reused_from), target)
                _finish_entry(entry, target)
                manifest.write()
                continue
            if not quiet:
                print(
                    f"diag bench: {entry.config} trial {entry.trial} "
                    f"({entry.order}/{len(manifest.entries)})",
                    file=sys.stderr,
                    flush=True,
                )
            options = RecordOptions(
                command=list(command),
                output=target,
                profile=profile,
                warmup_requests=warmup_requests,
                capture=TeeOutput(),
                # magi's sampled guard checks cost ~0.25 ms a call in steps 0-1 of each
                # request on an H200: measured time must not carry diag's own work.
                guard_checks=False,
            )
            try:
                _, outcomes = record(options)
            except LaunchError as exc:
                entry.status = "failed-to-start"
                entry.exit_code = exc.exit_code
                manifest.status = STATUS_INTERRUPTED
                manifest.ended = now_iso()
                manifest.write()
                raise DiagError(
                    f"configuration {entry.config}: {exc.message} (nothing ran)", exc.exit_code
                ) from None
            outcome = outcomes[0]
            entry.status = outcome.status
            entry.exit_code = outcome.shell_code
            entry.duration_s = round(outcome.duration_s, 3)
            manifest.write()
            if outcome.signal_name in _STOPPING:
                raise KeyboardInterrupt  # Ctrl-C or a supervisor stopped the trial: stop here
    except KeyboardInterrupt:
        manifest.status = STATUS_INTERRUPTED
        manifest.ended = now_iso()
        manifest.write()
        raise
    manifest.status = STATUS_COMPLETE
    manifest.ended = now_iso()
    manifest.write()
    return manifest


def _finish_entry(entry: TrialEntry, trace: Path) -> None:
    from diag.trace.load import read_manifest

    data = read_manifest(trace)
    entry.status = str(data.get("status") or "unknown")
    runs = data.get("runs")
    first = runs[0] if isinstance(runs, list) and runs and isinstance(runs[0], dict) else {}
    code = first.get("exit_code")
    entry.exit_code = code if isinstance(code, int) else None
    duration = first.get("duration_s")
    entry.duration_s = float(duration) if isinstance(duration, (int, float)) else None


def _copy_trace(source: Path, target: Path) -> None:
    """The manifest, each run's event files and captured output: what the tables read."""
    try:
        target.mkdir(parents=True)
        shutil.copy2(source / MANIFEST, target / MANIFEST)
        runs = source / RUNS_DIR
        for item in sorted(runs.rglob("*")) if runs.is_dir() else []:
            if item.is_symlink() or not item.is_file():
                continue
            relative = item.relative_to(source)
            if item.name in (EVENTS_FILE, "stdout.log", "stderr.log", "bootstrap-errors.txt"):
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(item, target / relative)
    except OSError as exc:
        raise DiagError(f"{source}: cannot copy the recording into the bench: {exc}") from None
