"""rank-divergence at 64 ranks: one finding naming the odd ranks, with rank lists compressed
(`ranks 0-31, 33-63`), on 64-rank directories replicated from the real H200 two-rank recording
(tests/ranks64.py), and the rank-list wording itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.analyzers.rank_divergence import analyze
from diag.findings.rankset import rank_list, rank_tags, ranks_text
from diag.trace.load import load_trace
from tests.ranks64 import make_ranks

BLOCK = "wan_block_forward"
OTHERS = "ranks 0-31, 33-63"


@pytest.mark.parametrize(
    ("ranks", "text"),
    [
        ([3], "rank 3"),
        ([0, 1], "ranks 0, 1"),
        ([0, 1, 2], "ranks 0-2"),
        ([*range(32), *range(33, 64)], OTHERS),
        ([5, 1, 3, 2, 9, 10], "ranks 1-3, 5, 9, 10"),
    ],
)
def test_rank_lists_compress_runs(ranks: list[int], text: str) -> None:
    assert ranks_text(ranks) == text
    assert rank_list(ranks) == text.split(" ", 1)[1]
    assert " " not in rank_tags(ranks)


def test_one_odd_rank_among_64_is_one_finding_naming_it(tmp_path: Path) -> None:
    """Rank 32 (a copy of the H200 rank that recompiled) recompiles at r1 step 0; the other 63
    wait. One finding, the same id as with two ranks, and no list of 63 ranks."""
    trace = load_trace(make_ranks(tmp_path / "t"))
    findings = analyze(trace)
    [finding] = [f for f in findings if f.severity == "error"]
    assert finding.id == f"rank-divergence:compile:{BLOCK}:r1@rank32"
    assert finding.title.startswith(
        f"rank 32 recompiled {BLOCK} at r1 step 0 and {OTHERS} did not (guard "
    )
    assert f"; {OTHERS} waited " in finding.title
    assert finding.data["ranks"] == [32]
    assert finding.data["ranks_without"] == [*range(32), *range(33, 64)]
    assert len(finding.data["waits_s"]) == 63
    assert all(w > 0.1 for w in finding.data["waits_s"].values())  # the compile took ~1.2 s
    text = "\n".join([finding.title, *finding.evidence, finding.fix])
    assert "rank 1," not in text and "rank 0 waited" not in text  # no per-rank enumeration
    assert len(finding.evidence) <= 4
    assert f"{OTHERS} waited" in finding.evidence[-1]
    # On the H200 rank 1's profiled step r0 step 3 ran 11 ms longer (its trace export): one
    # skew note for rank 32, the other 63 ranks as a range with their spread.
    [skew] = [f for f in findings if f.severity != "error"]
    assert (skew.id, skew.severity) == ("rank-divergence:skew@rank32", "info")
    assert skew.evidence[0].startswith(f"r0 step 3: rank 32 32 ms, {OTHERS} 21 ms (+11 ms)")


def test_one_rank_that_did_not_recompile_among_64_is_one_finding_not_63(tmp_path: Path) -> None:
    """The other way round: 63 ranks recompile and rank 32 does not. One finding names the 63
    as a range, not one finding per compiling rank."""
    odd = {r for r in range(64) if r != 32}
    trace = load_trace(make_ranks(tmp_path / "t", odd=odd))
    [finding] = [f for f in analyze(trace) if f.severity == "error"]
    assert finding.id == f"rank-divergence:compile:{BLOCK}:r1@ranks0-31,33-63"
    assert finding.title.startswith(
        f"{OTHERS} recompiled {BLOCK} at r1 step 0 and rank 32 did not (guard "
    )
    assert "rank 32 waited" in finding.title
    assert finding.data["ranks"] == sorted(odd)
    assert finding.data["ranks_without"] == [32]
    assert len(finding.evidence) <= 6
    assert any(
        line.startswith("and ranks 2-31, 33-63: 61 more compile") for line in finding.evidence
    )
    assert finding.fix.startswith(f"{BLOCK} reads per-rank Python state")
    assert f"changed on {OTHERS} only" in finding.fix


def test_64_copies_of_one_rank_diverge_nowhere(tmp_path: Path) -> None:
    """Every rank a copy of rank 0 (which did not recompile): no finding."""
    trace = load_trace(make_ranks(tmp_path / "t", odd=set()))
    assert analyze(trace) == []
