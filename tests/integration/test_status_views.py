"""The TUI's overview and the report's header say first how the recording ended and what diag
could not see: one real recording of a program that compiles, recompiles and exits 3."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from textual.pilot import Pilot

from diag.tui.app import DiagApp
from tests.tui.support import drive, screen_text

from .support import PYTHON, diag_record

CRASHING = """
import torch
f = torch.compile(lambda x: x * 2, backend="aot_eager", dynamic=False)
for n in (2, 3):
    f(torch.ones(n))
raise SystemExit(3)
"""


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crashed")
    app = folder / "app.py"
    app.write_text(textwrap.dedent(CRASHING))
    trace = folder / "t"
    assert diag_record(trace, PYTHON, str(app)).returncode == 3
    return trace


def test_tui_overview_heads_with_the_status_and_the_notices(crashed: Path) -> None:
    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        text = screen_text(app)
        assert "recording: crashed: the program exited with code 3" in text, text
        assert "NOTICE the recording is incomplete" in text, text
        assert text.index("recording: crashed") < text.index("findings:")

    drive(crashed, script, size=(120, 40))


def test_report_header_says_the_recording_is_incomplete(crashed: Path, tmp_path: Path) -> None:
    output = tmp_path / "report.html"
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "report", str(crashed), "-o", str(output), "--no-hta"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    html = output.read_text(encoding="utf-8")
    header = html[: html.index("<nav>")]
    assert "<dt>recording</dt><dd>crashed: the program exited with code 3</dd>" in header
    assert "<dt>not seen</dt><dd>the recording is incomplete" in header
