"""The TORCH_TRACE importer reads a log in fixed-size blocks: where a block ends must never change
what is read, one line can hold no more than the line limit, and memory does not grow with the
log. Real logs from shared/data (tlparse's test logs and torch 2.13 ones), copied with the damage
people's copies have (CRLF checkouts, a byte-order mark, gzip, a cut mid-payload)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

import diag.trace.torchtrace as torchtrace
from diag.errors import DiagError
from diag.trace.torchtrace import load_torch_trace

SHARED_TRACES = Path(__file__).resolve().parents[1] / "data" / "shared" / "torch_trace"


@pytest.fixture(scope="module")
def shared() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared TORCH_TRACE logs not found at {SHARED_TRACES}")
    return SHARED_TRACES


def _plain(value: Any) -> Any:
    """The Trace as plain data, to compare two reads field by field."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, msgspec.Struct):
        return {name: _plain(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _read(path: Path) -> Any:
    try:
        trace = load_torch_trace(path)
    except DiagError as exc:
        return ("error", exc.message)
    return _plain(trace.manifest), {label: _plain(run) for label, run in trace.runs.items()}


def _variants(source: Path, folder: Path) -> list[Path]:
    data = source.read_bytes()
    cut = data.index(b"\n\t", len(data) // 2) + 40  # inside a payload line
    made = {
        "plain.log": data,
        "crlf.log": data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
        "bom.log": b"\xef\xbb\xbf" + data,
        "cut.log": data[:cut],
        "gz.log.gz": gzip.compress(data),
    }
    paths = []
    for name, content in made.items():
        path = folder / f"{source.stem}-{name}"
        path.write_bytes(content)
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    ("name", "blocks"),
    [
        ("tlparse_graph_breaks.log", (1, 7, 509)),
        ("tlparse_corrupted_payload.log", (7, 4093)),
        ("tlparse_shape_recompiles.log", (4093, 65521)),
        ("torch213_graph_break_and_limit.log", (4093, 65521)),
    ],
)
def test_where_a_block_ends_does_not_change_what_is_read(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, blocks: tuple[int]
) -> None:
    """Blocks that end inside a record line, inside a payload line, between a CR and its LF or
    right after a tab give the same Trace as one big block."""
    for path in _variants(shared / name, tmp_path):
        expected = _read(path)
        assert expected[0] != "error", path.name
        for block in blocks:
            monkeypatch.setattr(torchtrace, "_BLOCK", block)
            assert _read(path) == expected, (path.name, block)
        monkeypatch.undo()


def _record(meta: dict[str, Any], payload: str | None = None, second: int = 29) -> str:
    if payload is not None:
        meta = {**meta, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    text = f"V1129 22:40:{second:02d}.692000 4242 torch/_dynamo/x.py:1] {json.dumps(meta)}\n"
    if payload is not None:
        text += "".join(f"\t{line}\n" for line in payload.split("\n"))
    return text


def _compile(frame: int, attempt: int) -> str:
    metrics = {"co_name": "f", "co_filename": "/m.py", "co_firstlineno": 3}
    ids = {"frame_id": frame, "frame_compile_id": attempt}
    return _record({"dynamo_start": {"stack": []}, **ids}) + _record(
        {"compilation_metrics": metrics, **ids}
    )


def test_a_line_past_the_limit_is_skipped_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A payload line longer than the limit spoils its payload only (the recompile's reasons
    come from compilation_metrics then); a record line that long is one skipped line; every
    record after them is read, whichever block the long lines end in."""
    monkeypatch.setattr(torchtrace, "_MAX_LINE", 512)
    reasons = {"artifact": {"name": "recompile_reasons", "encoding": "string"}}
    log = tmp_path / "long.log"
    log.write_text(
        _compile(0, 0)
        + _record({**reasons, "frame_id": 0, "frame_compile_id": 1}, "x" * 2000)
        + _compile(0, 1)
        + "V1129 22:40:29.692000 4242 torch/x.py:1] {" + '"a": 1, ' * 300 + '"b": 2}\n'
        + _record({**reasons, "frame_id": 0, "frame_compile_id": 2}, "L['x'] == 1")
        + _compile(0, 2)
    )  # fmt: skip
    for block in (16, 100, 256):
        monkeypatch.setattr(torchtrace, "_BLOCK", block)
        trace = load_torch_trace(log)
        run = trace.compiled
        assert run is not None
        assert [c.compile_id for c in run.compiles] == ["0/0", "0/1", "0/2"]
        assert run.compiles[1].guards == []
        assert [g.raw for g in run.compiles[2].guards] == ["L['x'] == 1"]
        stats = trace.manifest["torch_trace"]
        assert (stats["corrupt_payloads"], stats["skipped_lines"]) == (1, 1), block


def _peak_bytes(path: Path) -> int:
    tracemalloc.start()
    try:
        load_torch_trace(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_log(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same real log once and eight times over (compile ids restart, read as
    torch._dynamo.reset()): the reader's peak allocation stays a few blocks, not the file."""
    monkeypatch.setattr(torchtrace, "_BLOCK", 64 << 10)
    data = (shared / "torch213_python_state_recompiles.log").read_bytes()
    small, big = tmp_path / "once.log", tmp_path / "eight.log"
    small.write_bytes(data)
    big.write_bytes(data * 8)
    small_peak, big_peak = _peak_bytes(small), _peak_bytes(big)
    assert len(load_torch_trace(big).compiled.compiles) == 48  # type: ignore[union-attr]
    assert big_peak < len(data) // 4, (small_peak, big_peak, len(data))
    assert big_peak < 2 * small_peak + (256 << 10), (small_peak, big_peak)
