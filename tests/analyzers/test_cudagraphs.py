"""cudagraphs on real CUDA-graph runs recorded on an H200 (tests/data/h200/cudagraph-*, made by
bench/cudagraph_session.sh, torch 2.11): the reference service under `--mode reduce-overhead`
(clean) and with the cudagraph-rerecord plant, and a diffusers WanPipeline of dummy components
with a reduce-overhead transformer (tests/data/h200/cudagraph-diffusers/program.py), dynamic as
torch decides and with dynamic=False.

CPU CI cannot record a CUDA graph; the recordings are what the analyzer reads, the ground truth
is fixtures/ground_truth.py's cudagraph_expectation, and torch's own cudagraphs log of the same
run (TORCH_LOGS=cudagraphs), recorded and unrecorded, checks both.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest

from diag.analyzers import get_analyzer, run_analyzers
from diag.analyzers.cudagraphs import analyze
from diag.findings.grouping import group_findings
from diag.findings.model import Finding
from diag.fixtures.config import ConfigError, FixtureConfig
from diag.fixtures.ground_truth import cudagraph_expectation
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.h200data import h200_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
BLOCKS = 4  # bench/cudagraph_session.sh records --blocks 4
_TORCH_RECORDING = re.compile(r"\[(\d+/\d+)\] Recording function=")


def _trace(name: str, tmp_path: Path) -> Trace:
    return load_trace(h200_trace(name, tmp_path))


def _loud(findings: list[Finding]) -> list[str]:
    return [f"{f.severity} {f.id}: {f.title}" for f in findings if f.severity != "info"]


def _by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def _torch_recordings(log: str) -> Counter[str]:
    """Torch's own count of CUDA-graph recordings per compile id, from its cudagraphs log."""
    with gzip.open(DATA / "cudagraph-rerecord-logged" / log, "rt") as handle:
        return Counter(_TORCH_RECORDING.findall(handle.read()))


def _diag_recordings(trace: Trace) -> Counter[str]:
    return Counter(str(e.data["compile_id"]) for e in trace.compiled.of("cudagraph_record"))


def test_registered() -> None:
    assert get_analyzer("cudagraphs") is analyze


def test_recordings_match_torchs_own_log_and_the_ground_truth(tmp_path: Path) -> None:
    truth = cudagraph_expectation("cudagraph-rerecord", BLOCKS)
    logged = _trace("cudagraph-rerecord-logged", tmp_path)
    plain = _trace("cudagraph-rerecord", tmp_path)
    # Torch counted the same recordings with diag recording (record.log) and without it.
    assert _torch_recordings("record.log.gz") == truth.graphs_per_compile
    assert _torch_recordings("unrecorded.log.gz") == truth.graphs_per_compile
    assert _diag_recordings(logged) == truth.graphs_per_compile
    assert _diag_recordings(plain) == truth.graphs_per_compile


@pytest.mark.parametrize("name", ["cudagraph-rerecord", "cudagraph-rerecord-logged"])
def test_plant_names_each_live_request_that_recorded(name: str, tmp_path: Path) -> None:
    truth = cudagraph_expectation("cudagraph-rerecord", BLOCKS)
    trace = _trace(name, tmp_path)
    findings = analyze(trace)
    live = {f.data["request_id"]: f for f in findings if f.id.startswith("cudagraphs:live-record")}
    assert sorted(live) == sorted(truth.live_recording)
    assert not set(live) & set(truth.replaying)
    for finding in live.values():
        assert finding.severity == "error"
        assert finding.data["recordings"] == 2 * BLOCKS
        assert finding.data["recorded_compile_ids"] == ["0/1"]
        assert finding.data["compile_ids"] == [] and not finding.data["recompiled"]
        assert finding.title.startswith(f"{2 * BLOCKS} CUDA graph(s) recorded during live request")
        assert finding.title.endswith("with no recompile")
        # What it cost: the eager run at step 0 and the recording step against the replays.
        assert finding.data["steps"] == [1]
        assert finding.data["added_s"] > 0.05
        assert any(
            "(the eager warm-up run)" in e and "(the recordings)" in e for e in finding.evidence
        )
        assert any(e.startswith("memory reserved at step ends: ") for e in finding.evidence)
        assert "dynamic=False" in finding.fix and "two calls per size" in finding.fix
        [claim] = finding.claims
        assert claim["kind"] == "cudagraph-record"
        assert claim["request"] == finding.data["request_id"]
        assert (claim["step"], claim["count"], claim["compile_ids"]) == (1, 2 * BLOCKS, ["0/1"])
        assert claim["recompiled"] is False
    summary = _by_id(findings)["cudagraphs:summary"]
    assert summary.severity == "info"
    assert summary.data["per_compile"] == truth.graphs_per_compile
    assert summary.data["live"] == 2 * 2 * BLOCKS


def test_torch_logs_give_each_recordings_size_key(tmp_path: Path) -> None:
    findings = _by_id(analyze(_trace("cudagraph-rerecord-logged", tmp_path)))
    r0 = findings["cudagraphs:live-record:r0"]
    assert (
        "torch (TORCH_LOGS=cudagraphs): Recording cudagraph tree for symint key 24" in r0.evidence
    )
    unlogged = _by_id(analyze(_trace("cudagraph-rerecord", tmp_path)))["cudagraphs:live-record:r0"]
    assert any("TORCH_LOGS=cudagraphs makes torch log" in e for e in unlogged.evidence)


def test_plant_echoes_stay_quiet_or_grouped(tmp_path: Path) -> None:
    """Around the recordings: torch.cuda.graph()'s own empty_cache calls are not the program's
    (no warmup-hygiene warning), live-compile stays silent (nothing recompiled), and a step-0
    spike from the eager warm-up run joins the request's cudagraphs finding."""
    findings = group_findings(run_analyzers(_trace("cudagraph-rerecord", tmp_path)))
    loud = [f for f in findings if f.severity != "info"]
    assert {f.analyzer for f in loud} <= {"cudagraphs", "step0-spike"}
    for finding in loud:
        if finding.analyzer == "step0-spike":
            assert finding.group == f"cudagraphs:live-record:{finding.data['request_id']}"
            assert finding.data["cause"] == "cudagraph"


def test_clean_reduce_overhead_service_is_quiet(tmp_path: Path) -> None:
    truth = cudagraph_expectation(None, BLOCKS)
    trace = _trace("cudagraph-clean", tmp_path)
    findings = run_analyzers(trace)
    assert _loud(findings) == []
    summary = _by_id(findings)["cudagraphs:summary"]
    assert summary.title == f"{4 * BLOCKS} CUDA graph(s) recorded: {4 * BLOCKS} in warmup, 0 live"
    assert summary.data["per_compile"] == truth.graphs_per_compile
    assert any("traffic replayed warmup's graphs" in e for e in summary.evidence)


def test_diffusers_pipeline_dynamic_graph_records_live_without_a_recompile(
    tmp_path: Path,
) -> None:
    """WanPipeline warmed at 32x32 and 48x32 (diag record --warmup-requests 2): the second
    warmup request recompiles with a symbolic height, so the live 32x32 request records
    again under it, and 64x32 records a new size: two errors, no live compile."""
    findings = run_analyzers(_trace("cudagraph-diffusers-dynamic", tmp_path))
    assert sorted(f.id for f in findings if f.severity == "error") == [
        "cudagraphs:live-record:r3",
        "cudagraphs:live-record:r4",
    ]
    assert not [f for f in findings if f.analyzer == "live-compile" and f.severity == "error"]


def test_diffusers_static_graphs_record_with_their_live_compile(tmp_path: Path) -> None:
    """dynamic=False: 48x32 and 32x32 each have their graph; 64x32 compiles live and records.
    live-compile heads the group; the recording joins it with the step time less compile."""
    findings = group_findings(run_analyzers(_trace("cudagraph-diffusers-static", tmp_path)))
    by_id = _by_id(findings)
    record = by_id["cudagraphs:live-record:r4"]
    assert record.data["recompiled"] and record.data["compile_ids"] == ["0/2"]
    assert record.group is not None and record.group.startswith("live-compile:")
    assert not record.title.endswith("with no recompile")
    assert any("less " in e and "of compile in them" in e for e in record.evidence)
    coverage = by_id["live-compile:warmup-coverage"]
    assert coverage.title.startswith("Warmup covered 1 of 2 live shape(s)")
    assert any("keeps it static: dynamic=False" in e for e in coverage.evidence)


def test_fixture_mode_needs_inductor_and_the_plant_adds_a_height() -> None:
    with pytest.raises(ConfigError, match="needs --compile --backend inductor"):
        FixtureConfig(compile=True, plants=frozenset({"cudagraph-rerecord"}))
    config = FixtureConfig(
        compile=True, backend="inductor", plants=frozenset({"cudagraph-rerecord"})
    )
    assert config.effective_mode == "reduce-overhead"
    shapes = [str(r.shape) for r in config.live_requests()]
    assert shapes == ["2x8x8", "2x12x8", "2x16x8"]
