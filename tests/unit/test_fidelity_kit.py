"""The fidelity harness's parts that need no run: the generator (deterministic, every family
and plant reachable, programs that compile as Python with their planted lines where the truth
says), the matching rules of the comparison, and the report's wording when a kind of claim was
never made. The harness end to end is tests/integration/test_fidelity_sample.py."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from fidelity_kit import checks, compare, report  # noqa: E402
from fidelity_kit.evaluate import Evaluation  # noqa: E402
from fidelity_kit.families import DIFFUSERS, FAMILIES  # noqa: E402
from fidelity_kit.generator import sample  # noqa: E402
from fidelity_kit.program import render, truth  # noqa: E402
from fidelity_kit.records import DiagRequest, ProcessRecord, RequestRecord  # noqa: E402
from fidelity_kit.spec import PLANTS, ProgramSpec  # noqa: E402


def test_the_sample_is_deterministic_and_covers_the_catalogue() -> None:
    first = sample(7, 60, DIFFUSERS)
    again = sample(7, 60, DIFFUSERS)
    assert [s.to_json() for s in first] == [s.to_json() for s in again]
    assert [s.to_json() for s in sample(8, 60, DIFFUSERS)] != [s.to_json() for s in first]
    assert {s.family for s in first} == set(DIFFUSERS)
    assert {"wan", "flux", "sd3", "cogvideox", "ltx", "pixart", "sana", "auraflow"} <= set(
        DIFFUSERS
    ) and "qwenimage" in DIFFUSERS
    clean = [s for s in first if s.clean]
    assert len(clean) == 15 and all(not s.plants and s.warmup == "all" for s in clean)
    assert {s.family for s in clean[:9]} == set(DIFFUSERS)  # a clean variant of each family
    planted = {p for s in first for p in s.plants}
    assert planted == set(PLANTS) - {"patched-torch"}  # it changes only what Inductor caches
    inductor = {p for s in sample(7, 60, DIFFUSERS, "inductor") for p in s.plants}
    assert "patched-torch" in inductor
    assert {s.unit for s in first} == {"repeated", "per-block", "whole", "helper"}
    assert {s.layout for s in first} == {"single", "spawn", "ranks"}
    for spec in first:
        assert len([p for p in spec.plants if p in ("crash", "mark-dynamic-conflict")]) <= 1
        if "repeated" == spec.unit:
            assert FAMILIES[spec.family].repeated
        if "layer-strides" in spec.plants:
            assert spec.unit in ("repeated", "per-block")
        if "backend-failure" in spec.plants:  # it needs a live compile to fail
            assert "unwarmed-shape" in spec.plants and spec.warmup == "one"


def test_programs_are_python_with_their_plants_where_the_truth_says() -> None:
    for spec in sample(3, 40, list(FAMILIES)):
        text = render(spec)
        ast.parse(text)  # a real program
        lines = text.splitlines()
        for item in truth(spec, text):
            if item.line is not None:
                assert f"# plant:{item.plant}" in lines[item.line - 1]
        assert ("import diag.api as diag" in text) == (spec.marking != "bare")
        assert ("import diffusers" in text) == (FAMILIES[spec.family].source is None)


def test_a_reason_mentions_a_source_by_its_names() -> None:
    assert compare.mentions("G['ATTN_CONFIG']['impl'] == 'sdpa'", "G['ATTN_CONFIG']['impl']")
    assert compare.mentions("G['ATTN_CONFIG']['impl'] == 'sdpa'", "__main__.ATTN_CONFIG['impl']")
    assert compare.mentions("tensor 'hidden_states' stride mismatch at index 1", "hidden_states")
    assert compare.mentions("L['self'].tokens == 16", "self.tokens")
    assert not compare.mentions("tensor 'hidden_states' stride mismatch", "G['ATTN_CONFIG']")
    assert not compare.mentions("anything", None)


def test_a_frame_is_its_name_file_and_first_line() -> None:
    code = "forward@/tmp/p/program.py:65"
    assert compare.same_frame(code, "forward", None)
    assert compare.same_frame(code, "forward@p/program.py:65", "program.py:65")
    assert compare.same_frame(code, "forward", "/tmp/p/program.py:65")
    assert not compare.same_frame(code, "forward", "program.py:66")
    assert not compare.same_frame(code, "forward", "other.py:65")
    assert not compare.same_frame(code, "euler_step", None)
    assert not compare.same_frame(None, "forward", None)


def test_requests_align_by_id_else_by_order() -> None:
    process = ProcessRecord("main", 1, [RequestRecord(r, "live", None, None) for r in ("w1", "r2")])
    assert compare.align(
        [DiagRequest("w1", "warmup", None), DiagRequest("r2", "live", None)], process
    ) == {
        "w1": "w1",
        "r2": "r2",
    }
    inferred = [DiagRequest("r1", "live", None), DiagRequest("r2", "live", None)]
    assert compare.align(inferred, process) == {"r1": "w1", "r2": "r2"}


def test_a_verdict_needs_a_checked_field_to_confirm() -> None:
    verdict = compare.Verdict()
    verdict.check("calls", None, "not watched")
    assert verdict.settle().status == compare.UNCHECKED
    verdict.check("frame", True)
    assert verdict.settle().status == compare.CONFIRMED
    verdict.check("step", False, "torch did it at step 2")
    assert verdict.settle().status == compare.CONTRADICTED
    assert verdict.why == ["step: torch did it at step 2"]


def test_calls_compiled_after_a_limit_hit_count_from_the_hit() -> None:
    """The oracle's rows are per step. In an older record the step of the hit does not say
    which of its calls ran after the hit: a call that compiled a new entry ran before it, one
    an earlier entry served may have run on either side (the real case, with the order kept:
    tests/integration/test_limit_shared_code.py)."""
    after = {"calls": 2, "eager": 0, "compiled_new": 0, "matched": {"0/0": 2}}
    hit = {"calls": 2, "eager": 1, "compiled_new": 1, "matched": {}}
    assert checks._compiled_after_first_eager([hit, after]) == (2, 2)
    served = {"calls": 3, "eager": 1, "compiled_new": 0, "matched": {"0/0": 2}}
    assert checks._compiled_after_first_eager([served, after]) == (2, 4)
    assert checks._compiled_after_first_eager([dict(served, compiled_after_eager=1), after]) == (
        3,
        3,
    )
    assert checks._compiled_after_first_eager([after]) == (0, 0)


def test_the_report_says_when_no_claim_of_a_kind_was_made() -> None:
    spec = ProgramSpec("p", 0, "wan", "helper", "None", "one", "api", "single", "aot_eager", [], [])
    text = report.render([Evaluation(spec)], ["header"])
    assert "no claims of kind recompile were made" in text
    assert "live-compile       no claims were made" in text
    assert "0 claim(s)" in text and "%" not in text.split("claims per analyzer")[0]
