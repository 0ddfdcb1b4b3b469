"""diag.open() on the demo's recording: each frame's numbers against `diag analyze --json` (and
the summary `diag record` prints) on the same trace directory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import diag
from diag.notebook import TraceFrames, columns
from diag.record.summary import summarize
from tests.conftest import RecordFixture

from .support import analyze_json, demo_trace, finding


@pytest.fixture(scope="module")
def demo(record_fixture: RecordFixture) -> tuple[Path, TraceFrames, dict[str, Any]]:
    path = demo_trace(record_fixture).path
    return path, diag.open(path), analyze_json(path)


def test_status_and_findings_are_analyzes(demo: tuple[Path, TraceFrames, dict[str, Any]]) -> None:
    _, t, cli = demo
    keys = ("status", "notices", "diag_paused")
    assert t.status.as_dict() == {key: cli[key] for key in keys}
    frame = t.findings_frame()
    assert list(frame["id"]) == [f["id"] for f in cli["findings"]]
    assert list(frame["severity"]) == [f["severity"] for f in cli["findings"]]
    assert frame["severity"].value_counts().to_dict() == {
        k: v for k, v in cli["counts"].items() if v
    }
    headline = frame.set_index("id").loc["guard-churn:wan_block_forward:block.state.config"]
    assert headline["related"] == 2 and headline["location"] == "fixtures/models/wan.py:52"


def test_every_frame_has_its_documented_typed_columns(
    demo: tuple[Path, TraceFrames, dict[str, Any]],
) -> None:
    _, t, _ = demo
    frames = {
        "STEPS": t.steps,
        "REQUESTS": t.requests,
        "COMPILES": t.compiles,
        "GUARD_FAILURES": t.guard_failures,
        "CACHE_ENTRIES": t.cache_entries,
        "WINDOWS": t.windows,
        "KERNELS": t.kernels(),
        "CPU_OPS": t.cpu_ops("r0-s2-steady"),
        "KERNEL_SUMMARY": t.kernel_summary(),
        "OFFLOAD": t.offload(),
        "FINDINGS": t.findings_frame(),
    }
    api = (Path(__file__).parents[2] / "docs" / "API.md").read_text(encoding="utf-8")
    for name, frame in frames.items():
        spec = getattr(columns, name)
        assert list(frame.columns) == [c.name for c in spec], name
        for column in spec:
            dtype = str(frame[column.name].dtype)
            want = "datetime64[ns, UTC]" if column.dtype == "datetime" else column.dtype
            assert dtype == want, (name, column.name, dtype)
            assert f"`{column.name}`" in api, (name, column.name)
    # A CPU-only recording: no GPU work, nothing offloaded, the CPU ops stand in.
    assert frames["KERNELS"].empty and frames["OFFLOAD"].empty
    assert len(frames["CPU_OPS"]) > 100
    assert t.steps["start"].notna().all()


def test_steps_and_requests_match_the_summary_and_step0_spike(
    demo: tuple[Path, TraceFrames, dict[str, Any]],
) -> None:
    path, t, cli = demo
    for summary in summarize(path):
        requests = t.requests[t.requests["run"] == summary.label]
        steps = t.steps[t.steps["run"] == summary.label]
        assert requests.groupby("phase").size().to_dict() == summary.requests
        assert steps.groupby("phase").size().to_dict() == summary.steps
        counted = steps.groupby("request").size().to_dict()
        assert requests.set_index("request")["steps"].to_dict() == counted
    compiled = t.steps[t.steps["run"] == "compiled"].set_index(["request", "step"])
    for rid in ("r0", "r1"):
        data = finding(cli, f"step0-spike:{rid}")["data"]
        column = {"wall": "wall_s", "gpu": "gpu_s"}[data["metric"]]
        assert compiled.loc[(rid, 0), column] == pytest.approx(data["step0_s"], abs=1e-9)
        assert bool(compiled.loc[(rid, 0), "compiled"])
        assert compiled.loc[(rid, 0), "compile_s"] == pytest.approx(data["compile_s"], abs=1e-6)
    # The live compile's step was profiled (default profile: first step of each new shape).
    assert compiled.loc[("r1", 0), "window"] == "r1-s0-new-shape"


def test_compiles_match_the_live_compile_findings(
    demo: tuple[Path, TraceFrames, dict[str, Any]],
) -> None:
    _, t, cli = demo
    compiles = t.compiles[t.compiles["run"] == "compiled"]
    for rid in ("r0", "r1"):
        data = finding(cli, f"live-compile:wan_block_forward:{rid}")["data"]
        mine = compiles[(compiles["request"] == rid) & (compiles["phase"] == "live")]
        assert sorted(mine["compile_id"]) == sorted(data["compile_ids"])
        assert sorted(mine["step"].unique()) == data["steps"]
        assert mine["duration_s"].sum() == pytest.approx(data["compile_s"], abs=1e-6)
        assert mine["recompile"].all() and (mine["frame"] == data["frame"]).all()
    warm = finding(cli, "live-compile:warmup-compiles")["data"]
    warmup = compiles[compiles["phase"] == "warmup"]
    assert len(warmup) == warm["compiles"]
    assert warmup["duration_s"].sum() == pytest.approx(warm["compile_s"], abs=1e-6)
    # Phase seconds come from torch's compilation_metrics (aot_eager: no Inductor phases).
    assert (compiles["total_s"] > 0).all() and compiles["inductor_s"].isna().all()


def test_guard_failures_match_guard_churn_and_live_compile(
    demo: tuple[Path, TraceFrames, dict[str, Any]],
) -> None:
    _, t, cli = demo
    failures = t.guard_failures
    churn = finding(cli, "guard-churn:wan_block_forward:block.state.config")
    data = churn["data"]
    same = (failures["source"] == data["source"]) & (failures["kind"] == data["kind"])
    # Every entry's failure is a row; the churn counts the recompiles it caused
    # (diag.evidence.causes).
    mine = failures[same & failures["cause"]]
    assert sorted(mine["compile_id"].unique()) == sorted(data["compile_ids"])
    assert set(failures[same]["compile_id"]) >= set(data["compile_ids"])
    assert mine["compile_id"].nunique() == data["recompiles"]
    assert set(mine["line"]) == {churn["location"]}
    assert (mine["text"] == "len(block.state.config) != 3").all()
    # live-compile names the newest entry's failing guard of each live recompile.
    for rid in ("r0", "r1"):
        for guard in finding(cli, f"live-compile:wan_block_forward:{rid}")["data"]["guards"]:
            rows = failures[failures["compile_id"] == guard["compile_id"]]
            keys = ["kind", "source", "expected", "actual"]
            assert tuple(guard[k] for k in keys) in _tuples(rows[keys])
    # One row per failed cache entry: a recompile after N entries has N rows.
    per_compile = failures.groupby("compile_id").size()
    sizes = t.compiles.set_index("compile_id")["cache_size"]
    assert all(per_compile[cid] == sizes[cid] for cid in per_compile.index)


def test_cache_entries_match_guard_churns_count(
    demo: tuple[Path, TraceFrames, dict[str, Any]],
) -> None:
    _, t, cli = demo
    evidence = " ".join(
        finding(cli, "guard-churn:wan_block_forward:block.state.config")["evidence"]
    )
    at_exit = int(re.search(r"\((\d+) cache entries at exit", evidence).group(1))  # type: ignore[union-attr]
    entries = t.cache_entries
    final = entries[(entries["run"] == "compiled") & entries["at_exit"]]
    assert final.set_index("frame")["entries"].to_dict() == {"wan_block_forward": at_exit}
    # Each step-end row is a change: the count grows with each compile of the frame.
    history = entries[(entries["run"] == "compiled") & ~entries["at_exit"]]
    assert list(history["entries"]) == list(range(1, len(history) + 1))
    assert len(history) == len(t.compiles[t.compiles["run"] == "compiled"])


def test_kernel_summary_matches_kernel_routing(
    demo: tuple[Path, TraceFrames, dict[str, Any]],
) -> None:
    """A CPU-only trace: kernel-routing compares the CPU ops of each compiled region, over the
    steady steps both runs profiled (r0 steps 2 and 3, the r0-s2-steady window)."""
    _, t, cli = demo
    routing = finding(cli, "kernel-routing:wan_block_forward:diag_fixtures::fused_rms_norm")
    data = routing["data"]
    assert data["device"] == "cpu" and data["steps"] == 2
    summary = t.kernel_summary()
    steady = summary[(summary["window"] == "r0-s2-steady") & (summary["region"] == data["region"])]
    eager = steady[steady["run"] == "eager"].set_index("name")
    compiled = steady[steady["run"] == "compiled"].set_index("name")
    for name in data["missing"]:
        assert name in eager.index and name not in compiled.index
        per_step = eager.loc[name, "count"] / eager.loc[name, "steps"]
        shown = re.search(rf"eager: {re.escape(name)} ×(\d+)", " ".join(routing["evidence"]))
        assert shown is not None and per_step == int(shown.group(1))
    custom = set(eager.index[eager["category"] == "custom"]) - set(compiled.index)
    assert custom == set(data["missing"])


def _tuples(frame: Any) -> set[tuple[Any, ...]]:
    """The frame's rows as tuples, pandas' missing values as None (as JSON has them)."""
    return {tuple(None if pd.isna(v) else v for v in row) for row in frame.itertuples(index=False)}
