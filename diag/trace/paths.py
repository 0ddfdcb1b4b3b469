"""How every output names a file of the recorded program: one rule for analyze, check and the
GitHub annotations.

A trace records paths as the program saw them (absolute, from code objects and stacks; a
relative one is relative to the recording's working directory). Shown to a person or to CI, a
path is relative to the repository that diag runs in (the git work tree around the current
directory, or `GITHUB_WORKSPACE` in GitHub Actions) when the file is inside it, and absolute
otherwise. So `diag check` annotations resolve whether the program was recorded from the
repository root, a subfolder or elsewhere, and analyze and check print the same path.
"""

from __future__ import annotations

import functools
import os
import re

_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>\d+)$")


@functools.lru_cache(maxsize=8)
def repository_root(cwd: str) -> str:
    """The git work tree that holds `cwd` (GITHUB_WORKSPACE first), else `cwd` itself."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace and _inside(cwd, os.path.abspath(workspace)):
        return os.path.abspath(workspace)
    folder = cwd
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return cwd
        folder = parent


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def shown_path(path: str, recorded_cwd: str | None = None) -> str:
    """`path` as outputs show it: relative to the repository diag runs in when inside it."""
    if not os.path.isabs(path):
        if not recorded_cwd:
            return path
        path = os.path.join(recorded_cwd, path)
    path = os.path.normpath(path)
    root = repository_root(os.getcwd())
    return os.path.relpath(path, root) if _inside(path, root) else path


def shown_location(location: str, recorded_cwd: str | None = None) -> str:
    """`file:line` (or a bare file) as outputs show it; anything else (a frame's name) as is."""
    match = _LOCATION.match(location)
    file, line = (match.group("file"), match.group("line")) if match else (location, None)
    if not (file.endswith(".py") or os.sep in file):
        return location
    shown = shown_path(file, recorded_cwd)
    return f"{shown}:{line}" if line is not None else shown
