"""warmup-plan's shape rules on shape lists alone (no torch: the rules are arithmetic on the
request shapes a recording holds; the integration tests check them against torch's record)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from diag.warmup_plan import GENERALISE, SPECIALISE, VARIANT, _dimension_requests

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
