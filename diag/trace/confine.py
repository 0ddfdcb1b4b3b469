"""Every file a reader opens from a trace directory stays inside it.

A trace directory is untrusted input: anyone who can write one can name any path in it (a
Kineto window's `file` in `profile_window_end`) or put a symlink, a FIFO or a device where a
file should be. Reading `/dev/zero` never ends, a FIFO blocks forever, and `../../x` or
`/etc/passwd` would read (and cache) files that are not the trace's. So each path a reader
follows goes through `inside()`: relative, no `..`, resolved (symlinks followed) to a place
inside the trace directory, a regular file, and at most a size cap. `open_regular()` opens
without blocking and checks the type again on the open descriptor, so a file swapped for a
FIFO between the check and the open is refused too. What fails is skipped by the caller with
one warning (docs/FORMAT.md, "Reading a trace safely").
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from diag.errors import DiagError

#: A Kineto window (gzip'd JSON) larger than this is skipped: real windows are 0.1-30 MB of
#: gzip (24 MB per rank for a GPU-sized window); 2 GiB leaves room for a long profile.
MAX_WINDOW_BYTES = 2 << 30
#: ... and one that inflates past this many bytes of JSON (a gzip bomb) is refused mid-read.
MAX_WINDOW_JSON_BYTES = 16 << 30
#: manifest.json is a few KB; bootstrap-errors.txt a line per process.
MAX_MANIFEST_BYTES = 16 << 20
MAX_NOTES_BYTES = 4 << 20


class OutsideTrace(DiagError):
    """A path a trace names that a reader must not open; the message says why, in one line."""


def _real(path: Path) -> str:
    return os.path.realpath(path)


def is_within(path: Path, root: Path) -> bool:
    """Whether `path`, every symlink resolved, is `root` or below it (also resolved)."""
    real, base = _real(path), _real(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def inside(root: Path, base: Path, name: object, max_bytes: int, what: str = "its file") -> Path:
    """`base / name`, checked: `name` a relative path without `..`, the file (symlinks
    followed) inside `root`, a regular file of at most `max_bytes`. Raises OutsideTrace."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise OutsideTrace(f"its path {name!r} is not a file name")
    relative = PurePosixPath(name)
    if relative.is_absolute():
        raise OutsideTrace(f"its path {name!r} is absolute: it leads outside the trace")
    if ".." in relative.parts:
        raise OutsideTrace(f"its path {name!r} climbs out of the trace with '..'")
    return checked_file(root, base / name, max_bytes, what)


def checked_file(root: Path, path: Path, max_bytes: int | None, what: str = "file") -> Path:
    """`path` if it resolves inside `root` to a regular file of at most `max_bytes`."""
    if not is_within(path, root):
        raise OutsideTrace(f"{_named(what, path, root)} is a symlink that leads outside the trace")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise OutsideTrace(f"{_named(what, path, root)} does not exist") from None
    except OSError as exc:
        raise OutsideTrace(f"{_named(what, path, root)}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise OutsideTrace(f"{_named(what, path, root)} {_not_a_file(info.st_mode)}")
    if max_bytes is not None and info.st_size > max_bytes:
        raise OutsideTrace(
            f"{_named(what, path, root)} is {info.st_size / 2**20:.0f} MiB, over diag's "
            f"{max_bytes / 2**20:.0f} MiB limit"
        )
    return path


def open_regular(path: Path, follow: bool = True) -> BinaryIO:
    """Open for reading without ever blocking (a FIFO opened plainly waits for a writer):
    non-blocking open, then the descriptor's own type checked; `follow=False` refuses a
    symlink (ELOOP). OSError or OutsideTrace."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    descriptor = os.open(path, flags)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OutsideTrace(f"{path}: {_not_a_file(mode)}")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def open_for_write(path: Path, flags: int) -> int:
    """The one rule for a file diag writes (events, step segments, the manifest): `os.open`
    with `flags` (O_WRONLY and its kin), never through a symlink (O_NOFOLLOW), never waiting
    on a FIFO without a reader (O_NONBLOCK gives ENXIO instead), and only a regular file:
    anything else is closed again and refused with an OSError. Returns the descriptor."""
    extra = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    descriptor = os.open(path, flags | extra, 0o644)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{_not_a_file(mode)}", str(path))
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def read_small(root: Path, path: Path, max_bytes: int, what: str) -> bytes:
    """The whole of a small file of the trace (the manifest, bootstrap errors), confined."""
    checked_file(root, path, max_bytes, what)
    try:
        with open_regular(path) as handle:
            return handle.read(max_bytes + 1)[:max_bytes]
    except OSError as exc:
        raise OutsideTrace(f"{_named(what, path, root)}: cannot read ({exc.strerror})") from None


def cache_folder(root: Path, *parts: str) -> Path | None:
    """`root/.diag-cache/<parts>` when writing there stays inside the trace (no part of it a
    symlink that leads out); None: read without caching."""
    from diag.trace.format import CACHE_DIR

    folder = root.joinpath(CACHE_DIR, *parts)
    return folder if writable_cache(folder) else None


def writable_cache(folder: Path) -> bool:
    """The one rule for a folder diag writes into a trace (its .diag-cache): `folder`, every
    symlink resolved (also of parts not made yet), is inside the nearest `.diag-cache` above
    it, and that is inside the trace directory holding it. Checked where the folder is chosen
    and again by the writer just before it writes (a link swapped in between is refused)."""
    from diag.trace.format import CACHE_DIR

    cache = next((p for p in (folder, *folder.parents) if p.name == CACHE_DIR), None)
    return cache is not None and is_within(folder, cache) and is_within(cache, cache.parent)


def _not_a_file(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    return "is not a regular file (a device or a FIFO)"


def _named(what: str, path: Path, root: Path) -> str:
    """`event file runs/compiled/pid7/events.jsonl` (the path alone when `what` is empty)."""
    return f"{what} {_shown(path, root)}" if what else _shown(path, root)


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
