"""Where `diag record` may write: an output it cannot use is refused in one line with exit 2
before the program runs (never a traceback), and --force deletes only a diag trace or an empty
folder, never through a symbolic link."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import PYTHON, diag_record

#: Leaves a file behind if it ran: the refused cases must not run it.
PROGRAM = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"


def _record(output: Path | str, marker: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return diag_record(
        Path(output), PYTHON, "-c", PROGRAM, str(marker), options=("--profile", "none", *options)
    )


def _refused(done: subprocess.CompletedProcess[str], marker: Path, words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("diag: error: "), done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists(), "the program ran"


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("/proc/diag-x", "cannot create the trace directory /proc/diag-x: "),
        ("/sys/diag-x", "cannot create the trace directory /sys/diag-x: "),
        ("afile/sub", "cannot create the trace directory "),
    ],
    ids=["proc", "sys", "under-a-file"],
)
def test_an_unusable_output_is_one_line_and_exit_2(tmp_path: Path, output: str, words: str) -> None:
    (tmp_path / "afile").write_text("x")
    if not output.startswith("/"):
        output = str(tmp_path / output)
    _refused(_record(output, tmp_path / "ran"), tmp_path / "ran", words)


def test_a_read_only_filesystem_is_refused(tmp_path: Path, read_only_dir: Path) -> None:
    _refused(_record(read_only_dir / "t", tmp_path / "ran"), tmp_path / "ran", "Read-only file")


def test_a_directory_without_write_permission_is_refused(tmp_path: Path) -> None:
    """As an unprivileged user (root writes anywhere): `nobody` through setpriv, when the tests
    run as root."""
    prefix: list[str] = []
    base = tmp_path
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: no unprivileged user to try it as")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        base = Path(tempfile.mkdtemp(prefix="diag-locked-"))  # pytest's tmp is root's alone
        base.chmod(0o755)
    try:
        folder = base / "locked"
        folder.mkdir(mode=0o555)
        command = [PYTHON, "-m", "diag", "record", "-o", str(folder / "t"), "--", PYTHON, "-c", "1"]
        done = subprocess.run([*prefix, *command], capture_output=True, text=True)
        if prefix and "diag: error" not in done.stderr:
            pytest.skip(f"diag cannot run as nobody here: {done.stderr.strip()[-200:]}")
        _refused(done, tmp_path / "ran", "Permission denied")
        assert list(folder.iterdir()) == []
    finally:
        if base != tmp_path:
            shutil.rmtree(base)


def test_force_replaces_only_a_diag_trace_or_an_empty_folder(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    app = tmp_path / "webapp"
    app.mkdir()
    (app / "manifest.json").write_text(json.dumps({"name": "my-web-app", "version": 1}))
    (app / "index.html").write_text("<html>")
    _refused(_record(app, marker, "--force"), marker, "is not a diag trace directory")
    assert sorted(p.name for p in app.iterdir()) == ["index.html", "manifest.json"]

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text('{"format": "diag-trace", ')  # not diag's: unreadable
    _refused(_record(broken, marker, "--force"), marker, "is not a diag trace directory")

    empty = tmp_path / "empty"
    empty.mkdir()
    assert _record(empty, marker, "--force").returncode == 0 and marker.read_text() == "ran"
    marker.unlink()
    # A diag trace (the one just made) is replaced.
    assert _record(empty, marker, "--force").returncode == 0 and marker.exists()


def test_a_symbolic_link_is_never_the_output(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    target = tmp_path / "trace"
    assert _record(target, marker).returncode == 0
    marker.unlink()
    link = tmp_path / "link"
    link.symlink_to(target)
    for options in ((), ("--force",)):
        _refused(_record(link, marker, *options), marker, "is a symbolic link")
    assert (target / "manifest.json").exists()  # nothing behind the link was touched
