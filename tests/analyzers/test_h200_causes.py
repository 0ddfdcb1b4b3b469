"""Causes read off the H200 recordings of issue 23 (tests/data/h200/README.md): what torch's
profiler and MagiCompiler's counters say, and what diag names.

- magi-cudnn-*: a live request at a sequence length no warmup served, on magi's fast path (no
  compile). The profiled step 0 spends 115.4 ms of CPU in `aten::_cudnn_attention_forward`
  against 1.2 ms in a steady step (torch's profiler): cuDNN building an execution plan. Without
  a profile the evidence does not say, and diag says so (never "the allocator" for 302 MiB).
- magi-loop-nosplit: a declared boundary op magi's counters never split at.
- magi-loop: a hand-written loop over magi-compiled blocks with no adapter: steps are the loop's
  iterations (the program ran 2, 2, 8, 8 and 8 steps; the two 3072-token requests follow each
  other with nothing between them, so diag reads them as one of 16 and its steps-inferred
  notice says such requests count as one).
"""

from __future__ import annotations

from pathlib import Path

from diag.analyzers import run_analyzers
from diag.trace.load import load_trace

H200 = Path(__file__).resolve().parent.parent / "data" / "h200"


def _copy(name: str, tmp: Path) -> Path:
    """A copy: the Kineto cache is written beside the trace."""
    import shutil

    target = tmp / name
    shutil.copytree(H200 / name, target)
    return target


def test_cudnn_plan_read_off_the_profile(tmp_path: Path) -> None:
    trace = load_trace(_copy("magi-cudnn-profiled", tmp_path))
    findings = run_analyzers(trace, ["step0-spike"])
    (spike,) = [f for f in findings if f.id == "step0-spike:r1"]
    assert spike.data["cause"] == "cudnn-plan"
    assert "cuDNN built an execution plan" in spike.title
    text = "\n".join(spike.evidence)
    assert "aten::_cudnn_attention_forward: 115.4 ms in step 0 against 1.2 ms steady" in text
    assert "profiler" not in spike.title
    assert spike.claims[0]["cause"] == {"kind": "cudnn-plan", "decided": True}
    assert "sequence length" in spike.fix


def test_unprofiled_spike_is_not_blamed_on_the_allocator() -> None:
    trace = load_trace(H200 / "magi-cudnn-unprofiled")
    (spike,) = [f for f in run_analyzers(trace, ["step0-spike"]) if f.id == "step0-spike:r1"]
    assert spike.data["cause"] == "unknown"
    text = "\n".join(spike.evidence)
    assert "the allocator's reserve grew 302.00 MiB inside step 0" in text
    assert "allocator" not in spike.title
    assert "--profile new-shapes" in spike.fix


def test_boundary_op_that_never_splits() -> None:
    trace = load_trace(H200 / "magi-loop-nosplit")
    findings = run_analyzers(trace, ["magi-compile"])
    (unsplit,) = [f for f in findings if f.id.startswith("magi-compile:unsplit:")]
    assert unsplit.severity == "warning"
    assert unsplit.data["ops"] == ["aten::_scaled_dot_product_cudnn_attention"]
    assert unsplit.data["pieces"] == unsplit.data["compiled"]
    clean = load_trace(H200 / "magi-clean")
    assert not [f for f in run_analyzers(clean, ["magi-compile"]) if "unsplit" in f.id]


def test_magi_loop_steps_are_denoising_iterations() -> None:
    run = load_trace(H200 / "magi-loop").compiled
    assert run is not None
    served = [(r.shape, len(r.steps)) for r in run.requests]
    assert served == [
        ([2, 1024, 1536], 2),
        ([2, 2048, 1536], 2),
        ([2, 3072, 1536], 16),
        ([2, 2048, 1536], 8),
    ]
    # A denoising step of 8 blocks and the helper (4.8-10.7 ms), not one block call (an
    # eighth of that, under 1.4 ms).
    steady = [s.gpu_s for r in run.requests[2:] for s in r.steps[1:6] if s.gpu_s]
    assert min(steady) > 0.003
    # The helper's first compile lands in the step that ran it.
    assert all(c.step is not None for c in run.compiles)
    # Each request's last step ends at its last compiled call, on the GPU too (its CUDA event
    # was recorded there): not at the next request's first call or at exit, which measured
    # 40 ms to 4.5 s before.
    for request in run.requests:
        last = request.steps[-1]
        assert last.gpu_s is not None and last.wall_s is not None
        assert last.gpu_s < 2 * last.wall_s + 0.002, (request.request_id, last.gpu_s)


def test_magi_loop_causes_agree_and_say_what_was_inferred(tmp_path: Path) -> None:
    from diag.evidence.status import assess

    trace = load_trace(_copy("magi-loop", tmp_path))
    findings = run_analyzers(trace, ["step0-spike", "magi-compile", "dynamic-shapes"])
    by_id = {f.id: f for f in findings}
    # r3's step 0 (a new sequence length on magi's fast path, no compile, 56 ms against 6.9):
    # magi has nothing of its own to say, so it says nothing (it said "cause unknown").
    assert "magi-compile:step0:r3" not in by_id
    # r1: magi's 8 compiles are the cause; the helper's torch.compile is context, and
    # Dynamo's compiles of magi's own targets are not listed twice.
    r1 = by_id["magi-compile:step0:r1"]
    assert "8 magi compile(s)" in r1.title
    assert any("torch.compile compiled 1 time(s) in step 0 (combine" in e for e in r1.evidence)
    # x's dim 1 is declared dynamic and magi's fast-path calls had 1024, 2048 and 3072 tokens:
    # no "symbolic that never changed", and no dynamic= advice magi cannot take.
    assert not [f for f in findings if f.id.startswith("dynamic-shapes:over-dynamic:forward")]
    kinds = [n.kind for n in assess(trace).notices]
    assert "steps-inferred" in kinds


def test_magi_step0_names_what_step0_spike_names(tmp_path: Path) -> None:
    """magi-cudnn-profiled r1: step0-spike reads cuDNN's plan off the profile; magi's step-0
    finding, which printed "cause unknown" beside it, has nothing magi-specific to add."""
    trace = load_trace(_copy("magi-cudnn-profiled", tmp_path))
    by_id = {f.id: f for f in run_analyzers(trace, ["step0-spike", "magi-compile"])}
    assert by_id["step0-spike:r1"].data["cause"] == "cudnn-plan"
    assert "magi-compile:step0:r1" not in by_id
