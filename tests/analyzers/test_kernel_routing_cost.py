"""kernel-routing's cost verdict: medians of the region's time over aligned steady steps, a
noise band, and "too noisy to judge" rather than a guess.

The comparisons are built by hand (diag.evidence.regions.RegionComparison, the analyzer's input)
because
the cases are about numbers a real CPU run cannot hold still: one step spread wide, one side with
a single step. The H200 recording checks the same verdict on real kernel times.
"""

from __future__ import annotations

from pathlib import Path

from diag.analyzers.kernel_routing import COST_BAND, _missing, cost, severity
from diag.evidence.regions import KernelStat, RegionComparison
from diag.evidence.stats import FASTER, NOISY, SAME, SLOWER
from diag.findings.analysis import analyze
from diag.trace.load import load_trace
from tests.h200data import h200_trace


def _comparison(compiled: list[float], reference: list[float]) -> RegionComparison:
    rms = KernelStat("_rms_norm_fwd_kernel", "custom", 4, 0.001)
    return RegionComparison(
        region="block_forward",
        device="cpu",
        reference=[rms],
        compiled=[],
        reference_s=sum(reference) / len(reference),
        compiled_s=sum(compiled) / len(compiled),
        missing=[rms.name],
        replacements=[],
        steps=len(compiled),
        reference_steps_s=tuple(reference),
        compiled_steps_s=tuple(compiled),
    )


def test_one_slow_step_does_not_make_the_region_slower() -> None:
    """Means: 16.3 ms compiled against 10 ms eager, "costs time now". Medians: 10.2 against
    10.0, the same. The second run of the demo had no slow step and said "keep it"."""
    verdict = cost(_comparison([0.0102, 0.0101, 0.0103, 0.0102, 0.040], [0.010] * 5))
    assert verdict.verdict == SAME
    assert verdict.band == COST_BAND


def test_slower_and_faster_past_the_band() -> None:
    assert cost(_comparison([0.013, 0.0131, 0.0129], [0.010, 0.0101, 0.0099])).verdict == SLOWER
    assert cost(_comparison([0.008, 0.0081, 0.0079], [0.010, 0.0101, 0.0099])).verdict == FASTER


def test_too_few_or_too_spread_steps_are_too_noisy() -> None:
    single = cost(_comparison([0.013], [0.010]))
    assert (single.verdict, single.reason) == (NOISY, "compiled: 1 step(s), 2 needed")
    spread = cost(_comparison([0.010, 0.020, 0.005, 0.030], [0.010, 0.010, 0.010, 0.010]))
    assert spread.verdict == NOISY
    assert spread.reason.startswith("compiled steps spread ±")


def test_findings_fix_follows_the_verdict(tmp_path: Path) -> None:
    """On the H200 recording compiled is 0.72x eager over 4 steady steps, spread under 1%:
    faster, so it is info and the fix says keep it; the evidence gives both medians with their
    spread."""
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    (finding,) = analyze(trace, ["kernel-routing"])
    assert finding.data["cost"] == FASTER
    assert finding.severity == "info"
    assert finding.fix.startswith("Keeping it is fine") and "costs time now" not in finding.fix
    text = "\n".join(finding.evidence)
    assert "median ± spread: eager 31 ms ± 0.0 ms, compiled 22 ms ± 0.1 ms (0.72x)" in text
    assert "cost: compiled is faster than eager (the medians differ -28%" in text


def test_severity_and_fix_agree_with_the_cost() -> None:
    """Only a compiled region measurably slower than eager is a warning: as fast (the demo once
    read "+6%; the noise band is ±19%"), faster, or too noisy to judge is info, and the fix says
    whether to keep the replacement."""
    same = cost(_comparison([0.0106, 0.0107, 0.0105], [0.010, 0.0101, 0.0099]))
    assert same.verdict == SAME
    assert severity(same) == "info"
    assert severity(cost(_comparison([0.008, 0.0081, 0.0079], [0.010] * 3))) == "info"
    assert severity(cost(_comparison([0.013], [0.010]))) == "info"  # noisy
    assert severity(cost(_comparison([0.013, 0.0131, 0.0129], [0.010] * 3))) == "warning"


def test_the_finding_carries_the_verdict_as_its_severity(tmp_path: Path) -> None:
    """The analyzer's own output, on a trace whose compiled region is as fast as eager and on
    one where it is slower (the comparisons are the analyzer's input, built by hand as above)."""
    trace = load_trace(h200_trace("record-wan-routing", tmp_path))
    by_verdict = {}
    for compiled in ([0.0106, 0.0107, 0.0105], [0.013, 0.0131, 0.0129], [0.013]):
        finding = _missing(trace, _comparison(compiled, [0.010, 0.0101, 0.0099]))
        by_verdict[finding.data["cost"]] = finding
    same, slower, noisy = by_verdict[SAME], by_verdict[SLOWER], by_verdict[NOISY]
    assert same.severity == "info"
    assert "cost: compiled is as fast as eager (the medians differ +6%" in same.evidence[-1]
    assert same.fix.startswith("Keeping it is fine: the compiled region is as fast as eager")
    assert slower.severity == "warning"
    assert slower.fix.startswith("The compiled region is slower than eager here")
    assert "custom op" in slower.fix
    assert noisy.severity == "info" and "too noisy to judge" in noisy.fix
