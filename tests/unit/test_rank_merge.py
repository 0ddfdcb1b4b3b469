"""diag.findings.rank_merge's rules on small hand-made findings: what merges (figures in other
units, the
eager run's ranks), what stays apart (another severity, other data, an analyzer that compares
ranks itself, a finding without a rank), and that merging twice changes nothing. The 64-rank
recordings are in tests/analyzers/test_rank_merge_64.py; these cases are the ones a replicated
recording cannot hold (every copy has the same figures and one run)."""

from __future__ import annotations

from typing import Any

from diag.check.verdict import Violation, merge_rank_violations
from diag.findings.model import Finding
from diag.findings.rank_merge import merge_rank_findings, on_ranks


def _spike(rank: int, took: str, severity: str = "warning", **data: Any) -> Finding:
    return Finding(
        id=f"step0-spike:r1@rank{rank}",
        analyzer="step0-spike",
        severity=severity,
        title=f"Live request r1 step 0 took {took}",
        evidence=[f"step 0 took {took}", f"process rank{rank} (pid {4000 + rank})"],
        fix="warm it up",
        data={"request_id": "r1", "step0_s": 1.0, **data},
        claims=[{"kind": "spike", "process": 4000 + rank, "rank": rank, "request": "r1"}],
    )


def test_figures_in_other_units_merge_into_a_range() -> None:
    findings = [_spike(0, "990 ms"), _spike(1, "1.01 s"), _spike(2, "995 ms")]
    [merged] = merge_rank_findings(findings, {"compiled": 4})
    assert merged.id == "step0-spike:r1@ranks0-2"
    assert merged.title == "Live request r1 step 0 took 990 ms to 1.01 s (on 3 of 4 ranks: 0-2)"
    assert merged.evidence == [
        "on 3 of 4 ranks: 0-2; the evidence below is rank 0's",
        'across the ranks, "step 0 took ...": 990 ms (rank 0) to 1.01 s (rank 1), median 995 ms',
        "step 0 took 990 ms",
        "process rank0 (pid 4000)",  # the rank and pid name the process: not a figure
    ]
    assert merged.data["on_ranks"] == [0, 1, 2]
    assert merged.data["rank_ids"] == [f.id for f in findings]
    # The merged text stands for every rank: each rank's claims stay checkable.
    assert [c["rank"] for c in merged.claims] == [0, 1, 2]


def test_what_differs_beyond_figures_stays_apart() -> None:
    findings = [
        _spike(0, "990 ms"),
        _spike(1, "990 ms", severity="error"),
        _spike(2, "990 ms", cause="profiler"),  # data another rank's lacks
        _spike(3, "990 ms"),
    ]
    out = merge_rank_findings(findings, {"compiled": 4})
    assert [f.id for f in out] == [
        "step0-spike:r1@ranks0,3",
        "step0-spike:r1@rank1",
        "step0-spike:r1@rank2",
    ]
    assert out[0].title.endswith("(on 2 of 4 ranks: 0, 3)")
    # The same problem (one id but for the rank) differs on ranks 1 and 2: each says its rank.
    assert [f.title for f in out[1:]] == [
        f"{f.title} (on rank {r} of 4)" for r, f in ((1, findings[1]), (2, findings[2]))
    ]
    assert [f.evidence for f in out[1:]] == [findings[1].evidence, findings[2].evidence]
    assert out[1].data["on_ranks"] == [1]


def test_runs_merge_apart_and_every_rank_reads_all() -> None:
    eager = [
        Finding(
            id=f"offload-bound:r1@rank{r}@eager",
            analyzer="offload-bound",
            severity="warning",
            title="steps wait on copies",
            evidence=[],
            fix="",
            run="eager",
        )
        for r in (0, 1)
    ]
    [merged, compiled] = merge_rank_findings([*eager, _spike(0, "1 s")], {"eager": 2})
    assert merged.id == "offload-bound:r1@ranks0,1@eager"
    assert merged.title == "steps wait on copies (on both ranks)"
    assert compiled.id == "step0-spike:r1@rank0"
    assert on_ranks(range(64), 64) == "on all 64 ranks"


def test_cross_rank_and_rankless_findings_and_a_second_pass_are_left_alone() -> None:
    divergence = [
        Finding(
            id=f"rank-divergence:skew@rank{r}",
            analyzer="rank-divergence",
            severity="info",
            title=f"rank {r} kept the others waiting",
            evidence=[],
            fix="",
        )
        for r in (1, 2)
    ]
    single = _spike(0, "1 s")
    rankless = Finding("live-compile:f:r1", "live-compile", "error", "f recompiled", [], "")
    assert merge_rank_findings([*divergence, single, rankless], {"compiled": 4}) == [
        *divergence,
        single,
        rankless,
    ]
    once = merge_rank_findings([_spike(0, "1 s"), _spike(1, "2 s")], {"compiled": 2})
    assert merge_rank_findings(once, {"compiled": 2}) == once


def test_check_violations_merge_by_rank() -> None:
    def violation(pid: int) -> Violation:
        return Violation(
            "f recompiled 1 time(s) during live requests (r1 step 0), 725.2 ms of compile",
            ["live r1 step 0: compile 0/2", f"process rank{pid - 10} (pid {pid})"],
            location="app.py:3",
            key="live-compile:f",
        )

    items = [(violation(10 + r), r) for r in range(4)]
    items.append((Violation("g compiled", [], key="live-compile:g"), 5))
    merged, other = merge_rank_violations(items, 8)
    assert merged.message.endswith("725.2 ms of compile (on 4 of 8 ranks: 0-3)")
    assert merged.evidence[0] == "on 4 of 8 ranks: 0-3; the evidence below is rank 0's"
    assert merged.key == "live-compile:f" and merged.location == "app.py:3"
    assert other is items[-1][0]
