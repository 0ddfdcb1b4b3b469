"""kernel-routing on real traces: the H200 recording of the routing plant (Triton RMSNorm in eager,
inductor kernels under compile), the same plant on CPU (custom op vs plain ops), plain profiler
files compared with --kineto/--against, and clean runs that must stay quiet."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from diag.evidence.regions import compare_regions, kernel_kind
from diag.findings.analysis import analyze
from diag.trace.load import load_trace
from tests.conftest import RecordFixture
from tests.h200data import h200_file, h200_trace


def test_h200_routing_names_the_kernel_and_its_replacement(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    findings = analyze(trace, ["kernel-routing"])
    assert len(findings) == 1, [f.title for f in findings]
    finding = findings[0]
    assert finding.data["region"] == "wan_block_forward"
    assert finding.data["device"] == "gpu"
    assert finding.data["missing"] == ["_rms_norm_fwd_kernel"]
    assert "rsqrt" in finding.data["replacements"][0]
    assert finding.location and "wan.py" in finding.location
    assert "_rms_norm_fwd_kernel ×" in finding.evidence[0]
    # Eager and compiled kernel time per step, both measured.
    assert finding.data["reference_s"] > 0 and finding.data["compiled_s"] > 0


def test_h200_regions_line_up_and_plain_aten_fusion_is_not_flagged(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    (comparison,) = compare_regions(trace)
    kinds = {k.kind for k in comparison.compiled}
    assert "inductor" in kinds and "library" in kinds
    # Eager's ATen elementwise kernels are gone under compile, and that is not divergence.
    gone = {k.name for k in comparison.reference} - {k.name for k in comparison.compiled}
    assert any(kernel_kind(name) == "aten" for name in gone)
    assert comparison.missing == ["_rms_norm_fwd_kernel"]
    assert comparison.swapped_attention is None


def test_cpu_routing_plant_is_found_on_cpu_ops(record_fixture: RecordFixture) -> None:
    trace = record_fixture("routing", baseline=True, profile="steady:1")
    findings = analyze(trace, ["kernel-routing"])
    assert [f.data["device"] for f in findings] == ["cpu"]
    assert "diag_fixtures::fused_rms_norm" in findings[0].data["missing"]


def test_clean_cpu_run_with_baseline_has_no_routing_finding(record_fixture: RecordFixture) -> None:
    trace = record_fixture(baseline=True, profile="steady:1")
    assert compare_regions(trace), "the regions should line up"
    assert analyze(trace, ["kernel-routing"]) == []


def test_no_reference_run_means_no_comparison(tmp_path: Path) -> None:
    folder = h200_trace("record-wan-routing", tmp_path)
    shutil.rmtree(folder / "runs" / "eager")
    trace = load_trace(folder)
    assert trace.reference is None
    assert compare_regions(trace) == []
    assert analyze(trace, ["kernel-routing"]) == []


def test_kineto_files_compared_with_against() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "diag",
            "analyze",
            "--kineto",
            str(h200_file("wan-routing.json.gz")),
            "--against",
            str(h200_file("wan-routing-eager.json.gz")),
            "--only",
            "kernel-routing",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    assert [f["data"]["missing"] for f in findings] == [["_rms_norm_fwd_kernel"]]
    assert findings[0]["data"]["region"] == "whole step"


def test_against_another_trace_directory(tmp_path: Path) -> None:
    compiled = h200_trace("record-wan-routing", tmp_path)
    # The same recording's eager baseline, as a directory of its own.
    eager = tmp_path / "eager-only"
    (eager / "runs").mkdir(parents=True)
    (compiled / "runs" / "eager").rename(eager / "runs" / "compiled")
    (eager / "manifest.json").write_text((compiled / "manifest.json").read_text())
    trace = load_trace(compiled, against=eager)
    assert trace.eager is None and trace.reference is not None
    findings = analyze(trace, ["kernel-routing"])
    assert [f.data["missing"] for f in findings] == [["_rms_norm_fwd_kernel"]]
    assert "against:" in findings[0].evidence[0]
