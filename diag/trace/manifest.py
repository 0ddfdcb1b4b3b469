"""manifest.json: what was recorded, by whom, and how it ended.

The launcher owns it (the child never writes it): created with status `running` before the
child starts, rewritten atomically (write to a temporary file, then rename) when it ends, so a
reader never sees half a manifest.
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
    path = trace_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
