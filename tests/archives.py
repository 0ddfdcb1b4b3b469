"""Unpack the repository's committed `.tar.gz` test data (recordings of real runs).

`tarfile`'s extraction filters (`filter="data"`) came in Python 3.11.4; Debian 12's python3.11
(3.11.2, the interpreter `.ci/setup` prefers) has none. Without them, each member is checked
here the way the "data" filter would refuse it: only files and folders, at relative paths that
stay inside the target folder.
"""

from __future__ import annotations

import tarfile
from pathlib import Path


def unpack(archive_path: Path, folder: Path) -> None:
    """Extract `archive_path` into `folder`, refusing anything the "data" filter refuses."""
    with tarfile.open(archive_path) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(folder, filter="data")
            return
        members = archive.getmembers()
        root = folder.resolve()
        for member in members:
            target = (folder / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise ValueError(f"{archive_path.name}: refused member {member.name!r}")
        archive.extractall(folder, members=members)  # noqa: S202 - every member checked above
