"""Findings alike on many ranks merged into one (diag.findings.rank_merge), on 64-rank directories
replicated from the real H200 two-rank NCCL recording (tests/ranks64.py): 63 ranks that
recompile alike give one finding per problem naming them, with the lowest rank's evidence; a
rank that differs keeps its own findings; `diag check` fails as before and names the ranks.

Three tests edit one replicated rank's events: a live compile that expected another value of the
guarded state on that rank, one that took longer, and a rank whose steps were not profiled. Real
ranks do each (a rank reads its own parallel state, compile times vary by host, a program may
profile rank 0 only), but a replicated copy of one recording cannot."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from diag.analyzers import run_analyzers
from diag.findings.analysis import analyze
from diag.findings.model import Finding
from diag.trace.load import load_trace
from tests.check.support import run_check
from tests.ranks64 import make_ranks

BLOCK = "wan_block_forward"
BUT_32 = {r for r in range(64) if r != 32}
OTHERS = "0-31, 33-63"
PER_RANK = ("guard-churn", "live-compile", "step0-spike")


def _problems(findings: list[Finding]) -> Counter[str]:
    return Counter(f.analyzer for f in findings if f.severity != "info")


def _edit_live_compile(folder: Path, rank: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply `change` to the events of `rank`'s live compile 0/2 (its recompile and its end)."""
    [events] = (folder / "runs" / "compiled").glob(f"rank{rank}-pid*/events.jsonl")
    lines = []
    for line in events.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("compile_id") == "0/2" and event["ev"] in ("recompile", "compile_end"):
            change(event)
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_63_ranks_that_recompile_alike_are_one_finding_per_problem(tmp_path: Path) -> None:
    trace = load_trace(make_ranks(tmp_path / "t", odd=BUT_32))
    raw = run_analyzers(trace)
    assert {a: n for a, n in _problems(raw).items() if a in PER_RANK} == dict.fromkeys(PER_RANK, 63)
    findings = analyze(trace)
    assert _problems(findings) == {**dict.fromkeys(PER_RANK, 1), "rank-divergence": 1}
    assert len(findings) == 6  # and the two warmup infos
    by_name = {f.analyzer: f for f in findings if f.severity != "info"}
    churn = by_name["guard-churn"]
    assert churn.id.endswith("PARALLEL_STATE['attn_layout']@ranks0-31,33-63")
    assert churn.title.endswith(f"(on 63 of 64 ranks: {OTHERS})")
    assert churn.evidence[0] == f"on 63 of 64 ranks: {OTHERS}; the evidence below is rank 0's"
    assert churn.data["on_ranks"] == sorted(BUT_32)
    assert len(churn.data["rank_ids"]) == 63
    assert churn.data["rank_ids"][0].endswith("@rank0")
    live = by_name["live-compile"]
    assert live.id == f"live-compile:{BLOCK}:r1@ranks0-31,33-63"
    assert "process rank0 (pid 200000)" in live.evidence  # the representative's own evidence
    # Replicated ranks have the same figures: none is written as a range.
    assert not any(line.startswith("across the ranks") for line in live.evidence)
    # One root cause: the churn heads the merged live compile, spike and rank-divergence.
    assert sorted(churn.related) == sorted(
        f.id for f in findings if f.severity != "info" and f is not churn
    )
    coverage = next(f for f in findings if f.id == "live-compile:warmup-coverage")
    assert "4x48x96 (r0; on ranks 0-63)" in coverage.evidence[0]


def test_a_finding_on_one_rank_stays_its_own(tmp_path: Path) -> None:
    """Rank 32 alone recompiles: its findings keep their one-rank ids and say nothing of
    ranks."""
    findings = analyze(load_trace(make_ranks(tmp_path / "t")))
    live = [f for f in findings if f.analyzer in PER_RANK and f.severity != "info"]
    assert sorted(f.id.rsplit("@", 1)[1] for f in live) == ["rank32"] * 3
    assert not any("ranks" in f.title or "on_ranks" in f.data for f in live)


def test_a_rank_that_recompiled_on_another_value_is_not_merged(tmp_path: Path) -> None:
    """Rank 7's live recompile failed on another value of the guarded state: 62 ranks merge,
    rank 7 keeps its three findings, apart."""
    folder = make_ranks(tmp_path / "t", odd=BUT_32)

    def ring(event: dict[str, Any]) -> None:
        for guard in event.get("guards", []):
            guard["expected"] = guard["expected"].replace("ulysses", "ring")
            guard["raw"] = guard["raw"].replace("'ulysses'", "'ring'")

    _edit_live_compile(folder, 7, ring)
    findings = analyze(load_trace(folder))
    findings = [f for f in findings if f.analyzer in PER_RANK and f.severity != "info"]
    assert len(findings) == 6
    alone = [f for f in findings if f.id.endswith("@rank7")]
    assert sorted(f.analyzer for f in alone) == sorted(PER_RANK)
    assert all("'ring'" in " ".join([f.title, *f.evidence]) for f in alone)
    merged = [f for f in findings if f not in alone]
    assert all(f.title.endswith("(on 62 of 64 ranks: 0-6, 8-31, 33-63)") for f in merged)
    assert all(f.id.endswith("@ranks0-6,8-31,33-63") for f in merged)


def test_a_figure_that_differs_across_ranks_is_a_range_naming_the_ranks(tmp_path: Path) -> None:
    """Rank 9's live compile took 781 ms instead of 725: one finding, the title giving the
    range and the evidence the ranks at each end."""
    folder = make_ranks(tmp_path / "t", odd=BUT_32)

    def slower(event: dict[str, Any]) -> None:
        if event["ev"] == "compile_end":
            event["duration_s"] = 0.781

    _edit_live_compile(folder, 9, slower)
    findings = analyze(load_trace(folder))
    [live] = [f for f in findings if f.analyzer == "live-compile" and f.severity == "error"]
    assert "(725 ms to 781 ms of compile)" in live.title
    assert live.title.endswith(f"(on 63 of 64 ranks: {OTHERS})")
    spread = "725 ms (ranks 0-8, 10-31, 33-63) to 781 ms (rank 9), median 725 ms"
    # Said once, though the compile's time is in the title and two evidence lines.
    assert [line for line in live.evidence if spread in line] == [
        f'across the ranks, "at step 0 ...": {spread}'
    ]
    [spike] = [f for f in findings if f.analyzer == "step0-spike"]
    assert f'across the ranks, "compile(s) of wan_block_forward ...": {spread}' in spike.evidence
    # The spike names the merged live-compile finding, not rank 0's id.
    assert f"reported as errors ({live.id})" in " ".join(spike.evidence)


def test_an_echo_that_differs_on_one_rank_names_it_and_stays_in_the_group(tmp_path: Path) -> None:
    """Rank 0's profiler windows were not recorded: its spike does not name the window, so it
    is not merged with the other 62 ranks'. Both spikes say their ranks, both name the merged
    live compile, and both are echoes of the churn merged over all 63 (their ranks are among
    its ranks)."""
    folder = make_ranks(tmp_path / "t", odd=BUT_32)
    [events] = (folder / "runs" / "compiled").glob("rank0-pid*/events.jsonl")
    lines = events.read_text(encoding="utf-8").splitlines()
    events.write_text(
        "".join(line + "\n" for line in lines if '"profile_window_' not in line),
        encoding="utf-8",
    )
    findings = analyze(load_trace(folder))
    spikes = sorted((f for f in findings if f.analyzer == "step0-spike"), key=lambda f: f.id)
    assert [f.id for f in spikes] == ["step0-spike:r1@rank0", "step0-spike:r1@ranks1-31,33-63"]
    assert spikes[0].title.endswith("(on rank 0 of 64)")
    assert spikes[1].title.endswith("(on 62 of 64 ranks: 1-31, 33-63)")
    assert "(window r1-s0-new-shape)" not in " ".join(spikes[0].evidence)
    [live] = [f for f in findings if f.analyzer == "live-compile" and f.severity == "error"]
    assert all(f"reported as errors ({live.id})" in " ".join(s.evidence) for s in spikes)
    [churn] = [f for f in findings if f.analyzer == "guard-churn"]
    assert churn.id.endswith("@ranks0-31,33-63")
    assert {s.group for s in spikes} == {churn.id}
    assert len(churn.related) == 4  # the live compile, rank-divergence and both spikes


def test_check_fails_as_before_and_names_the_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_ranks(tmp_path / "t", odd=BUT_32)
    code, out, err = run_check(capsys, folder, "--format", "json")
    assert (code, err) == (1, "")
    rules = {rule["name"]: rule for rule in json.loads(out)["rules"]}
    failed = sorted(name for name, rule in rules.items() if rule["status"] == "fail")
    assert failed == ["guard-churn", "live-compile"]
    live = rules["live-compile"]
    assert live["summary"] == "63 compile(s) during live requests (max 0)"  # still every compile
    [violation] = live["violations"]
    assert violation["message"].endswith(f"(on 63 of 64 ranks: {OTHERS})")
    assert "process rank0 (pid 200000)" in violation["evidence"]
    [churn] = rules["guard-churn"]["violations"]
    assert churn["key"].endswith("@ranks0-31,33-63")
    assert churn["message"].endswith(f"(on 63 of 64 ranks: {OTHERS})")
    code, out, _ = run_check(capsys, folder)
    assert code == 1
    assert out.count("  x ") == 2 and "and 53 more" not in out
