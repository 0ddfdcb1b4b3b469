"""Steps: every step of every request, and a plot of step time with the compiles marked.

The plot follows the run of the highlighted row (the compiled run or its eager baseline).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from textual.app import ComposeResult

from diag.evidence.request_names import request_label, request_name
from diag.findings.rankset import ranks_text
from diag.perfetto.hint import step_line
from diag.trace.run import Compile, Event, RunData, Step

from .cells import Text, lines, seconds, shape, size, text, yes
from .cells import field as labelled
from .events import describe
from .loader import TraceData
from .rank_groups import RankGroupedView, ranks_of
from .step_plot import PlotData, StepPlot
from .table_view import Column, Row


@dataclass
class StepInfo:
    run: str
    step: Step
    compiles: list[Compile]
    events: list[Event]
    process: str = ""  # `rank1` (or `proc0`) when the run has several processes
    rank: int | None = None
    #: A group's row (many ranks, one step): the ranks' own steps; `step` is the slowest's.
    members: list[StepInfo] = field(default_factory=list)
    #: The request as every view names it: `r5`, or `r5 (task ...)` (diag.evidence.request_names),
    #: and
    #: the program's own name alone (filtered as `task:`).
    request: str = ""
    task: str = ""


def _by_step(
    run: RunData,
) -> tuple[dict[tuple[int, str, int], list[Compile]], dict[tuple[int, str, int], list[Event]]]:
    compiles: dict[tuple[int, str, int], list[Compile]] = defaultdict(list)
    for item in run.compiles:
        if item.request_id is not None and item.step is not None:
            compiles[(item.pid, item.request_id, item.step)].append(item)
    events: dict[tuple[int, str, int], list[Event]] = defaultdict(list)
    for event in run.events:
        _, request_id, step = event.position
        if isinstance(request_id, str) and isinstance(step, int):
            events[(event.pid, request_id, step)].append(event)
    return compiles, events


def _compile_cell(compiles: list[Compile]) -> str:
    if not compiles:
        return ""
    return f"{len(compiles)} · {seconds(sum(c.duration_s or 0.0 for c in compiles))}"


class StepsView(RankGroupedView):
    COLUMNS = (
        Column("run"),
        Column("request"),
        Column("phase", 6),
        Column("step", 4),
        Column("shape"),
        Column("wall", 7),
        Column("gpu", 7),
        Column("compiles"),
        Column("profiled", 8),
    )
    ALIASES = {
        "run": "run",
        "request": "request",
        "req": "request",
        "task": "task",
        "phase": "phase",
        "step": "step",
        "shape": "shape",
        "profiled": "profiled",
        "compiles": "compiles",
        "frame": "frame",
        "rank": "process",
        "process": "process",
    }
    NOUN = "steps"
    #: The trace on screen: the detail names the command that exports its timeline.
    _trace_path: Path | None = None

    def compose_extra(self) -> ComposeResult:
        yield StepPlot(id="step-plot")

    def show(self, data: TraceData) -> None:
        self._trace_path = data.trace.path
        rows: list[Row] = []
        groups: list[str | None] = []
        for label, run in data.trace.runs.items():
            compiles, events = _by_step(run)
            ranks = ranks_of(run)
            for step in sorted(run.steps, key=lambda s: s.start_t):
                key = (step.pid, step.request_id, step.index)
                info = StepInfo(
                    label,
                    step,
                    compiles.get(key, []),
                    events.get(key, []),
                    run.process_tag(step.pid),
                    ranks.get(step.pid),
                    request=request_name(run, step.pid, step.request_id),
                    task=request_label(run, step.pid, step.request_id) or "",
                )
                rows.append(self._row(info))
                grouped = ranks and info.rank is not None
                groups.append(f"{label}|{step.request_id}|{step.index}" if grouped else None)
        self.set_grouped(
            rows, groups, self._group_row, "no steps: the program reported no step boundaries"
        )
        if not rows:
            self.query_one(StepPlot).show(PlotData(title="step time", notes=("no steps",)))

    def _group_row(self, key: str, members: list[Row]) -> Row:
        """One step of many ranks: the slowest rank's times, every rank's compiles."""
        infos: list[StepInfo] = [m.payload for m in members]
        slowest = max(infos, key=lambda i: i.step.wall_s or 0.0)
        tag = ranks_text(i.rank for i in infos if i.rank is not None)
        info = StepInfo(
            slowest.run,
            slowest.step,
            [c for i in infos for c in i.compiles],
            [e for i in infos for e in i.events],
            tag,
            members=infos,
            request=slowest.request,
            task=slowest.task,
        )
        row = self._row(info)
        compiling = [i for i in infos if i.compiles]
        cells = list(row.cells)
        if compiling:
            # The ranks compiled side by side: the time is the slowest rank's, not their sum.
            longest = max(sum(c.duration_s or 0.0 for c in i.compiles) for i in compiling)
            who = ranks_text(i.rank for i in compiling if i.rank is not None)
            cells[7] = text(f"{len(info.compiles)} · {seconds(longest)} on {who}", "red")
        fields = dict(row.fields)
        fields["process"] = ",".join(i.process for i in infos)
        return Row(f"group|{key}", cells, fields, info, row.style)

    def _row(self, info: StepInfo) -> Row:
        step = info.step
        style = "bold" if info.compiles else ""
        return Row(
            key=f"{info.run}|{step.pid}|{step.request_id}|{step.index}",
            cells=[
                text(f"{info.run} {info.process}".strip()),
                text(info.request or step.request_id),
                text(step.phase),
                text(step.index),
                text(shape(step.shape)),
                text(seconds(step.wall_s)),
                text(seconds(step.gpu_s)),
                text(_compile_cell(info.compiles), "red" if info.compiles else ""),
                text(yes(step.profiled)),
            ],
            fields={
                "run": info.run,
                "request": step.request_id,
                "task": info.task,
                "phase": step.phase,
                "step": str(step.index),
                "shape": shape(step.shape),
                "profiled": yes(step.profiled) or "no",
                "compiles": str(len(info.compiles)),
                "frame": ",".join(c.frame.name for c in info.compiles if c.frame),
                "process": info.process,
            },
            payload=info,
            style=style,
        )

    def detail(self, row: Row) -> Text:
        info: StepInfo = row.payload
        if info.members:
            return _group_detail(info)
        step = info.step
        parts: list[Text | str] = [
            Text(
                f"{info.run} run, request {info.request or step.request_id}, step {step.index}",
                style="bold",
            ),
            labelled("phase", step.phase),
            labelled("shape", shape(step.shape) or "unknown"),
            labelled("wall", _times(step)),
        ]
        if step.memory:
            parts.append(
                labelled(
                    "memory",
                    "   ".join(
                        f"{k} {size(v)}" for k, v in step.memory.items() if isinstance(v, int)
                    ),
                )
            )
        if step.profiled:
            parts.append("profiled: this step ran under torch.profiler (Kineto window)")
        for item in info.compiles:
            frame = item.frame.name if item.frame else "?"
            line = Text(f"compile {item.compile_id} of ")
            line.append(frame)
            line.append(f": {seconds(item.duration_s)}, {item.result}")
            for guard in item.guards[:3]:
                line.append(f"\n    failing guard ({guard.kind}): ")
                line.append(guard.raw or str(guard.source))
            if len(item.guards) > 3:
                line.append(f"\n    ... {len(item.guards) - 3} more on the Compiles screen")
            parts.append(line)
        parts.extend(Text(describe(event)) for event in info.events)
        if self._trace_path is not None:
            hint = step_line(self._trace_path, step.request_id, step.index)
            parts.append(Text(hint, style="dim"))
        return lines(*parts)

    def highlighted(self, row: Row | None) -> None:
        plot = self.query_one(StepPlot)
        if row is None:
            if not self.rows:
                return
            row = self.rows[0]
            selected = None
        else:
            selected = row.key
        run = row.payload.run
        # One point per step: a group's is its slowest rank's (what a collective waits for);
        # a rank's row of an open group selects its group's point.
        infos = [r for r in self.rows if r.payload.run == run and self.head_key(r) == r.key]
        selected = None if selected is None else self.head_key(row)
        values = [r.payload.step.wall_s or 0.0 for r in infos]
        plot.show(
            PlotData(
                title=f"wall time per step, {run} run",
                values=values,
                marks=[bool(r.payload.compiles) for r in infos],
                dim=[r.payload.step.phase != "live" for r in infos],
                selected=next((i for i, r in enumerate(infos) if r.key == selected), None),
            )
        )


def _times(step: Step) -> str:
    """Wall time, and GPU time where the step used a GPU (a CPU step has none to show)."""
    wall = seconds(step.wall_s) or "?"
    return wall if step.gpu_s is None else f"{wall}   gpu: {seconds(step.gpu_s)}"


def _group_detail(info: StepInfo) -> Text:
    """A step on many ranks: who ran it, the spread of their times, who compiled in it."""
    step = info.step
    walls = [(m.step.wall_s, m.rank) for m in info.members if m.step.wall_s is not None]
    parts: list[Text | str] = [
        Text(
            f"{info.run} run, request {step.request_id}, step {step.index}, on {info.process}",
            style="bold",
        ),
        labelled("phase", step.phase),
        labelled("shape", shape(step.shape) or "unknown"),
    ]
    if walls:
        slow = max(walls, key=lambda w: w[0] or 0.0)
        fast = min(walls, key=lambda w: w[0] or 0.0)
        median = statistics.median(w for w, _ in walls if w is not None)
        parts.append(
            labelled(
                "wall",
                f"slowest rank {slow[1]} {seconds(slow[0])}, median {seconds(median)}, "
                f"fastest rank {fast[1]} {seconds(fast[0])}",
            )
        )
    compiling = [m for m in info.members if m.compiles]
    if 0 < len(compiling) <= 4:
        for member in compiling:
            for item in member.compiles:
                line = Text(f"rank {member.rank}: compile {item.compile_id} of ")
                line.append(item.frame.name if item.frame else "?")
                line.append(f": {seconds(item.duration_s)}, {item.result}")
                parts.append(line)
    elif compiling:  # many ranks: per frame, how many compiled and the spread of their time
        frames: dict[str, list[tuple[float, int | None]]] = {}
        for member in compiling:
            for item in member.compiles:
                name = item.frame.name if item.frame else "?"
                frames.setdefault(name, []).append((item.duration_s or 0.0, member.rank))
        for name, times in frames.items():
            slow = max(times, key=lambda t: t[0])
            who = ranks_text(r for _, r in times if r is not None)
            line = Text(f"{who}: {len(times)} compile(s) of ")
            line.append(name)
            line.append(
                f", median {seconds(statistics.median(t for t, _ in times))}, "
                f"slowest rank {slow[1]} {seconds(slow[0])}"
            )
            parts.append(line)
    if compiling:
        quiet = [m.rank for m in info.members if not m.compiles and m.rank is not None]
        if quiet:
            parts.append(f"{ranks_text(quiet)} compiled nothing in this step")
    parts.append("Enter: show or hide the ranks' own rows")
    return lines(*parts)
