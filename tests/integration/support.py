"""Run `diag record` in a real subprocess and read what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from diag.trace.lines import iter_events

PYTHON = sys.executable


def diag_record(
    trace_dir: Path,
    *command: str,
    options: tuple[str, ...] = (),
    timeout: float = 240,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", "record", "-o", str(trace_dir), *options, "--", *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def manifest(trace_dir: Path) -> dict[str, Any]:
    return json.loads((trace_dir / "manifest.json").read_text())


def events(trace_dir: Path, label: str = "compiled") -> list[dict[str, Any]]:
    """Every event of every process of one run, in time order."""
    found: list[dict[str, Any]] = []
    for path in sorted((trace_dir / "runs" / label).glob("*/events.jsonl")):
        found.extend(iter_events(path))
    return sorted(found, key=lambda e: e["t"])


def of(kind: str, evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in evs if e["ev"] == kind]
