"""The trace reader refuses unusable directories with one clear message (exit 2 from the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from diag.errors import DiagError
from diag.trace.load import load_trace


def _manifest(folder: Path, **fields: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = {"format": "diag-trace", "version": 1, "status": "complete", "runs": []}
    data.update(fields)
    (folder / "manifest.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: p, "no such trace directory"),
        (lambda p: (p.mkdir(), p)[1], "not a diag trace directory"),
        (
            lambda p: (p.mkdir(), (p / "manifest.json").write_text('{"form'), p)[2],
            "truncated or corrupt",
        ),
        (lambda p: _manifest(p, format="other"), "not a diag trace manifest"),
        (lambda p: _manifest(p, version=99), "newer diag (format version 99"),
    ],
)
def test_unusable_directories(tmp_path: Path, setup: object, message: str) -> None:
    folder = setup(tmp_path / "t")  # type: ignore[operator]
    with pytest.raises(DiagError, match=message.replace("(", r"\(")):
        load_trace(folder)
    proc = subprocess.run(
        [sys.executable, "-m", "diag", "analyze", str(folder)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    )


def test_truncated_event_lines_are_skipped(tmp_path: Path) -> None:
    folder = _manifest(tmp_path / "t")
    events = folder / "runs" / "compiled" / "pid1" / "events.jsonl"
    events.parent.mkdir(parents=True)
    lines = [
        {"t": 1, "ev": "process_start", "pid": 1, "argv": [], "versions": {}},
        {"t": 2, "ev": "request_start", "request_id": "r0", "phase": "live", "shape": [2, 8, 8]},
        {"t": 3, "ev": "step_start", "request_id": "r0", "step": 0, "phase": "live"},
        {"t": 4, "ev": "step_end", "request_id": "r0", "step": 0, "phase": "live", "wall_s": 0.5},
    ]
    events.write_text("\n".join(json.dumps(line) for line in lines) + '\n{"t": 5, "ev": "st')
    run = load_trace(folder).compiled
    assert run is not None
    assert [(s.request_id, s.index, s.wall_s) for s in run.steps] == [("r0", 0, 0.5)]
    assert not run.processes[0].ended
