"""tests/archives.py refuses what tarfile's "data" filter refuses, on a Python with the filter
(3.11.4+) and on one without it (Debian 12's 3.11.2, which `.ci/setup` prefers)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tests.archives import unpack


def _archive(path: Path, *members: tuple[str, bytes | None, bytes]) -> Path:
    """A .tar.gz of (name, file contents, link target) members: a link when contents is None."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data, target in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, target.decode()
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path


def test_files_in_folders_unpack(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "ok.tar.gz", ("trace/events.jsonl", b"{}\n", b""))
    unpack(archive, tmp_path / "out")
    assert (tmp_path / "out" / "trace" / "events.jsonl").read_bytes() == b"{}\n"


@pytest.mark.parametrize(
    "member", [("../outside.txt", b"x", b""), ("link", None, b"/etc")], ids=["parent", "symlink"]
)
def test_a_member_leaving_the_folder_or_a_link_is_refused(
    tmp_path: Path, member: tuple[str, bytes | None, bytes]
) -> None:
    archive = _archive(tmp_path / "bad.tar.gz", member)
    with pytest.raises((ValueError, tarfile.TarError)):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "out" / "link").exists()


def test_an_absolute_member_never_lands_at_its_absolute_path(tmp_path: Path) -> None:
    """The "data" filter unpacks it inside the folder (its leading slash stripped); without
    the filter it is refused."""
    absolute = tmp_path / "absolute.txt"
    archive = _archive(tmp_path / "abs.tar.gz", (str(absolute), b"x", b""))
    try:
        unpack(archive, tmp_path / "out")
    except (ValueError, tarfile.TarError):
        pass
    assert not absolute.exists()
