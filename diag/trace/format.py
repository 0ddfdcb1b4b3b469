"""The trace directory's layout and names: the one contract between `record` and the rest.

docs/FORMAT.md is the written spec; this module is its code. Nothing here imports torch.
"""

from __future__ import annotations

import re
from pathlib import Path

from diag.trace.numerals import parse_int

FORMAT_NAME = "diag-trace"
#: 2: per-step events of a long run continue in rotated `steps-<n>.jsonl` segments beside
#: `events.jsonl` (a version-1 reader would miss them). Readers accept 1 and 2.
FORMAT_VERSION = 2

MANIFEST = "manifest.json"
RUNS_DIR = "runs"
EVENTS_FILE = "events.jsonl"
#: Per-step events once a process's events.jsonl holds a segment's worth: `steps-<n>.jsonl`,
#: n = 1, 2, ... (the oldest are deleted to keep --max-size).
STEP_SEGMENT_PREFIX = "steps-"
STEP_SEGMENT_SUFFIX = ".jsonl"
#: Room kept on the trace's disk so that a recording that fills it can still say so: deleted to
#: make that room (one per process, and one for the launcher's manifest). Readers ignore it.
RESERVE_FILE = ".diag-reserve"
KINETO_DIR = "kineto"
TORCH_TRACE_DIR = "torch_trace"
BOOTSTRAP_ERRORS = "bootstrap-errors.txt"
# Derived data (parsed Kineto windows) that readers write to make a second open fast.
CACHE_DIR = ".diag-cache"

# Run labels: the command as given, and the eager baseline of `--baseline eager`.
RUN_COMPILED = "compiled"
RUN_EAGER = "eager"

# Environment the launcher sets for the child (and every process it starts).
ENV_TRACE_DIR = "DIAG_TRACE_DIR"
ENV_RUN_LABEL = "DIAG_RUN_LABEL"
ENV_STANCE = "DIAG_STANCE"
ENV_PROFILE = "DIAG_PROFILE"
ENV_STEP_FN = "DIAG_STEP_FN"
ENV_REQUEST_FN = "DIAG_REQUEST_FN"
ENV_WARMUP_FN = "DIAG_WARMUP_FN"
#: `diag record --metrics-join`: add diag's live counters to the program's Prometheus registry.
ENV_METRICS_JOIN = "DIAG_METRICS_JOIN"
# The first N requests of each process are warmup (diag record --warmup-requests N).
ENV_WARMUP_REQUESTS = "DIAG_WARMUP_REQUESTS"
# "0": no guard checks on sampled calls (diag bench: timing is what is measured, and the checks'
# own time would land in the steps they sample).
ENV_GUARD_CHECKS = "DIAG_GUARD_CHECKS"
# Bytes of per-step events each process keeps (diag record --max-size); 0: no bound.
ENV_MAX_SIZE = "DIAG_MAX_SIZE"

STATUS_RUNNING = "running"
STATUS_COMPLETE = "complete"
STATUS_CRASHED = "crashed"
STATUS_KILLED = "killed"
# The command could not be started (not found, not executable): nothing ran.
STATUS_FAILED_TO_START = "failed-to-start"

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def run_dir(trace_dir: Path, label: str) -> Path:
    return trace_dir / RUNS_DIR / label


def process_dir_name(pid: int, rank: int | None) -> str:
    """One folder per process: `rank<R>-pid<PID>` under torchrun, `pid<PID>` otherwise."""
    return f"rank{rank}-pid{pid}" if rank is not None else f"pid{pid}"


#: The ranks and world sizes a trace may hold: the writer (collectors/session.py, from RANK,
#: LOCAL_RANK and WORLD_SIZE) and the reader (diag.trace.schema's Rank and WorldSize) share
#: them, so a value the writer records is one the reader accepts (RANK=99999999999 was
#: written, then refused). torchrun's are far below.
MAX_RANK = 2**24
MAX_WORLD_SIZE = MAX_RANK + 1


def env_rank(value: str | None) -> int | None:
    """A RANK or LOCAL_RANK value as diag records it: ASCII digits within MAX_RANK, else None
    (`RANK=²` once stopped the collectors from starting)."""
    number = parse_int(value)
    return number if number is not None and number <= MAX_RANK else None


def env_world_size(value: str | None) -> int | None:
    """WORLD_SIZE as diag records it: 1 to MAX_WORLD_SIZE, else None."""
    number = parse_int(value)
    return number if number is not None and 1 <= number <= MAX_WORLD_SIZE else None


def env_count(value: str | None) -> int:
    """A count diag's own variables carry (DIAG_MAX_SIZE, DIAG_WARMUP_REQUESTS): 0 when unset
    or malformed."""
    return parse_int(value) or 0


def step_segment_name(number: int) -> str:
    return f"{STEP_SEGMENT_PREFIX}{number}{STEP_SEGMENT_SUFFIX}"


def step_segment_number(name: str) -> int | None:
    """n of `steps-<n>.jsonl`, or None for any other name."""
    if not (name.startswith(STEP_SEGMENT_PREFIX) and name.endswith(STEP_SEGMENT_SUFFIX)):
        return None
    digits = name[len(STEP_SEGMENT_PREFIX) : -len(STEP_SEGMENT_SUFFIX)]
    return parse_int(digits, max_digits=11)


def process_event_files(events_path: Path) -> list[Path]:
    """One process's event files in the order they were written: its events.jsonl, then its
    retained step segments by number (none in a version-1 trace or a short run)."""
    segments: list[tuple[int, Path]] = []
    try:
        entries = list(events_path.parent.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        number = step_segment_number(entry.name)
        if number is not None and not entry.is_symlink() and entry.is_file():
            segments.append((number, entry))
    return [events_path] + [path for _, path in sorted(segments)]


def safe_name(text: str) -> str:
    """A file-name-safe version of an arbitrary string (program names, window names)."""
    return _SAFE.sub("-", text).strip("-") or "program"
