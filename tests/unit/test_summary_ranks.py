"""The end-of-record summary on a 2-rank torchrun recording (the committed H200 NCCL run of the
rank-recompile plant): requests are counted per rank, not summed, and the third process is named
for what it is, torchrun's launcher (the parent of both ranks, which ran no model)."""

from __future__ import annotations

import json
from pathlib import Path

from diag.record.summary import summarize_run

from ..h200data import h200_trace


def test_two_ranks_count_requests_per_rank(tmp_path: Path) -> None:
    trace = h200_trace("record-ranks-nccl", tmp_path)
    text = "\n".join(summarize_run(trace / "runs" / "compiled").lines())
    assert (
        "run compiled: 3 process(es): ranks 0 and 1, and torchrun's launcher (pid 3505, the "
        "parent of the ranks; it ran no model)"
    ) in text
    assert (
        "2 live request(s), 8 live step(s) on each of 2 ranks; warmup 2 request(s), 4 step(s) "
        "on each"
    ) in text
    assert "4 live request(s)" not in text


def test_ranks_that_served_differently_get_totals_and_each_rank(tmp_path: Path) -> None:
    """Rank 1's last request cut off (a hand-edited copy: a real run cannot be made to lose a
    request on one rank only without killing it)."""
    trace = h200_trace("record-ranks-nccl", tmp_path)
    events = next((trace / "runs" / "compiled").glob("rank1-*")) / "events.jsonl"
    lines = events.read_text(encoding="utf-8").splitlines()
    last = max(
        i
        for i, line in enumerate(lines)
        if json.loads(line)["ev"] == "request_start" and '"phase":"live"' in line.replace(" ", "")
    )
    events.write_text("\n".join(lines[:last]) + "\n", encoding="utf-8")
    text = "\n".join(summarize_run(trace / "runs" / "compiled").lines())
    assert "3 live request(s)" in text and "(rank 0: 2 live, rank 1: 1 live)" in text
    assert "on each of" not in text


def test_one_process_says_nothing_of_ranks(tmp_path: Path) -> None:
    trace = h200_trace("record-wan-offload-unwarmed", tmp_path)
    lines = summarize_run(trace / "runs" / "compiled").lines()
    assert lines[0] == "run compiled: 1 process(es), adapter: diag.fixtures"
    assert lines[1] == "  2 live request(s), 8 live step(s); warmup 2 request(s), 4 step(s)"


def test_a_program_alone_is_not_called_a_helper(tmp_path: Path) -> None:
    """One process that reported no steps is the program itself, not 'a helper process'."""
    folder = tmp_path / "compiled" / "pid7"
    folder.mkdir(parents=True)
    start = {"t": 1, "ev": "process_start", "pid": 7, "ppid": 1, "argv": ["app.py"]}
    (folder / "events.jsonl").write_text(json.dumps(start) + "\n", encoding="utf-8")
    text = "\n".join(summarize_run(tmp_path / "compiled").lines())
    assert "run compiled: 1 process(es), adapter: none" in text
    assert "helper" not in text
