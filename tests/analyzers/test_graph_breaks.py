"""graph-breaks on a real recording of a small program that breaks its compiled function twice:
one warning per user location, with Dynamo's reason and the frame that broke."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from diag.analyzers import get_analyzer
from diag.analyzers.graph_breaks import analyze, reason_of, skipped_frame
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.analyzers.support import write_trace
from tests.integration.support import PYTHON, diag_record

RecordFixture = Callable[..., Trace]

APP = """
import torch
import diag.api as diag

def block(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1

def other(x):
    print("in other")
    return x + 1

f = torch.compile(block, backend="aot_eager")
g = torch.compile(other, backend="aot_eager")
with diag.phase("warmup"):
    with diag.request("w0", shape=[2]):
        with diag.step():
            f(torch.ones(2))
with diag.request("r0", shape=[2]):
    with diag.step():
        f(torch.ones(2))
        g(torch.ones(2))
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    folder = tmp_path_factory.mktemp("breaks")
    (folder / "app.py").write_text(textwrap.dedent(APP))
    proc = diag_record(folder / "t", PYTHON, "app.py", options=("--profile", "none"), cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return load_trace(folder / "t")


def _by_location(findings: list[Finding]) -> dict[str | None, Finding]:
    return {f.location: f for f in findings}


def test_registered() -> None:
    assert get_analyzer("graph-breaks") is analyze


def test_one_warning_per_location(trace: Trace) -> None:
    findings = _by_location(analyze(trace))
    assert set(findings) == {"app.py:7", "app.py:11"}
    assert all(f.severity == "warning" for f in findings.values())

    explicit = findings["app.py:7"]
    assert explicit.id == "graph-breaks:app.py:7"
    assert explicit.data["reason"] == "Call to `torch._dynamo.graph_break()`"
    assert explicit.data["frames"] == ["block"]
    assert explicit.data["count"] == 1  # compiled once in warmup; the live call reuses it
    text = "\n".join(explicit.evidence)
    assert "warmup w0 step 0" in text
    assert "live requests" not in text
    assert "fullgraph=True" in explicit.fix

    printing = findings["app.py:11"]
    assert "print" in "\n".join(printing.evidence)
    assert printing.data["frames"] == ["other"]
    assert "1 of them during live requests" in "\n".join(printing.evidence)


def test_claims_are_the_breaks_the_text_counts(trace: Trace) -> None:
    findings = _by_location(analyze(trace))
    [explicit] = findings["app.py:7"].claims
    assert explicit["kind"] == "graph-break" and explicit["location"] == "app.py:7"
    assert explicit["reason"] == findings["app.py:7"].data["reason"]
    assert (explicit["frame"], explicit["phase"], explicit["request"], explicit["step"]) == (
        "block",
        "warmup",
        "w0",
        0,
    )
    assert explicit["compile_id"] == findings["app.py:7"].data["compile_ids"][0]
    assert explicit["code"].endswith("app.py:5")  # block's code object
    [printing] = findings["app.py:11"].claims
    assert (printing["frame"], printing["request"]) == ("other", "r0")


def test_reason_skips_dynamo_boilerplate() -> None:
    data: dict[str, object] = {
        "reason": "Encountered graph break when attempting to trace CALL: a function call:",
        "raw": "Graph break in user code at a.py:3\nGraph Break Reason: Encountered graph break "
        "when attempting to trace CALL:\n\nData-dependent branching\n  Explanation: ...",
    }
    assert reason_of(data) == "Data-dependent branching"
    assert reason_of({"reason": "call_function print"}) == "call_function print"
    assert reason_of({}) == "no reason recorded"


def test_fixture_runs_have_no_breaks(record_fixture: RecordFixture) -> None:
    assert analyze(record_fixture()) == []


def test_a_break_torch_cannot_resume_from_names_its_own_reason_and_the_skipped_frame() -> None:
    """torch 2.13's payload when a break in a nested call makes it give up on the frame (seen
    on diffusers models compiled whole with a data-dependent branch in an attention processor,
    bench/fidelity.py): the reason is the break's own, not torch's wrapper around it."""
    raw = (
        "Graph break in user code at /srv/app.py:48\n"
        "Graph Break Reason: Failed to handle graph break gracefully. Skipping the function and "
        "falling back to eager. Graph break encountered:\n\nData-dependent branching\n"
        "  Explanation: Detected data-dependent branching.\n"
    )
    data = {
        "reason": "Failed to handle graph break gracefully. Skipping the function and falling "
        "back to eager. Graph break encountered:",
        "raw": raw,
    }
    assert reason_of(data) == "Data-dependent branching"
    assert skipped_frame(data)
    assert not skipped_frame({"reason": "Data-dependent branching", "raw": raw[:40]})


GROUP_OFFLOAD_APP = """
import torch
import diag.api as diag
from diffusers.hooks import apply_group_offloading


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


model = Model().eval()
cpu = torch.device("cpu")
apply_group_offloading(
    model, onload_device=cpu, offload_device=cpu, offload_type="block_level",
    num_blocks_per_group=1, use_stream=False,
)
for block in model.blocks:
    block.compile(backend="aot_eager")
with torch.no_grad():
    with diag.phase("warmup"):
        with diag.request("w0", shape=[2, 8]):
            with diag.step():
                model(torch.ones(2, 8))
    with diag.request("r0", shape=[2, 8]):
        with diag.step():
            model(torch.ones(2, 8))
"""


def test_a_librarys_disabled_hook_is_by_design_not_yours(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """diffusers' group offloading (use_stream=False runs on a CPU) with per-block compile: its
    onload_/offload_ hooks are @torch.compiler.disable'd, so every compiled block breaks there.
    torch's hint says "Remove the torch.compiler.disable call"; the finding says whose it is."""
    folder = tmp_path_factory.mktemp("group-offload")
    (folder / "app.py").write_text(textwrap.dedent(GROUP_OFFLOAD_APP))
    proc = diag_record(folder / "t", PYTHON, "app.py", options=("--profile", "none"), cwd=folder)
    assert proc.returncode == 0, proc.stderr
    findings = analyze(load_trace(folder / "t"))
    by_hook = {f.data["disabled_function"]: f for f in findings}
    assert set(by_hook) == {"ModuleGroup.onload_", "ModuleGroup.offload_"}, findings
    for hook, finding in by_hook.items():
        assert finding.severity == "info" and finding.data["by_design"] is True
        assert finding.data["library"] == "diffusers"
        assert finding.id.startswith("graph-breaks:diffusers/hooks/group_offloading.py:")
        assert finding.title.endswith(
            f"{hook} is torch.compiler.disable'd by design in diffusers (not yours to remove)"
        )
        assert finding.fix.startswith("By design in diffusers: not yours to remove.")
        assert "enable_group_offload" in finding.fix
        assert "Remove the construct" not in finding.fix
        text = "\n".join(finding.evidence)
        assert "is not yours to follow" in text and "torch's hint: " not in text
        assert finding.location and "site-packages/diffusers/hooks/" in finding.location


def test_a_break_in_library_code_that_is_not_disabled(tmp_path: Path) -> None:
    """A break inside a library that did not choose it (torch's words for a data-dependent
    branch; hand-written: diffusers' tiny models trace without such a break on CPU) stays a
    warning, with a fix that does not ask to edit the library."""
    where = "/venv/lib/python3.11/site-packages/diffusers/models/attention_processor.py:900"
    raw = (
        f"Graph break in user code at {where}\nGraph Break Reason: Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching.\n  Hint: Use torch.cond\n"
    )
    event = {"t": 5, "ev": "graph_break", "compile_id": "0/0", "user_location": where}
    event |= {"reason": "Data-dependent branching", "raw": raw, "phase": "warmup"}
    (finding,) = analyze(write_trace(tmp_path, [event]))
    assert finding.severity == "warning" and finding.data["by_design"] is False
    assert finding.id == "graph-breaks:diffusers/models/attention_processor.py:900"
    assert finding.fix.startswith("The break is in diffusers' code, not yours to edit")
    line = "the break is in diffusers' code, not the program's (torch's hint: Use torch.cond)"
    assert line in finding.evidence
