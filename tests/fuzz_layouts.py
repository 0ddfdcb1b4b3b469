"""Hostile layouts of a trace directory, for the readers and the writer (issue 37).

A trace directory is untrusted: anything in it may be a FIFO, a socket, a directory, an empty
file, or a symlink that leads out of the trace (to a copy of the real thing, to /dev/zero, to
itself), and a file name may hold numerals `int()` refuses (`steps-².jsonl`, `pid٣`). Each
`Layout` is one such thing in one position a reader or the writer touches, made in a copy of a
real H200 recording (tests/data/h200/record-wan-routing: a compiled and an eager run, three
Kineto windows each, the parsed-window cache warmed). `run_layout` reads it as every face
does (analyze, check, diag.open, export --perfetto; the report when asked) under an alarm:
each reads it with a warning or refuses it with one DiagError line (never exit 3), nothing is
written or replaced outside the trace and the chosen output, and nothing waits forever.
`writer_layouts` are the positions the event writer opens. Used by tests/unit/
test_fuzz_layouts.py (a seeded sample in CI) and bench/fuzz_events.py --layouts (all).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from diag.errors import EXIT_INTERNAL, DiagError

BASE = Path(__file__).resolve().parent / "data" / "h200" / "record-wan-routing"
PROCESS = "runs/compiled/pid420"
#: Positions a reader opens or lists (`{cache}`: the warmed cache file of the first window).
READ_POSITIONS = (
    "manifest.json",
    "runs",
    "runs/compiled",
    PROCESS,
    f"{PROCESS}/events.jsonl",
    f"{PROCESS}/steps-1.jsonl",
    f"{PROCESS}/kineto",
    f"{PROCESS}/kineto/r0-s0-new-shape.json.gz",
    "runs/compiled/bootstrap-errors.txt",
    "runs/compiled/pid421/events.jsonl",
    ".diag-cache",
    ".diag-cache/compiled",
    f".diag-cache/{PROCESS.removeprefix('runs/')}",
    "{cache}",
)
KINDS = ("fifo", "socket", "dir", "empty", "link-out", "link-dev", "link-loop")
#: File and folder names with numerals int() refuses or that are too long for it.
ODD_NAMES = (
    f"{PROCESS}/steps-².jsonl",
    f"{PROCESS}/steps-٣.jsonl",
    f"{PROCESS}/steps-{'9' * 240}.jsonl",
    f"{PROCESS}/steps--1.jsonl",
    "runs/compiled/pid²",
    "runs/compiled/rank٣-pid7",
    f"runs/compiled/pid{'9' * 240}",
)
ALARM_S = 60


@dataclass(frozen=True)
class Layout:
    position: str
    kind: str  # one of KINDS, or "odd-name" (an empty file, or a folder with a copy of events)

    @property
    def name(self) -> str:
        return f"{self.kind}@{self.position[:60]}"


def layouts() -> list[Layout]:
    """Every hostile layout: each kind in each position, and each odd name."""
    found = [Layout(p, k) for p in READ_POSITIONS for k in KINDS]
    return found + [Layout(p, "odd-name") for p in ODD_NAMES]


def sample(seed: int, count: int) -> list[Layout]:
    """`count` of them, the same for the same seed, every kind and every odd name present."""
    every = layouts()
    rng = random.Random(seed)
    chosen = [Layout(p, "odd-name") for p in ODD_NAMES[:2]]
    chosen += [rng.choice([x for x in every if x.kind == kind]) for kind in KINDS]
    rest = [x for x in every if x not in chosen]
    return chosen + rng.sample(rest, max(0, min(count - len(chosen), len(rest))))


def warmed_base(folder: Path) -> Path:
    """A copy of the base recording with its window cache written (copied with its mtimes, so
    each layout's copy reads the cache instead of parsing the windows again)."""
    from diag.findings.analysis import analyze
    from diag.trace.inputs import open_input

    base = folder / "base"
    if not base.exists():
        shutil.copytree(BASE, base, ignore=shutil.ignore_patterns(".diag-cache"))
        analyze(open_input(base))
    return base


def make(layout: Layout, base: Path, folder: Path) -> tuple[Path, Path]:
    """The layout in a fresh copy of `base` under `folder`: (trace dir, outside dir). The
    outside dir holds what a link out points to."""
    if folder.exists():
        _remove(folder)
    trace, outside = folder / "trace", folder / "outside"
    shutil.copytree(base, trace, symlinks=True)
    outside.mkdir()
    position = layout.position
    if position == "{cache}":
        position = str(
            next(iter(sorted((trace / ".diag-cache").rglob("*.msgpack")))).relative_to(trace)
        )
    path = trace / position
    if layout.kind == "odd-name":
        if path.name.startswith("steps-"):
            path.write_bytes(b"")
        else:
            path.mkdir()
            shutil.copy(trace / PROCESS / "events.jsonl", path / "events.jsonl")
        return trace, outside
    original = outside / "original"  # what was there, moved out: a link out leads to it
    if path.exists() or path.is_symlink():
        shutil.move(str(path), str(original))
    else:
        original.write_bytes(b'{"t":1,"ev":"process_start","pid":421}\n')
    path.parent.mkdir(parents=True, exist_ok=True)
    _put(layout.kind, path, original)
    return trace, outside


def _put(kind: str, path: Path, original: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        os.mknod(path, stat.S_IFSOCK | 0o600)  # a socket's node, as bind() leaves one
    elif kind == "dir":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "link-out":
        path.symlink_to(original)
    elif kind == "link-dev":
        path.symlink_to("/dev/zero")
    elif kind == "link-loop":
        path.symlink_to(path.name)
    else:
        raise ValueError(kind)


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry below `folder` (links not followed): (mode, size, mtime_ns)."""
    found: dict[str, tuple[int, int, int]] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            info = os.lstat(os.path.join(root, name))
            found[os.path.join(root, name)] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


class Hang(Exception):
    """A read that did not return within the alarm (a FIFO or a device waited on)."""


@contextmanager
def alarm(seconds: int = ALARM_S) -> Iterator[None]:
    def ring(_signum: int, _frame: object) -> None:
        raise Hang(f"no answer in {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_layout(layout: Layout, base: Path, folder: Path, report: bool = False) -> str:
    """'read' (every face read it, warnings allowed) or 'refused' (one DiagError line, the same
    from analyze, check and diag.open). Raises AssertionError or the exception a face raised:
    the bug being hunted."""
    import diag
    from diag.check import run_check
    from diag.check.policy import Policy
    from diag.findings.analysis import analyze
    from diag.perfetto import export_perfetto
    from diag.trace.inputs import input_warnings, open_input

    trace_dir, outside = make(layout, base, folder)
    before = snapshot(outside)
    output = folder / "out.json"
    with alarm():
        try:
            trace = open_input(trace_dir)
        except DiagError as exc:
            _one_line(exc)
            for other in (lambda: run_check(trace_dir, Policy()), lambda: diag.open(trace_dir)):
                try:
                    other()
                except DiagError as again:
                    _one_line(again)
                    assert again.message == exc.message, (exc.message, again.message)
                else:
                    raise AssertionError(f"analyze refused, another face read it: {exc.message}")
            outcome = "refused"
        else:
            analyze(trace)
            for warning in input_warnings(trace):
                assert warning and "\n" not in warning, warning
            run_check(trace_dir, Policy())
            diag.open(trace_dir).steps  # noqa: B018 - a frame is built as a notebook reads it
            export_perfetto(open_input(trace_dir), output)
            if report:
                from diag.report.build import build_report, write_report

                write_report(build_report(trace, analyze(trace), hta=False), folder / "r.html")
            outcome = "read"
    assert snapshot(outside) == before, f"{layout.name}: something outside the trace changed"
    return outcome


def _one_line(exc: DiagError) -> None:
    assert exc.message and "\n" not in exc.message, exc.message
    assert exc.exit_code != EXIT_INTERNAL, exc.message


# --- the writer ---------------------------------------------------------------------------------

WRITE_POSITIONS = ("events.jsonl", "steps-1.jsonl")
WRITE_KINDS = ("fifo", "socket", "dir", "link-out", "link-dev", "link-loop")


def writer_layouts() -> list[tuple[str, str]]:
    return [(p, k) for p in WRITE_POSITIONS for k in WRITE_KINDS]


def run_writer_layout(position: str, kind: str, folder: Path) -> bool:
    """An EventWriter whose event file (or first step segment) is `kind` before it opens it:
    it never blocks, never raises, never writes through the link. Returns whether it stopped
    recording (True for every layout: none of them is a file it may write)."""
    from diag.trace.events import EventWriter

    if folder.exists():
        _remove(folder)
    process, outside = folder / "pid1", folder / "outside"
    process.mkdir(parents=True)
    outside.mkdir()
    original = outside / "original"
    original.write_bytes(b"")
    _put(kind, process / position, original)
    before = snapshot(outside)
    with alarm():
        # The smallest bound: past 64 KiB of events.jsonl, the next step goes to steps-1.jsonl.
        writer = EventWriter(process / "events.jsonl", max_bytes=1, reserve_bytes=0)
        writer.emit("process_start", pid=1)
        for _ in range(70):
            writer.emit("note", text="x" * 1000)
        for step in range(3):
            writer.emit("step_start", step=step)
            writer.emit("step_end", step=step, wall_s=0.1)
        writer.close()
    assert snapshot(outside) == before, f"{kind}@{position}: written through a link"
    made = process / position
    if not made.is_symlink() and stat.S_ISREG(os.lstat(made).st_mode):
        raise AssertionError(f"{kind}@{position}: replaced by a file")
    return writer.stopped
