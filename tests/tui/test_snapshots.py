"""SVG snapshots of the layout, on the committed H200 traces (stable: no times or pids vary).

The environment is cleared of NO_COLOR and TEXTUAL_* (conftest) and each size is pinned.
Update with `pytest tests/tui/test_snapshots.py --snapshot-update` after checking the report.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from diag.tui.app import DiagApp

from .support import choose_finding, wait_loaded

SnapCompare = Callable[..., bool]


def _then(*keys: str, finding: str | None = None) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, DiagApp)
        await wait_loaded(app, pilot)
        if finding is not None:
            await choose_finding(app, pilot, finding)
        await pilot.press(*keys)

    return run_before


def test_overview_100x30(snap_compare: SnapCompare, in_h200: Path) -> None:
    app = DiagApp(Path("record-wan-offload-unwarmed"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=_then())


def test_overview_80x24(snap_compare: SnapCompare, in_h200: Path) -> None:
    """A short terminal: the header collapses to three lines, so the findings table keeps six
    rows; titles end in an ellipsis where cut, and the footer says what Enter opens."""
    app = DiagApp(Path("record-wan-offload-unwarmed"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=_then())


def test_live_compile_evidence_80x24(snap_compare: SnapCompare, in_h200: Path) -> None:
    app = DiagApp(Path("record-wan-offload-unwarmed"))
    run_before = _then("enter", finding="live-compile")
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_steps_plot_100x30(snap_compare: SnapCompare, in_h200: Path) -> None:
    app = DiagApp(Path("record-wan-offload-unwarmed"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=_then("2", "down", "down"))


def test_kernels_100x30(snap_compare: SnapCompare, in_h200: Path) -> None:
    app = DiagApp(Path("record-wan-routing"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=_then("4"))
