"""Structure of the event-based figures, on real recordings of the reference service."""

from __future__ import annotations

from typing import Any

import pytest

from diag.report.figures import cache_entries, compile_timeline, step_times
from diag.report.plot import TEMPLATE, Limits, figure_json, percentile
from diag.trace.run import Trace
from tests.conftest import RecordFixture
from tests.fixture_lines import fixture_line


def _traces(figure: Any) -> dict[str, Any]:
    return {trace.name: trace for trace in figure.data}


def _points(trace: Any) -> int:
    return sum(1 for y in trace.y if y is not None)


def test_step_times_draws_every_step_compile_and_profiled_step(routing_trace: Trace) -> None:
    run = routing_trace.compiled
    assert run is not None
    plot = step_times(run, Limits(), routing_trace.reference)
    assert plot is not None
    traces = _traces(plot.figure)
    assert {"warmup steps", "live steps", "profiled step (Kineto window)"} <= set(traces)
    assert _points(traces["warmup steps"]) == sum(1 for s in run.steps if s.phase == "warmup")
    assert _points(traces["live steps"]) == sum(1 for s in run.steps if s.phase == "live")
    profiled = [s for s in run.steps if s.profiled]
    assert len(profiled) == 1  # --profile steady:1
    assert _points(traces["profiled step (Kineto window)"]) == len(profiled)
    compiles = [t for name, t in traces.items() if name.startswith("compile")]
    assert sum(_points(t) for t in compiles) == len(run.compiles) > 0
    # One line per request: a gap (None) between consecutive live requests.
    live_requests = {s.request_id for s in run.steps if s.phase == "live"}
    assert list(traces["live steps"].y).count(None) == len(live_requests) - 1
    # The eager baseline's live steps are drawn beside them, and the note says how.
    assert _points(traces["eager run, live steps"]) == sum(
        1 for s in routing_trace.runs["eager"].steps if s.phase == "live"
    )
    assert any("eager run's live steps" in note for note in plot.notes)
    assert plot.figure.layout.yaxis.type == "log"


def test_step_times_aggregates_per_request_beyond_the_limit(routing_trace: Trace) -> None:
    run = routing_trace.compiled
    assert run is not None
    assert len(run.steps) > 8
    plot = step_times(run, Limits(step_points=8))
    assert plot is not None
    traces = _traces(plot.figure)
    assert "live steps" not in traces
    medians = traces["live steps: median per request (p10-p90 bar)"]
    live = [r for r in run.requests if r.phase == "live"]
    assert len(medians.y) == len(live)
    first = sorted(s.wall_s * 1000 for s in live[0].steps if s.wall_s is not None)
    assert medians.y[0] == pytest.approx(percentile(first, 50), abs=1e-3)
    slowest = traces["live steps: slowest step per request"]
    assert slowest.y[0] == pytest.approx(max(first), abs=1e-3)
    assert any(note.startswith("Aggregated:") and "p10-p90" in note for note in plot.notes)
    # Compiles are never aggregated away.
    compiles = [t for name, t in traces.items() if name.startswith("compile")]
    assert sum(_points(t) for t in compiles) == len(run.compiles)
    # Fewer points still: consecutive requests share one.
    tighter = step_times(run, Limits(step_points=4))
    assert tighter is not None
    merged = _traces(tighter.figure)["live steps: median per request (p10-p90 bar)"]
    assert len(merged.y) == 1
    assert "(2 requests)" in merged.hovertext[0]


def test_compile_timeline_marks_live_compiles(record_fixture: RecordFixture) -> None:
    trace = record_fixture("guard-churn", model="wan")
    run = trace.compiled
    assert run is not None
    plot = compile_timeline(run, Limits())
    assert plot is not None
    traces = _traces(plot.figure)
    assert sum(len(t.x) for t in traces.values()) == len(run.compiles)
    live = [c for c in run.compiles if c.live]
    assert live, "guard-churn recompiles during live requests"
    assert len(traces["live compile"].x) == len(live)
    # Hover text names the failing guard, as recorded.
    guard = live[0].guards[0]
    assert any(guard.source in text for text in traces["live compile"].hovertext)
    line = fixture_line("models/wan.py", "def wan_block_forward(")
    assert {y for t in traces.values() for y in t.y} == {f"wan_block_forward (wan.py:{line})"}
    assert not plot.notes


def test_compile_timeline_folds_frames_beyond_the_limit(record_fixture: RecordFixture) -> None:
    run = record_fixture("guard-churn", model="wan").compiled
    assert run is not None
    plot = compile_timeline(run, Limits(frames=0, compile_bars=2))
    assert plot is not None
    bars = [y for t in plot.figure.data for y in t.y]
    assert set(bars) == {"other code objects (1)"}
    assert len(bars) == 2
    longest = sorted((c.duration_s or 0.0 for c in run.compiles), reverse=True)[:2]
    drawn = sorted((x for t in plot.figure.data for x in t.x), reverse=True)
    assert drawn == longest
    assert any("share one row" in n for n in plot.notes)
    assert any(f"2 of {len(run.compiles)} compiles are drawn" in n for n in plot.notes)
    # The step figure keeps the same compiles as markers.
    steps = step_times(run, Limits(compile_bars=2))
    assert steps is not None
    markers = [t for t in steps.figure.data if t.name.startswith("compile")]
    assert sorted(y for t in markers for y in t.y) == pytest.approx(
        sorted(x * 1000 for x in longest)
    )


def test_cache_entries_follow_the_reported_counts(record_fixture: RecordFixture) -> None:
    run = record_fixture("guard-churn", model="wan").compiled
    assert run is not None
    plot = cache_entries(run, Limits())
    assert plot is not None
    final = run.cache_entries()
    assert len(plot.figure.data) == len(final)
    (frame, entries), line = next(iter(final.items())), plot.figure.data[0]
    assert line.name.startswith(frame.name)
    assert line.y[-1] == entries
    assert list(line.y) == sorted(line.y)  # this plant only ever adds entries
    assert line.line.shape == "hv"


def test_cache_entries_thin_long_histories(record_fixture: RecordFixture) -> None:
    run = record_fixture("guard-churn", model="wan").compiled
    assert run is not None
    full = cache_entries(run, Limits())
    thin = cache_entries(run, Limits(cache_points=2))
    assert full is not None and thin is not None
    assert len(thin.figure.data[0].y) < len(full.figure.data[0].y)
    assert thin.figure.data[0].y[-1] == full.figure.data[0].y[-1]  # the last count is kept
    assert any("changes are drawn" in n for n in thin.notes)


def test_a_run_without_compiles_draws_no_compile_figures(record_fixture: RecordFixture) -> None:
    trace = record_fixture("routing", baseline=True, profile="steady:1")
    eager = trace.runs["eager"]
    assert compile_timeline(eager, Limits()) is None
    assert cache_entries(eager, Limits()) is None or not eager.compiles


def test_a_figure_is_written_as_if_built_with_its_template(record_fixture: RecordFixture) -> None:
    """Figures are built without plotly's template and given it when written (plot.py says
    why): the JSON is the one a figure built with the template writes, key for key."""
    import plotly.graph_objects as go  # type: ignore[import-untyped]

    run = record_fixture("guard-churn", model="wan").compiled
    assert run is not None
    plot = compile_timeline(run, Limits())
    assert plot is not None
    with_template = go.Figure(plot.figure)
    with_template.update_layout(template=TEMPLATE)
    written = figure_json(plot.figure)
    assert written == with_template.to_plotly_json()
    assert list(written["layout"]["template"]) == list(
        with_template.layout.template.to_plotly_json()
    )
    assert written["layout"]["template"]["layout"]["plot_bgcolor"] == "white"
    written["layout"]["template"]["layout"]["plot_bgcolor"] = "black"  # a copy, each time
    assert figure_json(plot.figure)["layout"]["template"]["layout"]["plot_bgcolor"] == "white"
