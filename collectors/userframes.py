"""Which frames of a traceback are the program's own code: not torch, not diag, not an installed
package, not the standard library. Failures and crashes point at the innermost such frame, the
line a user can change."""

from __future__ import annotations

import os
import re
import sys
import sysconfig

# Installed packages, and code torch generates at run time (inductor's output modules under
# /tmp/torchinductor_<user>/, Triton's cache).
_PACKAGE_DIRS = re.compile(r"(?:^|/)(?:site-packages|dist-packages|\.triton)/|torchinductor_")
# Frames with no file of their own: frozen modules, generated FX code. `python -c` and stdin
# code is the user's.
_NO_FILE = re.compile(r"^<(?!string>|stdin>)")
_TB_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$', re.M)


def _prefixes() -> tuple[str, ...]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # diag's own packages
    found = [
        os.path.join(root, name) + os.sep for name in ("diag", "collectors", "analyzers", "tui")
    ]
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            found.append(os.path.abspath(path) + os.sep)
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if isinstance(torch_file, str):
        found.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    return tuple(found)


_NOT_USER_PREFIXES: tuple[str, ...] | None = None


def is_user_file(path: str) -> bool:
    global _NOT_USER_PREFIXES
    if _NO_FILE.search(path) or _PACKAGE_DIRS.search(path) or "/torch/" in path:
        return False
    if _NOT_USER_PREFIXES is None:
        _NOT_USER_PREFIXES = _prefixes()
    return not os.path.abspath(path).startswith(_NOT_USER_PREFIXES)


def innermost_user_frame(traceback_text: str) -> str | None:
    """`file:line` of the last user frame of a formatted traceback (e.g. a user backend that
    raised inside Dynamo's `dynamo_error` traceback)."""
    found = None
    for match in _TB_FRAME.finditer(traceback_text):
        if is_user_file(match.group("file")):
            found = f"{match.group('file')}:{match.group('line')}"
    return found
