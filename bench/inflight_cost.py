"""What reading a process that never reached diag's exit hook costs (diag/trace/inflight.py).

A server killed, stopped by `os._exit`, or still running leaves no `process_end`; the reader then
reads its event file once more for compiles that began and never ended. This writes two traces
of one process serving N requests of 3 steps (about 1.1 KB per request), identical but for a
final `process_end` in one, and times `load_trace` on both, interleaved, printing the medians
and their ratio.

    python bench/inflight_cost.py [--requests 100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from diag.trace.load import load_trace

FRAME = {"name": "block_runner", "file": "/srv/transformer_infer.py", "line": 21}


def write(folder: Path, requests: int, ended: bool) -> int:
    events = folder / "runs" / "compiled" / "pid1" / "events.jsonl"
    events.parent.mkdir(parents=True)
    manifest = {"format": "diag-trace", "version": 1, "status": "complete", "runs": []}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    t = 10**12
    with open(events, "w", encoding="utf-8") as out:

        def emit(ev: str, **fields: object) -> None:
            out.write(json.dumps({"t": t, "ev": ev, **fields}) + "\n")

        emit("process_start", pid=1, argv=["serve"])
        warm = {"phase": "warmup", "request_id": "w1", "step": 0}
        emit("compile_start", compile_id="0/0", epoch=0, frame=FRAME, **warm)
        emit("compile_end", compile_id="0/0", epoch=0, frame=FRAME, result="ok", **warm)
        for number in range(requests):
            rid = f"r{number}"
            emit("request_start", request_id=rid, phase="live", shape=[16, 2, 8, 8], steps=3)
            for step in range(3):
                where = {"request_id": rid, "step": step, "phase": "live"}
                t += 1000
                emit("step_start", **where, shape=[16, 2, 8, 8], profiled=False)
                t += 1000
                emit("step_end", **where, wall_s=0.03, cpu_s=0.03, host_load=1.0, profiled=False)
            emit("request_end", request_id=rid, phase="live")
        if ended:
            t += 1
            emit("process_end", gpu=None)
    return events.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: Path(tmp) / name for name in ("ended", "open")}
        for name, folder in folders.items():
            size = write(folder, args.requests, ended=name == "ended")
        times: dict[str, list[float]] = {name: [] for name in folders}
        for _ in range(args.repeats):
            for name, folder in folders.items():
                start = time.perf_counter()
                load_trace(folder)
                times[name].append(time.perf_counter() - start)
    ended, opened = (statistics.median(times[n]) for n in ("ended", "open"))
    print(
        f"{args.requests} requests, {size / 1e6:.1f} MB per event file, {args.repeats} "
        f"interleaved reads: ended {ended:.2f} s, no process_end {opened:.2f} s, "
        f"ratio {opened / ended:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
