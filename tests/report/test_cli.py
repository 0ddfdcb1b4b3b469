"""`diag report` as a user runs it: a real subprocess on a real H200 recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.h200data import h200_trace


def _diag(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diag", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_report_of_an_h200_recording(tmp_path: Path) -> None:
    trace = h200_trace("record-wan-routing", tmp_path)
    output = tmp_path / "out" / "report.html"
    output.parent.mkdir()
    proc = _diag("report", str(trace), "-o", str(output))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {output} (")
    assert "incomplete sections" not in proc.stdout
    html = output.read_text(encoding="utf-8")
    assert output.stat().st_size < 10_000_000
    for key in ("findings", "steps", "compiles", "regions", "offload", "cache"):
        assert f'<section id="{key}">' in html
    assert "could not be drawn" not in html
    # plotly.js once, in the page: nothing is loaded from a CDN.
    assert html.count("* plotly.js v") == 1
    assert "<script src=" not in html
    # The kernel-routing finding and the eager-vs-compiled figure are both there.
    assert "kernel-routing" in html
    assert 'id="plot-regions"' in html
    try:
        import hta  # noqa: F401
    except ImportError:
        return
    assert 'id="plot-hta"' in html and "HTA section" not in html


def test_default_output_sits_beside_the_trace(tmp_path: Path) -> None:
    trace = h200_trace("record-wan-routing", tmp_path)
    proc = _diag("report", str(trace), "--no-hta")
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / "record-wan-routing-report.html"
    assert written.is_file()
    assert "left out (--no-hta)" in written.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("report", "no-such-dir"), "no-such-dir: no such trace directory"),
        (("report", "."), "not a diag trace directory"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    proc = _diag(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("diag: error: ")
    assert message in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_output_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    trace = h200_trace("record-wan-routing", tmp_path)
    proc = _diag("report", str(trace), "-o", str(tmp_path), "--no-hta")
    assert proc.returncode == 2
    assert proc.stderr == f"diag: error: {tmp_path}: is a directory; give a file name with -o\n"


def test_report_file_mode_follows_the_umask(tmp_path: Path) -> None:
    """mkstemp makes 0600 files; a report is shared like any file the user writes."""
    import os

    from diag.report.build import Report, write_report

    previous = os.umask(0o022)
    try:
        write_report(Report("<html></html>", []), tmp_path / "a.html")
        os.umask(0o077)
        write_report(Report("<html></html>", []), tmp_path / "b.html")
    finally:
        os.umask(previous)
    assert (tmp_path / "a.html").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.html").stat().st_mode & 0o777 == 0o600
