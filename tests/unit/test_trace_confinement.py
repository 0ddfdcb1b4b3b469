"""A trace never reaches outside itself (issue 22): every path a reader follows from a trace
directory resolves inside it, to a regular file under the size cap, or is skipped with one
warning, the same warning and the same findings from analyze, check, the TUI's loader and the
report. Files are opened as Python's audit hook sees them (`open` events), so "not opened"
is checked, not assumed. Input: a real H200 recording (tests/data/h200/record-wan-routing,
three Kineto windows per run) with one window made hostile."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from diag.check import run_check
from diag.check.policy import Policy
from diag.errors import DiagError
from diag.findings.analysis import analyze
from diag.trace import profiles
from diag.trace.inputs import input_warnings, open_input
from tests.h200data import h200_trace

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], str | Path):
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        # An open that refuses a symlink (O_NOFOLLOW) never reaches where the link points.
        follows = not flags & os.O_NOFOLLOW
        _OPENED.append(os.path.realpath(args[0]) if follows else os.fspath(args[0]))


sys.addaudithook(_audit)


@contextmanager
def opened() -> Iterator[list[str]]:
    """The real paths of every file opened inside the block (Python's `open` audit event)."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


def _window_event(events: Path, new: str) -> str:
    """Point the first profile_window_end at `new`; its old file name."""
    lines = events.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        if '"profile_window_end"' in line:
            old = line.split('"file":"', 1)[1].split('"', 1)[0]
            lines[index] = line.replace(f'"file":"{old}"', f'"file":"{new}"')
            events.write_text("\n".join(lines) + "\n", encoding="utf-8")
            return old
    raise AssertionError("no window")


def _process(trace: Path) -> Path:
    return next((trace / "runs" / "compiled").glob("pid*"))


def _outside_window(trace: Path) -> Path:
    """A real Kineto window, copied next to the trace directory (outside it)."""
    outside = trace.parent / "outside"
    outside.mkdir(exist_ok=True)
    target = outside / "x.json.gz"
    shutil.copy(next((_process(trace) / "kineto").glob("*.json.gz")), target)
    return target


def _absolute(target: str) -> Callable[[Path], str]:
    def make(trace: Path) -> str:
        _window_event(_process(trace) / "events.jsonl", target)
        return target

    return make


def _climbs_out(trace: Path) -> str:
    target = _outside_window(trace)
    _window_event(_process(trace) / "events.jsonl", "../../../../outside/x.json.gz")
    return str(target)


def _replaced_by(make: Callable[[Path, Path], str], which: int = 0) -> Callable[[Path], str]:
    """A window file of the compiled run (sorted by name), replaced by what `make` puts there."""

    def replace(trace: Path) -> str:
        path = sorted((_process(trace) / "kineto").glob("*.json.gz"))[which]
        assert path.resolve().is_relative_to(trace.resolve())  # never unlink outside it
        path.unlink()
        return make(trace, path)

    return replace


def _symlink_out(trace: Path, path: Path) -> str:
    target = _outside_window(trace)  # a valid trace: only where it is makes it wrong
    path.symlink_to(target)
    return str(target)


def _fifo(trace: Path, path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _directory(trace: Path, path: Path) -> str:
    path.mkdir()
    return str(path)


#: name -> (how the window is made hostile, returning the path that must not be opened; the
#: warning's words)
HOSTILE: dict[str, tuple[Callable[[Path], str], str]] = {
    "absolute /dev/zero": (_absolute("/dev/zero"), "is absolute"),
    "absolute /etc/passwd": (_absolute("/etc/passwd"), "is absolute"),
    "../ out of the trace": (_climbs_out, "climbs out of the trace with '..'"),
    "a symlink out": (_replaced_by(_symlink_out), "symlink that leads outside the trace"),
    "a FIFO": (_replaced_by(_fifo), "not a regular file"),
    "a directory": (_replaced_by(_directory), "is a directory, not a file"),
    "missing": (_replaced_by(lambda trace, path: str(path)), "does not exist"),
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    """Finding ids of the unchanged recording, and those of kernel analyzers."""
    trace = h200_trace("record-wan-routing", tmp_path_factory.mktemp("clean"))
    findings = analyze(open_input(trace))
    return [f.id for f in findings], [f.id for f in findings if f.analyzer == "kernel-routing"]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_window_is_skipped_with_one_warning_by_every_reader(
    tmp_path: Path, case: str, clean: tuple[list[str], list[str]]
) -> None:
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    make, words = HOSTILE[case]
    forbidden = make(trace_dir)
    with opened() as paths:
        trace = open_input(trace_dir)
        findings = analyze(trace)
    warnings = input_warnings(trace)
    assert len(warnings) == 1 and words in warnings[0] and "skipped" in warnings[0], warnings
    if case != "missing":
        assert os.path.realpath(forbidden) not in paths, f"{forbidden} was opened"
    ids = [f.id for f in findings]
    all_ids, kernel_ids = clean
    # The other windows were read: the event findings are all there, and kernel routing
    # still compares the steps whose windows remain.
    assert set(all_ids) - set(kernel_ids) <= set(ids)
    # Check (no Kineto in its default policy) reads the events as before; the TUI's loader
    # and the report skip the same window with the same line.
    assert run_check(trace_dir, Policy()).warnings == []
    from diag.tui.loader import load_events, load_kernels

    data = load_events(trace_dir)
    load_kernels(data)
    assert sorted(f.id for f in data.findings) == sorted(ids)
    assert input_warnings(data.trace) == warnings
    from diag.report.build import build_report

    report = build_report(trace, findings, hta=False)
    assert "skipped" in report.html and "Kineto window" in report.html
    cache = trace_dir / ".diag-cache"
    assert not any("outside" in p.name for p in cache.rglob("*")), "cached from outside"


def test_a_window_over_the_size_cap_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    sizes = [p.stat().st_size for p in _process(trace_dir).glob("kineto/*.json.gz")]
    monkeypatch.setattr(profiles, "MAX_WINDOW_BYTES", min(sizes) - 1)
    trace = open_input(trace_dir)
    analyze(trace, ["kernel-routing"])
    warnings = input_warnings(trace)
    assert len(warnings) == 6, warnings  # every window of both runs
    assert all("over diag's" in w for w in warnings), warnings


def test_the_cache_is_never_written_outside_the_trace(tmp_path: Path) -> None:
    """.diag-cache a symlink to a folder outside: the windows are read without caching."""
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (trace_dir / ".diag-cache").symlink_to(elsewhere)
    trace = open_input(trace_dir)
    analyze(trace, ["kernel-routing"])
    assert list(elsewhere.iterdir()) == []
    assert input_warnings(trace) == []


@pytest.mark.parametrize("level", [".diag-cache/compiled/PROC", ".diag-cache/compiled"])
def test_no_command_writes_the_cache_through_a_linked_run_or_process_folder(
    tmp_path: Path, level: str
) -> None:
    """Issue 37: with `.diag-cache/<run>/<proc>` a symlink, `diag export --perfetto` created
    *.msgpack files wherever it pointed (it built the folder itself, past the check that
    analyze, check and report go through). Every command now takes it from one rule."""
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = trace_dir / level.replace("PROC", _process(trace_dir).name)
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere)
    export = subprocess.run(
        [sys.executable, "-m", "diag", "export", str(trace_dir), "--perfetto",
         str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr
    analyze(open_input(trace_dir), ["kernel-routing"])
    assert list(elsewhere.iterdir()) == []


def test_a_cache_file_that_is_a_link_or_a_fifo_is_not_followed(tmp_path: Path) -> None:
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    analyze(open_input(trace_dir), ["kernel-routing"])  # writes the cache
    cached = sorted((trace_dir / ".diag-cache").rglob("*.msgpack"))
    assert len(cached) == 6
    cached[0].unlink()
    cached[0].symlink_to("/etc/passwd")
    cached[1].unlink()
    os.mkfifo(cached[1])
    with opened() as paths:
        trace = open_input(trace_dir)
        analyze(trace, ["kernel-routing"])
    assert "/etc/passwd" not in paths
    assert input_warnings(trace) == []


def _refused(trace_dir: Path) -> str:
    with pytest.raises(DiagError) as refused:
        open_input(trace_dir)
    with pytest.raises(DiagError) as again:
        run_check(trace_dir, Policy())
    assert again.value.message == refused.value.message
    assert "\n" not in refused.value.message
    return refused.value.message


def test_a_manifest_or_event_file_that_leads_out_refuses_the_trace(tmp_path: Path) -> None:
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    manifest = trace_dir / "manifest.json"
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    assert "leads outside the trace" in _refused(trace_dir)
    manifest.unlink()
    shutil.copy(h200_trace("record-wan-routing", tmp_path / "b") / "manifest.json", manifest)
    events = _process(trace_dir) / "events.jsonl"
    events.rename(tmp_path / "events.jsonl")
    events.symlink_to(tmp_path / "events.jsonl")
    assert "event file" in _refused(trace_dir)
    events.unlink()
    os.mkfifo(events)
    assert "not a regular file" in _refused(trace_dir)


def test_bootstrap_errors_that_lead_out_are_not_read(tmp_path: Path) -> None:
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("a line from outside the trace\n", encoding="utf-8")
    (trace_dir / "runs" / "compiled" / "bootstrap-errors.txt").symlink_to(secret)
    with opened() as paths:
        trace = open_input(trace_dir)
        verdict = run_check(trace_dir, Policy())
    assert str(secret) not in paths
    assert not any(
        "outside the trace" in str(v.evidence) for r in verdict.rules for v in r.violations
    )
    assert trace.compiled is not None


@pytest.mark.parametrize("verb", ["analyze", "report"])
def test_the_cli_skips_a_device_or_fifo_window_without_hanging(tmp_path: Path, verb: str) -> None:
    trace_dir = h200_trace("record-wan-routing", tmp_path)
    _replaced_by(_fifo, which=-1)(trace_dir)  # a FIFO nobody writes
    _window_event(_process(trace_dir) / "events.jsonl", "/dev/zero")
    extra = ["-o", str(tmp_path / "r.html")] if verb == "report" else []
    proc = subprocess.run(
        [sys.executable, "-m", "diag", verb, str(trace_dir), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("diag: warning: ") for line in lines), lines
