"""The fidelity harness (bench/fidelity.py, issue 24) end to end on its CI sample: six small
programs (bench/fidelity_kit/sample.py) run plain and under `diag record`, each with the
oracle, which records torch's own record without diag.

Two kinds of test share the one set of runs:

- the harness's verdicts: no behaviour difference with and without diag, no contradicted claim
  from the analyzers whose claims are populated, and every planted problem of their kinds
  claimed;
- the comparison logic itself, on claims built by hand against those real oracle records (no
  mock of torch): for each claim kind, a claim torch's record bears out is confirmed and a
  wrong one is contradicted, with the reason.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from fidelity_kit import checks, compare  # noqa: E402
from fidelity_kit.evaluate import Evaluation, evaluate, load_program  # noqa: E402
from fidelity_kit.records import CompileRecord, ProcessRecord  # noqa: E402
from fidelity_kit.runner import run_program  # noqa: E402
from fidelity_kit.sample import ci_sample  # noqa: E402

#: Analyzers whose claims are populated; their claims must hold (magi-compile's are checked on
#: the committed H200 recordings: MagiCompiler does not run in this sample).
POPULATED = {
    "graph-breaks",
    "compile-failure",
    "crash",
    "warmup-hygiene",
    "cudagraphs",
    "trace-boundary",
    "live-compile",
    "recompiles",
    "guard-churn",
    "recompile-limit",
    "step0-spike",
    "cache-bloat",
    "dynamic-shapes",
}
#: Problems those analyzers are expected to claim.
POPULATED_PROBLEMS = {"graph-break", "compile-failure", "crash", "empty-cache"}

Sample = dict[str, tuple[Evaluation, compare.Program]]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    root = tmp_path_factory.mktemp("fidelity")
    found: Sample = {}
    for spec in ci_sample():
        run = run_program(spec, root, timeout=300)
        found[spec.program_id] = (evaluate(run.folder), load_program(run.folder))
    return found


def _process(sample: Sample, name: str) -> tuple[compare.Program, ProcessRecord]:
    program = sample[name][1]
    [process] = program.processes
    return program, process


def _verdict(program: compare.Program, claim: dict[str, Any]) -> compare.Verdict:
    return checks.check_claim(program, claim)


def _confirmed(program: compare.Program, claim: dict[str, Any]) -> None:
    verdict = _verdict(program, claim)
    assert verdict.status == compare.CONFIRMED, (claim, verdict)


def _contradicted(program: compare.Program, claim: dict[str, Any], field: str) -> None:
    verdict = _verdict(program, claim)
    assert verdict.status == compare.CONTRADICTED, (claim, verdict)
    assert any(why.startswith(field) for why in verdict.why), verdict.why


def _base(process: ProcessRecord, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "process": process.pid,
        "rank": None,
        "frame": None,
        "code": None,
        "phase": None,
        "request": None,
        "step": None,
        **fields,
    }


# --- the harness's verdicts ------------------------------------------------------------------


def test_every_program_ran_and_behaves_the_same_with_diag(sample: Sample) -> None:
    assert sorted(sample) == sorted(s.program_id for s in ci_sample())
    for name, (evaluation, _) in sample.items():
        assert evaluation.errors == [], name
        assert evaluation.differences == [], (name, evaluation.differences)
    # The planted crashes happened in both runs (the exit code is one of the facets compared).
    assert _process(sample, "ci-crash-unmarked")[1].crash is not None
    assert _process(sample, "ci-constraint")[1].crash is not None
    assert _process(sample, "ci-clean")[1].crash is None


def test_populated_claims_hold_against_torchs_record(sample: Sample) -> None:
    claims = [c for evaluation, _ in sample.values() for c in evaluation.claims]
    ours = [c for c in claims if c.analyzer in POPULATED]
    wrong = [
        (c.program, c.finding, c.claim, c.verdict.why)
        for c in ours
        if c.verdict.status == "contradicted"
    ]
    assert wrong == []
    confirmed = {c.claim["kind"] for c in ours if c.verdict.status == compare.CONFIRMED}
    assert {"graph-break", "compile-failure", "crash", "empty-cache", "eager-calls"} <= confirmed


def test_planted_problems_of_populated_kinds_are_claimed(sample: Sample) -> None:
    problems = [p for evaluation, _ in sample.values() for p in evaluation.problems]
    ours = [p for p in problems if p.kind in POPULATED_PROBLEMS and p.planted]
    assert {p.kind for p in ours} == POPULATED_PROBLEMS
    assert [p for p in ours if not p.claimed_by] == []


def test_the_clean_program_gives_torch_nothing_to_claim(sample: Sample) -> None:
    evaluation, _ = sample["ci-clean"]
    assert [p for p in evaluation.problems if p.kind != "no-warmup"] == []


# --- the comparison logic, on claims built by hand ---------------------------------------------


def _switch_recompile(process: ProcessRecord) -> CompileRecord:
    """Layer 0's recompile at the request that switched the tier (issue 23's first case)."""
    found = [c for c in process.compiles.values() if c.request == "r3" and c.name == "forward"]
    assert len(found) == 2  # both layers recompiled
    first = found[0]
    assert any("ATTN_CONFIG" in r for r in first.reasons)
    assert "stride" in first.reasons[0]  # the newest entry failed on a stride
    return first


def test_a_recompile_cause_is_the_entry_that_would_have_served(sample: Sample) -> None:
    program, process = _process(sample, "ci-switch-strides")
    item = _switch_recompile(process)
    where = {
        "frame": "forward",
        "phase": "live",
        "request": "r3",
        "step": 0,
        "compile_id": item.compile_id,
    }
    newest = item.entries_before[0]
    served = next(e for e in item.entries_before if "ATTN_CONFIG" in (item.reason_of(e) or ""))
    wrong = {"entry": newest, "guard_kind": "stride", "source": "hidden_states", "decided": True}
    _contradicted(program, _base(process, "recompile", **where, cause=wrong), "cause (planted)")
    right = {
        "entry": served,
        "guard_kind": "python-value",
        "source": "G['ATTN_CONFIG']['impl']",
        "decided": True,
        "why": "tensor-compatible",
    }
    _confirmed(program, _base(process, "recompile", **where, cause=right))
    # An entry that did not fail on the source it is said to have failed on.
    mixed = dict(right, entry=newest)
    _contradicted(program, _base(process, "recompile", **where, cause=mixed), "cause.source")
    undecided = dict(wrong, entry=None, decided=False, why="undecided")
    assert _verdict(program, _base(process, "recompile", **where, cause=undecided)).status == (
        compare.CONFIRMED
    )  # a stride is among torch's reasons, and diag did not pick an entry
    _contradicted(program, _base(process, "recompile", **dict(where, step=1)), "step")
    _contradicted(program, _base(process, "compile", **where), "compile_id")


def test_a_first_compile_and_its_position(sample: Sample) -> None:
    program, process = _process(sample, "ci-switch-strides")
    first = next(c for c in process.compiles.values() if not c.is_recompile)
    claim = _base(
        process,
        "compile",
        frame="forward",
        code=f"program.py:{first.code.rsplit(':', 1)[1]}",
        phase="warmup",
        request="w1",
        step=0,
        compile_id=first.compile_id,
        result="ok",
    )
    _confirmed(program, claim)
    _contradicted(program, dict(claim, phase="live"), "phase")
    _contradicted(program, dict(claim, frame="euler_step"), "frame")
    _contradicted(program, dict(claim, code="program.py:1"), "frame")
    _contradicted(program, dict(claim, process=1), "process")


def test_a_spike_and_its_cause(sample: Sample) -> None:
    program, process = _process(sample, "ci-switch-strides")
    request = process.request("r3")
    assert request is not None
    steps = request.steps
    excess = steps[0].wall_s - statistics.median(s.wall_s for i, s in steps.items() if i)  # type: ignore[operator, type-var]
    spike = _base(
        process,
        "spike",
        request="r3",
        step=0,
        excess_ms=excess * 1000,
        cause={"kind": "compile", "decided": True},
    )
    _confirmed(program, spike)
    _contradicted(program, dict(spike, cause={"kind": "profiler-start"}), "cause")
    _contradicted(program, dict(spike, step=1, excess_ms=excess * 1000), "excess_ms")


def test_warmup_coverage(sample: Sample) -> None:
    program, process = _process(sample, "ci-switch-strides")
    _confirmed(program, _base(process, "covered", request="r3", shape=[8, 8]))
    _contradicted(program, _base(process, "not-covered", request="r3", shape=[8, 8]), "not-covered")
    program, process = _process(sample, "ci-suppressed-failure")
    _confirmed(program, _base(process, "not-covered", request="r3", shape=[12, 8], dims=[0]))
    _contradicted(program, _base(process, "not-covered", shape=[12, 8], dims=[1]), "dims[1]")


def test_a_recompile_limit_and_the_calls_it_left_eager(sample: Sample) -> None:
    program, process = _process(sample, "ci-limit-break")
    [hit] = process.limits
    assert (hit["request"], hit["step"]) == ("r3", 0)
    limit = _base(process, "recompile-limit", frame="euler_step", request="r3", step=0, limit=3)
    _confirmed(program, limit)
    _contradicted(program, dict(limit, request="r4"), "request")
    _contradicted(program, dict(limit, limit=8), "limit")
    # Only calls that match no entry ran eagerly: the 4-step request; the next one ran compiled.
    eager = [{"request": "r3", "step": s} for s in range(4)]
    claim = _base(
        process, "eager-calls", frame="euler_step", calls=eager, count=4, extent="checked"
    )
    _confirmed(program, claim)
    then_on = eager + [{"request": "r4", "step": s} for s in range(3)]
    _contradicted(program, dict(claim, calls=then_on, count=None), "calls")
    _contradicted(program, dict(claim, count=7), "count")


def test_a_graph_break_at_its_planted_line(sample: Sample) -> None:
    program, process = _process(sample, "ci-limit-break")
    [truth] = [t for t in program.spec.truth if t.kind == "graph-break"]
    claim = _base(
        process,
        "graph-break",
        frame="forward",
        location=f"program.py:{truth.line}",
        reason="Unsupported Tensor.item() call with capture_scalar_outputs=False",
    )
    _confirmed(program, claim)
    _contradicted(program, dict(claim, location=f"program.py:{truth.line + 1}"), "location")
    _contradicted(program, dict(claim, reason="Data-dependent branching"), "reason")
    _contradicted(program, dict(claim, frame="euler_step"), "graph-break")


def test_empty_cache_calls(sample: Sample) -> None:
    program, process = _process(sample, "ci-limit-break")
    live = [{"request": r, "step": None} for r in ("r2", "r3", "r4")]
    claim = _base(process, "empty-cache", phase="live", calls=live, count=3)
    _confirmed(program, claim)
    _contradicted(program, dict(claim, calls=[{"request": "w1", "step": None}]), "calls")
    _contradicted(program, dict(claim, count=4), "count")


def test_no_warmup_is_true_only_when_the_program_marked_none(sample: Sample) -> None:
    program, process = _process(sample, "ci-crash-unmarked")
    _confirmed(program, _base(process, "no-warmup", requests=["w1"]))
    program, process = _process(sample, "ci-limit-break")  # --warmup-requests 1
    _contradicted(program, _base(process, "no-warmup"), "no-warmup")


def test_a_suppressed_failure_and_what_ran_eagerly_after_it(sample: Sample) -> None:
    program, process = _process(sample, "ci-suppressed-failure")
    failed = [c for c in process.compiles.values() if c.fail_type]
    assert failed and all(c.request == "r3" for c in failed)
    first = failed[0]
    claim = _base(
        process,
        "compile-failure",
        frame=first.name,
        phase="live",
        request="r3",
        step=0,
        compile_id=first.compile_id,
        fail_type="BackendCompilerFailed",
        suppress_errors=True,
    )
    _confirmed(program, claim)
    _contradicted(program, dict(claim, fail_type="Unsupported"), "fail_type")
    _contradicted(program, dict(claim, suppress_errors=False), "suppress_errors")
    # Dynamo skips the frame's code after the suppressed failure: r4, at the warmed shape, runs
    # eagerly too (warmup's entry stays in the cache, unused), while warmup's calls ran compiled.
    eager = _base(process, "eager-calls", frame=first.name, extent="unknown", count=None)
    rest = [{"request": "r4", "step": s} for s in range(3)]
    _confirmed(program, dict(eager, calls=[{"request": "r3", "step": 0}, *rest]))
    _contradicted(program, dict(eager, calls=[{"request": "w1", "step": 0}]), "calls")


def test_a_crash_where_the_program_raised_it(sample: Sample) -> None:
    program, process = _process(sample, "ci-crash-unmarked")
    claim = _base(process, "crash", phase="live", request="r3", type="RuntimeError", inside=[])
    _confirmed(program, claim)
    _contradicted(program, dict(claim, type="ValueError"), "type")
    _contradicted(program, dict(claim, step=2), "step")  # raised after the denoising loop
    _contradicted(program, dict(claim, inside=["compiled_code"]), "inside")
    program, process = _process(sample, "ci-constraint")
    [failed] = [c for c in process.compiles.values() if c.fail_type]
    assert failed.fail_type == "ConstraintViolationError"
    _confirmed(program, _base(process, "crash", type="ConstraintViolationError", request="w1"))
