"""How soon `diag tui` paints, and how long until it has loaded everything, on a big trace.

Builds a trace directory whose Kineto window holds >= 1.5 M events (bench/synth_kineto.py's
`make_trace_dir`), then starts `diag tui DIR` in a detached tmux terminal (100x30) and reads the
screen every 10 ms: first paint is when the tab bar shows, loaded is when the status line no
longer says `loading`. Measured with the Kineto cache cold (first open: the cache is built) and
warm (every later open), printed side by side with the 1.5 s target.

    python bench/tui_first_paint.py [--events 1500000] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth_kineto import WINDOW, make_trace_dir  # noqa: E402

from diag.trace.format import CACHE_DIR  # noqa: E402

TARGET_S = 1.5
SOCKET = "diag-tui-bench"


def _tmux(*args: str) -> str:
    done = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True)
    return done.stdout


def count_events(trace_dir: Path) -> int:
    """Events in the big window (one `"ph":` per Chrome trace event)."""
    window = next(trace_dir.glob(f"runs/*/*/kineto/{WINDOW}.json.gz"))
    with gzip.open(window, "rb") as handle:
        data = handle.read()
    return data.count(b'"ph":') + data.count(b'"ph" :')


def open_once(trace_dir: Path, timeout: float = 600.0) -> tuple[float, float]:
    """(seconds to first paint, seconds until fully loaded) for one `diag tui` start."""
    command = f"{shlex.quote(sys.executable)} -m diag tui {shlex.quote(str(trace_dir))}; sleep 60"
    _tmux("kill-server")
    start = time.perf_counter()
    _tmux("new-session", "-d", "-s", "b", "-x", "100", "-y", "30", command)
    paint = loaded = None
    try:
        while time.perf_counter() - start < timeout:
            screen = _tmux("capture-pane", "-p", "-t", "b")
            now = time.perf_counter() - start
            if paint is None and "1 Overview" in screen:
                paint = now
            status = screen.splitlines()[0] if screen else ""
            if paint is not None and "finding(s)" in status and "loading" not in status:
                loaded = now
                break
            time.sleep(0.01)
        _tmux("send-keys", "-t", "b", "q")
    finally:
        time.sleep(0.5)
        _tmux("kill-server")
    if paint is None or loaded is None:
        raise SystemExit(f"diag tui did not finish loading within {timeout:.0f} s")
    return paint, loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_500_000)
    parser.add_argument("--runs", type=int, default=3, help="warm-cache starts to time")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the trace directory here")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        raise SystemExit("this benchmark needs tmux")
    workdir = None if args.keep else Path(tempfile.mkdtemp(prefix="diag-tui-bench-"))
    trace_dir = args.keep or Path(str(workdir)) / "trace"
    try:
        if not (trace_dir / "manifest.json").exists():
            began = time.perf_counter()
            make_trace_dir(trace_dir, args.events)
            print(f"built {trace_dir} in {time.perf_counter() - began:.0f} s")
        events = count_events(trace_dir)
        print(f"Kineto events in the window: {events:,}")
        shutil.rmtree(trace_dir / CACHE_DIR, ignore_errors=True)
        cold = open_once(trace_dir)
        warm = [open_once(trace_dir) for _ in range(args.runs)]
        paints = [p for p, _ in warm]
        loads = [load for _, load in warm]
        print()
        print(f"{'diag tui, 100x30, tmux':<34}{'first paint':>12}{'all loaded':>12}")
        print(f"{'cold cache (first open)':<34}{cold[0]:>11.2f}s{cold[1]:>11.2f}s")
        print(
            f"{'warm cache, median of ' + str(args.runs):<34}"
            f"{statistics.median(paints):>11.2f}s{statistics.median(loads):>11.2f}s"
        )
        print(f"{'warm cache, slowest':<34}{max(paints):>11.2f}s{max(loads):>11.2f}s")
        print(f"{'target (warm cache)':<34}{TARGET_S:>11.2f}s{'-':>12}")
        verdict = "meets" if max(paints) <= TARGET_S else "MISSES"
        print(f"first paint {verdict} the {TARGET_S} s target on {events:,} events")
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
