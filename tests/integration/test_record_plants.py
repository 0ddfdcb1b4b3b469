"""`diag record` on every plant: the recorded events carry the ground truth that
fixtures/ground_truth.py documents (and tests/fixtures/ checks against torch's own bookkeeping)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from diag.fixtures.ground_truth import expectation
from tests.conftest import RecordFixture

from .support import PYTHON, diag_record, events, of

FIXTURE = (PYTHON, "-m", "diag.fixtures", "--compile", "--warmup", "--backend", "aot_eager", "-q")


def _recorded(record_fixture: RecordFixture, plant: str) -> list[dict[str, Any]]:
    """The events of `diag record --profile none -- FIXTURE --plant PLANT` (Wan, warmup on):
    the session's shared recording, which other suites read too."""
    return events(record_fixture(plant).path)


@pytest.mark.parametrize(
    "plant", ["guard-churn", "recompile-limit", "unwarmed-shape", "cache-bloat"]
)
def test_compile_plants(record_fixture: RecordFixture, plant: str) -> None:
    truth = expectation(plant, "wan")
    evs = _recorded(record_fixture, plant)
    live = [e for e in of("recompile", evs) if e["phase"] == "live"]
    expected = [(r.request_id, r.step) for r in truth.live_recompiles]
    if truth.limit_hit:
        expected.append(truth.limit_hit)  # the attempt that hit the limit was a recompile too
    assert [(e["request_id"], e["step"]) for e in live] == expected
    for event, lr in zip(live, truth.live_recompiles, strict=False):
        assert event["guards"][0]["source"] == lr.source
        assert event["guards"][0]["kind"] == lr.guard_kind
    final = [e for e in of("cache_entries", evs) if e["when"] == "exit"][0]
    assert {c["name"]: c["entries"] for c in final["codes"]} == truth.cache_entries
    hits = [(e["request_id"], e["step"]) for e in of("recompile_limit", evs)]
    assert hits == ([truth.limit_hit] if truth.limit_hit else [])
    for pattern in truth.warmup_guards:
        warm = [
            g["raw"] for e in of("recompile", evs) if e["phase"] == "warmup" for g in e["guards"]
        ]
        assert any(re.search(pattern, raw) for raw in warm), pattern


def test_routing_is_visible_in_profile_windows(record_fixture: RecordFixture) -> None:
    # `--baseline eager --profile steady:1`: the session's shared recording, which the
    # kernel-routing, offload-bound, report and TUI tests read too.
    trace = record_fixture("routing", baseline=True, profile="steady:1").path

    def ops(label: str) -> set[str]:
        (proc_dir,) = (trace / "runs" / label).glob("pid*")
        with gzip.open(proc_dir / "kineto" / "r0-s2-steady.json.gz", "rt") as handle:
            return {e.get("name", "") for e in json.load(handle)["traceEvents"]}

    assert "diag_fixtures::fused_rms_norm" in ops("eager")
    assert "diag_fixtures::fused_rms_norm" not in ops("compiled")
    assert "aten::rsqrt" in ops("compiled")
    assert not of("compile_end", events(trace, "eager"))


def test_empty_cache_calls_during_live_requests(record_fixture: RecordFixture) -> None:
    evs = _recorded(record_fixture, "empty-cache")
    calls = [(e["phase"], e["request_id"]) for e in of("empty_cache", evs)]
    assert calls == [("warmup", "warmup0"), ("warmup", "warmup1"), ("live", "r0"), ("live", "r1")]


def test_offload_bound_copies_in_profile_window(tmp_path: Path) -> None:
    trace = tmp_path / "offload"
    proc = diag_record(trace, *FIXTURE, "--plant", "offload-bound")
    assert proc.returncode == 0, proc.stderr
    (proc_dir,) = (trace / "runs" / "compiled").glob("pid*")
    with gzip.open(proc_dir / "kineto" / "r0-s2-steady.json.gz", "rt") as handle:
        names = [e.get("name", "") for e in json.load(handle)["traceEvents"]]
    # Two steady steps x 2 passes x 4 blocks, one copy_ per parameter of a block.
    assert names.count("aten::copy_") >= 2 * 2 * 4 * 10
