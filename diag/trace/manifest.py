"""manifest.json: what was recorded, by whom, and how it ended.

The launcher owns it (the child never writes it): created with status `running` before the
child starts, rewritten atomically (write to a temporary file, then rename) when it ends, so a
reader never sees half a manifest. On a full disk the last rewrite goes into the blocks the file
already has (the launcher frees its reserve first), never half a file.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

from diag import __version__
from diag.trace.confine import open_for_write
from diag.trace.format import FORMAT_NAME, FORMAT_VERSION, MANIFEST, STATUS_RUNNING


def new_manifest(command: list[str], options: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "diag_version": __version__,
        "status": STATUS_RUNNING,
        "command": command,
        "cwd": os.getcwd(),
        "host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "launcher_python": sys.version.split()[0],
        },
        "options": options,
        "versions": {},
        "runs": [],
    }


def write_manifest(trace_dir: Path, manifest: dict[str, Any]) -> None:
    """Replace manifest.json atomically; on a disk too full for the temporary copy, rewrite it
    in the blocks it already has. Raises OSError when neither worked, leaving no temporary
    file behind (the previous manifest stays whole)."""
    path = trace_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    data = (json.dumps(manifest, indent=1) + "\n").encode()
    try:
        _write_file(tmp, data)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        if not _rewrite_in_place(path, data) and not _rewrite_in_place(
            path, (json.dumps(manifest, separators=(",", ":")) + "\n").encode()
        ):
            raise


def _write_file(path: Path, data: bytes) -> None:
    fd = open_for_write(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _rewrite_in_place(path: Path, data: bytes) -> bool:
    """Overwrite `path` with `data` only when it fits in the blocks the file already holds, so
    that a full disk cannot leave it half written."""
    try:
        if len(data) > os.stat(path).st_blocks * 512:
            return False
        fd = open_for_write(path, os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


class ManifestWriter:
    """The launcher's rewrites of manifest.json once the program runs: a failed one (a full
    disk) is not an error of the recording and raises nothing; the launcher frees its reserve
    before the last, and if even that fails, one line on stderr says so."""

    def __init__(self, trace_dir: Path, manifest: dict[str, Any]) -> None:
        self.trace_dir = trace_dir
        self.manifest = manifest
        self.failure: str | None = None

    def write(self, final: bool = False) -> None:
        try:
            write_manifest(self.trace_dir, self.manifest)
        except OSError as exc:
            self.failure = exc.strerror or str(exc)
        else:
            self.failure = None
        if final and self.failure is not None:
            print(
                f"diag: could not finish {self.trace_dir / MANIFEST}: {self.failure}; it does "
                "not say how the run ended",
                file=sys.stderr,
            )
