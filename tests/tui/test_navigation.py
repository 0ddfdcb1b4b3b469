"""Pilot tests: moving between screens, filtering, and going from a finding to its evidence, on
real traces (CPU recordings shared through record_fixture, and the committed H200 ones).

Each test drives one app session through several steps: an app start costs more than a key."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, TabbedContent

from diag.tui.app import SCREENS, DiagApp
from diag.tui.step_plot import MARK, StepPlot
from tests.conftest import RecordFixture

from .support import choose_finding, drive, screen_text, shown


def _active(app: DiagApp) -> str:
    return app.query_one(TabbedContent).active


def test_keys_show_each_screen_at_80x24(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        assert _active(app) == "overview"
        assert app.focused is app.view("overview").table
        for index, (pane, label) in enumerate(SCREENS, 1):
            await pilot.press(str(index))
            assert _active(app) == pane
            assert app.focused is app.view(pane).table
            assert app.view(pane).table.size.height >= 3  # rows stay visible
            assert app.view(pane).shown  # every screen has data on this trace
            text = screen_text(app)
            assert label in text and "Quit" in text and "Filter" in text
        await pilot.press("2")
        assert "wall time per step" in screen_text(app)

    drive(Path("record-wan-offload-unwarmed"), script, size=(80, 24))


def test_unwarmed_shape_findings_open_the_compile_and_the_step(
    record_fixture: RecordFixture,
) -> None:
    trace = record_fixture("unwarmed-shape")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        # live-compile -> the compile of r1, with its failing guards
        finding = await choose_finding(app, pilot, "live-compile", request_id="r1")
        await pilot.press("enter")
        assert _active(app) == "compiles"
        view = app.view("compiles")
        assert app.focused is view.table
        assert set(shown(view, "request")) == {"r1"}
        assert view.current is not None
        assert view.current.fields["id"] == finding.data["compile_ids"][0]
        text = screen_text(app)
        assert "failing guards" in text and "freqs_w" in text
        assert "filter: run:compiled frame:wan_block_forward request:r1" in text
        await pilot.press("b")
        assert _active(app) == "overview"
        # step0-spike -> step 0 of r1, selected in the table and in the plot, marked compiled
        await choose_finding(app, pilot, "step0-spike", request_id="r1")
        await pilot.press("enter")
        assert _active(app) == "steps"
        steps = app.view("steps")
        assert steps.current is not None
        assert (steps.current.fields["request"], steps.current.fields["step"]) == ("r1", "0")
        plot = app.query_one(StepPlot).data
        run_steps = [r for r in steps.rows if r.fields["run"] == "compiled"]
        assert plot.selected == run_steps.index(steps.current)
        assert plot.marks[plot.selected]
        assert MARK in screen_text(app)

    drive(trace.path, script)


def test_guard_churn_evidence_and_the_filter(record_fixture: RecordFixture) -> None:
    trace = record_fixture("guard-churn")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        finding = await choose_finding(app, pilot, "guard-churn")
        await pilot.press("enter")
        view = app.view("compiles")
        assert _active(app) == "compiles"
        assert shown(view, "id") == finding.data["compile_ids"]
        assert all(finding.data["source"] in row.fields["guard"] for row in view.shown)
        assert "container-length" in screen_text(app)
        # Esc clears the jump's filter; / filters by phase and guard kind
        await pilot.press("escape")
        everything = len(view.shown)
        assert everything > len(finding.data["compile_ids"]) and view.query_text == ""
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        assert app.focused is box
        await pilot.press(*"phase:live kind:container")
        assert 0 < len(view.shown) < everything
        assert set(shown(view, "phase")) == {"live"}
        assert all("container-length" in kinds for kinds in shown(view, "kind"))
        await pilot.press("enter")
        assert app.focused is view.table and not box.display
        assert "filter: phase:live kind:container" in screen_text(app)
        await pilot.press("slash", *" frame:no-such-frame")
        assert view.shown == [] and "0 of" in screen_text(app)
        await pilot.press("escape")
        assert len(view.shown) == everything and app.focused is view.table

    drive(trace.path, script)


def test_recompile_limit_and_cache_bloat_evidence(record_fixture: RecordFixture) -> None:
    trace = record_fixture("recompile-limit")

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        finding = await choose_finding(app, pilot, "recompile-limit")
        await pilot.press("enter")
        compiles = app.view("compiles")
        assert compiles.current is not None
        assert compiles.current.fields["id"] == finding.data["compile_id"]
        assert compiles.current.fields["result"] == "recompile_limit"
        await pilot.press("b")
        bloat = await choose_finding(app, pilot, "cache-bloat")
        await pilot.press("enter")
        assert _active(app) == "cache"
        cache = app.view("cache")
        assert cache.current is not None
        assert cache.current.fields["frame"] == bloat.data["frame"]
        assert cache.current.fields["entries"] == str(bloat.data["entries"])
        text = screen_text(app)
        assert "entries after each step where they changed" in text
        assert "recompile limit" in text

    drive(trace.path, script)


def test_kernel_routing_opens_the_divergent_region(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        finding = await choose_finding(app, pilot, "kernel-routing")
        await pilot.press("enter")
        assert _active(app) == "kernels"
        view = app.view("kernels")
        assert view.current is not None
        assert view.current.fields["region"] == finding.data["region"]
        assert view.current.fields["divergent"] == "yes"
        text = screen_text(app)
        assert "DIVERGENT" in text
        for name in finding.data["missing"]:
            assert name in text

    drive(Path("record-wan-routing"), script)


def test_offload_bound_opens_the_bound_steps(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        finding = await choose_finding(app, pilot, "offload-bound")
        await pilot.press("enter")
        assert _active(app) == "offload"
        view = app.view("offload")
        bound = [(s["request_id"], str(s["step"])) for s in finding.data["steps"]]
        assert [(r.fields["request"], r.fields["step"]) for r in view.shown] == bound
        assert set(shown(view, "bound")) == {"yes"}
        text = screen_text(app)
        assert "BOUND" in text and "copy HtoD" in text

    drive(Path("record-wan-offload-unwarmed"), script)


def test_against_compares_kernels_with_the_other_directory(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        assert app.data is not None and app.data.kernels is not None
        assert app.data.kernels.reference == "against"
        assert "against record-wan-offload-unwarmed" in screen_text(app)
        await pilot.press("4")
        kernels = app.view("kernels")
        assert kernels.shown and kernels.current is not None
        assert "kernel time per step: against" in screen_text(app)
        await pilot.press("2")
        assert "against" in shown(app.view("steps"), "run")

    drive(Path("record-wan-routing"), script, against=Path("record-wan-offload-unwarmed"))
