"""offload-bound names diffusers' own switch when diffusers offloads, and says what share of the
copy time went back to the host.

Model offload: the H200 recording of a WanPipeline under `enable_model_cpu_offload()`
(tests/data/h200/offload-model-profiled), as recorded. Group offload: no GPU recording of
`enable_group_offload` exists in the repository yet, so the copy-bound H200 recording of the
reference service (record-wan-offload-unwarmed: real copies, real compute) is given the
`pipeline_offload` event a diffusers pipeline with group offloading emits (what
tests/integration/test_record_diffusers_offload.py records on CPU), and half of its
host-to-device copies are relabelled device-to-host: the write-back of every group that
`use_stream=False` does (FACTS, diffusers 0.42.1's `_offload_to_memory`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.findings.model import Finding
from diag.trace.load import load_trace
from tests.h200data import h200_trace

offload_bound = get_analyzer("offload-bound")


def test_model_offload_names_keeping_the_pipeline_on_the_gpu(tmp_path: Path) -> None:
    (finding,) = offload_bound(load_trace(h200_trace("offload-model-profiled", tmp_path)))
    assert finding.data["diffusers_offload"] == "model"
    assert finding.fix.startswith("diffusers' enable_model_cpu_offload() copies the whole model")
    assert "pipe.to('cuda')" in finding.fix and "use_stream=True" in finding.fix
    assert "prefetch block i+1" not in finding.fix
    text = "\n".join(finding.evidence)
    assert "the pipeline (WanPipeline) uses diffusers' enable_model_cpu_offload()" in text
    # Step 0's few bytes back to the host (0.0 ms of 163 ms) are not worth a line.
    assert finding.data["dtoh_share"] is None and "device-to-host" not in text


def _write_backs(tmp_path: Path, offload: dict[str, object] | None) -> Finding:
    folder = h200_trace("record-wan-offload-unwarmed", tmp_path)
    (process,) = (folder / "runs" / "compiled").glob("pid*")
    if offload is not None:
        events = process / "events.jsonl"
        lines = events.read_text().splitlines()
        event = {"t": json.loads(lines[1])["t"], "ev": "pipeline_offload"} | offload
        events.write_text("\n".join([lines[0], json.dumps(event), *lines[1:]]) + "\n")
    for window in (process / "kineto").glob("*.json.gz"):
        with gzip.open(window, "rt") as handle:
            doc = json.load(handle)
        copies = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("Memcpy HtoD")]
        for event in copies[1::2]:
            event["name"] = "Memcpy DtoH (Device -> Pinned)"
        with gzip.open(window, "wt") as handle:
            json.dump(doc, handle)
    (finding,) = offload_bound(load_trace(folder))
    return finding


GROUP = {"pipeline": "WanPipeline", "model": False, "group": True, "param_bytes": {}}


def test_group_offload_without_a_stream_gets_use_stream_and_the_write_back_share(
    tmp_path: Path,
) -> None:
    finding = _write_backs(tmp_path, GROUP | {"group_stream": False})
    share = finding.data["dtoh_share"]
    assert 0.4 < share < 0.6, share
    assert finding.data["diffusers_offload"] == "group"
    text = "\n".join(finding.evidence)
    assert f"{share:.0%} of the copy time is device-to-host (DtoH: " in text
    assert (
        "diffusers' group offloading with use_stream=False writes every group's weights back"
        in (text)
    )
    assert "the pipeline (WanPipeline) uses diffusers' group offloading (use_stream=False)" in text
    assert finding.fix.startswith("Pass use_stream=True to enable_group_offload(...)")
    assert f"nothing is written back ({share:.0%} of the copy time here)" in finding.fix


def test_group_offload_with_a_stream_is_not_told_to_turn_it_on(tmp_path: Path) -> None:
    finding = _write_backs(tmp_path, GROUP | {"group_stream": True})
    assert finding.fix.startswith("diffusers' group offloading already copies on a side stream")
    assert "Pass use_stream=True" not in finding.fix


def test_without_diffusers_the_general_recipe_and_the_write_backs(tmp_path: Path) -> None:
    finding = _write_backs(tmp_path, None)
    assert finding.data["diffusers_offload"] is None
    assert finding.fix.startswith("Overlap the copies with compute: prefetch block i+1")
    assert "If the device-to-host copies are weights going back" in finding.fix
    assert "if these are offloaded weights, inference did not change them" in "\n".join(
        finding.evidence
    )
