"""What the UI shows, loaded in two stages so the light part is on screen while Kineto loads.

Stage one (`load_events`) reads the event files and runs the event analyzers: fast even on big
traces. Stage two (`load_kernels`) parses the Kineto windows (cached by diag.trace.profiles), breaks
profiled steps into copies, syncs and compute, compares kernels per compiled region against the
reference run, and runs the kernel analyzers. Both are plain functions of the trace directory
(no Textual), run by the app in a worker thread and reporting through `progress`.

The kernel-level modules (diag.trace.profiles, diag.evidence.offload, diag.evidence.regions) are
imported when
stage two runs, so stage one (and the first paint) never pays for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from diag.errors import DiagError
from diag.findings.grouping import group_findings
from diag.findings.model import Finding, sort_findings
from diag.findings.rank_merge import merge_rank_findings, world_sizes
from diag.trace.load import load_trace
from diag.trace.run import Trace

if TYPE_CHECKING:
    from diag.evidence.offload import StepOffload
    from diag.evidence.regions import RegionComparison

#: (what is happening, fraction done or None when unknown)
Progress = Callable[[str, float | None], None]

#: Analyzers that read Kineto windows: run in stage two, after the profiles are parsed.
KERNEL_ANALYZERS = ("kernel-routing", "offload-bound")


@dataclass
class KernelData:
    """Stage two's results; `note` says why a screen is empty (no windows, no reference...)."""

    offload: dict[str, list[StepOffload]] = field(default_factory=dict)  # by run label
    regions: list[RegionComparison] = field(default_factory=list)
    reference: str | None = None  # label of the run the regions compare against
    profiled_steps: int = 0
    note: str | None = None
    error: str | None = None


@dataclass
class TraceData:
    trace: Trace
    findings: list[Finding]
    kernels: KernelData | None = None  # None until stage two finishes
    #: The warmup plan in a few lines (diag/warmup/summary.py), shown beside warmup coverage;
    #: empty when the trace has no live request with a shape, or the plan could not be made.
    plan: list[str] = field(default_factory=list)


def _registry() -> ModuleType:
    return importlib.import_module("diag.analyzers")


def _no_progress(what: str, done: float | None) -> None:
    return None


def run_analyzers(trace: Trace, names: list[str], progress: Progress) -> list[Finding]:
    registry = _registry()
    findings: list[Finding] = []
    for index, name in enumerate(names):
        progress(f"analyzing: {name}", index / max(len(names), 1))
        findings.extend(registry.run_analyzers(trace, [name]))
    return findings


def load_events(
    path: Path, against: Path | None = None, progress: Progress = _no_progress
) -> TraceData:
    """Stage one: the Run model and the findings of every analyzer that needs no Kineto."""
    progress("reading events", None)
    trace = load_trace(path, against=against)
    if not trace.runs:
        raise DiagError(f"{path}: the trace holds no runs (was the recording interrupted?)")
    names = [n for n in _registry().REGISTRY if n not in KERNEL_ANALYZERS]
    findings = merge_rank_findings(run_analyzers(trace, names, progress), world_sizes(trace))
    progress("planning warmup", None)
    return TraceData(trace, sort_findings(group_findings(findings)), plan=_plan(trace, findings))


def _plan(trace: Trace, findings: list[Finding]) -> list[str]:
    """The warmup plan's lines, made once per trace; a plan that cannot be made costs the screen
    nothing but those lines, and says so."""
    from diag.warmup.summary import plan_for, summary_lines

    try:
        plan = plan_for(trace, findings)
    except Exception as exc:  # noqa: BLE001 - a face shows what it can
        return [f"warmup plan: not made ({type(exc).__name__}: {exc})"]
    return summary_lines(plan, trace) if plan is not None else []


def load_kernels(data: TraceData, progress: Progress = _no_progress) -> KernelData:
    """Stage two: profiles, offload breakdown and region comparison; kernel findings are added
    to `data.findings`. Returns what it could, with a note when a part is unavailable."""
    # Imported here: stage one (and the first paint) never pays for the Kineto readers.
    from diag.evidence.offload import offload_breakdown
    from diag.evidence.regions import compare_regions
    from diag.trace.profiles import step_profiles

    trace = data.trace
    result = KernelData()
    for label, run in trace.runs.items():
        what = f"reading Kineto windows ({label})"
        progress(what, None)

        def report(done: int, total: int, what: str = what) -> None:
            progress(what, done / total if total else None)

        steps = step_profiles(run, progress=report)
        result.profiled_steps += len(steps)
        progress(f"offload breakdown ({label})", None)
        result.offload[label] = offload_breakdown(run)
    if not result.profiled_steps:
        result.note = "no profiled steps: record with --profile to get Kineto windows"
    progress("comparing kernels per region", None)
    result.regions = compare_regions(trace)
    reference = trace.reference
    result.reference = reference.label if reference is not None else None
    names = [n for n in _registry().REGISTRY if n in KERNEL_ANALYZERS]
    added = merge_rank_findings(run_analyzers(trace, names, progress), world_sizes(trace))
    data.findings = sort_findings(group_findings(data.findings + added))
    data.kernels = result
    return result
