"""`diag.open` raises one documented exception type, DiagError with one line (issue 37: it
raised raw Python errors on 13 traces of the probes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import diag
import diag.trace.inputs
from diag.errors import EXIT_INTERNAL, EXIT_USAGE, DiagError
from tests.h200data import h200_trace


def test_unreadable_traces_raise_one_line_diag_errors(tmp_path: Path) -> None:
    trace = h200_trace("record-wan-routing", tmp_path)
    process = next((trace / "runs" / "compiled").glob("pid*"))
    (process / "steps-².jsonl").write_bytes(b"")  # once int("²"): now not a segment
    events = process / "events.jsonl"
    events.write_bytes(events.read_bytes() + b'{"t":1,"ev":"phase","phase":"\\ud800"}\n')
    assert diag.open(trace).steps is not None
    manifest = trace / "manifest.json"
    manifest.unlink()
    os.symlink("manifest.json", manifest)  # a link to itself
    with pytest.raises(DiagError) as refused:
        diag.open(trace)
    assert refused.value.exit_code == EXIT_USAGE and "\n" not in refused.value.message


def test_a_fault_of_diag_while_reading_is_a_diag_error_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a reader, made here by hand (no trace makes one once it is fixed): the
    notebook gets a DiagError with exit_code 3 and the bug as its cause, never an IndexError."""
    trace = h200_trace("record-wan-routing", tmp_path)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(diag.trace.inputs, "open_input", broken)
    with pytest.raises(DiagError) as failed:
        diag.open(trace)
    assert failed.value.exit_code == EXIT_INTERNAL
    assert "IndexError: tuple index out of range" in failed.value.message
    assert "a bug in diag" in failed.value.message and "\n" not in failed.value.message
    assert isinstance(failed.value.__cause__, IndexError)
