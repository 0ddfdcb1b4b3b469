"""The way from a finding or a step to its timeline: the `diag export --perfetto` command and
the slice to search for in ui.perfetto.dev. One wording for the report and the TUI."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from diag.findings.model import Finding

PERFETTO_UI = "ui.perfetto.dev"


def default_output(trace_path: Path) -> Path:
    """`runs/diag-demo` -> `runs/diag-demo-perfetto.json.gz`: beside the trace, not inside it,
    and relative when the trace path is (the line a person copies stays short)."""
    where = trace_path if trace_path.name else trace_path.resolve()
    return where.parent / f"{where.name}-perfetto.json.gz"


def export_command(trace_path: Path) -> str:
    out = default_output(trace_path)
    return f"diag export {shlex.quote(str(trace_path))} --perfetto {shlex.quote(str(out))}"


def step_line(trace_path: Path, request_id: str, step: int) -> str:
    """`timeline: diag export ... --perfetto OUT, open it in ui.perfetto.dev, search "r1 s0"`."""
    from diag.perfetto.timeline import step_name

    return (
        f"timeline: {export_command(trace_path)}, open it in {PERFETTO_UI} and search "
        f'"{step_name(request_id, step)}"'
    )


def finding_step(finding: Finding) -> tuple[str, int] | None:
    """The (request, step) a finding is about, when its data names one."""
    data = finding.data
    request = data.get("request_id")
    step: Any = data.get("step")
    if step is None and isinstance(data.get("steps"), list) and data["steps"]:
        step = data["steps"][0]
    if isinstance(step, dict):  # offload-bound: one dict per step
        request, step = step.get("request_id"), step.get("step")
    if step is None and finding.analyzer == "step0-spike":
        step = 0
    if isinstance(request, str) and isinstance(step, int) and not isinstance(step, bool):
        return request, step
    return None
