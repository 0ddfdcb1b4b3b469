"""The HTA section: HTA's breakdown per window, agreeing with diag's own kernel totals; any
HTA failure becomes one line in the report."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from diag.findings.model import Finding
from diag.report.build import build_report
from diag.report.hta_view import hta_available, hta_breakdown, hta_plot, hta_table
from diag.trace.inputs import open_input
from diag.trace.kineto import read_kineto
from diag.trace.run import Trace
from tests.h200data import h200_trace

pytestmark = pytest.mark.skipif(not hta_available(), reason="the hta extra is not installed")


@pytest.fixture(scope="module")
def wan_routing(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return open_input(h200_trace("record-wan-routing", tmp_path_factory.mktemp("h200")))


def test_diag_and_hta_agree_on_kernel_time(wan_routing: Trace) -> None:
    run = wan_routing.compiled
    assert run is not None
    result = hta_breakdown(run)
    assert result.error is None
    assert len(result.windows) == 3  # two new-shape windows and one steady one
    for window in result.windows:
        parsed = read_kineto(run.folder / window.window)
        kernels = [a for a in parsed.activities if a.kind == "kernel"]
        ours = sum(a.dur for a in kernels)
        # Same file, same kernels: equal up to float rounding of the µs sums.
        assert window.compute_us == pytest.approx(ours, abs=1e-3 * len(kernels) + 1e-6)
        assert window.diag_kernel_us == pytest.approx(ours, abs=1e-2)
        copies = sum(a.dur for a in parsed.activities if a.kind in ("memcpy", "memset"))
        assert window.non_compute_us == pytest.approx(copies, rel=1e-6, abs=1e-2)
        assert window.idle_us >= 0 and window.process == "pid 420"
    plot = hta_plot(result)
    assert plot is not None
    assert [t.name for t in plot.figure.data][:2] == [
        "compute",
        "non-compute (copies, memsets, communication)",
    ]
    assert {t.name for t in plot.figure.data} >= {"idle: host_wait", "idle: kernel_wait"}
    assert hta_table(result).count("<tr><td>pid 420</td>") == 3


def test_a_window_hta_cannot_read_is_one_line(tmp_path: Path) -> None:
    path = h200_trace("record-wan-routing", tmp_path)
    window = path / "runs/compiled/pid420/kineto/r0-s2-steady.json.gz"
    window.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "cat": "kernel"'))
    trace = open_input(path)
    run = trace.compiled
    assert run is not None
    result = hta_breakdown(run)
    assert result.error is not None
    assert result.error.startswith("HTA section failed on pid420/kineto/r0-s2-steady.json.gz: ")
    assert "\n" not in result.error
    # The report is still written, and says so.
    no_findings: list[Finding] = []
    report = build_report(trace, no_findings)
    hta = next(s for s in report.sections if s.key == "hta")
    assert hta.error == result.error
    assert "HTA section failed on" in report.html
    assert next(s for s in report.sections if s.key == "steps").plot is not None


def test_cpu_only_windows_are_skipped(routing_trace: Trace) -> None:
    run = routing_trace.compiled
    assert run is not None
    result = hta_breakdown(run)
    assert result.windows == [] and result.error is None
    assert result.skipped is not None and "CPU-only" in result.skipped
