"""Committed H200 recordings (tests/data/h200), copied before use: readers write their derived
cache into a trace directory, and the repository's copy must stay as committed."""

from __future__ import annotations

import shutil
from pathlib import Path

H200 = Path(__file__).parent / "data" / "h200"


def h200_trace(name: str, tmp_path: Path) -> Path:
    """A private copy of `tests/data/h200/<name>` (a diag trace directory)."""
    target = tmp_path / name
    shutil.copytree(H200 / name, target, ignore=shutil.ignore_patterns(".diag-cache"))
    return target


def h200_file(name: str) -> Path:
    """A committed Kineto file (read-only use)."""
    return H200 / name
