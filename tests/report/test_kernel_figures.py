"""Structure of the Kineto-based figures, on the committed H200 recordings."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.evidence.offload import offload_breakdown
from diag.evidence.regions import compare_regions
from diag.report.kernel_figures import offload_chart, region_comparison
from diag.report.plot import Limits, ms
from diag.trace.inputs import open_input
from diag.trace.run import Trace
from tests.h200data import h200_trace


@pytest.fixture(scope="module")
def wan_routing(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return open_input(h200_trace("record-wan-routing", tmp_path_factory.mktemp("h200")))


@pytest.fixture(scope="module")
def wan_offload(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = h200_trace("record-wan-offload-unwarmed", tmp_path_factory.mktemp("h200"))
    return open_input(path)


def test_region_comparison_names_the_divergent_kernels(wan_routing: Trace) -> None:
    comparisons = compare_regions(wan_routing)
    divergent = [c for c in comparisons if c.divergent]
    assert divergent, "the routing plant swaps the hand-written RMSNorm under compile"
    drawn = region_comparison(comparisons, "eager", Limits())
    assert drawn is not None
    traces = {t.name: t for t in drawn.plot.figure.data}
    assert list(traces) == ["eager", "compiled", "divergent kernels (hover for names)"]
    assert list(traces["eager"].y) == [ms(c.reference_s) for c in _by_time(comparisons)]
    assert list(traces["compiled"].y) == [ms(c.compiled_s) for c in _by_time(comparisons)]
    stars = traces["divergent kernels (hover for names)"]
    assert len(stars.x) == len(divergent)
    for comparison in divergent:
        for name in comparison.missing:
            assert any(name[:60] in text for text in stars.hovertext)
            assert name[:60] in drawn.table_html
    assert "_rms" in drawn.table_html  # the hand-written Triton RMSNorm, by name


def _by_time(comparisons: list) -> list:  # type: ignore[type-arg]
    return sorted(comparisons, key=lambda c: -max(c.reference_s, c.compiled_s))


def test_region_comparison_keeps_the_biggest_regions(wan_routing: Trace) -> None:
    comparisons = compare_regions(wan_routing)
    drawn = region_comparison(comparisons, "eager", Limits(regions=1))
    assert drawn is not None
    assert len(drawn.plot.figure.data[0].x) == 1
    if len(comparisons) > 1:
        assert any(n.startswith("Aggregated:") for n in drawn.plot.notes)
    # The table keeps every region, whatever the figure shows.
    assert drawn.table_html.count("<tr><td><code>") == len(comparisons)


def test_region_comparison_without_reference_draws_nothing() -> None:
    assert region_comparison([], "eager", Limits()) is None


def test_offload_chart_per_profiled_step(wan_offload: Trace) -> None:
    run = wan_offload.compiled
    assert run is not None
    rows = offload_breakdown(run)
    assert rows, "the offload-bound plant streams weights on the GPU"
    drawn = offload_chart(rows, Limits())
    assert drawn is not None
    traces = {t.name: t for t in drawn.plot.figure.data}
    assert len(traces["compute kernels"].x) == len(rows)
    assert list(traces["compute kernels"].y) == [ms(r.kernel_s) for r in rows]
    assert list(traces["step span"].y) == [ms(r.span_s) for r in rows]
    assert list(traces["copy HtoD"].y) == [ms(r.copy_s.get("HtoD", 0.0)) for r in rows]
    bound = [r for r in rows if r.bound]
    assert bound, "fp32 master weights make copies dominate"
    assert len(traces["offload-bound step"].x) == len(bound)
    assert drawn.table_html.count("<tr><td>") == len(rows)


def test_offload_chart_averages_per_request_beyond_the_limit(wan_offload: Trace) -> None:
    run = wan_offload.compiled
    assert run is not None
    rows = offload_breakdown(run)
    drawn = offload_chart(rows, Limits(offload_steps=1))
    assert drawn is not None
    requests = {r.request_id for r in rows}
    labels = drawn.plot.figure.data[0].x
    assert len(labels) == min(1, len(requests))
    assert all(" s-1" in label for label in labels)
    if len(rows) > 1:
        assert any(n.startswith("Aggregated:") for n in drawn.plot.notes)


def test_against_another_trace_labels_the_reference(
    wan_offload: Trace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other: Path = h200_trace("record-wan-routing", tmp_path_factory.mktemp("against"))
    trace = open_input(wan_offload.path, against=other)
    assert trace.reference is not None and trace.reference.label == "against"
    drawn = region_comparison(compare_regions(trace), trace.reference.label, Limits())
    assert drawn is not None
    assert drawn.plot.figure.data[0].name == "against"
    assert "against ms/step" in drawn.table_html
