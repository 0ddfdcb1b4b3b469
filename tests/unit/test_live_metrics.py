"""The live counters (diag.live.metrics) on hand-written events: what counts once, what a
recompile-limit hit is, the step-0 rule, label escaping, and a line still being written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from diag.live.metrics import EventTail, LiveCounters, step0_spike

FRAME = {"name": "block", "file": "/srv/m.py", "line": 3}
LIVE = {"phase": "live", "request_id": "r2", "step": 0}


def _feed(events: list[dict[str, Any]]) -> str:
    counters = LiveCounters()
    for event in events:
        counters.observe("compiled", "pid7", event)
    return counters.exposition()


def test_a_live_compile_counts_once_from_its_start() -> None:
    warm = {"phase": "warmup", "request_id": "w1", "step": 0}
    # Dynamo writes a recompile's reasons before its start: the frame is known from its last
    # compile (the same frame id), and the compile counts as live from its first event.
    text = _feed(
        [
            {"ev": "compile_end", "compile_id": "0/0", "epoch": 0, "frame": FRAME, **warm}
            | {"result": "ok"},
            {"ev": "request_start", "request_id": "r2", "phase": "live", "label": "T-9"},
            {"ev": "recompile", "compile_id": "0/1", "epoch": 0, **LIVE},
            {"ev": "compile_start", "compile_id": "0/1", "epoch": 0, "frame": FRAME, **LIVE},
        ]
    )
    assert 'diag_live_compiles_total{run="compiled",frame="block"} 1' in text
    assert 'diag_compiles_in_progress{run="compiled"} 1' in text
    assert 'diag_recompiles_total{run="compiled",phase="live",frame="block"} 1' in text
    assert 'diag_compiles_total{run="compiled",phase="warmup",frame="block"} 1' in text
    text = _feed(
        [
            {"ev": "request_start", "request_id": "r2", "phase": "live", "label": "T-9"},
            {"ev": "compile_start", "compile_id": "0/1", "epoch": 0, "frame": FRAME, **LIVE},
            {"ev": "recompile", "compile_id": "0/1", "epoch": 0, **LIVE},
            {"ev": "compile_end", "compile_id": "0/1", "epoch": 0, "frame": FRAME, **LIVE}
            | {"result": "ok"},
        ]
    )
    assert 'diag_live_compiles_total{run="compiled",frame="block"} 1' in text
    assert 'diag_compiles_total{run="compiled",phase="live",frame="block"} 1' in text
    assert 'diag_compiles_in_progress{run="compiled"} 0' in text
    assert (
        'diag_last_live_compile_info{run="compiled",finding="live-compile:block:r2",'
        'request="r2",task="T-9"} 1'
    ) in text


def test_a_limit_hit_is_not_a_compile() -> None:
    text = _feed(
        [
            {"ev": "compile_start", "compile_id": "0/8", "epoch": 0, "frame": FRAME, **LIVE},
            {"ev": "compile_end", "compile_id": "0/8", "epoch": 0, "frame": FRAME, **LIVE}
            | {"result": "recompile_limit"},
            {"ev": "recompile_limit", "compile_id": "0/8", "epoch": 0, "frame": FRAME, **LIVE},
        ]
    )
    assert 'diag_recompile_limit_hits_total{run="compiled",frame="block"} 1' in text
    assert "diag_compiles_total{" not in text
    # It began in a live request: counted when it began, before its result was known.
    assert 'diag_live_compiles_total{run="compiled",frame="block"} 1' in text


def test_step0_spikes_follow_step0_spikes_rule() -> None:
    assert step0_spike({0: 1.0, 1: 0.10, 2: 0.11})
    assert not step0_spike({0: 0.15, 1: 0.10, 2: 0.11})  # under 2x
    assert not step0_spike({0: 1.0, 1: 0.10})  # one other step: not judged
    assert not step0_spike({0: 0.06, 1: 0.02, 2: 0.02})  # 3x, but less than 50 ms more
    requests = []
    for rid, walls in (("r1", (1.0, 0.1, 0.1)), ("r2", (0.1, 0.1, 0.1))):
        requests.append({"ev": "request_start", "request_id": rid, "phase": "live"})
        requests.extend(
            {"ev": "step_end", "request_id": rid, "step": i, "wall_s": w, "profiled": False}
            for i, w in enumerate(walls)
        )
        requests.append({"ev": "request_end", "request_id": rid, "phase": "live"})
    assert 'diag_step0_spikes_total{run="compiled"} 1' in _feed(requests)


def test_label_values_are_escaped() -> None:
    frame = {"name": 'we"ird\\name\nx', "file": "/srv/m.py", "line": 3}
    text = _feed([{"ev": "compile_end", "compile_id": "0/0", "epoch": 0, "frame": frame}])
    assert 'frame="we\\"ird\\\\name x"' in text
    assert all("\n" not in line for line in text.splitlines())


def test_every_label_goes_through_the_one_sanitiser() -> None:
    """A phase name with a newline (diag.api.phase accepts any str) once ended the sample line
    and made the whole exposition unparseable; an ESC or BEL reached the scraper raw."""
    frame = {"name": "blk\x1b]0;x\x07", "file": "/srv/m.py", "line": 3}
    end = {"ev": "compile_end", "compile_id": "0/0", "epoch": 0, "frame": frame}
    text = _feed([{**end, "phase": "warm\nup\ud800"}])
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert 'phase="warm up\\\\ud800"' in text, text
    assert 'frame="blk\\\\x1b]0;x\\\\x07"' in text, text
    for line in samples:  # each sample: name{labels} value
        assert line.rsplit(" ", 1)[1].isdigit(), line
    assert "\x1b" not in text and "\x07" not in text


def test_a_line_still_being_written_is_read_when_complete(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "compiled" / "pid7"
    folder.mkdir(parents=True)
    path = folder / "events.jsonl"
    line = json.dumps({"ev": "compile_start", "compile_id": "0/0", "epoch": 0, **LIVE}) + "\n"
    path.write_text(line[:20])
    counters = LiveCounters()
    tail = EventTail(tmp_path)
    tail.read(counters)
    assert 'diag_compiles_in_progress{run="compiled"} 1' not in counters.exposition()
    with open(path, "a") as handle:
        handle.write(line[20:])
    tail.read(counters)
    tail.read(counters)
    assert 'diag_compiles_in_progress{run="compiled"} 1' in counters.exposition()
    assert 'diag_live_compiles_total{run="compiled",frame="?"} 1' in counters.exposition()


def test_a_fifo_or_a_link_for_an_event_file_is_not_waited_on(tmp_path: Path) -> None:
    """Issue 37: a FIFO named events.jsonl made every /metrics scrape time out (the tail opened
    it plainly and waited for a writer). The other process's counters are still served."""
    runs = tmp_path / "runs" / "compiled"
    for name in ("pid7", "pid8", "pid9"):
        (runs / name).mkdir(parents=True)
    os.mkfifo(runs / "pid7" / "events.jsonl")
    (runs / "pid8" / "events.jsonl").symlink_to("/dev/zero")
    line = json.dumps({"ev": "compile_start", "compile_id": "0/0", "epoch": 0, **LIVE}) + "\n"
    (runs / "pid9" / "events.jsonl").write_text(line)
    counters = LiveCounters()
    EventTail(tmp_path).read(counters)  # returns: neither waited on nor read forever
    assert 'diag_compiles_in_progress{run="compiled"} 1' in counters.exposition()
