"""warmup-hygiene on real recordings: the empty-cache plant's calls in live requests r0 and r1
are one warning (warmup's calls are not reported); a program's own gc.collect() in a live step
is an info, while the collections Dynamo makes while compiling are not counted."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.analyzers.hygiene import analyze
from diag.fixtures.ground_truth import expectation
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.integration.support import PYTHON, diag_record

RecordFixture = Callable[..., Trace]


def test_registered() -> None:
    assert get_analyzer("warmup-hygiene") is analyze


def test_empty_cache_in_live_requests(record_fixture: RecordFixture) -> None:
    assert "every request" in expectation("empty-cache", "wan").diagnosis
    trace = record_fixture("empty-cache")
    compiled = trace.compiled
    assert compiled is not None
    assert len(compiled.of("empty_cache")) == 4  # warmup0, warmup1, r0, r1
    [finding] = analyze(trace)
    assert finding.id == "warmup-hygiene:empty_cache"
    assert finding.severity == "warning"
    assert finding.data["requests"] == ["r0", "r1"]
    assert finding.data["calls"] == 2 and finding.data["warmup_calls"] == 2
    assert finding.title.startswith(
        "torch.cuda.empty_cache() after every request undoes warmup's allocations"
    )
    assert "warmup0" not in "\n".join(finding.evidence)
    [claim] = finding.claims
    assert claim["kind"] == "empty-cache" and claim["count"] == 2 and claim["phase"] == "live"
    assert [c["request"] for c in claim["calls"]] == ["r0", "r1"]


def test_dynamo_collections_are_not_the_programs(record_fixture: RecordFixture) -> None:
    """guard-churn recompiles live; Dynamo's gc.collect() during those compiles is torch's."""
    trace = record_fixture("guard-churn", model="wan")
    compiled = trace.compiled
    assert compiled is not None
    live = [e for e in compiled.of("gc_collect") if e.position[0] == "live"]
    assert live, "Dynamo collects while it compiles"
    assert analyze(trace) == []


def test_program_gc_collect_in_a_live_step(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            import gc
            import torch
            import diag.api as diag

            with diag.phase("warmup"):
                with diag.request("w0", shape=[2]):
                    with diag.step():
                        gc.collect()
            for r in range(2):
                with diag.request(f"r{r}", shape=[2]):
                    for i in range(2):
                        with diag.step():
                            torch.ones(2).sum()
                            if r == 1:
                                gc.collect()
            """
        )
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app), options=("--profile", "none"))
    assert proc.returncode == 0, proc.stderr
    [finding] = analyze(load_trace(tmp_path / "t"))
    assert finding.id == "warmup-hygiene:gc_collect"
    assert finding.severity == "info"
    assert finding.data["requests"] == ["r1"]
    assert finding.data["calls"] == 2
    assert "r1 step 0, r1 step 1" in "\n".join(finding.evidence)
    assert "torch itself may call gc.collect()" in "\n".join(finding.evidence)
