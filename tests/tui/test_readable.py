"""Read at a glance (issue 28): event kinds in people's words, cut titles that say so, six
findings rows at 80x24, and a footer that says what Enter does on the highlighted row."""

from __future__ import annotations

import re
from pathlib import Path

from textual.pilot import Pilot

from diag.trace.run import Event
from diag.tui.app import DiagApp
from diag.tui.events import EVENT_NAMES, describe, event_name
from diag.tui.evidence import evidence_for

from .support import drive, screen_text, widget_text

FORMAT = Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md"
TRACE = Path("record-wan-offload-unwarmed")


def _enter(app: DiagApp) -> str | None:
    """What the footer shows for Enter (None: nothing)."""
    active = app.screen.active_bindings.get("enter")
    if active is None or not active.binding.show:
        return None
    return active.binding.description


def test_every_recorded_event_kind_has_a_name() -> None:
    """The format's event table (docs/FORMAT.md) against the one mapping the UI uses."""
    text = FORMAT.read_text()
    table = text[text.index("| `ev` | fields | when |") :].split("\n\n")[0]
    kinds = [
        k for line in table.splitlines()[2:] for k in re.findall(r"`(\w+)`", line.split("|")[1])
    ]
    assert len(kinds) > 40
    assert [k for k in kinds if k not in EVENT_NAMES] == []
    assert event_name("some_new_kind") == "some new kind"


def test_events_read_as_what_happened() -> None:
    def event(kind: str, **data: object) -> Event:
        return Event(kind, 1, 7, {"phase": "live", "request_id": "r0", "step": 0, **data})

    assert describe(event("gc_collect", duration_s=32e-6)) == "gc.collect() 32 µs"
    caller = {"file": "/venv/lib/python3.11/site-packages/diffusers/utils/torch_utils.py"}
    assert (
        describe(event("empty_cache", duration_s=0.0043, caller=caller | {"line": 257}))
        == "torch.cuda.empty_cache() 4.3 ms, called by diffusers"
    )
    assert describe(event("compile_timing", compile_id="0/1", total_s=2.75)) == (
        "compile time of 0/1: 2.75 s"
    )
    assert describe(event("compile_timing", compile_id="0/1", runtime=True, total_s=0.2)) == (
        "first-call work of 0/1: 200 ms"
    )
    assert describe(event("cudagraph_record", compile_id="2/0", duration_s=0.012)) == (
        "CUDA graph recorded of 2/0 12 ms"
    )
    assert describe(event("magi_guard_check", ok=False)) == "magi guard check: failed"


def test_step_detail_names_events_for_people(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("2")
        steps = app.view("steps")
        assert steps.select("request:warmup1 step:0")
        await pilot.pause()
        text = screen_text(app)
        assert "gc.collect() 0.2 ms" in text
        assert "gc_collect" not in text and " us" not in text

    drive(TRACE, script, size=(100, 40))


def test_overview_keeps_six_findings_rows_at_80x24(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        table = app.view("overview").table
        assert table.region.height - 1 >= 6  # the header row, then six rows (3 before)
        header = widget_text(app, app.query_one("#meta-short"))
        assert header.splitlines()[0].strip() == (
            "record-wan-offload-unwarmed · complete · 1 error · 2 warning · 2 info"
        )
        assert "versions:" not in screen_text(app)
        # A taller terminal shows the whole header again.
        await pilot.resize_terminal(100, 34)
        await pilot.pause(0.2)
        assert "versions: torch 2.11.0+cu130" in screen_text(app)

    drive(TRACE, script, size=(80, 24))


def test_cut_titles_end_in_an_ellipsis_and_follow_the_width(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        view = app.view("overview")
        table = view.table

        def titles() -> list[str]:
            return [table.get_row_at(i)[2].plain for i in range(table.row_count)]

        narrow = titles()
        full = [row.payload.title for row in view.shown]
        assert any(t.endswith("…") for t in narrow)
        for shown, row in zip(narrow, view.shown, strict=True):
            assert shown.endswith("…") or shown.endswith(row.payload.title)
        assert table.virtual_size.width <= table.size.width  # nothing hides past the edge
        await pilot.resize_terminal(160, 24)
        await pilot.pause(0.2)
        wide = titles()
        assert sum(len(t) for t in wide) > sum(len(t) for t in narrow)
        assert table.virtual_size.width <= table.size.width
        assert len(full) == len(wide)

    drive(TRACE, script, size=(80, 24))


def test_footer_says_what_enter_opens(in_h200: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        view = app.view("overview")
        for index, row in enumerate(view.shown):
            if index:
                await pilot.press("down")
                await pilot.pause()
            target = evidence_for(row.payload)
            tab = target.tab.capitalize() if target is not None else "text only"
            assert _enter(app) == f"Evidence: {tab}", row.payload.id
            assert f"Evidence: {tab}" in screen_text(app).splitlines()[-1]
        last = evidence_for(view.shown[-1].payload)
        assert last is not None
        await pilot.press("enter")
        await pilot.pause()
        assert app.active_pane == last.tab
        assert _enter(app) is None  # a plain row: Enter does nothing there, and none is shown

    drive(TRACE, script, size=(80, 24))
