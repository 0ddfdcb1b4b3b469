"""The `next:` hints name a diag that runs as written (issue 28: `diag` is not on PATH after
.ci/setup, `.venv/bin/diag` is)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from diag.cli.invocation import diag_command


def _script(folder: Path) -> Path:
    script = folder / "bin" / "diag"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    return script


def test_a_venv_script_off_path_is_named_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path / ".venv")
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert diag_command() == os.path.join(".venv", "bin", "diag")
    monkeypatch.chdir("/")
    assert diag_command() == str(script)


def test_diag_on_path_is_plain_diag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(tmp_path / "env")
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert diag_command() == "diag"
    # Another diag first on PATH is not this one: the path is named.
    other = _script(tmp_path / "other")
    monkeypatch.setenv("PATH", f"{other.parent}:{script.parent}")
    assert diag_command() == str(script)
