"""The launcher side of `diag record` stays light: no torch, pandas, plotly or Textual."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "pandas", "plotly", "textual", "numpy")


def test_record_launcher_imports_nothing_heavy(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from diag.cli import main\n"
        f"rc = main(['record', '--profile', 'none', '-o', {str(tmp_path / 't')!r}, '--', "
        f"{sys.executable!r}, '-c', 'pass'])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(rc, heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "0 []", proc.stdout + proc.stderr


def test_the_notebook_api_imports_pandas_only_for_a_frame(tmp_path: Path) -> None:
    """`import diag` and `diag.open` stay light (the CLI and the recorded program import diag);
    pandas arrives with the first DataFrame asked for."""
    from tests.analyzers.support import write_trace

    write_trace(tmp_path, [])
    code = (
        "import sys\n"
        "import diag\n"
        "light = 'pandas' not in sys.modules\n"
        f"t = diag.open({str(tmp_path)!r})\n"
        "t.status\n"
        "opened = 'pandas' not in sys.modules\n"
        "t.steps\n"
        "print(light, opened, 'pandas' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "True True True", proc.stdout + proc.stderr
