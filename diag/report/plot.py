"""What every figure shares: the size limits, the time axis, one layout, percentiles."""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from diag.trace.run import RunData

#: plotly ships no type information; a figure is a plotly.graph_objects.Figure.
Figure = Any


@dataclass(frozen=True)
class Limits:
    """How much of a large run is drawn point by point before the report aggregates.

    Sized so that a run with a million steps still gives a report of a few MB next to plotly.js
    (about 4.8 MB): bench/report_size.py measures it.
    """

    step_points: int = 10000  # steps drawn one by one; beyond, per-request percentiles
    compile_bars: int = 1000  # compiles drawn (timeline, step markers); beyond, the longest
    frames: int = 20  # code objects drawn in the compile timeline and the cache chart
    cache_points: int = 4000  # cache-entry changes drawn, over all code objects
    offload_steps: int = 200  # profiled steps in the offload chart; beyond, per request
    regions: int = 40  # compiled regions in the eager-vs-compiled chart
    findings: int = 150  # findings shown whole; the next `finding_rows` by title only
    finding_rows: int = 2000


@dataclass
class Plot:
    """A figure and, in plain text, what it leaves out or aggregates (said under the figure)."""

    figure: Figure
    notes: list[str] = field(default_factory=list)


def new_figure(title: str, x_title: str, y_title: str, height: int = 420) -> Figure:
    """A figure with the report's common layout (titles are ours, never trace text).

    Built without its template: plotly deep-copies and validates a template into every figure
    it is given, 25 ms a figure against 0.6 ms without, most of what a report spends in plotly.
    `figure_json` adds the one template, made once per process, when the figure is written."""
    figure = go.Figure(layout={"template": {}})
    figure.update_layout(
        title={"text": title, "x": 0.01},
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.18},
        hoverlabel={"align": "left"},
        xaxis_title=x_title,
        yaxis_title=y_title,
    )
    return figure


#: The look of every figure: plotly's white template.
TEMPLATE = "plotly_white"


@functools.cache
def _template_json() -> dict[str, Any]:
    """The template as a figure built with it writes it (the same keys in the same order)."""
    written: dict[str, Any] = go.Figure(layout={"template": TEMPLATE}).to_plotly_json()
    template: dict[str, Any] = written["layout"]["template"]
    return template


def figure_json(figure: Figure) -> dict[str, Any]:
    """The figure as plotly.js reads it (`data`, `layout`), with the report's template: the
    same JSON as a figure built with `template=TEMPLATE`."""
    drawn: dict[str, Any] = figure.to_plotly_json()
    drawn["layout"]["template"] = copy.deepcopy(_template_json())
    return drawn


def run_origin(run: RunData) -> int:
    """The run's first recorded moment (monotonic ns), the zero of its time axis."""
    times = [r.start_t for r in run.requests]
    times += [c.start_t if c.start_t is not None else c.t for c in run.compiles]
    times += [e.t for e in run.events]
    times += [row[0] for row in run.cache_history]
    return min((t for t in times if t > 0), default=0)


def seconds(t: int, origin: int) -> float:
    return round((t - origin) / 1e9, 6)


def log_axis(figure: Figure, values: list[float | None], title: str | None = None) -> None:
    """A log y axis labelled 1, 2, 5, 10, 20, 50...: plotly's own log ticks label the minor
    ticks by their first digit alone, which reads "5, 2, 1000, 5, 2, 100"."""
    positive = [v for v in values if v is not None and v > 0]
    update: dict[str, Any] = {"type": "log"}
    if title is not None:
        update["title_text"] = title
    if positive:
        low, high = min(positive), max(positive)
        low_exp, high_exp = math.floor(math.log10(low)), math.ceil(math.log10(high))
        mantissas = (1,) if high_exp - low_exp > 4 else (1, 2, 5)
        ticks = [
            m * 10.0**e
            for e in range(low_exp, high_exp + 1)
            for m in mantissas
            if low / 2 <= m * 10.0**e <= high * 2
        ]
        update["tickvals"] = ticks
        update["ticktext"] = [f"{t:g}" for t in ticks]
    figure.update_yaxes(**update)


def percentile(ordered: list[float], q: float) -> float:
    """Linear-interpolated percentile `q` (0..100) of an ascending, non-empty list."""
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(value_s: float | None) -> float | None:
    return None if value_s is None else round(value_s * 1000.0, 4)


def ms_text(value_s: float | None) -> str:
    """Milliseconds as a table or hover shows them: `17.30`, `0.412`, `1234.5` (never
    `17.2964`)."""
    if value_s is None:
        return "–"
    value = value_s * 1000.0
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"
