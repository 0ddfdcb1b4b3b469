"""`diag report` at 64 ranks where 63 recompile alike (tests/ranks64.py, replicated from the real
H200 recording): the findings table has one row per problem naming the ranks
(diag.findings.rank_merge),
not one per rank."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.cli import main
from tests.ranks64 import make_ranks


def test_report_lists_one_finding_per_problem_with_its_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_ranks(tmp_path / "t", odd={r for r in range(64) if r != 32})
    output = tmp_path / "report.html"
    assert main(["report", str(folder), "-o", str(output), "--no-hta"]) == 0
    assert "6 finding(s))" in capsys.readouterr().out
    html = output.read_text(encoding="utf-8")
    assert "6 finding(s): 3 error, 1 warning, 2 info" in html
    # guard-churn, live-compile and step0-spike: in their titles and first evidence lines.
    assert html.count("(on 63 of 64 ranks: 0-31, 33-63)") == 3
    assert "live-compile:wan_block_forward:r1@ranks0-31,33-63" in html
    assert not re.search(r"@rank\d", html)  # no per-rank finding id left
