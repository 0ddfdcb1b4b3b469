"""Run the registered analyzers over a Trace.

The analyzers live in the `diag.analyzers` package (the top-level analyzers/ folder), imported
here by name so that this module, and `diag check`, load only what they run.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from diag.errors import DiagError
from diag.findings.model import Finding
from diag.trace.run import Trace

#: Analyzers that read Kineto windows; the others need only the event files.
KERNEL_ANALYZERS = ("kernel-routing", "offload-bound", "trace-diff")


def _registry() -> ModuleType:
    return importlib.import_module("diag.analyzers")


def analyzer_names() -> list[str]:
    return list(_registry().REGISTRY)


def check_names(only: list[str] | None) -> None:
    names = analyzer_names()
    unknown = [name for name in only or [] if name not in names]
    if unknown:
        raise DiagError(f"unknown analyzer {unknown[0]!r}; choose from {', '.join(names)}")


def preload_profiles(trace: Trace, only: list[str] | None = None, show: bool = True) -> None:
    """Parse the Kineto windows the kernel analyzers will read, with a progress bar on a
    terminal, so the slow part of an analysis is visible and happens once."""
    if only is not None and not set(only) & set(KERNEL_ANALYZERS):
        return
    from diag.trace.profiles import step_profiles
    from diag.trace.progress import ProgressBar

    with ProgressBar("reading profiler traces", force=False) as bar:
        for run in (trace.compiled, trace.reference):
            if run is not None and run.profiles is None:
                step_profiles(run, bar.callback(run.label) if show else None)


def analyze(trace: Trace, only: list[str] | None = None) -> list[Finding]:
    check_names(only)
    preload_profiles(trace, only)
    findings: list[Finding] = _registry().run_analyzers(trace, only)
    from diag.findings.grouping import group_findings
    from diag.findings.rank_merge import merge_rank_findings, world_sizes

    return group_findings(merge_rank_findings(findings, world_sizes(trace)))


def analyze_trace(
    path: Path, only: list[str] | None = None, against: Path | None = None
) -> list[Finding]:
    """Analyze a trace directory (optionally against another one's run)."""
    from diag.trace.inputs import open_input

    check_names(only)
    return analyze(open_input(path, against=against), only)
