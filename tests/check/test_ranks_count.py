"""`diag check`'s recording rule counts requests per rank: the committed 2-rank H200 recording
served 2 live requests, each on both ranks, not 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.h200data import h200_trace

from .support import run_check


def test_recording_rule_counts_each_rank_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = h200_trace("record-ranks-nccl", tmp_path)
    policy = tmp_path / "diag.toml"
    policy.write_text("[check]\n", encoding="utf-8")
    _, out, err = run_check(capsys, trace, "--policy", policy)
    assert err == ""
    assert (
        "pass recording: status complete, 2 live request(s), 8 live step(s) on each of 2 ranks"
    ) in out
    assert "4 live request(s)" not in out
