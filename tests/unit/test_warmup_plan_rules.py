"""warmup-plan's shape rules on shape lists alone (no torch: the rules are arithmetic on the
request shapes a recording holds; the integration tests check them against torch's record)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from diag.warmup.plan import GENERALISE, SPECIALISE, VARIANT, _dimension_requests

DIMS = ["frames", "height", "width"]


def _plan(shapes: list[tuple[int, ...]]) -> list[tuple[list[int], str]]:
    notes: list[str] = []
    requests, _ = _dimension_requests(shapes, 3, DIMS, notes)
    return [(r.shape, r.role) for r in requests]


def test_one_second_request_generalises_every_varied_dim() -> None:
    shapes = [(2, 8, 8), (2, 8, 8), (2, 8, 12), (2, 12, 16)]
    assert _plan(shapes) == [([2, 8, 8], SPECIALISE), ([2, 12, 16], GENERALISE)]


def test_second_request_is_made_of_live_values_when_no_live_shape_changes_them_all() -> None:
    # No live shape changes both height and width from 8x8: take each from traffic.
    plan = _plan([(2, 8, 8), (2, 8, 12), (2, 16, 8)])
    assert plan[0] == ([2, 8, 8], SPECIALISE)
    assert plan[1][1] == GENERALISE
    second = plan[1][0]
    assert second[1] == 16 and second[2] == 12


def test_second_request_changes_the_token_count_too() -> None:
    """A block sees frames x height x width flattened: 8x12 then 12x8 is one size to it (torch's
    record on LightX2V's server, tests/integration/test_lightx2v_warmup_plan.py). No live shape
    changes both dims and the product, so the fewest dims take twice the first value."""
    plan = _plan([(2, 8, 12), (2, 8, 12), (2, 12, 8), (2, 8, 8)])
    assert plan[0] == ([2, 8, 12], SPECIALISE)
    assert plan[1] == ([2, 16, 8], GENERALISE)


def test_sizes_0_and_1_get_a_request_of_their_own() -> None:
    plan = _plan([(4, 8, 8), (4, 12, 8), (1, 8, 8)])
    assert plan == [
        ([4, 8, 8], SPECIALISE),
        ([4, 12, 8], GENERALISE),
        ([1, 8, 8], VARIANT),
    ]


def test_one_shape_needs_one_request() -> None:
    assert _plan([(2, 8, 8), (2, 8, 8)]) == [([2, 8, 8], SPECIALISE)]


def test_fixture_rejects_bad_warmup_shapes_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "diag.fixtures", "--warmup-shapes", "3x3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("diag.fixtures: error: --warmup-shapes: bad request '3x3'")
    assert proc.stderr.count("\n") == 1


LIGHTX2V = Path(__file__).resolve().parents[1] / "data" / "lightx2v"


def test_lightx2v_recording_plans_its_live_resolution_in_pixels() -> None:
    """LightX2V's own run (tests/data/lightx2v/README.md): warmup at 64x64 and 96x64 (the height
    varies), one request at --target_shape 64 96; torch recompiled the block live on the
    rotary table's stride guard (the width). One live resolution: warming it is enough, and
    LightX2V's resolutions are pixels (latents x 8)."""
    from diag.trace.load import load_trace
    from diag.warmup.forms import render
    from diag.warmup.plan import plan_warmup

    trace = load_trace(LIGHTX2V / "model-offload")
    plan = plan_warmup([trace])
    (live,) = plan.live_compiles
    assert "self.cos_sin._base.stride()[0] == 64*self.cos_sin._base.size()[1]" in live.cause
    assert live.covered_by == 0
    assert [(r.shape, r.role) for r in plan.requests] == [([16, 2, 8, 12], SPECIALISE)]
    assert render(plan, "lightx2v").startswith("_WARMUP_RESOLUTIONS = ((64, 96),)")
    fixed = plan_warmup([load_trace(LIGHTX2V / "warm-width")])
    assert fixed.live_compiles == []


def test_recordings_of_different_programs_are_said_to_be() -> None:
    from diag.trace.load import load_trace
    from diag.warmup.plan import plan_warmup

    h200 = Path(__file__).resolve().parents[1] / "data" / "h200"
    traces = [load_trace(LIGHTX2V / "model-offload"), load_trace(h200 / "magi-newshape")]
    plan = plan_warmup(traces)
    assert any("different programs" in note for note in plan.notes)
    same = plan_warmup([load_trace(LIGHTX2V / "model-offload")] * 2)
    assert not any("different programs" in note for note in same.notes)
