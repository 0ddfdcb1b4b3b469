"""warmup-hygiene: whose empty_cache() call it is decides the fix.

A real CPU recording: the program empties the cache itself, and diffusers' own
`empty_device_cache("cuda")` (what a pipeline's `maybe_free_model_hooks()` reaches under
`enable_model_cpu_offload()`) does too; torch.cuda.empty_cache() runs (a no-op on a CPU build)
and diag records each caller. The H200 recording of a diffusers pipeline under
`enable_model_cpu_offload()` (tests/data/h200/offload-model-unprofiled) was made before the
collector named callers: the model-offload case adds to its real events the caller the CPU
recording shows diffusers 0.42.1 gives (`empty_cache()` at diffusers/utils/torch_utils.py:257),
and the same events without it check what diag says when the caller is not known.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import diffusers.utils.torch_utils
import pytest

from diag.analyzers.hygiene import analyze as hygiene
from diag.findings.analysis import analyze
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.analyzers.support import write_trace
from tests.h200data import h200_trace
from tests.integration.support import PYTHON, diag_record

APP = """
import torch
import diag.api as diag
from diffusers.utils.torch_utils import empty_device_cache

with diag.phase("warmup"):
    with diag.request("w0", shape=[2]):
        with diag.step():
            torch.ones(2) + 1
for rid in ("r0", "r1"):
    with diag.request(rid, shape=[2]):
        with diag.step():
            torch.ones(2) + 1
        empty_device_cache("cuda")  # diffusers' own call
        torch.cuda.empty_cache()  # the program's
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    folder = tmp_path_factory.mktemp("callers")
    (folder / "app.py").write_text(textwrap.dedent(APP))
    proc = diag_record(folder / "t", PYTHON, "app.py", options=("--profile", "none"), cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return load_trace(folder / "t")


def test_the_collector_names_diffusers_as_the_caller(recorded: Trace) -> None:
    assert recorded.compiled is not None
    callers = [e.data["caller"] for e in recorded.compiled.of("empty_cache")]
    library = Path(diffusers.utils.torch_utils.__file__)
    assert {(c["file"], c["name"]) for c in callers[::2]} == {(str(library), "empty_cache")}
    assert {Path(c["file"]).name for c in callers[1::2]} == {"app.py"}


def test_a_librarys_call_is_not_yours_to_remove(recorded: Trace) -> None:
    by_id = {f.id: f for f in hygiene(recorded)}
    assert set(by_id) == {"warmup-hygiene:empty_cache", "warmup-hygiene:empty_cache:diffusers"}
    library = by_id["warmup-hygiene:empty_cache:diffusers"]
    assert library.title.startswith("diffusers calls torch.cuda.empty_cache() during live")
    assert library.fix.startswith("Not yours to remove: it is diffusers' own call")
    assert "Remove torch.cuda.empty_cache()" not in library.fix
    text = "\n".join(library.evidence)
    assert (
        "called from diffusers' own code: empty_cache() at diffusers/utils/torch_utils.py:257"
        in text
    )
    assert library.data["calls"] == 2 and library.data["library"] == "diffusers"
    own = by_id["warmup-hygiene:empty_cache"]
    assert own.fix.startswith("Remove torch.cuda.empty_cache() from the request path")
    own_text = "\n".join(own.evidence)
    assert "called from: <module>() at app.py:" in own_text, own.evidence
    assert "diffusers" not in own_text and own.data["requests"] == ["r0", "r1"]


def _offload_trace(
    tmp_path: Path, caller: dict[str, object] | None, name: str = "offload-model-unprofiled"
) -> Trace:
    folder = h200_trace(name, tmp_path)
    (events,) = folder.glob("runs/compiled/*/events.jsonl")
    lines = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("ev") == "empty_cache" and caller is not None:
            event["caller"] = caller
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n")
    return load_trace(folder)


DIFFUSERS_CALLER = {
    "file": "/usr/lib/python3/dist-packages/diffusers/utils/torch_utils.py",
    "line": 257,
    "name": "empty_cache",
}


def test_model_offload_names_diffusers_switch_and_heads_the_reloads(tmp_path: Path) -> None:
    findings = analyze(_offload_trace(tmp_path, DIFFUSERS_CALLER))
    by_id = {f.id: f for f in findings}
    head = by_id["warmup-hygiene:empty_cache:diffusers"]
    assert head.data["cause"] == "model-offload"
    assert head.title.startswith(
        "diffusers empties the CUDA cache after every request: the pipeline's "
        "enable_model_cpu_offload() (4 call(s) in live requests r2, r3)"
    )
    assert head.fix.startswith("Not yours to remove: diffusers' enable_model_cpu_offload()")
    assert "pipe.to('cuda')" in head.fix and "step0-spike" in head.fix
    assert "the pipeline (WanPipeline) uses enable_model_cpu_offload()" in "\n".join(head.evidence)
    # One switch, one headline: the step-0 reloads it causes are its echoes.
    assert head.related == ["step0-spike:r2", "step0-spike:r3"]
    assert by_id["step0-spike:r2"].group == head.id


def test_the_profiled_reloads_copy_bound_steps_join_the_same_headline(tmp_path: Path) -> None:
    """The profiled recording of the same program: offload-bound measures the reload's copies
    (step 0 of r2 and r3), and names the same switch under the same headline."""
    findings = analyze(_offload_trace(tmp_path, DIFFUSERS_CALLER, "offload-model-profiled"))
    by_id = {f.id: f for f in findings}
    head = by_id["warmup-hygiene:empty_cache:diffusers"]
    assert "offload-bound:copies" in head.related
    assert by_id["offload-bound:copies"].data["diffusers_offload"] == "model"


def test_without_a_caller_diag_says_it_cannot_tell(tmp_path: Path) -> None:
    """The H200 events as recorded (no caller): the program's finding, with both fixes."""
    (finding,) = hygiene(_offload_trace(tmp_path, None))
    assert finding.id == "warmup-hygiene:empty_cache"
    text = "\n".join(finding.evidence)
    assert "called from: not recorded" in text
    assert "these may be its calls" in text
    assert finding.fix.startswith("If the calls are your own: remove")
    assert "If they are diffusers' (enable_model_cpu_offload())" in finding.fix


def test_lightx2v_memory_pressure_names_its_config_keys(tmp_path: Path) -> None:
    """LightX2V's runner (`maybe_empty_cache`, read at ModelTC/LightX2V's default_runner.py)
    empties the cache only under memory pressure, which a CPU run cannot reach: its event is
    hand-written, with the caller its checkout gives."""
    caller = {
        "file": "/srv/LightX2V/lightx2v/models/runners/default_runner.py",
        "line": 296,
        "name": "maybe_empty_cache",
    }
    trace = write_trace(
        tmp_path,
        [
            {"t": 10, "ev": "request_start", "request_id": "r0", "phase": "live"},
            {"t": 20, "ev": "empty_cache", "duration_s": 0.001, "caller": caller}
            | {"phase": "live", "request_id": "r0", "step": None},
            {"t": 30, "ev": "request_end", "request_id": "r0", "phase": "live"},
        ],
    )
    (finding,) = hygiene(trace)
    assert finding.id == "warmup-hygiene:empty_cache:lightx2v"
    assert finding.data["cause"] == "lightx2v-memory-pressure"
    assert "empty_cache_min_free_gib" in finding.fix
    assert finding.fix.startswith("Not yours to remove: LightX2V's runner")
    assert "maybe_empty_cache() at lightx2v/models/runners/default_runner.py:296" in "\n".join(
        finding.evidence
    )
