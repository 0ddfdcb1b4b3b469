"""Whose code a file is: a known library's (diffusers, LightX2V, ...) or the program's own.

Why: a fix that says "remove this call" or "remove the torch.compiler.disable" is wrong when the
line is inside a library the person installed. The place is not theirs to change, and the
library usually has a switch of its own (diffusers' `enable_model_cpu_offload()`, LightX2V's
config keys). Every analyzer that words a fix asks here, so they agree on whose code it is.

A path names its library by the package folder it sits in: the folder right after
`site-packages`/`dist-packages` for an installed package, else the outermost folder named after
a known package (LightX2V run from its checkout, `.../LightX2V/lightx2v/models/...`). Outermost,
because libraries hold folders named like other libraries (diffusers' `models/transformers/`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Library:
    #: The import name, as its folder appears in a path.
    package: str
    #: The name people write.
    name: str

    @property
    def owner(self) -> str:
        """`diffusers'`, `LightX2V's`: the name as the owner of a call or a switch."""
        return f"{self.name}'" if self.name.endswith("s") else f"{self.name}'s"


DIFFUSERS = Library("diffusers", "diffusers")
LIGHTX2V = Library("lightx2v", "LightX2V")
MAGI = Library("magi_compiler", "MagiCompiler")
ACCELERATE = Library("accelerate", "accelerate")
TRANSFORMERS = Library("transformers", "transformers")
TORCH = Library("torch", "torch")

KNOWN: tuple[Library, ...] = (DIFFUSERS, LIGHTX2V, MAGI, ACCELERATE, TRANSFORMERS, TORCH)
_BY_PACKAGE = {library.package: library for library in KNOWN}
_INSTALLED = frozenset({"site-packages", "dist-packages"})
_SEPARATORS = re.compile(r"[\\/]+")


def library_of(path: str | None) -> Library | None:
    """The known library whose package holds `path` (a file, or `file:line`); None for the
    program's own code, an unknown package, or no path."""
    found = _locate(path)
    return found[0] if found else None


def library_path(path: str) -> str:
    """`path` from its library's package folder on (`diffusers/utils/torch_utils.py:257`): what
    a person searches the library for, without the site-packages prefix of one machine; any
    other path unchanged."""
    found = _locate(path)
    return found[1] if found else path


def _locate(path: str | None) -> tuple[Library, str] | None:
    if not path:
        return None
    parts = _SEPARATORS.split(path)
    folders = parts[:-1]
    installed = [i for i, part in enumerate(folders) if part in _INSTALLED]
    if installed:
        # The package right after the last site-packages decides; a library folder further up
        # (a project called `torch` holding a venv) does not.
        candidates = [installed[-1] + 1] if installed[-1] + 1 < len(folders) else []
    else:
        candidates = list(range(len(folders)))
    for index in candidates:
        library = _BY_PACKAGE.get(folders[index])
        if library is not None:
            return library, "/".join(parts[index:])
    return None


def in_torch_shortened(location: str | None) -> bool:
    """True when `location` (`utils/_contextlib.py:119`) is torch's own file as torch's guard
    comments write it: relative to torch's package folder. Decided by the file's presence in
    the torch installed here (found without importing torch); False when torch is not here or
    the path is absolute (then `library_of` decides)."""
    if not location or location.startswith("/"):
        return False
    file = location.rsplit(":", 1)[0]
    root = _torch_folder()
    return root is not None and os.path.isfile(os.path.join(root, file))


@functools.cache
def _torch_folder() -> str | None:
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return os.path.dirname(origin) if origin else None
