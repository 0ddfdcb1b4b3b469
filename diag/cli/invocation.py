"""How to run diag again from where the person is: the `next:` hints print it.

Why: after `.ci/setup` diag is in `.venv/bin`, which is not on PATH; a hint that says
`diag tui ...` then fails with "command not found". The hint names `diag` when that resolves
to this very diag, else the path of the script that is running (`.venv/bin/diag`, relative to
the working directory when under it)."""

from __future__ import annotations

import os
import shutil
import sys


def diag_command() -> str:
    """`diag`, or the path to this diag's script when `diag` on PATH is not it (or absent)."""
    script = sys.argv[0] if sys.argv and os.path.basename(sys.argv[0]) == "diag" else None
    if script is None:
        beside = os.path.join(os.path.dirname(sys.executable), "diag")
        script = beside if os.path.isfile(beside) else None
    if script is None:
        return "diag" if shutil.which("diag") else f"{sys.executable} -m diag"
    found = shutil.which("diag")
    if found is not None and os.path.realpath(found) == os.path.realpath(script):
        return "diag"
    path = os.path.abspath(script)
    cwd = os.getcwd()
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path
