"""The installed package: its version, its console script, and the diag.* namespace layout
(the top-level folders are importable only under diag, never by their bare names)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import diag

REPO = Path(__file__).resolve().parent.parent
SUBPACKAGES = ("collectors", "analyzers", "tui", "fixtures")


def _env() -> dict[str, str]:
    """The environment without PYTHONPATH, so only the installed package can be found."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120, check=False
    )


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-c", code], cwd)


def test_module_version(tmp_path: Path) -> None:
    proc = _run([sys.executable, "-m", "diag", "--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "diag 0.1.0"
    assert diag.__version__ == "0.1.0"


def _console_script() -> str:
    found = shutil.which("diag")
    if found is not None:
        return found
    beside = Path(sys.executable).parent / "diag"
    assert beside.is_file(), f"no diag console script on PATH or at {beside}"
    return str(beside)


def test_console_script(tmp_path: Path) -> None:
    script = _console_script()
    proc = _run([script, "--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "diag 0.1.0"
    # Without a command it prints its usage on stderr and exits 2.
    bare = _run([script], tmp_path)
    assert bare.returncode == 2
    assert bare.stderr.startswith("usage: diag"), bare.stderr
    assert "Traceback" not in bare.stderr


def test_namespaced_subpackages_import_from_the_repo(tmp_path: Path) -> None:
    code = (
        "import diag.collectors, diag.analyzers, diag.tui, diag.fixtures\n"
        f"for name in {SUBPACKAGES!r}:\n"
        "    print(getattr(diag, name).__file__)\n"
    )
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = [Path(line) for line in proc.stdout.splitlines()]
    # Editable install: each module is the file in the repository, so edits take effect.
    assert files == [REPO / name / "__init__.py" for name in SUBPACKAGES]


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_bare_top_level_names_are_not_importable(name: str, tmp_path: Path) -> None:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is not None)"
    outside = _python(code, tmp_path)
    assert outside.returncode == 0, f"{name!r} is importable outside the repository"
    # Control: from the repository root the folder itself is importable, so the check can see it.
    inside = _python(code, REPO)
    assert inside.returncode == 1, inside.stderr
