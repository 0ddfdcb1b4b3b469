"""What a new user hit in the TUI (issue 17): rows at 80x24, ranks told apart, an unknown filter
key said aloud, no `actual None` in a guard, a CPU run's Offload screen, no `gpu: ?`."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from diag.tui.app import DiagApp
from tests.conftest import RecordFixture
from tests.h200data import h200_trace

from .support import drive, screen_text, shown, write_trace


def test_tables_keep_their_rows_at_80x24(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        for key, pane, rows in (("2", "steps", 6), ("3", "compiles", 9), ("6", "cache", 9)):
            await pilot.press(key)
            await pilot.pause()
            # The header row, then the data rows (4 or fewer before, issue 17).
            assert app.view(pane).table.region.height - 1 >= rows, pane

    drive(Path("record-wan-offload-unwarmed"), script, size=(80, 24))


def test_two_ranks_rows_name_their_rank_and_filter_by_it(tmp_path: Path) -> None:
    trace = h200_trace("record-ranks-nccl", tmp_path)

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        compiles = app.view("compiles")
        processes = set(shown(compiles, "process"))
        assert processes == {"rank0", "rank1"}
        await pilot.press("3")
        assert "compiled rank1" in screen_text(app)
        compiles.apply_filter("rank:rank1")
        assert set(shown(compiles, "process")) == {"rank1"}
        steps = app.view("steps")
        assert set(shown(steps, "process")) == {"rank0", "rank1"}

    drive(trace, script, size=(120, 30))


def test_an_unknown_filter_key_is_said_not_silent(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        view = app.view("compiles")
        view.apply_filter("framez:wan")
        await pilot.pause()
        assert not view.shown
        assert "no filter key framez: searched as text" in screen_text(app)
        view.apply_filter("frame:wan")
        await pilot.pause()
        assert view.shown and "no filter key" not in screen_text(app)

    drive(Path("record-wan-offload-unwarmed"), script, size=(120, 30))


def _guard_trace(tmp_path: Path) -> Path:
    """A recompile whose guard has an expected value and no actual one: Dynamo's text for a
    Python-value guard (`len(self.config) == 3`) carries no actual value. Hand-written events:
    the point is the rendering of a guard lacking one side."""
    frame = {"name": "block", "file": "model.py", "line": 3}
    guard = {"kind": "container-length", "source": "self.config", "expected": "3", "raw": "x"}
    return write_trace(
        tmp_path / "t",
        [
            {"t": 2, "ev": "compile_end", "compile_id": "0/0", "frame": frame, "phase": "live"},
            {"t": 3, "ev": "recompile", "compile_id": "0/1", "guards": [guard]},
            {"t": 4, "ev": "compile_end", "compile_id": "0/1", "frame": frame, "phase": "live"},
        ],
        ["python", "prog.py"],
    )


def test_a_guard_without_an_actual_value_says_only_what_it_has(tmp_path: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        view = app.view("compiles")
        assert view.select("id:0/1")
        await pilot.pause()
        text = screen_text(app)
        assert "container-length on self.config: expected 3" in text
        assert "actual None" not in text

    drive(_guard_trace(tmp_path), script, size=(120, 40))


def test_a_cpu_run_says_why_offload_has_nothing(record_fixture: RecordFixture) -> None:
    trace = record_fixture("routing", baseline=True, profile="steady:1")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        await pilot.pause()
        text = screen_text(app)
        assert "profiled step(s), none on a GPU" in text
        assert "no profiled step to break down" not in text
        await pilot.press("2")
        steps = app.view("steps")
        assert steps.select("profiled:yes")
        await pilot.pause()
        assert "gpu:" not in screen_text(app)

    drive(trace.path, script, size=(120, 40))
