"""The event writer's cost per step against an earlier revision's, side by side in one process.

bench/record_step_cost.py measures all the collectors' work per step, process against process,
which a loaded host swamps. This isolates diag.trace.events.EventWriter: the writer of REV
(`git show REV:diag/trace/events.py`, loaded as a module) and the current one write the same
step_start/step_end pair into files of their own, in alternating blocks, and the ratio of their
medians is printed. `--max-size` puts the current writer's steps in rotated segments.

    python bench/event_writer_cost.py --against 478e375
    python bench/event_writer_cost.py --against 478e375 --max-size 1048576
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _writer_of(revision: str, folder: Path) -> Any:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:diag/trace/events.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = folder / "events_then.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("events_then", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EventWriter


def _block(writer: Any, steps: int) -> float:
    """Seconds per step of `steps` step_start/step_end pairs, as collectors/steps.py writes them."""
    start = time.perf_counter()
    for i in range(steps):
        t = time.monotonic_ns()
        writer.emit(
            "step_start",
            t=t,
            request_id="r1",
            step=i,
            phase="live",
            shape=[2, 8, 8],
            profiled=False,
        )
        writer.emit(
            "step_end",
            t=t + 1,
            request_id="r1",
            step=i,
            phase="live",
            wall_s=0.0123,
            cpu_s=0.0101,
            host_load=0.5,
            profiled=False,
        )
    return (time.perf_counter() - start) / steps


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", required=True, metavar="REV")
    parser.add_argument("--max-size", type=int, default=0, metavar="BYTES")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=2000, help="steps per block")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from diag.trace.events import EventWriter

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        then_writer = _writer_of(args.against, folder)(folder / "then" / "events.jsonl")
        now_writer = EventWriter(folder / "now" / "events.jsonl", max_bytes=args.max_size)
        then: list[float] = []
        now: list[float] = []
        for block in range(args.blocks):  # alternate, so load spikes hit both alike
            pair = ((then, then_writer), (now, now_writer))
            for samples, writer in pair if block % 2 == 0 else pair[::-1]:
                samples.append(_block(writer, args.steps))
        then_writer.close()
        now_writer.close()
        segments = len(list((folder / "now").glob("steps-*.jsonl")))
    ratio = statistics.median(now) / statistics.median(then)
    print(
        f"event writer per step (step_start + step_end), {args.blocks} alternating blocks of "
        f"{args.steps}: {args.against} {statistics.median(then) * 1e6:.2f} us, now "
        f"{statistics.median(now) * 1e6:.2f} us (max-size {args.max_size or 'none'}, "
        f"{segments} segment(s) kept); ratio now/then {ratio:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
