"""cache-bloat on real recordings of the reference service (CPU, aot_eager): the cache-bloat
plant's 8 entries for 2 shapes are found with the per-block source that separates them; the
clean run's 2 entries for 2 shapes are not bloat."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.analyzers.cache_bloat import analyze
from diag.fixtures.ground_truth import BLOCK_FILE, BLOCK_FRAME, GUIDER_FRAME, expectation
from diag.trace.run import Trace
from diag.trace.torchtrace import load_torch_trace
from tests.fixture_lines import fixture_line

RecordFixture = Callable[..., Trace]


def test_registered() -> None:
    assert get_analyzer("cache-bloat") is analyze


def test_block_index_bloat(record_fixture: RecordFixture) -> None:
    truth = expectation("cache-bloat", "wan")
    frame = BLOCK_FRAME["wan"]
    trace = record_fixture("cache-bloat")
    [finding] = analyze(trace)
    assert finding.id == f"cache-bloat:{frame}"
    assert finding.data["entries"] == truth.cache_entries[frame] == 8
    assert finding.data["distinct_shapes"] == 2
    # 8 entries is torch's default recompile limit: the cache is full.
    assert finding.severity == "error"
    assert finding.data["at_limit"] and not finding.data["limit_hit"]
    assert finding.data["per_block_sources"] == ["block.block_idx"]
    text = "\n".join(finding.evidence)
    assert "holds 8 cache entries" in text and "distinct request shapes served: 2" in text
    assert "block.block_idx (python-value; 4 value(s): 0, 1, 2, 3)" in text
    assert "one entry per block" in text
    assert any(re.search(g, "block.block_idx == 3") for g in truth.warmup_guards)
    assert (
        finding.location
        == f"{BLOCK_FILE['wan']}:{fixture_line('models/wan.py', 'def wan_block_forward(')}"
    )
    assert "per-block" in finding.fix


def test_recompile_limit_is_an_error(record_fixture: RecordFixture) -> None:
    [finding] = analyze(record_fixture("recompile-limit"))
    assert finding.severity == "error"
    assert finding.data["limit_hit"]
    assert finding.data["per_block_sources"] == []
    assert "block.state.cnt" in "\n".join(finding.evidence)
    assert "guard-churn" in finding.fix


def test_guard_churn_entries_point_at_the_source(record_fixture: RecordFixture) -> None:
    """LTX's guider: 4 entries for 2 shapes, separated by the skip set (a mild warning)."""
    findings = analyze(record_fixture("guard-churn", model="ltx"))
    assert [f.id for f in findings] == [f"cache-bloat:{GUIDER_FRAME}"]
    [finding] = findings
    assert finding.severity == "warning"
    assert finding.data["entries"] == expectation("guard-churn", "ltx").cache_entries[GUIDER_FRAME]
    assert finding.data["sources"][0]["source"] == "self.skip_layers"
    assert "see guard-churn" in "\n".join(finding.evidence)


def test_clean_run_is_not_bloated(record_fixture: RecordFixture) -> None:
    trace = record_fixture()
    compiled = trace.compiled
    assert compiled is not None
    assert list(compiled.cache_entries().values()) == [2]
    assert analyze(trace) == []


PASS_NAMES = """
import torch

torch._dynamo.config.recompile_limit = 16


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "p0"

    def forward(self, x):
        return x * 2 if self.mode == "p0" else x + len(self.mode)


block = torch.compile(Block(), backend="aot_eager")
x = torch.randn(4)
for i in range(10):
    block.mode = f"p{i}"
    block(x)
print("ok")
"""


def test_entries_from_compilation_metrics(tmp_path: Path) -> None:
    """A TORCH_TRACE log has no entry counts of diag's: they come from compilation_metrics'
    cache_size. A string guard compiled 10 entries with the limit raised to 16: past the
    default limit, and no hit."""
    program = tmp_path / "app.py"
    program.write_text(PASS_NAMES, encoding="utf-8")
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "log")}
    done = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    trace = load_torch_trace(tmp_path / "log")
    assert trace.compiled is not None and trace.compiled.cache_entries() == {}
    [finding] = analyze(trace)
    assert finding.severity == "warning"
    assert finding.data["entries"] == 10
    assert finding.title == (
        "forward holds 10 cache entries (no request shapes known): past the default recompile "
        "limit, which this run raised"
    )
    assert finding.evidence[0].startswith("forward holds at least 10 cache entries (torch's ")
    assert any(
        "this run raised torch._dynamo.config.recompile_limit" in e for e in finding.evidence
    )
