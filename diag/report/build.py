"""Build the report of a trace directory: load, analyze, draw, assemble, write."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from diag import __version__
from diag.errors import DiagError
from diag.evidence.status import assess
from diag.findings.model import Finding
from diag.perfetto.hint import PERFETTO_UI, export_command
from diag.report.html import Header, Section, render_page
from diag.report.plot import Limits
from diag.report.sections import build_sections
from diag.trace.inputs import input_warnings
from diag.trace.run import Trace


@dataclass
class Report:
    html: str
    sections: list[Section]


def default_output(trace_dir: Path) -> Path:
    """`runs/diag-demo` -> `runs/diag-demo-report.html`, beside the trace, not inside it."""
    resolved = trace_dir.resolve()
    return resolved.parent / f"{resolved.name}-report.html"


def build_report(
    trace: Trace, findings: list[Finding], limits: Limits | None = None, hta: bool = True
) -> Report:
    """The whole page for an already loaded trace and its findings."""
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

    from diag.report.hta_view import hta_available

    with_hta = hta and hta_available()
    sections = build_sections(trace, findings, limits or Limits(), with_hta)
    header = _header(trace, hta, with_hta)
    return Report(render_page(header, sections, get_plotlyjs()), sections)


def write_report(report: Report, output: Path) -> None:
    """Write atomically: a reader never sees half a report."""
    if output.is_dir():
        raise DiagError(f"{output}: is a directory; give a file name with -o")
    folder = output.parent if str(output.parent) else Path(".")
    try:
        handle, temp = tempfile.mkstemp(prefix=".diag-report-", suffix=".html", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(report.html)
        # mkstemp creates the file 0600; a report is an ordinary file, made as open() would.
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, output)
    except OSError as exc:
        raise DiagError(f"{output}: cannot write the report ({exc.strerror or exc})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _header(trace: Trace, hta_asked: bool, hta_used: bool) -> Header:
    manifest = trace.manifest
    versions = manifest.get("versions") if isinstance(manifest.get("versions"), dict) else {}
    facts: list[tuple[str, str]] = [("trace", str(trace.path))]
    if manifest.get("command"):
        facts.append(("command", _text(manifest.get("command"))))
    facts.append(("status", _text(manifest.get("status")) or "unknown"))
    visibility = assess(trace)  # what diag could not see comes first (diag/evidence/status.py)
    if not visibility.status.complete:
        facts.append(("recording", visibility.status.detail))
    facts.extend(("not seen", f"{n.message}. How: {n.how}") for n in visibility.notices)
    facts.extend(("skipped", warning) for warning in input_warnings(trace))
    if manifest.get("started"):
        facts.append(
            ("recorded", f"{_text(manifest.get('started'))} .. {_text(manifest.get('ended'))}")
        )
    runs = []
    for label, run in trace.runs.items():
        duration = next(
            (
                r.get("duration_s")
                for r in manifest.get("runs", [])
                if isinstance(r, dict) and r.get("label") == label
            ),
            None,
        )
        text = f"{label} ({run.status or 'status unknown'}"
        text += f", {duration} s)" if duration is not None else ")"
        if label == "against":
            text += f" from {run.folder.parent.parent}"
        runs.append(text)
    facts.append(("runs", ", ".join(runs) or "none"))
    if versions:
        wanted = ("torch", "python", "cuda", "triton", "gpu")
        facts.append(
            ("versions", ", ".join(f"{k} {_text(versions[k])}" for k in wanted if versions.get(k)))
        )
    facts.append(
        (
            "timeline",
            f"{export_command(trace.path)}, then open that file in {PERFETTO_UI} (it stays on "
            "your machine): steps, compiles and kernels on one clock; steps are named "
            "r3 s0 (request r3, step 0)",
        )
    )
    if not hta_asked:
        facts.append(("HTA", "left out (--no-hta)"))
    elif not hta_used:
        facts.append(("HTA", "not installed: pip install 'diag[hta]' adds HTA's breakdowns"))
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts.append(("report", f"diag {__version__}, {now}"))
    return Header(f"diag report: {trace.path.name or trace.path}", facts)
