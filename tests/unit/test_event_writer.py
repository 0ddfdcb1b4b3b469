"""diag.trace.events.EventWriter: never raises into the program, stops once with its last word
on a full disk (a real tmpfs) or a closed descriptor, and with --max-size keeps the newest
per-step events in rotated segments while every other event stays in events.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.trace.events import SEGMENTS_KEPT, EventWriter, segment_limit
from diag.trace.format import process_event_files
from diag.trace.lines import iter_events
from diag.trace.load import load_trace


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs with about 48 KiB left free."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        stats = os.statvfs(disk)
        (disk / "filler").write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - (48 << 10)))
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_a_full_disk_stops_the_writer_once_with_where_and_why(
    tiny_disk: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    position = {"phase": "live", "request_id": "r3", "step": 7}
    stops: list[bool] = []
    writer = EventWriter(
        tiny_disk / "pid1" / "events.jsonl",
        position=lambda: position,
        on_stop=lambda: stops.append(True),  # the session pauses its per-step hooks
    )
    for i in range(2000):  # ~230 KiB of events into 48 KiB (less the 32 KiB reserve)
        writer.emit("step_end", request_id="r3", step=i, wall_s=0.5, note="x" * 80)
    writer.emit("compile_end", compile_id="0/1")  # after the stop: dropped, no error
    writer.close()

    assert writer.stopped and writer.stop_reason == "disk full" and stops == [True]
    lines = _lines(writer.path)
    marker = json.loads(lines[-1])
    assert marker["ev"] == "recording_stopped" and marker["reason"] == "disk full"
    assert marker["error"].startswith("ENOSPC") and marker["file"] == "events.jsonl"
    assert {k: marker[k] for k in position} == position
    # Every line but at most one torn write is whole; the marker starts a line of its own.
    whole = [line for line in lines if line.endswith(b"}")]
    assert len(lines) - len(whole) <= 1 and all(json.loads(line) for line in whole)
    assert not (writer.folder / ".diag-reserve").exists()
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"diag: recording stopped in process {os.getpid()}")
    assert "disk full (ENOSPC" in err[0] and str(writer.path) in err[0]


def test_a_descriptor_closed_under_the_writer_stops_it_quietly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    writer = EventWriter(tmp_path / "pid1" / "events.jsonl")
    writer.emit("process_start", pid=1)
    os.close(writer._fd)  # a program that closes every descriptor it did not open
    writer.emit("step_start", step=0)
    writer.emit("step_end", step=0)
    writer.close()
    assert writer.stopped and writer.stop_reason == "the event file was closed under diag"
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith("diag: recording stopped") and "EBADF" in line


def test_a_value_json_cannot_hold_becomes_a_collector_error(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path / "pid1" / "events.jsonl")
    loop: dict[str, object] = {}
    loop["self"] = loop
    writer.emit("call_shapes", signatures=loop)
    writer.close()
    (event,) = iter_events(writer.path)
    assert event["ev"] == "collector_error" and event["where"] == "encode call_shapes"
    assert not writer.stopped


def test_max_size_keeps_the_newest_steps_and_every_other_event(tmp_path: Path) -> None:
    """20 000 steps of 100-step requests with a compile every 1 000 steps, under a 1 MiB bound:
    events.jsonl keeps the first steps and every compile and request boundary; the newest steps
    are in at most SEGMENTS_KEPT segments; what was dropped is counted."""
    trace = tmp_path / "t"
    (trace / "runs" / "compiled").mkdir(parents=True)
    manifest = {"format": "diag-trace", "version": 2, "status": "complete", "runs": []}
    (trace / "manifest.json").write_text(json.dumps(manifest))
    writer = EventWriter(trace / "runs" / "compiled" / "pid7" / "events.jsonl", max_bytes=1 << 20)
    t = 1000
    writer.emit("process_start", t=t, pid=7)
    for r in range(200):
        t += 1
        writer.emit("request_start", t=t, request_id=f"r{r}", phase="live", shape=[4])
        for i in range(100):
            if (r * 100 + i) % 1000 == 0:
                t += 1
                writer.emit("compile_end", t=t, compile_id=f"0/{r // 10}", epoch=0, phase="live")
            writer.emit("step_start", t=t + 1, request_id=f"r{r}", step=i, phase="live")
            writer.emit("step_end", t=t + 2, request_id=f"r{r}", step=i, phase="live", wall_s=0.1)
            t += 2
        writer.emit("request_end", t=t + 1, request_id=f"r{r}", phase="live")
        t += 1
    writer.emit("process_end", t=t + 1)
    writer.close()

    files = process_event_files(writer.path)
    segments = files[1:]
    assert 1 <= len(segments) <= SEGMENTS_KEPT
    assert [int(p.stem.split("-")[1]) for p in segments] == sorted(
        int(p.stem.split("-")[1]) for p in segments
    )
    assert all(p.stat().st_size <= segment_limit(1 << 20) + 200 for p in segments)
    head = list(iter_events(writer.path))
    dropped = [e for e in head if e["ev"] == "steps_dropped"]
    assert dropped and all(e["segment"] not in {p.name for p in segments} for e in dropped)

    run = load_trace(trace).runs["compiled"]
    assert len(run.requests) == 200 and len(run.compiles) == 20
    assert run.processes[0].ended
    kept = [(s.request_id, s.index) for s in run.steps]
    assert len(kept) + sum(e["steps"] for e in dropped) == 20_000
    # The newest steps are all kept (the last segment runs to the end) ...
    assert kept[-1] == ("r199", 99) and len(set(kept)) == len(kept)
    assert all(s.end_t is not None for s in run.steps)  # no step split across files
    tail = [(f"r{n // 100}", n % 100) for n in range(20_000)][-len(segments) * 300 :]
    assert set(tail) <= set(kept)
    # ... and so are the first ones, in events.jsonl.
    assert kept[0] == ("r0", 0)


@pytest.mark.parametrize(
    "value",
    [
        [2, 3],
        (4, 5),
        None,
        [None, 1],
        {"allocated": 1 << 40, "reserved": None},
        float("nan"),
        float("inf"),
        0.1 + 0.2,
        2**70,
        True,
        "null",
        "tête\u2028\x00",
        "\ud800",
        os.sep,
    ],
)
def test_a_step_event_decodes_as_json_would_have_written_it(value: object) -> None:
    """Step events take msgspec's encoder (faster); what a reader gets must not change."""
    from diag.trace.events import _encode, encode_line

    record = {"t": 1, "ev": "step_end", "request_id": "r1", "value": value}
    fast = encode_line("step_end", record)
    slow = (_encode(record) + "\n").encode()
    assert fast.endswith(b"\n") and fast.count(b"\n") == 1
    assert repr(json.loads(fast)) == repr(json.loads(slow))


def test_a_step_event_with_an_int_subclass_keeps_the_number() -> None:
    """json writes an int subclass (an IntFlag, a framework's counter type) as the number."""
    from diag.trace.events import encode_line

    class Step(int):
        pass

    line = encode_line("step_start", {"t": 1, "ev": "step_start", "step": Step(4)})
    assert json.loads(line)["step"] == 4
