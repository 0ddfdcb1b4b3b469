"""A compact bar plot of step time across a run, with the steps that compiled marked.

Drawn with unicode eighth blocks, so it needs neither colour nor a plotting library: compile
steps carry a `▲` under their bar and the selected step is shown in reverse video (both survive
NO_COLOR). A run with a 50x compile spike uses a log scale, or the steady steps would be flat.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from textual.widget import Widget

from .cells import Text, seconds

BLOCKS = " ▁▂▃▄▅▆▇█"
MARK = "▲"
GUTTER = 8
LOG_RATIO = 20.0


@dataclass(frozen=True)
class PlotData:
    title: str = ""
    values: Sequence[float] = ()  # seconds, one per step in time order
    marks: Sequence[bool] = ()  # the step compiled
    dim: Sequence[bool] = ()  # warmup steps, drawn dim
    selected: int | None = None
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class _Column:
    value: float
    mark: bool
    dim: bool
    selected: bool


def _columns(data: PlotData, width: int) -> tuple[list[_Column], int]:
    """Steps -> plot columns: one bar per step, or the max over a bucket when steps outnumber
    the columns. Returns the columns and how many cells each is drawn with."""
    count = len(data.values)
    if count == 0 or width <= 0:
        return [], 1
    bucket = max(1, math.ceil(count / width))
    columns = []
    for start in range(0, count, bucket):
        idx = range(start, min(start + bucket, count))
        columns.append(
            _Column(
                value=max(data.values[i] for i in idx),
                mark=any(i < len(data.marks) and data.marks[i] for i in idx),
                dim=all(i < len(data.dim) and data.dim[i] for i in idx),
                selected=data.selected is not None and data.selected in idx,
            )
        )
    cell = max(1, min(4, width // len(columns)))
    return columns, cell


def _scale(values: list[float]) -> tuple[float, float, bool]:
    positive = [v for v in values if v > 0]
    if not positive:
        return 0.0, 1.0, False
    low, high = min(positive), max(positive)
    use_log = high / low >= LOG_RATIO
    return low, high, use_log


def render_plot(data: PlotData, width: int, height: int) -> Text:
    """The plot as literal Text of `height` lines (title, bars, compile marks)."""
    rows = max(1, height - 2)
    columns, cell = _columns(data, width - GUTTER)
    low, high, use_log = _scale([c.value for c in columns])
    title = Text(data.title, style="bold")
    if columns:
        title.append(f"   {MARK} compiled in the step")
        if use_log:
            title.append("   log scale", style="italic")
        if cell == 1 and len(columns) < len(data.values):
            title.append(f"   max of {math.ceil(len(data.values) / len(columns))} steps per bar")
    out = Text(no_wrap=True, overflow="crop")
    out.append_text(title)
    if not columns:
        for note in data.notes[: rows + 1]:
            out.append("\n" + note)
        return out

    def fraction(value: float) -> float:
        if value <= 0:
            return 0.0
        if use_log:
            floor = low / 2
            return math.log(value / floor) / math.log(high / floor)
        return value / high

    eighths = [max(1, round(fraction(c.value) * rows * 8)) if c.value > 0 else 0 for c in columns]
    for r in range(rows):
        label = seconds(high) if r == 0 else (seconds(low) if r == rows - 1 else "")
        out.append("\n" + label.rjust(GUTTER - 1)[: GUTTER - 1] + " ", style="dim")
        level = (rows - 1 - r) * 8
        for column, total in zip(columns, eighths, strict=True):
            glyph = BLOCKS[min(8, max(0, total - level))]
            style = "reverse" if column.selected else ("red" if column.mark else "")
            if column.dim and not column.selected:
                style += " dim"
            out.append(glyph * (cell - 1 if cell > 1 else 1), style=style.strip())
            if cell > 1:
                out.append(" ")
    out.append("\n" + " " * GUTTER)
    for column in columns:
        mark = MARK if column.mark else " "
        out.append(mark * (cell - 1 if cell > 1 else 1), style="bold red" if column.mark else "")
        if cell > 1:
            out.append(" ")
    return out


class StepPlot(Widget):
    """Step wall time across one run; the Steps screen feeds it and moves its selection."""

    DEFAULT_CSS = """
    StepPlot { height: 8; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._data = PlotData(title="step time", notes=("loading...",))

    @property
    def data(self) -> PlotData:
        return self._data

    def show(self, data: PlotData) -> None:
        self._data = data
        self.refresh()

    def render(self) -> Text:
        return render_plot(self._data, self.size.width, self.size.height)
