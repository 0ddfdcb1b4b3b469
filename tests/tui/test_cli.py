"""`diag tui` refuses a bad directory with one line and exit 2, before Textual is even imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CASES = {
    "missing": "no such trace directory",
    "file": "not a directory",
    "empty": "not a diag trace directory",
    "newer": "written by a newer diag",
    "no-runs": "the trace holds no runs",
}


def _make(root: Path) -> dict[str, Path]:
    paths = {name: root / name for name in CASES}
    paths["file"].write_text("x")
    paths["empty"].mkdir()
    for name, version in (("newer", 99), ("no-runs", 1)):
        paths[name].mkdir()
        manifest = {"format": "diag-trace", "version": version, "runs": []}
        (paths[name] / "manifest.json").write_text(json.dumps(manifest))
    return paths


def test_bad_directories_exit_2_with_one_line_before_the_ui(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    good = Path(__file__).resolve().parent.parent / "data" / "h200" / "record-wan-routing"
    calls = [["tui", str(p)] for p in paths.values()]
    calls.append(["tui", str(good), "--against", str(paths["missing"])])
    code = (
        "import contextlib, io, json, sys\n"
        "from diag.cli import main\n"
        "out = []\n"
        f"for argv in {calls!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        rc = main(argv)\n"
        "    out.append([rc, err.getvalue()])\n"
        "print(json.dumps([out, 'textual' in sys.modules]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    results, textual_loaded = json.loads(proc.stdout)
    messages = [*CASES.values(), "no such trace directory"]
    for (rc, stderr), message in zip(results, messages, strict=True):
        assert rc == 2
        assert stderr.startswith("diag: error: ") and stderr.count("\n") == 1, stderr
        assert message in stderr
    assert results[-1][1].startswith(f"diag: error: {paths['missing']}")
    assert not textual_loaded
