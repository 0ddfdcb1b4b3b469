"""Grouping: one root cause, one headline, its echoes as evidence (diag.findings.grouping).

Real recordings (the guard-churn and unwarmed-shape plants, CPU aot_eager) for what the
analyzers produce together; hand-built Finding lists for the rules' edges (a second process,
INFO context, grouping twice), which no single recording holds at once.
"""

from __future__ import annotations

import json
from typing import Any

from diag.findings.analysis import analyze
from diag.findings.grouping import group_findings
from diag.findings.model import Finding, findings_to_json
from diag.findings.text import findings_to_text
from tests.conftest import RecordFixture


def _finding(fid: str, analyzer: str, severity: str = "warning", **data: Any) -> Finding:
    return Finding(fid, analyzer, severity, f"title of {fid}", [], "fix", data=data)


def test_guard_churn_heads_its_recompiles_entries_and_spikes(
    record_fixture: RecordFixture,
) -> None:
    """One churned guard: its two live recompiles, the cache entries they left and the two
    step-0 spikes they caused sit under the guard-churn headline, in text and JSON."""
    findings = analyze(record_fixture("guard-churn"))
    (head,) = [f for f in findings if f.related]
    assert head.analyzer == "guard-churn"
    # Whether a request's step 0 crosses step0-spike's threshold depends on how long the
    # compile took against the steps; every spike there is must be in the group.
    spikes = [f.id for f in findings if f.analyzer == "step0-spike" and f.severity != "info"]
    assert sorted(head.related) == sorted(
        [
            "cache-bloat:wan_block_forward",
            "live-compile:wan_block_forward:r0",
            "live-compile:wan_block_forward:r1",
            *spikes,
        ]
    )
    members = [f for f in findings if f.group]
    assert {f.id for f in members} == set(head.related)
    assert all(f.group == head.id for f in members)
    assert all(f.severity == "info" for f in findings if not f.group and f is not head)

    text = findings_to_text(findings)
    assert f"same root cause, {len(head.related)} related finding(s):" in text
    for member in members:  # one line under the headline, not a block of its own
        assert f"(id: {member.id})" in text
        assert f"        id: {member.id}" not in text
    assert "of them in 1 group(s), one root cause each" in text

    document = json.loads(findings_to_json(findings, "t"))
    by_id = {f["id"]: f for f in document["findings"]}
    assert by_id[head.id]["related"] == head.related and by_id[head.id]["group"] is None
    assert all(by_id[m.id]["group"] == head.id for m in members)


def test_a_live_compile_heads_the_spike_it_caused(record_fixture: RecordFixture) -> None:
    findings = analyze(record_fixture("unwarmed-shape"))
    # Not an INFO "too noisy to judge" spike a loaded host can add for r0 (never grouped).
    spike = next(f for f in findings if f.analyzer == "step0-spike" and not f.data.get("too_noisy"))
    head = next(f for f in findings if f.id == spike.group)
    assert head.analyzer == "live-compile" and head.severity == "error"
    assert head.related == [spike.id]


def test_processes_info_and_regrouping() -> None:
    """Compile ids repeat across processes (each rank counts from 0/0): they never join; INFO
    findings are context, never grouped; grouping again gives the same groups."""
    findings = [
        _finding("live-compile:f:r1", "live-compile", "error", compile_ids=["0/2"]),
        _finding("step0-spike:r1", "step0-spike", compile_ids=["0/2"]),
        _finding("step0-spike:r1@rank1", "step0-spike", compile_ids=["0/2"]),
        _finding("live-compile:warmup-compiles", "live-compile", "info", compile_ids=["0/2"]),
        _finding("cache-bloat:f", "cache-bloat", frame="f"),  # no churn headline: alone
    ]
    grouped = group_findings(findings)
    assert [f.id for f in grouped] == [f.id for f in findings]
    assert grouped[0].related == ["step0-spike:r1"]
    assert [f.group for f in grouped] == [None, "live-compile:f:r1", None, None, None]
    assert group_findings(grouped) == grouped
    assert group_findings(findings[2:]) == findings[2:]


def test_a_recompile_with_a_cause_of_its_own_heads_its_own_group() -> None:
    """As in `diag demo` (guard-churn, unwarmed-shape and routing planted): r1's recompile
    fails the churned config guard and a width warmup never served; live-compile explains it
    by the size guard, so it and its step-0 spike are a second group, not the churn's."""

    def guards(source: str) -> list[dict[str, str]]:
        return [{"source": source, "kind": "?"}]

    churn = _finding(
        "guard-churn:f:block.state.config",
        "guard-churn",
        "error",
        frame="f",
        source="block.state.config",
        compile_ids=["0/2", "0/3"],
    )
    r0 = _finding(
        "live-compile:f:r0",
        "live-compile",
        "error",
        compile_ids=["0/2"],
        guards=guards("block.state.config"),
    )
    r1 = _finding(
        "live-compile:f:r1", "live-compile", "error", compile_ids=["0/3"], guards=guards("freqs_w")
    )
    spikes = [
        _finding(f"step0-spike:{rid}", "step0-spike", compile_ids=[cid])
        for rid, cid in (("r0", "0/2"), ("r1", "0/3"))
    ]
    grouped = {f.id: f for f in group_findings([churn, r0, r1, *spikes])}
    assert grouped[churn.id].related == ["live-compile:f:r0", "step0-spike:r0"]
    assert grouped["live-compile:f:r1"].related == ["step0-spike:r1"]
    assert grouped["live-compile:f:r1"].group is None
