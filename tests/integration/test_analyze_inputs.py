"""`diag analyze` inputs: bad ones give one line and exit 2; a terminal gets a progress bar and
a pipe gets nothing."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.h200data import h200_trace

DIAG = [sys.executable, "-m", "diag", "analyze"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DIAG, *args], capture_output=True, text=True, timeout=120)


def _one_error_line(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("diag: error: "), proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "bad.json.gz"),
        (b"\x00\x01 not json at all", "bad.json.gz"),
        (gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1')[:-9], "bad.json.gz"),
        (gzip.compress(b'{"schemaVersion": 1}'), "bad.json.gz"),
    ],
    ids=["empty", "garbage", "truncated-gzip", "no-trace-events"],
)
def test_bad_kineto_file(tmp_path: Path, content: bytes, needle: str) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(content)
    _one_error_line(_run("--kineto", str(bad)), needle)


def test_missing_inputs_and_conflicting_options(tmp_path: Path) -> None:
    _one_error_line(_run("--kineto", str(tmp_path / "nope.json")), "nope.json")
    _one_error_line(_run(str(tmp_path / "nodir")), "nodir")
    _one_error_line(_run(), "give one input")
    _one_error_line(_run(str(tmp_path), "--kineto", str(tmp_path / "x")), "give one input")
    _one_error_line(_run("--torch-trace", str(tmp_path)), str(tmp_path))


def test_truncated_kineto_window_inside_a_trace_dir(tmp_path: Path) -> None:
    """One window the reader refuses is skipped with one warning (issue 22: the whole trace was
    refused); the findings of the events and of the other windows are still given."""
    folder = h200_trace("record-wan-routing", tmp_path)
    window = next((folder / "runs" / "compiled").glob("pid*/kineto/r0-s2-steady.json.gz"))
    window.write_bytes(window.read_bytes()[: window.stat().st_size // 2])
    proc = _run(str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("diag: warning: compiled/pid420: Kineto window ") and "r0-s2" in line
    assert "truncated gzip file" in line and line.endswith("; skipped")
    payload = json.loads(proc.stdout)
    assert payload["warnings"] == [line.removeprefix("diag: warning: ")]
    assert payload["findings"]


def test_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    folder = h200_trace("record-wan-routing", tmp_path)
    piped = _run(str(folder), "--only", "kernel-routing")
    assert piped.returncode == 0 and piped.stderr == ""
    # stderr on a pseudo-terminal, stdout on a pipe: the bar goes to the terminal only.
    primary, secondary = os.openpty()
    try:
        proc = subprocess.run(
            [*DIAG, str(folder), "--only", "offload-bound"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            timeout=120,
        )
        os.close(secondary)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(primary)
    assert proc.returncode == 0
    assert b"reading profiler traces [" in seen
    assert b"reading profiler traces" not in proc.stdout
