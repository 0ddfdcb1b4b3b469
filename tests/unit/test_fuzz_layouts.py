"""Hostile layouts of a trace directory (tests/fuzz_layouts.py): a FIFO, a socket, a folder, an
empty file or a symlink (out of the trace, to /dev/zero, to itself) in each position a reader
or the writer touches, and file names with numerals int() refuses (`steps-².jsonl`). A seeded
sample here (every kind and two odd names among them); bench/fuzz_events.py --layouts runs all.
Each is read with a warning or refused with one line by analyze, check, diag.open and export
--perfetto, never waits (an alarm), and nothing outside the trace is written or replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz_layouts import (
    Layout,
    layouts,
    run_layout,
    run_writer_layout,
    sample,
    warmed_base,
    writer_layouts,
)

SEED = 20261203
COUNT = 12


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warmed_base(tmp_path_factory.mktemp("layouts"))


def test_the_sample_covers_every_kind() -> None:
    chosen = sample(SEED, COUNT)
    assert len(chosen) == COUNT and len(set(chosen)) == COUNT
    assert {x.kind for x in chosen} >= {"fifo", "socket", "dir", "link-out", "odd-name"}
    assert len(layouts()) > 100


@pytest.mark.parametrize("layout", sample(SEED, COUNT), ids=lambda x: x.name)
def test_a_hostile_layout_is_read_or_refused_in_one_line(
    layout: Layout, base: Path, tmp_path: Path
) -> None:
    assert run_layout(layout, base, tmp_path / "case") in ("read", "refused")


def test_an_empty_steps_file_with_an_odd_numeral_is_ignored(base: Path, tmp_path: Path) -> None:
    """Issue 37: an empty `steps-².jsonl` stopped every command (`"²".isdigit()` is True)."""
    layout = Layout("runs/compiled/pid420/steps-².jsonl", "odd-name")
    assert run_layout(layout, base, tmp_path / "case", report=True) == "read"


@pytest.mark.parametrize(("position", "kind"), writer_layouts())
def test_the_writer_never_opens_a_fifo_a_folder_or_a_link(
    position: str, kind: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run_writer_layout(position, kind, tmp_path / "w")
    # It says so once, on the program's stderr, as for a full disk.
    assert capfd.readouterr().err.count("diag: recording stopped") == 1
