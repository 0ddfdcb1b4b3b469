"""TUI tests: a clean terminal environment, and copies of the committed H200 trace directories
(opening a trace writes its Kineto cache into the directory; the repository stays untouched)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "h200"
H200 = ("record-wan-routing", "record-wan-offload-unwarmed")


@pytest.fixture(autouse=True)
def _terminal_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Colours and Textual settings from the person running the tests must not leak in
    (the snapshot plugin's own TEXTUAL_SNAPSHOT_* stay)."""
    for key in list(os.environ):
        if key == "NO_COLOR" or (
            key.startswith("TEXTUAL_") and not key.startswith("TEXTUAL_SNAPSHOT")
        ):
            monkeypatch.delenv(key)
    yield


@pytest.fixture(scope="session")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding copies of tests/data/h200/record-*; tests use paths relative to it."""
    root = tmp_path_factory.mktemp("h200")
    for name in H200:
        shutil.copytree(DATA / name, root / name, ignore=shutil.ignore_patterns(".diag-cache"))
    return root


@pytest.fixture
def in_h200(h200: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the copies' folder, so the app shows the same relative path on every machine."""
    monkeypatch.chdir(h200)
    return h200
