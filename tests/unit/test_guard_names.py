"""Dynamo's module aliases (`G['__import_diag_dot_fixtures_dot_distributed']`) read as module
paths in guard sources and conditions: on the committed 2-rank H200 recording, whose rank 1
recompiles on `diag.fixtures.distributed.PARALLEL_STATE['attn_layout']`, no title, evidence
line, fix or id holds the mangled name."""

from __future__ import annotations

from pathlib import Path

from diag.analyzers import run_analyzers
from diag.trace.guards import condition_text, readable_source
from diag.trace.load import load_trace
from diag.trace.run import Guard

from ..h200data import h200_trace

MANGLED = "G['__import_diag_dot_fixtures_dot_distributed'].PARALLEL_STATE['attn_layout']"
READABLE = "diag.fixtures.distributed.PARALLEL_STATE['attn_layout']"


def test_readable_source() -> None:
    assert readable_source(MANGLED) == READABLE
    assert readable_source('G["__import_torch_dot__dynamo_dot_utils"].x') == "torch._dynamo.utils.x"
    assert readable_source("__import_a_dot_b.c == 1") == "a.b.c == 1"
    assert readable_source("G['STATE'].x") == "G['STATE'].x"  # a plain global: left as is
    assert condition_text(f"0/1: {MANGLED} == 'ulysses'  # x = 1") == f"{READABLE} == 'ulysses'"
    guard = Guard(kind="python-value", source=MANGLED, raw=f"0/1: {MANGLED} == 'ulysses'")
    assert guard.source == READABLE and guard.raw.endswith("== 'ulysses'")
    assert "__import_" in guard.raw  # torch's own text is kept


def test_no_mangled_name_in_findings(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-ranks-nccl", tmp_path))
    findings = run_analyzers(trace)
    churn = [f for f in findings if f.analyzer == "guard-churn"]
    assert churn and all(READABLE in f.title for f in churn)
    for finding in findings:
        for text in (finding.title, finding.fix, finding.id, *finding.evidence):
            assert "__import_" not in text, (finding.id, text)
