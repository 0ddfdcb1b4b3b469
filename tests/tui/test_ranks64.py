"""The TUI on 64 ranks (replicated from the real H200 two-rank recording, events only:
tests/ranks64.py): Steps and Compiles group each step and compile across ranks, collapsed by
default; Enter opens a group into its ranks' rows; a rank filter shows the ranks' own rows;
a finding about rank 32 still jumps to its compile."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import TabbedContent

from diag.tui.app import DiagApp
from tests.ranks64 import make_ranks

from .support import choose_finding, drive, screen_text, shown

ALL = "ranks 0-63"


def _heads(view: object) -> list[str]:
    return [r.key for r in view.shown if r.key.startswith("group|")]  # type: ignore[attr-defined]


def test_64_ranks_steps_are_one_row_per_step_and_open_on_enter(tmp_path: Path) -> None:
    folder = make_ranks(tmp_path / "t")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("2")
        steps = app.view("steps")
        per_rank = len(steps._flat)  # type: ignore[attr-defined]
        assert per_rank == 64 * 12  # 4 warmup and 8 live steps on each rank
        assert len(steps.shown) == 12  # collapsed: one row per step
        assert set(shown(steps, "request")) == {"warmup0", "warmup1", "r0", "r1"}
        text = screen_text(app)
        assert f"▸ compiled {ALL}" in text
        # r1 step 0: rank 32 recompiled there, the group row says so.
        assert steps.select("request:r1 step:0")
        row = steps.current
        assert row is not None and row.key == "group|compiled|r1|0"
        assert "1 · " in row.cells[7].plain and row.cells[7].plain.endswith("on rank 32")
        text = screen_text(app)
        assert "slowest rank 32" in text
        assert "ranks 0-31, 33-63 compiled nothing in this step" in text
        assert "⏎ Show ranks" in text.splitlines()[-1]  # the footer says what Enter does
        await pilot.press("enter")
        await pilot.pause()
        assert len(steps.shown) == 12 + 64
        assert steps.current is not None and steps.current.key == "group|compiled|r1|0"
        assert "▾ compiled " in screen_text(app)
        assert "⏎ Hide ranks" in screen_text(app).splitlines()[-1]
        await pilot.press("down")
        await pilot.pause()
        assert steps.current is not None and steps.current.fields["process"] == "rank0"
        assert "ranks" not in screen_text(app).splitlines()[-1]  # a rank's row: nothing to do
        await pilot.press("up", "enter")
        await pilot.pause()
        assert len(steps.shown) == 12
        # A filter that names a rank shows that rank's own rows, ungrouped.
        steps.apply_filter("rank:rank32 request:r1")
        assert set(shown(steps, "process")) == {"rank32"} and len(steps.shown) == 4
        assert not _heads(steps)
        steps.apply_filter("")
        assert len(steps.shown) == 12

    drive(folder, script, size=(120, 40))


def test_64_ranks_compiles_group_alike_compiles_and_the_odd_one_stands_alone(
    tmp_path: Path,
) -> None:
    folder = make_ranks(tmp_path / "t")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        compiles = app.view("compiles")
        # Every rank compiled the block twice in warmup (the H200 run: 2 per rank); rank 32
        # recompiled live, alone: 2 group rows and 1 rank's own row.
        heads = _heads(compiles)
        assert len(heads) == len(compiles.shown) - 1
        alone = [r for r in compiles.shown if not r.key.startswith("group|")]
        assert [r.fields["process"] for r in alone] == ["rank32"]
        assert alone[0].fields["phase"] == "live"
        # The live-compile finding of rank 32 opens its compile.
        finding = await choose_finding(app, pilot, "live-compile", request_id="r1")
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "compiles"
        current = compiles.current
        assert current is not None and current.fields["process"] == "rank32"
        assert current.fields["id"] == finding.data["compile_ids"][0]
        # A group's detail: the spread over ranks, then the slowest rank's compile.
        compiles.apply_filter("phase:warmup")
        await pilot.pause()
        assert compiles.shown and all(r.key.startswith("group|") for r in compiles.shown)
        text = screen_text(app)
        assert f"the same compile on {ALL}" in text and "slowest rank" in text

    drive(folder, script, size=(120, 40))


def test_64_ranks_cache_growth_is_one_ranks_not_all_interleaved(tmp_path: Path) -> None:
    folder = make_ranks(tmp_path / "t")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("6")
        await pilot.pause()
        cache = app.view("cache")
        [row] = cache.shown
        # Rank 32 recompiled live: its counts, named, not 64 ranks' counts interleaved.
        assert row.cells[3].plain == "1 2 3 3 (rank 32)"
        text = screen_text(app)
        assert f"warmup0 step 0: 1   ({ALL})" in text
        assert "r1 step 0: 3   (rank 32)" in text
        assert "(pid " not in text

    drive(folder, script, size=(120, 40))
