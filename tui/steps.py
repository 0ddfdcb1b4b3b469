"""Steps: every step of every request, and a plot of step time with the compiles marked.

The plot follows the run of the highlighted row (the compiled run or its eager baseline).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from diag.trace.run import Compile, Event, RunData, Step

from .cells import field, lines, seconds, shape, size, text, yes
from .loader import TraceData
from .step_plot import PlotData, StepPlot
from .table_view import Column, Row, TableView


@dataclass
class StepInfo:
    run: str
    step: Step
    compiles: list[Compile]
    events: list[Event]
    process: str = ""  # `rank1` (or `proc0`) when the run has several processes


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


class StepsView(TableView):
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

    def compose_extra(self) -> ComposeResult:
        yield StepPlot(id="step-plot")

    def show(self, data: TraceData) -> None:
        rows: list[Row] = []
        for label, run in data.trace.runs.items():
            compiles, events = _by_step(run)
            for step in sorted(run.steps, key=lambda s: s.start_t):
                key = (step.pid, step.request_id, step.index)
                info = StepInfo(
                    label,
                    step,
                    compiles.get(key, []),
                    events.get(key, []),
                    run.process_tag(step.pid),
                )
                rows.append(self._row(info))
        self.set_rows(rows, empty="no steps: the program reported no step boundaries")
        if not rows:
            self.query_one(StepPlot).show(PlotData(title="step time", notes=("no steps",)))

    def _row(self, info: StepInfo) -> Row:
        step = info.step
        style = "bold" if info.compiles else ""
        return Row(
            key=f"{info.run}|{step.pid}|{step.request_id}|{step.index}",
            cells=[
                text(f"{info.run} {info.process}".strip()),
                text(step.request_id),
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
        step = info.step
        parts: list[Text | str] = [
            Text(f"{info.run} run, request {step.request_id}, step {step.index}", style="bold"),
            field("phase", step.phase),
            field("shape", shape(step.shape) or "unknown"),
            field("wall", _times(step)),
        ]
        if step.memory:
            parts.append(
                field(
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
        for event in info.events:
            duration = event.data.get("duration_s")
            parts.append(
                f"{event.kind}" + (f" ({seconds(duration)})" if isinstance(duration, float) else "")
            )
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
        infos = [r for r in self.rows if r.payload.run == run]
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
