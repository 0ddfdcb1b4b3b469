"""The derived Kineto cache: reused when it matches, rebuilt when it does not, never in the way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import msgspec
import pytest

import diag.trace.kinetocache as kinetocache
from diag.errors import DiagError
from diag.trace.kineto import KinetoTrace, read_kineto, read_kineto_with_columns
from diag.trace.kinetocache import CACHE_DIR, MAGIC, cache_path, load_kineto

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
SOURCE = H200 / "wan-routing.json.gz"
OTHER = H200 / "wan-compiled.json.gz"


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    """A trace directory holding one Kineto window, as `diag record` lays it out."""
    window = tmp_path / "runs" / "compiled" / "pid1" / "kineto" / "r0-s2-steady.json.gz"
    window.parent.mkdir(parents=True)
    shutil.copy(SOURCE, window)
    return tmp_path


def _window(trace_dir: Path) -> Path:
    return trace_dir / "runs" / "compiled" / "pid1" / "kineto" / "r0-s2-steady.json.gz"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records every real parse that load_kineto does (a cache hit does none)."""
    calls: list[Path] = []

    def counting(path: Path, progress: object = None) -> KinetoTrace:
        calls.append(path)
        return read_kineto(path)

    def counting_with_columns(path: Path, progress: object = None) -> tuple[KinetoTrace, object]:
        calls.append(path)
        return read_kineto_with_columns(path)

    monkeypatch.setattr(kinetocache, "read_kineto", counting)
    monkeypatch.setattr(kinetocache, "read_kineto_with_columns", counting_with_columns)
    return calls


def test_second_load_comes_from_the_cache(trace_dir: Path, parses: list[Path]) -> None:
    cache = trace_dir / CACHE_DIR
    first = load_kineto(_window(trace_dir), cache)
    stored = cache_path(_window(trace_dir), cache)
    assert stored == cache / "runs__compiled__pid1__kineto__r0-s2-steady.json.gz.msgpack"
    assert stored.read_bytes().startswith(MAGIC)
    second = load_kineto(_window(trace_dir), cache)
    assert len(parses) == 1
    assert second == first
    assert second.activities and second.activities[0].region == first.activities[0].region
    assert [p.name for p in cache.iterdir()] == [stored.name]  # no temporary left behind


def test_same_window_name_in_two_runs_gets_two_entries(trace_dir: Path, parses: list[Path]) -> None:
    eager = trace_dir / "runs" / "eager" / "pid2" / "kineto" / "r0-s2-steady.json.gz"
    eager.parent.mkdir(parents=True)
    shutil.copy(OTHER, eager)
    cache = trace_dir / CACHE_DIR / "compiled"  # a per-run cache folder works the same way
    for _ in range(2):
        compiled_trace = load_kineto(_window(trace_dir), cache)
        eager_trace = load_kineto(eager, cache)
    assert len(parses) == 2
    assert compiled_trace.activities != eager_trace.activities


def test_changed_source_is_rebuilt(trace_dir: Path, parses: list[Path]) -> None:
    cache = trace_dir / CACHE_DIR
    window = _window(trace_dir)
    original = load_kineto(window, cache)
    stat = window.stat()
    os.utime(window, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched
    load_kineto(window, cache)
    assert len(parses) == 2
    shutil.copy(OTHER, window)  # rewritten with other content
    rebuilt = load_kineto(window, cache)
    assert len(parses) == 3
    assert rebuilt == read_kineto(window) != original
    assert load_kineto(window, cache) == rebuilt
    assert len(parses) == 3


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"garbage" * 100,
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:-1] + b"\xc1",  # last byte is not msgpack
        lambda data: b"",
        lambda data: MAGIC + b"\xff\xff\xff\x7f",  # header length beyond the file
    ],
    ids=["garbage", "truncated", "corrupt-tail", "empty", "bad-length"],
)
def test_damaged_cache_is_rebuilt(trace_dir: Path, parses: list[Path], damage: object) -> None:
    cache = trace_dir / CACHE_DIR
    expected = load_kineto(_window(trace_dir), cache)
    stored = cache_path(_window(trace_dir), cache)
    stored.write_bytes(damage(stored.read_bytes()))  # type: ignore[operator]
    assert load_kineto(_window(trace_dir), cache) == expected
    assert len(parses) == 2
    assert load_kineto(_window(trace_dir), cache) == expected  # and it was rewritten
    assert len(parses) == 2


def test_other_parser_version_is_rebuilt(
    trace_dir: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = trace_dir / CACHE_DIR
    load_kineto(_window(trace_dir), cache)
    monkeypatch.setattr(kinetocache, "PARSER_VERSION", kinetocache.PARSER_VERSION + 1)
    load_kineto(_window(trace_dir), cache)
    assert len(parses) == 2
    monkeypatch.setattr(kinetocache, "CACHE_FORMAT", kinetocache.CACHE_FORMAT + 1)
    load_kineto(_window(trace_dir), cache)
    assert len(parses) == 3


def test_unwritable_cache_folder_still_loads(trace_dir: Path, parses: list[Path]) -> None:
    blocker = trace_dir / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    trace = load_kineto(_window(trace_dir), blocker / CACHE_DIR)
    assert trace == read_kineto(_window(trace_dir))
    assert blocker.is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_trace_directory(trace_dir: Path, parses: list[Path]) -> None:
    cache = trace_dir / CACHE_DIR
    trace_dir.chmod(0o555)
    try:
        assert load_kineto(_window(trace_dir), cache) == read_kineto(_window(trace_dir))
        assert not cache.exists()
    finally:
        trace_dir.chmod(0o755)


def test_without_cache_dir_it_just_parses(trace_dir: Path, parses: list[Path]) -> None:
    load_kineto(_window(trace_dir), None)
    load_kineto(_window(trace_dir), None)
    assert len(parses) == 2
    assert not (trace_dir / CACHE_DIR).exists()


def test_missing_source_is_a_diag_error(trace_dir: Path) -> None:
    with pytest.raises(DiagError, match="no such file"):
        load_kineto(trace_dir / "missing.json.gz", trace_dir / CACHE_DIR)


def test_cache_hit_reports_progress(trace_dir: Path) -> None:
    cache = trace_dir / CACHE_DIR
    load_kineto(_window(trace_dir), cache)
    calls: list[tuple[int, int]] = []
    load_kineto(_window(trace_dir), cache, progress=lambda d, t: calls.append((d, t)))
    size = _window(trace_dir).stat().st_size
    assert calls == [(size, size)]


@pytest.mark.parametrize(
    "columns",
    [
        lambda strings, columns: (
            strings,
            [c[:-1] if i == 3 else c for i, c in enumerate(columns)],
        ),
        lambda strings, columns: (strings[:1], columns),  # string indices past the table
    ],
    ids=["short-column", "index-past-table"],
)
def test_cache_with_inconsistent_activity_columns_is_rebuilt(
    trace_dir: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch, columns: object
) -> None:
    """A body that decodes and passes its CRC but whose activity columns do not line up (not
    something diag writes: made by wrapping the writer) is not trusted: it is rebuilt."""
    cache = trace_dir / CACHE_DIR
    expected = read_kineto(_window(trace_dir))
    assert len(expected.activities) > 1
    honest = kinetocache._activity_columns
    monkeypatch.setattr(
        kinetocache,
        "_activity_columns",
        lambda acts: columns(*honest(acts)),  # type: ignore[operator]
    )
    load_kineto(_window(trace_dir), cache)
    monkeypatch.setattr(kinetocache, "_activity_columns", honest)
    assert load_kineto(_window(trace_dir), cache) == expected
    assert len(parses) == 2
    assert load_kineto(_window(trace_dir), cache) == expected  # rewritten, now from the cache
    assert len(parses) == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda ops: msgspec.structs.replace(
            ops, run=[ops.run[0] - 1, *ops.run[1:]]
        ),  # one op short
        lambda ops: msgspec.structs.replace(ops, dur=ops.dur[:-1]),
        lambda ops: msgspec.structs.replace(ops, names=ops.names[:1]),  # indices past the table
    ],
    ids=["thread-runs", "short-column", "index-past-table"],
)
def test_cache_with_inconsistent_cpu_op_columns_is_rebuilt(
    trace_dir: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch, damage: object
) -> None:
    """Likewise for the CPU ops' columns (made by wrapping the writer, not something diag
    writes): a body that decodes and passes its CRC but does not line up is rebuilt."""
    cache = trace_dir / CACHE_DIR
    expected = read_kineto(_window(trace_dir))
    assert len({op.name for op in expected.cpu_ops}) > 1
    honest = kinetocache._op_columns
    monkeypatch.setattr(kinetocache, "_op_columns", lambda ops: damage(honest(ops)))  # type: ignore[operator]
    load_kineto(_window(trace_dir), cache)
    monkeypatch.setattr(kinetocache, "_op_columns", honest)
    assert load_kineto(_window(trace_dir), cache) == expected
    assert len(parses) == 2
    assert load_kineto(_window(trace_dir), cache) == expected  # rewritten, now from the cache
    assert len(parses) == 2
