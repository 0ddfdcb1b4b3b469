"""rank-divergence on a real two-GPU recording (2x H200, NCCL, torch 2.11, inductor):

  diag record -- torchrun --standalone --nproc_per_node 2 -m diag.fixtures --device cuda \
      --size large --compile --backend inductor --plant rank-recompile -q

Only the event files are committed (tests/data/h200/README.md); the fixture's own --json output
sits beside them and shows the NCCL backend and identical latents on both ranks."""

from __future__ import annotations

import json
from pathlib import Path

from diag.findings.analysis import analyze
from diag.trace.load import load_trace
from tests.h200data import H200, h200_trace


def test_nccl_recording_is_two_ranks_with_identical_latents() -> None:
    output = json.loads((H200 / "record-ranks-nccl" / "fixture-output.json").read_text())
    assert output["ranks"]["backend"] == "nccl"
    assert output["ranks"]["latents_identical"] is True


def test_rank1_live_recompile_is_a_cross_rank_error(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-ranks-nccl", tmp_path))
    assert trace.compiled is not None
    ranks = sorted(p.rank for p in trace.compiled.processes if p.rank is not None)
    assert ranks == [0, 1]
    findings = analyze(trace, ["rank-divergence", "live-compile"])
    errors = [f for f in findings if f.severity == "error"]
    cross = [f for f in errors if f.analyzer == "rank-divergence"]
    assert len(cross) == 1
    assert "rank 1 recompiled wan_block_forward at r1 step 0 and rank 0 did not" in cross[0].title
    assert "attn_layout" in cross[0].title
    # The per-rank view agrees: the live recompile is rank 1's alone.
    live = [f for f in errors if f.analyzer == "live-compile"]
    assert [f.id.rsplit("@", 1)[-1] for f in live] == ["rank1"]
