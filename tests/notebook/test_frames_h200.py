"""diag.open() on the committed H200 recordings (GPU kernels, copies, an inductor live recompile)
and on imported inputs, against `diag analyze --json` on the same input."""

from __future__ import annotations

from pathlib import Path

import pytest

import diag
from diag.trace.kineto import read_kineto
from diag.trace.profiles import profiles_from_kineto
from tests.h200data import h200_file, h200_trace
from tests.unit.test_torchtrace import SHARED_TRACES

from .support import analyze_json, finding


def test_offload_and_steps_match_offload_bound_and_step0_spike(tmp_path: Path) -> None:
    path = h200_trace("record-wan-offload-unwarmed", tmp_path)
    cli = analyze_json(path)
    t = diag.open(path)
    offload = t.offload()
    bound = offload[(offload["run"] == "compiled") & offload["bound"]]
    expected = finding(cli, "offload-bound:copies")["data"]["steps"]
    assert len(bound) == len(expected)
    rows = bound.set_index(["request", "step"])
    for step in expected:
        row = rows.loc[(step["request_id"], step["step"])]
        for key in ("span_s", "kernel_s", "sync_s", "idle_s", "max_gain_s"):
            assert round(row[key], 6) == step[key], key
        for direction, seconds in step["copy_s"].items():
            assert round(row[f"{direction.lower()}_s"], 6) == seconds
            assert row[f"{direction.lower()}_bytes"] == step["copy_bytes"][direction]
    spike = finding(cli, "step0-spike:r1")["data"]
    assert spike["metric"] == "gpu"
    steps = t.steps[t.steps["run"] == "compiled"].set_index(["request", "step"])
    assert steps.loc[("r1", 0), "gpu_s"] == pytest.approx(spike["step0_s"], abs=1e-9)
    live = finding(cli, "live-compile:wan_block_forward:r1")["data"]
    compiles = t.compiles[(t.compiles["run"] == "compiled") & (t.compiles["phase"] == "live")]
    assert list(compiles["compile_id"]) == live["compile_ids"]
    assert compiles["duration_s"].sum() == pytest.approx(live["compile_s"], abs=1e-6)
    [guard] = live["guards"]
    failed = t.guard_failures.set_index("compile_id").loc[[guard["compile_id"]]]
    assert set(
        zip(failed["kind"], failed["source"], failed["expected"], failed["actual"], strict=True)
    ) >= {(guard["kind"], guard["source"], guard["expected"], guard["actual"])}


def test_compile_phases_and_caches_match_compile_time(tmp_path: Path) -> None:
    """Inductor with CUDA graphs: seconds by phase and cache hits per compile, from torch's
    compilation_metrics, add up to compile-time's figures."""
    path = h200_trace("cudagraph-clean", tmp_path)
    data = finding(analyze_json(path), "compile-time:summary")["data"]
    compiles = diag.open(path).compiles
    assert len(compiles) == data["compiles"]
    assert round(compiles["total_s"].sum(), 6) == data["total_s"]
    for phase, seconds in data["phases"].items():
        assert compiles[phase].sum() == pytest.approx(seconds, abs=2e-6), phase
    for cache, counts in data["caches"].items():
        for what, count in counts.items():
            assert compiles[f"{cache}_{what}"].sum() == count, (cache, what)


def test_kernel_summary_matches_kernel_routing_on_the_gpu(tmp_path: Path) -> None:
    path = h200_trace("record-wan-routing", tmp_path)
    cli = analyze_json(path)
    data = finding(cli, "kernel-routing:wan_block_forward:_rms_norm_fwd_kernel")["data"]
    assert data["device"] == "gpu"
    t = diag.open(path)
    summary = t.kernel_summary()
    region = summary[summary["region"] == data["region"]]
    # Kernel time per aligned step: every profiled step of both runs aligns here.
    for run, key in (("compiled", "compiled_s"), ("eager", "reference_s")):
        mine = region[region["run"] == run]
        steps = mine.drop_duplicates("window")["steps"].sum()
        assert steps == data["steps"]
        assert round(mine["total_s"].sum() / steps, 9) == pytest.approx(data[key], abs=2e-9)
    eager = set(region[region["run"] == "eager"]["name"])
    compiled = set(region[region["run"] == "compiled"]["name"])
    assert data["missing"] == ["_rms_norm_fwd_kernel"]
    assert "_rms_norm_fwd_kernel" in eager - compiled
    assert set(data["replacements"]) <= compiled - eager
    kernels = t.kernels("r0-s2-steady")
    assert set(kernels["window"]) == {"r0-s2-steady"}
    assert {(r, s) for r, s in zip(kernels["request"], kernels["step"], strict=True)} == {
        ("r0", 2),
        ("r0", 3),
    }
    assert (kernels["dur_us"] > 0).all() and kernels["stream"].notna().all()


def test_a_plain_kineto_file_opens_with_its_kernels() -> None:
    path = h200_file("wan-compiled.json.gz")
    t = diag.open(path)
    assert t.status.status.status == "imported" and t.steps["request"].eq("trace").all()
    expected = profiles_from_kineto("compiled", read_kineto(path))
    kernels = t.kernels()
    assert len(kernels) == sum(len(p.activities) for p in expected)
    assert kernels.groupby("kind").size().to_dict().keys() <= {"kernel", "memcpy", "memset"}
    assert set(kernels["step"]) == {p.step for p in expected}


def test_a_torch_trace_log_opens_with_its_compiles_and_guards() -> None:
    log = SHARED_TRACES / "torch213_python_state_recompiles.log"
    if not log.exists():
        pytest.skip(f"shared TORCH_TRACE logs not found at {SHARED_TRACES}")
    cli = analyze_json("--torch-trace", log)
    t = diag.open(log)
    summary = finding(cli, "recompiles:no-steps")["data"]
    assert len(t.compiles) == summary["compiles"]
    assert int(t.compiles["recompile"].sum()) == summary["recompiles"]
    assert t.steps.empty and t.requests.empty
    for source in ("self.step", "self.use_cfg"):
        churn = finding(cli, f"guard-churn:forward:{source}")["data"]
        every = t.guard_failures[t.guard_failures["source"] == source]
        # Every entry's failure is a row; the churn counts the recompiles it caused.
        rows = every[every["cause"]]
        assert sorted(rows["compile_id"].unique()) == churn["compile_ids"]
        assert set(every["compile_id"]) >= set(churn["compile_ids"])
        assert set(rows["line"]) == {churn["user_location"]}
