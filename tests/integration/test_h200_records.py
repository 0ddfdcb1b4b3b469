"""Traces that `diag record` wrote on an H200 (torch 2.11, inductor, --size large, with
--baseline eager), committed as test data because CI has no GPU. They check the GPU paths of the
collectors: CUDA step times, allocator figures, Kineto windows with CUDA kernels and region
markers that line up between the compiled run and its eager baseline.

Recorded with (tests/data/h200/README.md):
  diag record --baseline eager -- python -m diag.fixtures --device cuda --size large --compile \
      --backend inductor --plant routing -q
  diag record --baseline eager -- python -m diag.fixtures --device cuda --size large --compile \
      --backend inductor --plant offload-bound --plant unwarmed-shape -q
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from diag.trace.lines import iter_events

DATA = Path(__file__).resolve().parent.parent / "data" / "h200"
ROUTING = DATA / "record-wan-routing"
OFFLOAD = DATA / "record-wan-offload-unwarmed"


def _proc(trace: Path, label: str) -> Path:
    (folder,) = (trace / "runs" / label).glob("pid*")
    return folder


def _events(trace: Path, label: str) -> list[dict[str, Any]]:
    return list(iter_events(_proc(trace, label) / "events.jsonl"))


def _kineto(trace: Path, label: str, window: str) -> list[dict[str, Any]]:
    with gzip.open(_proc(trace, label) / "kineto" / f"{window}.json.gz", "rt") as handle:
        events: list[dict[str, Any]] = json.load(handle)["traceEvents"]
    return events


@pytest.mark.parametrize("trace", [ROUTING, OFFLOAD], ids=["routing", "offload"])
def test_manifest_names_the_gpu_and_both_runs(trace: Path) -> None:
    manifest = json.loads((trace / "manifest.json").read_text())
    assert manifest["versions"]["gpu"] == "NVIDIA H200"
    assert manifest["versions"]["torch"].startswith("2.11")
    assert [(r["label"], r["status"]) for r in manifest["runs"]] == [
        ("compiled", "complete"),
        ("eager", "complete"),
    ]


@pytest.mark.parametrize("label", ["compiled", "eager"])
def test_cuda_step_times_and_memory(label: str) -> None:
    events = _events(ROUTING, label)
    gpu = [e for e in events if e["ev"] == "step_gpu"]
    ends = [e for e in events if e["ev"] == "step_end"]
    assert len(gpu) == len(ends) == 12
    assert all(0.005 < e["gpu_s"] < 1.0 for e in gpu if e["request_id"].startswith("r"))
    assert all(e["memory"]["allocated"] > 0 for e in ends)


def test_region_markers_line_up_between_compiled_and_eager() -> None:
    def regions(label: str) -> Counter[str]:
        names = (e.get("name", "") for e in _kineto(ROUTING, label, "r0-s2-steady"))
        return Counter(n for n in names if n.startswith("diag.region:"))

    compiled, eager = regions("compiled"), regions("eager")
    # 12 blocks x 2 guidance passes x 2 steps, each call with its own ordinal.
    assert sum(compiled.values()) == 96
    assert compiled == eager


def test_routing_kernels_differ_between_runs() -> None:
    def kernels(label: str) -> set[str]:
        return {
            e["name"] for e in _kineto(ROUTING, label, "r0-s2-steady") if e.get("cat") == "kernel"
        }

    assert "_rms_norm_fwd_kernel" in kernels("eager")
    compiled = kernels("compiled")
    assert "_rms_norm_fwd_kernel" not in compiled
    assert any(k.startswith("triton_") and "rsqrt" in k for k in compiled)


def test_offload_copies_in_windows_and_live_recompile() -> None:
    window = _kineto(OFFLOAD, "compiled", "r0-s2-steady")
    htod = [e for e in window if e.get("cat") == "gpu_memcpy" and "HtoD" in e["name"]]
    kernels = [e for e in window if e.get("cat") == "kernel"]
    assert sum(e["dur"] for e in htod) > 2 * sum(e["dur"] for e in kernels)
    live = [
        e for e in _events(OFFLOAD, "compiled") if e["ev"] == "recompile" and e["phase"] == "live"
    ]
    assert [(e["request_id"], e["step"]) for e in live] == [("r1", 0)]
    guard = live[0]["guards"][0]
    assert (guard["kind"], guard["source"], guard["expected"], guard["actual"]) == (
        "tensor-size",
        "freqs_w",
        "48",
        "64",
    )
