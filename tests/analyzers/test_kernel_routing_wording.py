"""kernel-routing never leaves "what replaced it" blank: when no compiled kernel is named after
the missing kernel's ops, the finding names the fused kernels the work moved into (those the
reference did not run, longest first), or says the work moved into kernels both sides ran.

The comparisons are built by hand (diag.evidence.regions.RegionComparison, the analyzer's input): a
real
run's fused kernel carries the op's name (`..._rsqrt_...`), so real traces match. The trace they
are reported on is the committed H200 routing recording."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from diag.analyzers.kernel_routing import _missing
from diag.evidence.regions import KernelStat, RegionComparison
from diag.trace.load import load_trace
from tests.h200data import h200_trace

RMS = KernelStat("_rms_norm_fwd_kernel", "custom", 96, 0.0005)
SHARED = KernelStat("sm90_xmma_gemm_bf16", "library", 48, 0.010)
FUSED = KernelStat("triton_per_fused_add_mul_3", "inductor", 24, 0.001)


def _comparison(compiled: list[KernelStat]) -> RegionComparison:
    return RegionComparison(
        region="wan_block_forward",
        device="gpu",
        reference=[RMS, SHARED],
        compiled=compiled,
        reference_s=0.031,
        compiled_s=0.022,
        missing=[RMS.name],
        replacements=[],
        steps=4,
        reference_steps_s=(0.031,) * 4,
        compiled_steps_s=(0.022,) * 4,
    )


def test_no_matching_kernel_names_the_fused_kernels(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    finding = _missing(trace, _comparison([SHARED, FUSED]))
    assert finding.title.endswith(
        "(no compiled kernel matches its ops; new: triton_per_fused_add_mul_3)"
    )
    assert (
        "no kernel of the compiled region matches its ops: the work moved into the fused "
        "kernels eager did not run: triton_per_fused_add_mul_3 ×24 (1.0 ms) per step"
    ) in finding.evidence


def test_no_new_kernel_says_where_the_work_went(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    finding = _missing(trace, _comparison([SHARED]))
    assert finding.title.endswith(
        "(no kernel replaced it: its work moved into kernels both sides ran)"
    )
    assert any(
        line.startswith("no kernel of the compiled region matches its ops, and")
        for line in finding.evidence
    )


def test_metadata_ops_are_not_where_the_work_went(tmp_path: Path) -> None:
    """The demo's CPU case: compiled ran aten::sym_size (no time) and otherwise eager's own ops."""
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    comparison = _comparison([SHARED, KernelStat("aten::sym_size", "aten", 16, 0.0)])
    finding = _missing(trace, dataclasses.replace(comparison, device="cpu"))
    assert finding.title.endswith("(no op replaced it: its work moved into ops both sides ran)")
    assert "sym_size" not in " ".join(finding.evidence)
