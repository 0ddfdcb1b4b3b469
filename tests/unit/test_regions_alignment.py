"""Eager against compiled compares like with like: a profiled step that compiled is left out
while steady steps remain (issue 13: a live recompile counted as the region's kernel time).

The step profiles are built by hand: the case needs a compile inside a profiled step on one
side and steady profiled steps on both, with exact region times to compare.
"""

from __future__ import annotations

from pathlib import Path

from diag.evidence.regions import compare_regions
from diag.trace.kineto import Annotation, CpuOp
from diag.trace.profiles import REGION_PREFIX, StepProfile
from diag.trace.run import Compile, Frame, RunData, Trace


def _profile(run: str, step: int, region_ms: float) -> StepProfile:
    mark = Annotation(f"{REGION_PREFIX}block_runner#0", 1000.0, region_ms * 1000.0, 1)
    op = CpuOp("aten::addmm", 1001.0, 10.0, 1, 0, "block_runner#0")
    return StepProfile(
        run, 1, None, "r1", step, "live", "w", "cpu", 0.0, 1e6, cpu_ops=[op], annotations=[mark]
    )


def _run(label: str, region_ms: dict[int, float], compile_at: int | None) -> RunData:
    run = RunData(label, Path("."), "complete")
    run.profiles = [_profile(label, step, ms) for step, ms in region_ms.items()]
    if compile_at is not None:
        frame = Frame("block_runner", "transformer_infer.py", 21)
        run.compiles.append(Compile("0/1", 0, frame, "ok", 0.6, 0, 0, "live", "r1", compile_at, 1))
    return run


def _trace(compiled: RunData, eager: RunData) -> Trace:
    return Trace(Path("."), {}, {"compiled": compiled, "eager": eager})


def test_a_step_that_compiled_is_left_out_while_steady_steps_remain() -> None:
    compiled = _run("compiled", {0: 653.1, 2: 14.4}, compile_at=0)
    eager = _run("eager", {0: 19.2, 2: 18.9}, compile_at=None)
    (comparison,) = compare_regions(_trace(compiled, eager))
    assert comparison.steps == 1 and comparison.compiling_steps == 0
    assert round(comparison.compiled_s * 1000, 1) == 14.4
    assert round(comparison.reference_s * 1000, 1) == 18.9


def test_only_compiling_steps_are_compared_and_said_so() -> None:
    compiled = _run("compiled", {0: 653.1}, compile_at=0)
    eager = _run("eager", {0: 19.2}, compile_at=None)
    (comparison,) = compare_regions(_trace(compiled, eager))
    assert comparison.steps == 1 and comparison.compiling_steps == 1
