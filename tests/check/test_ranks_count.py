"""`diag check`'s recording rule counts requests per rank: the committed 2-rank H200 recording
served 2 live requests, each on both ranks, not 4."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.trace.guards import full_user_location
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


def test_guard_line_keeps_the_whole_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch wrote the guard's note as `ork/main/fixtures/distributed.py:59` (its install folder
    and the repository shared only "/"); the user stack beside it has the whole path."""
    trace = h200_trace("record-ranks-nccl", tmp_path)
    _, out, _ = run_check(capsys, trace)
    # Never the cut path (whole paths may contain /work/main: the recording's own checkout).
    assert not re.search(r"(?<![\w/])ork/main", out)
    assert "['attn_layout'] == 'ulysses' (expected 'ulysses'), read at " in out
    assert "distributed.py:59 (1 other cache entry" in out


def test_full_user_location() -> None:
    raw = 'x == 1  # a  # ork/app.py:9 in f\nUser stack trace:\n  File "/work/app.py", line 9, in f'
    assert full_user_location("ork/app.py:9", raw) == "/work/app.py:9"
    assert full_user_location("ork/app.py:8", raw) == "ork/app.py:8"  # another line: as is
    assert full_user_location(None, raw) is None
