"""warmup-plan on MagiCompiler's recordings (tests/data/h200/magi-*, made on an H200 with the
reference service's blocks `magi_compile`d, `dynamic_arg_dims={"x": 1, "freqs_h": 0,
"freqs_w": 0}`; tests/data/h200/README.md), against magi's own record in them.

magi compiles a target once, at its first call, with its declared dims dynamic, and its fast
path checks no guard afterwards: a declared dim needs no second size, so the plan asks for one
request where torch.compile's rules ask for two. A `compile_sizes` entry magi compiles on its
fast path at first use (`magi_runtime_compile`) is a live compile a request of that shape moves
into warmup. A fast-path call that fails the captured guards is no compile at all: no warmup
prevents it, and the plan says so with magi-compile's guard-bypass finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.warmup.forms import render
from diag.warmup.plan import GENERALISE, SPECIALISE, VARIANT, plan_warmup

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
DECLARED = "dynamic_arg_dims x[1], freqs_h[0], freqs_w[0]"


def _trace(name: str) -> Trace:
    return load_trace(H200 / name)


@pytest.mark.parametrize("name", ["magi-newshape", "magi-torch-mode"])
def test_a_declared_dim_needs_no_second_size(name: str) -> None:
    trace = _trace(name)
    run = trace.compiled
    assert run is not None
    # magi's record: the warmup's second request changed the height and live r1 the width
    # (4x48x128, a width warmup never served), and nothing compiled after the first request.
    shapes = {r.request_id: r.shape for r in run.requests}
    assert shapes == {
        "warmup0": [4, 48, 96],
        "warmup1": [4, 64, 96],
        "r0": [4, 48, 96],
        "r1": [4, 48, 128],
    }
    assert {c.request_id for c in run.compiles} == {"warmup0"}
    checks = [e for e in run.of("magi_guard_check") if e.position[1] == "r1"]
    assert all(e.data["ok"] for e in checks)  # MAGI_COMPILE: the fast path's sampled checks
    plan = plan_warmup([trace])
    assert [(r.shape, r.role) for r in plan.requests] == [([4, 48, 96], SPECIALISE)]
    (frame,) = plan.frames
    assert frame.frame == "wan_block_forward" and frame.requests == [0]
    assert frame.magi is not None and DECLARED in frame.magi
    text = render(plan, "text")
    assert "a declared dim needs no second size" in text
    assert "no request is needed to generalise a size" in text
    assert render(plan, "fixture") == "--warmup-shapes 4x48x96"


def test_magi_mode_costs_every_target_instance_first_compile() -> None:
    trace = _trace("magi-newshape")
    plan = plan_warmup([trace])
    firsts = [c.duration_s or 0.0 for c in trace.compiled.compiles]  # type: ignore[union-attr]
    assert len(firsts) == 4  # one per block: magi keeps a compile state per module instance
    assert plan.requests[0].cost_s == pytest.approx(sum(firsts))
    assert plan.requests[0].cost_from == "4 first compiles of 1 frame(s) as recorded"


def test_a_compile_sizes_entry_compiled_live_gets_its_shape_warmed() -> None:
    trace = _trace("magi-compile-sizes")
    run = trace.compiled
    assert run is not None
    runtime = run.of("magi_runtime_compile")
    # magi's record: compile_sizes [12800, 40, 80]; live r1 (4x80x160: 12800 tokens) compiled
    # on the fast path in its step 0, once per block.
    assert {e.position for e in runtime} == {("live", "r1", 0)}
    assert len(runtime) == 4
    plan = plan_warmup([trace])
    assert [(r.shape, r.role) for r in plan.requests] == [
        ([4, 48, 96], SPECIALISE),
        ([4, 80, 160], VARIANT),
    ]
    live = plan.live_compiles
    assert len(live) == 4 and {c.covered_by for c in live} == {1}
    assert all(c.cannot is None and c.request == "r1" and c.step == 0 for c in live)
    assert plan.requests[1].cost_s == pytest.approx(
        sum(float(e.data["duration_s"]) for e in runtime)
    )
    assert "compile_sizes [12800, 40, 80]" in live[0].cause
    assert render(plan, "fixture") == "--warmup-shapes 4x48x96,4x80x160"


def test_a_guard_bypass_is_not_warmups_to_fix() -> None:
    trace = _trace("magi-guard-bypass")
    run = trace.compiled
    assert run is not None
    failed = [e for e in run.of("magi_guard_check") if e.data.get("ok") is False]
    assert failed
    plan = plan_warmup([trace])
    (note,) = [n for n in plan.notes if "guard-bypass" in n]
    assert note.startswith(f"wan_block_forward: magi's fast path ran {len(failed)} sampled call")
    assert "block.state.pass_name == 'cond'" in note and "no warmup prevents that" in note


def test_a_torch_compiled_helper_beside_magi_targets_still_needs_two_sizes() -> None:
    """magi_loop.py: 8 magi-compiled blocks and a torch.compile'd `combine`, no warmup; live
    requests at 1024, 2048, 3072 and 2048 tokens. torch recompiled `combine` for the second
    size; the blocks compiled once each."""
    plan = plan_warmup([_trace("magi-loop")])
    assert [r.role for r in plan.requests] == [SPECIALISE, GENERALISE]
    frames = {f.frame: f for f in plan.frames}
    assert frames["forward"].requests == [0] and frames["forward"].magi is not None
    assert frames["combine"].requests == [0, 1] and frames["combine"].magi is None
    resized = [c for c in frames["combine"].live if c.compile_id == "8/1"]
    assert resized[0].covered_by == 1  # the size recompile moves to the generalising request
    assert "tensor 'cond' size mismatch at index 1" in resized[0].cause
