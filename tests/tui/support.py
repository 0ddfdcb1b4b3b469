"""Drive the real app headless (Textual's Pilot) and read what it shows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widget import Widget

from diag.tui.app import DiagApp
from diag.tui.table_view import TableView

Script = Callable[[DiagApp, Pilot[None]], Awaitable[None]]


async def wait_loaded(app: DiagApp, pilot: Pilot[None], timeout: float = 60.0) -> None:
    """Until both loading stages have finished (or failed)."""
    waited = 0.0
    while not app.loaded:
        await pilot.pause(0.05)
        waited += 0.05
        assert waited < timeout, "the trace did not load"
    await pilot.pause()


def drive(
    path: Path,
    script: Script,
    size: tuple[int, int] = (100, 30),
    against: Path | None = None,
) -> None:
    """Run the app on `path`, wait for it to load, then run `script` against it."""

    async def main() -> None:
        app = DiagApp(path, against=against)
        async with app.run_test(size=size) as pilot:
            await wait_loaded(app, pilot)
            await script(app, pilot)

    asyncio.run(main())


def screen_text(app: DiagApp) -> str:
    """The characters on screen, as a person reads them."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)


def widget_text(app: DiagApp, widget: Widget) -> str:
    """The characters inside one widget's region of the screen."""
    region = widget.region
    strips = app.screen._compositor.render_strips()[region.y : region.bottom]
    return "\n".join(strip.crop(region.x, region.right).text for strip in strips)


def shown(view: TableView, field: str) -> list[str]:
    """One field of every row the view's filter keeps."""
    return [row.fields[field] for row in view.shown]


async def choose_finding(app: DiagApp, pilot: Pilot[None], analyzer: str, **data: Any) -> Any:
    """Put the cursor on the first finding of `analyzer` (whose data holds `data`), as a person
    would with the arrow keys, and return that finding."""
    view = app.view("overview")
    for index, row in enumerate(view.shown):
        finding = row.payload
        if finding.analyzer == analyzer and all(finding.data.get(k) == v for k, v in data.items()):
            moves = index - view.table.cursor_row
            for _ in range(abs(moves)):
                await pilot.press("down" if moves > 0 else "up")
            await pilot.pause()
            assert view.current is row
            return finding
    raise AssertionError(f"no {analyzer} finding with {data}")


def write_trace(folder: Path, events: list[dict[str, Any]], command: list[str]) -> Path:
    """A one-process trace directory (docs/FORMAT.md) holding `events`."""
    manifest = {
        "format": "diag-trace",
        "version": 1,
        "status": "complete",
        "command": command,
        "runs": [{"label": "compiled", "stance": "default", "status": "complete"}],
    }
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = folder / "runs" / "compiled" / "pid7"
    proc.mkdir(parents=True)
    lines = [{"t": 1, "ev": "process_start", "pid": 7, "ppid": 1, "argv": command}, *events]
    (proc / "events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8"
    )
    return folder
