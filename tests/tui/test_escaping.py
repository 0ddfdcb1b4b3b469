"""Trace strings are data, never markup: a guard text holding Textual markup shows literally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from diag.tui.app import DiagApp

from .support import drive, screen_text, widget_text, write_trace

FRAME = "[bold red]x[/]"
GUARD = "[link=https://example.com]click[/link] == 3"
SOURCE = "self.cfg['[@click=app.quit]k']"


def _events() -> list[dict[str, Any]]:
    pos = {"phase": "live", "request_id": "r0", "step": 0}
    frame = {"name": FRAME, "file": "/srv/[red]model[/red].py", "line": 7}
    guard = {
        "compile_id": "0/0",
        "kind": "python-value",
        "source": SOURCE,
        "expected": "[i]3[/i]",
        "actual": "4",
        "user_location": "/srv/[red]model[/red].py:9",
        "raw": GUARD,
    }
    return [
        {"t": 10, "ev": "request_start", "request_id": "r0", "phase": "live", "shape": [2, 3]},
        {"t": 11, "ev": "step_start", "request_id": "r0", "step": 0, "phase": "live"},
        {
            "t": 12,
            "ev": "compile_end",
            "compile_id": "0/0",
            "epoch": 0,
            "frame": frame,
            "result": "ok",
            "duration_s": 0.5,
            **pos,
        },
        {"t": 13, "ev": "recompile", "compile_id": "0/1", "epoch": 0, "guards": [guard], **pos},
        {
            "t": 14,
            "ev": "compile_end",
            "compile_id": "0/1",
            "epoch": 0,
            "frame": frame,
            "result": "ok",
            "duration_s": 0.4,
            **pos,
        },
        {"t": 15, "ev": "step_end", "request_id": "r0", "step": 0, "phase": "live", "wall_s": 1.0},
        {
            "t": 16,
            "ev": "cache_entries",
            "when": "exit",
            "full": True,
            "codes": [{**frame, "entries": 2}],
            "request_id": None,
            "step": None,
        },
        {"t": 17, "ev": "request_end", "request_id": "r0", "phase": "live"},
    ]


def test_markup_in_trace_strings_renders_literally(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", _events(), ["serve", "--name", "[b]svc[/b]"])

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        assert app.error is None
        assert "[b]svc[/b]" in screen_text(app)  # the command, on the Overview
        assert FRAME in widget_text(app, app.view("overview").table)  # finding titles
        await pilot.press("3")
        compiles = app.view("compiles")
        assert compiles.select("id:0/1")
        await pilot.pause()
        assert FRAME in widget_text(app, compiles.table)
        detail = screen_text(app)
        assert GUARD in detail and SOURCE in detail
        assert "/srv/[red]model[/red].py:9" in detail
        await pilot.press("6")
        assert FRAME in widget_text(app, app.view("cache").table)
        await pilot.press("2")
        assert FRAME in screen_text(app)  # the step's detail names its compiles
        assert app.is_running  # [@click=app.quit] did nothing

    drive(trace, script, size=(120, 40))


ESCAPES = "\x1b[2J\x1b[H\x1b]0;PWNED\x07"


def test_terminal_escapes_in_trace_strings_show_escaped(tmp_path: Path) -> None:
    """Issue 22's probe: a frame name (and the command) holding escapes that clear the screen
    and retitle the terminal. Rich passes ESC on; the overview shows `\\x1b[2J` instead."""
    events = _events()
    for event in events:
        if isinstance(event.get("frame"), dict):
            event["frame"] = {**event["frame"], "name": "block" + ESCAPES}
    trace = write_trace(tmp_path / "t", events, ["serve", "--name", "svc" + ESCAPES])

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        assert app.error is None
        overview = screen_text(app)
        assert "\x1b" not in overview and "\x07" not in overview
        assert "block\\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07" in overview  # the finding's title
        assert "svc\\x1b[2J" in overview  # the command
        await pilot.press("3")
        await pilot.pause()
        compiles = screen_text(app)
        assert "\x1b" not in compiles and "block\\x1b[2J" in compiles

    drive(trace, script, size=(140, 40))
