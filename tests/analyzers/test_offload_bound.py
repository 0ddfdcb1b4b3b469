"""offload-bound on real H200 traces: the offload-bound plant (fp32 weights streamed per block)
against a run that keeps its weights resident."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from diag.evidence.offload import offload_breakdown, union_s
from diag.findings.analysis import analyze
from diag.trace.load import load_trace
from tests.conftest import RecordFixture
from tests.h200data import h200_file, h200_trace


def test_offload_plant_is_bound_by_host_to_device_copies(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-offload-unwarmed", tmp_path))
    findings = analyze(trace, ["offload-bound"])
    assert len(findings) == 1
    (finding,) = findings
    steps = finding.data["steps"]
    assert steps
    for step in steps:
        assert step["copy_bytes"]["HtoD"] > 1e9  # fp32 master weights of the whole model
        assert step["copy_s"]["HtoD"] > step["kernel_s"]
        assert step["max_gain_s"] < step["span_s"]
    assert "HtoD" in finding.evidence[1] or "HtoD" in finding.evidence[2]


def test_resident_weights_are_not_offload_bound(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    assert trace.compiled is not None
    rows = offload_breakdown(trace.compiled)
    assert rows and not any(r.bound for r in rows)
    assert all(r.kernel_s > 0 and r.idle_s >= 0 for r in rows)
    assert analyze(trace, ["offload-bound"]) == []


def test_cpu_only_trace_has_no_offload_rows(record_fixture: RecordFixture) -> None:
    trace = record_fixture("routing", baseline=True, profile="steady:1")
    assert trace.compiled is not None
    assert offload_breakdown(trace.compiled) == []


def test_union_counts_overlap_once() -> None:
    assert union_s([(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)]) == 25e-6
    assert union_s([]) == 0.0


def _kineto_findings(name: str) -> list[dict[str, object]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "diag",
            "analyze",
            "--kineto",
            str(h200_file(name)),
            "--only",
            "offload-bound",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    findings: list[dict[str, object]] = json.loads(proc.stdout)["findings"]
    return findings


def test_plain_profiler_files() -> None:
    assert len(_kineto_findings("wan-offload-bound.json.gz")) == 1
    assert _kineto_findings("wan-compiled.json.gz") == []
