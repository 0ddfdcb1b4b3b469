"""A quick count of what a recorded run holds, for the end of `diag record`.

Reads the event files line by line (msgspec and the standard library): no pandas, no torch. A
truncated last line (a process killed mid-write) is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.trace import schema as ev
from diag.trace.confine import (
    OutsideTrace,
    checked_file,
)
from diag.trace.format import EVENTS_FILE, RUNS_DIR, process_event_files
from diag.trace.lines import Tally, Unknown, read_events, read_notes
from diag.trace.printable import printable


@dataclass
class RunSummary:
    label: str
    processes: int = 0
    adapters: set[str] = field(default_factory=set)
    requests: dict[str, int] = field(default_factory=lambda: {"warmup": 0, "live": 0})
    steps: dict[str, int] = field(default_factory=lambda: {"warmup": 0, "live": 0})
    compiles: int = 0
    live_compiles: int = 0
    live_recompiles: int = 0
    #: Live compiles that began and never ended (the process stopped inside them).
    live_cut_off: int = 0
    limit_hits: int = 0
    graph_breaks: int = 0
    profile_windows: int = 0
    #: Time windows' stop and export held the program's thread (profile_window_end.export_s):
    #: between steps, so in no step's time, but the program waited for it.
    windows_paused_s: float = 0.0
    #: diag's own work at step ends (process_end): total seconds, longest, steps ended.
    step_end_work_s: float = 0.0
    step_end_work_max_s: float = 0.0
    steps_ended: int = 0
    windows_paused_max_s: float = 0.0
    #: Why each window that was not written was skipped (profile_window_skipped).
    windows_skipped: list[str] = field(default_factory=list)
    collector_errors: int = 0
    #: Steps whose events --max-size rotated away (steps_dropped events).
    steps_dropped: int = 0
    magi_compile: bool = False
    magi_compiles: int = 0  # magi_compile_end events: diag saw magi's own compiles
    magi_guard_failures: int = 0
    bootstrap_errors: list[str] = field(default_factory=list)
    #: One per process that served requests: (rank, live requests, live steps, warmup
    #: requests, warmup steps); the rank is None outside torchrun.
    served: list[tuple[int | None, int, int, int, int]] = field(default_factory=list)
    #: Processes that ran no model: a launcher (torchrun's agent, the parent of the ranks) or a
    #: helper; (pid, what it is).
    helpers: list[tuple[int, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        adapter = ", ".join(sorted(self.adapters)) or "none (no steps reported)"
        text = [
            f"run {self.label}: {self._processes_text()}, adapter: {adapter}",
            f"  {self._requests_text()}",
            f"  {self.compiles} compile(s); {self._live_compiles_text()}; "
            f"{self.graph_breaks} graph break(s); {self.profile_windows} profile window(s)"
            + self._skipped_text(),
        ]
        text.extend(self._not_seen())
        if self.windows_paused_s:
            text.append(
                f"  diag's profile windows paused the program {self.windows_paused_s:.3f} s in "
                f"all (longest {self.windows_paused_max_s:.3f} s), between steps: in no step's "
                "time"
            )
        if self.steps_ended:
            text.append(
                f"  diag's work at step ends held the program {self.step_end_work_s * 1e3:.1f} "
                f"ms over {self.steps_ended} step(s) "
                f"({self.step_end_work_s / self.steps_ended * 1e6:.0f} us a step, longest "
                f"{self.step_end_work_max_s * 1e3:.2f} ms), between steps"
            )
        if self.magi_compile and self.magi_compiles:
            text.append(
                f"  magi_compile in use: {self.magi_compiles} magi compile(s) recorded, "
                f"{self.magi_guard_failures} guard check(s) failed (see magi-compile)"
            )
        elif self.magi_compile:
            text.append("  magi_compile in use: its recompiles are invisible to Dynamo's logs")
        if self.steps_dropped:
            text.append(
                f"  {self.steps_dropped} older step(s) rotated away to keep --max-size (every "
                "compile, guard failure and request boundary is kept)"
            )
        if self.collector_errors:
            text.append(f"  {self.collector_errors} collector error(s): see collector_error events")
        text.extend(f"  bootstrap error: {line}" for line in self.bootstrap_errors[:3])
        return [printable(line, one_line=True) for line in text]

    def _skipped_text(self) -> str:
        if not self.windows_skipped:
            return ""
        return f" ({len(self.windows_skipped)} skipped: {self.windows_skipped[0].split(':')[0]})"

    def _processes_text(self) -> str:
        """`3 process(es): ranks 0 and 1, and torchrun's launcher (pid 3505, the parent of the
        ranks; it ran no model)`: what each process was, when there are several kinds."""
        text = f"{self.processes} process(es)"
        ranks = sorted(r for r, *_ in self.served if r is not None)
        parts = [f"ranks {_join([str(r) for r in ranks])}"] if len(ranks) > 1 else []
        parts += [f"{what}; it ran no model)" for pid, what in self.helpers]
        return text + (": " + ", and ".join(parts) if parts else "")

    def _requests_text(self) -> str:
        """Requests per rank when every rank served the same (each rank serves every request),
        else the totals."""
        counts = {tuple(row[1:]) for row in self.served}
        ranked = len(self.served) > 1 and all(r is not None for r, *_ in self.served)
        if ranked and len(counts) == 1:
            live, live_steps, warm, warm_steps = next(iter(counts))
            return (
                f"{live} live request(s), {live_steps} live step(s) on each of "
                f"{len(self.served)} ranks; warmup {warm} request(s), {warm_steps} step(s) on each"
            )
        text = (
            f"{self.requests['live']} live request(s), {self.steps['live']} live step(s); "
            f"warmup {self.requests['warmup']} request(s), {self.steps['warmup']} step(s)"
        )
        if ranked:
            text += (
                " in all ("
                + ", ".join(
                    f"rank {r}: {live} live" for r, live, *_ in sorted(self.served, key=_rank_key)
                )
                + ")"
            )
        return text

    def _live_compiles_text(self) -> str:
        cut = f" ({self.live_cut_off} cut off: never ended)" if self.live_cut_off else ""
        counts = (
            f"{self.live_compiles} compile(s){cut}, {self.live_recompiles} recompile(s), "
            f"{self.limit_hits} recompile-limit hit(s)"
        )
        if not self.processes or not any(self.requests.values()):
            return f"{self.limit_hits} recompile-limit hit(s); live traffic not identified"
        if not self.requests["warmup"]:
            return f"in requests (no warmup identified): {counts}"
        return f"after warmup: {counts}"

    def _not_seen(self) -> list[str]:
        """What diag could not see in this run, and how to show it (diag.evidence.status has the
        rest)."""
        from diag.evidence.status import HOW_STEPS, HOW_WARMUP

        if not self.processes:
            if self.bootstrap_errors:
                return ["  NOT RECORDED: torch ran without diag's collectors (see the error below)"]
            return [
                "  NOT RECORDED: no process of this run imported torch under diag's bootstrap, "
                "so nothing it compiled was seen"
            ]
        if self.bootstrap_errors:
            return [
                f"  NOT RECORDED: {len(self.bootstrap_errors)} process(es) ran torch without "
                "diag's collectors (bootstrap error below)"
            ]
        if not any(self.requests.values()):
            return [
                "  no steps or requests identified: diag cannot tell warmup from live traffic; "
                + HOW_STEPS
            ]
        if not self.requests["warmup"]:
            return ["  no warmup identified: every request counts as live; " + HOW_WARMUP]
        return []


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _rank_key(row: tuple[int | None, int, int, int, int]) -> int:
    return row[0] if row[0] is not None else -1


def _helper_name(pid: int, argv: object, parent_of_ranks: bool) -> str:
    """What a process that ran no model was, from its command line."""
    program = Path(str(argv[0])).name if isinstance(argv, list) and argv else "?"
    if program == "torchrun" or (
        isinstance(argv, list) and "torch.distributed.run" in [str(a) for a in argv[:3]]
    ):
        return f"torchrun's launcher (pid {pid}" + (
            ", the parent of the ranks" if parent_of_ranks else ""
        )
    return f"a helper process ({program}, pid {pid}"


def summarize_run(run_path: Path, root: Path | None = None) -> RunSummary:
    summary = RunSummary(run_path.name)
    root = root or run_path.parent.parent
    summary.bootstrap_errors = read_notes(run_path, root)
    starts: dict[int, ev.ProcessStart] = {}  # pid -> its process_start
    idle: list[int] = []  # pids that served no request
    for events_path in sorted(run_path.glob(f"*/{EVENTS_FILE}")):
        summary.processes += 1
        before = (dict(summary.requests), dict(summary.steps))
        start: ev.ProcessStart | None = None
        live_starts: set[tuple[object, object]] = set()  # live compiles begun, not yet ended
        for event in _events(root, events_path):
            phase = "warmup" if getattr(event, "phase", None) == "warmup" else "live"
            live = (
                getattr(event, "phase", None) == "live"
                and getattr(event, "request_id", None) is not None
            )
            if isinstance(event, ev.StepEnd):
                summary.steps[phase] += 1
            elif isinstance(event, ev.ProcessStart):
                start = event
            elif isinstance(event, ev.Adapter):
                summary.adapters.add(str(event.name))
            elif isinstance(event, ev.RequestStart):
                summary.requests[phase] += 1
            elif isinstance(event, ev.CompileStart):
                if live:
                    live_starts.add((event.epoch, event.compile_id))
            elif isinstance(event, ev.CompileEnd):
                summary.compiles += 1
                summary.live_compiles += live
                live_starts.discard((event.epoch, event.compile_id))
            elif isinstance(event, ev.Recompile):
                summary.live_recompiles += live
            elif isinstance(event, ev.RecompileLimit):
                summary.limit_hits += 1
            elif isinstance(event, ev.GraphBreak):
                summary.graph_breaks += 1
            elif isinstance(event, ev.ProfileWindowEnd):
                summary.profile_windows += 1
                paused = event.export_s or 0.0
                summary.windows_paused_s += paused
                summary.windows_paused_max_s = max(summary.windows_paused_max_s, paused)
            elif isinstance(event, ev.ProcessEnd) and event.steps_ended:
                summary.steps_ended += event.steps_ended
                summary.step_end_work_s += event.step_end_work_s or 0.0
                summary.step_end_work_max_s = max(
                    summary.step_end_work_max_s, event.step_end_work_max_s or 0.0
                )
            elif isinstance(event, ev.MagiCompile):
                summary.magi_compile = True
            elif isinstance(event, ev.MagiCompileEnd):
                summary.magi_compiles += 1
            elif isinstance(event, ev.MagiGuardCheck) and not event.ok:
                summary.magi_guard_failures += 1
            elif isinstance(event, ev.CollectorError):
                summary.collector_errors += 1
            elif isinstance(event, Unknown) and event.kind == "profile_window_skipped":
                summary.windows_skipped.append(str(event.data.get("reason") or "?"))
            elif isinstance(event, Unknown) and event.kind == "steps_dropped":
                dropped = event.data.get("steps")
                summary.steps_dropped += dropped if isinstance(dropped, int) else 0
        summary.live_compiles += len(live_starts)
        summary.live_cut_off += len(live_starts)
        pid = start.pid if start is not None else None
        if start is not None:
            starts[start.pid] = start
        requests = {k: summary.requests[k] - before[0][k] for k in summary.requests}
        steps = {k: summary.steps[k] - before[1][k] for k in summary.steps}
        if any(requests.values()) or any(steps.values()) or pid is None:
            summary.served.append(
                (
                    start.rank if start is not None else None,
                    requests["live"],
                    steps["live"],
                    requests["warmup"],
                    steps["warmup"],
                )
            )
        else:
            idle.append(pid)
    parents = {s.ppid for pid, s in starts.items() if pid not in idle}
    spawned = {s.ppid for s in starts.values()}
    for pid in idle:
        start = starts[pid]
        # A process that ran no model is a helper only beside others (the launcher of the
        # ranks, a worker): a program alone that reported no steps is the program itself.
        if start.rank is None and len(starts) > 1 and (pid in spawned or not summary.served):
            summary.helpers.append((pid, _helper_name(pid, start.argv, pid in parents)))
    return summary


def _events(root: Path, path: Path) -> Iterator[ev.EventBase]:
    """The valid events of one event file inside the trace; nothing when it cannot be read."""
    try:
        checked_file(root, path, None, "event file")
        for file in process_event_files(path):
            for batch in read_events(file, Tally()):
                yield from batch
    except (OSError, OutsideTrace):
        return


def summarize(trace_dir: Path) -> list[RunSummary]:
    runs = trace_dir / RUNS_DIR
    return [summarize_run(p) for p in sorted(runs.iterdir()) if p.is_dir()] if runs.exists() else []


def process_versions(trace_dir: Path) -> dict[str, Any]:
    """Versions the child reported (python, torch, CUDA, triton, diag) and the GPU it used."""
    versions: dict[str, Any] = {}
    for events_path in sorted((trace_dir / RUNS_DIR).glob(f"*/*/{EVENTS_FILE}")):
        for event in _events(trace_dir, events_path):
            if isinstance(event, ev.ProcessStart) and not versions:
                versions.update(event.versions)
            elif isinstance(event, ev.ProcessEnd) and event.gpu:
                versions["gpu"] = event.gpu
        if versions.get("gpu"):
            break
    versions.setdefault("gpu", None)
    return versions
