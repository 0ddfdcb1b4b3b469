"""Hand-written trace directories, for situations a real CPU run cannot produce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diag.trace.load import load_trace
from diag.trace.run import Trace


def write_trace(folder: Path, events: list[dict[str, Any]]) -> Trace:
    """A one-process trace directory (docs/FORMAT.md) holding `events`, loaded."""
    manifest = {
        "format": "diag-trace",
        "version": 1,
        "status": "complete",
        "runs": [{"label": "compiled", "stance": "default", "status": "complete"}],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = folder / "runs" / "compiled" / "pid7"
    proc.mkdir(parents=True)
    lines = [{"t": 1, "ev": "process_start", "pid": 7, "ppid": 1, "argv": ["serve"]}, *events]
    (proc / "events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8"
    )
    return load_trace(folder)
