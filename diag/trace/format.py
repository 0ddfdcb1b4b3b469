"""The trace directory's layout and names: the one contract between `record` and the rest.

docs/FORMAT.md is the written spec; this module is its code. Nothing here imports torch.
"""

from __future__ import annotations

import re
from pathlib import Path

FORMAT_NAME = "diag-trace"
FORMAT_VERSION = 1

MANIFEST = "manifest.json"
RUNS_DIR = "runs"
EVENTS_FILE = "events.jsonl"
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


def safe_name(text: str) -> str:
    """A file-name-safe version of an arbitrary string (program names, window names)."""
    return _SAFE.sub("-", text).strip("-") or "program"
