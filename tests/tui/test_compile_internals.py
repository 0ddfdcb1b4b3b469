"""The Compiles detail shows what happened inside a compile: its time by phase (Dynamo, the
backend) and, for a compile with `dynamic=True`, each dim it made symbolic beside the values
the frame's calls really had there (a real CPU aot_eager recording, driven by Pilot)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from textual.pilot import Pilot

from diag.tui.app import DiagApp
from tests.integration.support import PYTHON, diag_record

from .support import drive, screen_text

PROGRAM = textwrap.dedent(
    """
    import torch

    def block(x, w):
        return (x @ w).relu()

    compiled = torch.compile(block, backend="aot_eager", dynamic=True)
    w = torch.randn(16, 16)
    for rows in (4, 8, 8):
        compiled(torch.randn(rows, 16), w)
    """
)


def test_compile_detail_shows_phases_and_dims(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    proc = diag_record(tmp_path / "t", PYTHON, str(program), options=("--profile", "none"))
    assert proc.returncode == 0, proc.stderr

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        compiles = app.view("compiles")
        assert compiles.select("id:0/0")
        await pilot.pause()
        detail = screen_text(app)
        assert "compile time by phase: total" in detail and "Dynamo" in detail
        assert "dims made symbolic" in detail
        # x's rows were 4 and 8 in the calls; its columns (and w's dims, duck-sized) 16
        assert "L['x'].size()[0]  calls: 4, 8" in detail
        assert "calls: 16" in detail

    drive(tmp_path / "t", script, size=(160, 50))
