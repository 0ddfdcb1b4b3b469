"""The Overview shows the warmup plan beside warmup coverage: selecting live-compile's
warmup-coverage finding shows, in its detail, the plan diag warmup-plan gives (made once per
trace by diag/warmup/summary.py, the lines the report shows too). On a real LightX2V server
recording (tests/data/lightx2v/server.tar.gz: warmup 64x64 and 96x64, a live width never
warmed) and with a trace path that holds Textual markup, which shows literally."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from diag.tui.app import DiagApp
from diag.tui.table_view import TableView
from tests.archives import unpack

from .support import drive, screen_text

DATA = Path(__file__).resolve().parents[1] / "data" / "lightx2v" / "server.tar.gz"
MARKUP = "[bold red]srv"


def _unpack(folder: Path) -> Path:
    unpack(DATA, folder)
    trace = folder / MARKUP
    (folder / "server").rename(trace)
    return trace


def _detail(view: TableView) -> str:
    static = view.query_one(".detail-text")
    return str(static.render())


def test_coverage_finding_shows_the_plan(tmp_path: Path) -> None:
    trace = _unpack(tmp_path)

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        assert app.error is None
        view = app.view("overview")
        assert view.select("id:live-compile:warmup-coverage")
        await pilot.pause()
        detail = _detail(view)
        assert "Warmup covered 2 of 3 live shape(s); not covered: 16x2x8x12" in detail
        assert "warmup plan: 2 request(s)" in detail
        assert "1. 16x2x8x12 [specialise]: covers 0/2" in detail
        assert "2. 16x2x16x8 [generalise]" in detail
        assert "paste: _WARMUP_RESOLUTIONS = ((64, 96), (128, 64))" in detail
        # The trace path, in the verify line, is data: its markup shows as typed.
        assert f"verify: diag warmup-plan {trace} --verify" in detail
        assert MARKUP in screen_text(app)
        # Another finding's detail has no plan.
        assert view.select("id:live-compile:warmup-compiles")
        await pilot.pause()
        assert "warmup plan" not in _detail(view)

    drive(trace, script, size=(200, 60))
