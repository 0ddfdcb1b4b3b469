"""Where `diag record` writes: the trace directory made, refused, or replaced.

An output diag cannot use (a symbolic link, a file, a read-only or full filesystem, a folder it
may not write, /proc) is refused with one line and exit 2 before the program runs, never with a
traceback; `--force` deletes only an earlier diag trace (a manifest.json of diag's format) or
an empty folder, never what a symbolic link points to.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from diag.errors import DiagError
from diag.trace.confine import MAX_MANIFEST_BYTES, OutsideTrace, open_regular
from diag.trace.format import FORMAT_NAME, MANIFEST, safe_name
from diag.trace.manifest import write_manifest
from diag.trace.reserve import LAUNCHER_RESERVE_BYTES, make_reserve


def program_name(command: list[str]) -> str:
    """A short name for the default output folder: the module of -m, the script, or argv[0]."""
    args = command[1:] if Path(command[0]).name.startswith("python") else command
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return safe_name(args[i + 1])
        if arg.endswith(".py"):
            return safe_name(Path(arg).stem)
    return safe_name(Path(command[0]).name)


def default_output(command: list[str]) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(f"diag-{program_name(command)}-{stamp}")


def is_replaceable(path: Path) -> bool:
    """What --force may delete: an empty folder, or one whose manifest.json is diag's."""
    try:
        if not any(path.iterdir()):
            return True
        # A FIFO or device named manifest.json is not diag's: never waited on nor read.
        with open_regular(path / MANIFEST, follow=False) as handle:
            manifest = json.loads(handle.read(MAX_MANIFEST_BYTES))
    except (OSError, OutsideTrace, ValueError, RecursionError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT_NAME


def prepare_output(path: Path, force: bool) -> None:
    """Make the trace directory, or say in one line why it cannot be (a DiagError, exit 2):
    never overwrite without --force, replace only an earlier diag trace or an empty folder, and
    never follow a symbolic link."""
    try:
        _replace_output(path, force)
        path.mkdir(parents=True)
    except OSError as exc:
        raise DiagError(f"cannot create the trace directory {path}: {_why(exc, path)}") from None


def _replace_output(path: Path, force: bool) -> None:
    if path.is_symlink():
        raise DiagError(
            f"{path} is a symbolic link; diag record writes only to a real directory "
            "(give the path it points to)"
        )
    if not path.exists():
        return
    if not force:
        raise DiagError(f"{path} already exists; use --force to replace it")
    if not path.is_dir():
        raise DiagError(f"{path} exists and is not a directory; not replacing it")
    if not is_replaceable(path):
        raise DiagError(
            f"{path} is not a diag trace directory (no manifest.json of format "
            f"{FORMAT_NAME!r}) and not empty; --force replaces only those, so it is left alone"
        )
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise DiagError(f"cannot replace {path}: {_why(exc, path)}") from None


def _why(exc: OSError, named: Path | None = None) -> str:
    """An OSError in words, with the path that failed when it is not the one named."""
    text = exc.strerror or str(exc)
    if exc.filename and (named is None or str(exc.filename) != str(named)):
        return f"{text} ({exc.filename})"
    return text


def start_trace(trace_dir: Path, manifest: dict[str, Any]) -> Path | None:
    """The first manifest, or the directory removed again and a DiagError: nothing is run
    into a directory diag cannot write (a read-only or full filesystem). The launcher's reserve
    (diag/trace/reserve.py), or None when there was no room for it."""
    try:
        write_manifest(trace_dir, manifest)
    except OSError as exc:
        shutil.rmtree(trace_dir, ignore_errors=True)
        raise DiagError(f"cannot write the trace directory {trace_dir}: {_why(exc)}") from None
    return make_reserve(trace_dir, LAUNCHER_RESERVE_BYTES)
