"""diag in a notebook: a trace as pandas DataFrames, and its findings as objects.

    import diag
    t = diag.open("diag-demo")          # a trace directory, a TORCH_TRACE log or a Kineto file
    t.status                            # how the recording ended, what diag could not see
    t.findings_frame()                  # the findings of `diag analyze`
    t.steps.groupby(["phase", "shape"]).wall_s.median()

Everything is read by the reader and views the CLI uses (diag.trace.inputs, diag.trace.run,
diag.trace.profiles, diag.evidence.regions, diag.evidence.offload, diag.findings.analysis), so a
frame's numbers are the
ones `diag analyze`, the TUI and the report print. Each frame is built on first use and kept;
pandas is imported then, never by `import diag`. Columns, dtypes and units: docs/API.md
(diag.notebook.columns holds them in code).
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

from diag.errors import EXIT_INTERNAL, DiagError
from diag.evidence.status import Visibility
from diag.findings.model import Finding
from diag.notebook import columns
from diag.notebook.frame import to_frame
from diag.trace.format import MANIFEST
from diag.trace.printable import one_line
from diag.trace.run import Trace

#: A pandas DataFrame (pandas ships no type information for mypy).
DataFrame = Any

KINDS = ("auto", "trace", "torch-trace", "kineto")


def open(  # noqa: A001 - diag.open, as the notebook API is called
    path: str | Path, *, kind: str = "auto", against: str | Path | None = None
) -> TraceFrames:
    """Open a trace for analysis in Python.

    `path` is a `diag record` trace directory, a TORCH_TRACE log directory or log file, or a
    torch.profiler (Kineto) trace file (`.json`, `.json.gz`); `kind` forces one of `trace`,
    `torch-trace`, `kineto`. `against` is another trace directory (or, for a Kineto file,
    another Kineto file) whose run kernels are compared with, as `diag analyze --against`.
    Raises DiagError with the one line the CLI would print for input it cannot read, and
    never another exception: a fault of diag's own while reading is a DiagError too, with
    exit_code EXIT_INTERNAL (3) and the original exception as its __cause__."""
    try:
        return _open(Path(path), kind, against)
    except DiagError:
        raise
    except Exception as exc:  # noqa: BLE001 - turned into the one documented type
        what = one_line(f"{type(exc).__name__}: {exc}", 300)
        raise DiagError(
            f"{one_line(str(path), 300)}: diag could not read this trace ({what}; a bug in diag)",
            exit_code=EXIT_INTERNAL,
        ) from exc


def _open(where: Path, kind: str, against: str | Path | None) -> TraceFrames:
    chosen = _kind(where) if kind == "auto" else kind
    if chosen not in KINDS[1:]:
        raise DiagError(f"kind {kind!r}: choose from {', '.join(KINDS)}")
    from diag.trace.inputs import open_input

    other = Path(against) if against is not None else None
    if chosen == "torch-trace":
        trace = open_input(torch_trace=where, against=other)
    elif chosen == "kineto":
        trace = open_input(kineto=where, against=other)
    else:
        trace = open_input(where, against=other)
    return TraceFrames(trace)


def _kind(path: Path) -> str:
    """A directory with a manifest is a trace directory, one without is a TORCH_TRACE log
    directory; a `.json`/`.json.gz` file is a Kineto trace, any other file a TORCH_TRACE log."""
    if path.is_dir():
        return "trace" if os.path.lexists(path / MANIFEST) else "torch-trace"
    if path.name.endswith((".json", ".json.gz")):
        return "kineto"
    if path.is_file():
        return "torch-trace"
    return "trace"  # not there: the trace reader says so in its own words


class TraceFrames:
    """One opened trace. Frames are properties (built once, then cached); the kernel frames
    are methods because they take a window. `trace` is the Run model underneath."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def __repr__(self) -> str:
        runs = ", ".join(self.trace.runs) or "no runs"
        return f"<diag trace {self.trace.path} ({runs}): {self.status.status.detail}>"

    # -- what the recording can show, and what diag found in it -----------------------------

    @cached_property
    def status(self) -> Visibility:
        """How the recording ended and what diag could not see (`.status.detail`,
        `.notices`), as `diag analyze` prints first; `.as_dict()` is its JSON."""
        from diag.evidence.status import assess

        return assess(self.trace)

    @cached_property
    def warnings(self) -> list[str]:
        """What the reader skipped or could not see in an imported input, one line each."""
        from diag.trace.inputs import input_warnings

        return input_warnings(self.trace)

    @cached_property
    def findings(self) -> list[Finding]:
        """The findings of `diag analyze` (diag.findings.model.Finding objects), sorted as it
        prints them."""
        from diag.findings.analysis import analyze
        from diag.findings.model import sort_findings

        return sort_findings(analyze(self.trace))

    def findings_frame(self) -> DataFrame:
        """One row per finding: id, analyzer, severity, title, location, fix, and the evidence
        and data it carries."""
        from diag.notebook.event_rows import finding_rows

        return to_frame(finding_rows(self.findings), columns.FINDINGS)

    # -- frames of the event files ----------------------------------------------------------

    @cached_property
    def steps(self) -> DataFrame:
        """One row per step of every request, process and run."""
        from diag.notebook.event_rows import step_rows

        return to_frame(step_rows(self.trace), columns.STEPS)

    @cached_property
    def requests(self) -> DataFrame:
        """One row per request (warmup and live)."""
        from diag.notebook.event_rows import request_rows

        return to_frame(request_rows(self.trace), columns.REQUESTS)

    @cached_property
    def compiles(self) -> DataFrame:
        """One row per Dynamo compile attempt, with its seconds by phase and cache hits."""
        from diag.notebook.event_rows import compile_rows

        return to_frame(compile_rows(self.trace), columns.COMPILES)

    @cached_property
    def guard_failures(self) -> DataFrame:
        """One row per failed cache entry per recompile: the guard that failed and the line
        that reads what it checks."""
        from diag.notebook.event_rows import guard_failure_rows

        return to_frame(guard_failure_rows(self.trace), columns.GUARD_FAILURES)

    @cached_property
    def cache_entries(self) -> DataFrame:
        """Dynamo cache entries per compiled code object: at each step end where the count
        changed, and at exit."""
        from diag.notebook.event_rows import cache_entry_rows

        return to_frame(cache_entry_rows(self.trace), columns.CACHE_ENTRIES)

    @cached_property
    def windows(self) -> DataFrame:
        """One row per profiler window: the names `kernels(window)` takes."""
        from diag.notebook.event_rows import window_rows

        return to_frame(window_rows(self.trace), columns.WINDOWS)

    # -- frames of the profiler windows (parsed on first use, cached in .diag-cache) --------

    def kernels(self, window: str | None = None) -> DataFrame:
        """GPU work (kernels, copies, memsets) of one profiler window (`r1-s0-new-shape`), or
        of all: one row each, owned by the profiled step that launched it. A CPU-only trace
        has none: `cpu_ops(window)` holds its work."""
        from diag.notebook.profile_rows import kernel_rows

        return to_frame(kernel_rows(self.trace, window), columns.KERNELS)

    def cpu_ops(self, window: str | None = None) -> DataFrame:
        """The profiler's CPU ops of one window, or of all, owned by the step they ran in."""
        from diag.notebook.profile_rows import cpu_op_rows

        return to_frame(cpu_op_rows(self.trace, window), columns.CPU_OPS)

    def kernel_summary(self, device: str = "auto") -> DataFrame:
        """Per run, window, region and kernel: count and time over the window's profiled
        steps. `device` "gpu" counts kernels, "cpu" the CPU ops (what kernel-routing compares
        on a CPU-only trace); "auto" takes kernels when the trace has any."""
        from diag.notebook.profile_rows import has_kernels, kernel_summary_rows

        if device not in ("auto", "gpu", "cpu"):
            raise DiagError(f"device {device!r}: choose from auto, gpu, cpu")
        if device == "auto":
            device = "gpu" if has_kernels(self.trace) else "cpu"
        return to_frame(kernel_summary_rows(self.trace, device), columns.KERNEL_SUMMARY)

    def offload(self) -> DataFrame:
        """Per profiled GPU step: copy, compute, sync and idle time, and whether it is
        offload-bound (diag.evidence.offload, the offload-bound analyzer's figures)."""
        from diag.notebook.profile_rows import offload_rows

        return to_frame(offload_rows(self.trace), columns.OFFLOAD)


__all__ = ["TraceFrames", "open"]
