"""How the check words trace facts: frame locations (diag.paths' rule), guard lines,
positions. Shared by the rules and the baseline comparison so they read alike."""

from __future__ import annotations

from diag.guards import condition_text
from diag.paths import shown_path
from diag.run import Compile, Frame, Guard, Trace

_SITE = "site-packages/"


def trace_cwd(trace: Trace) -> str | None:
    cwd = trace.manifest.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def relative(path: str, cwd: str | None) -> str:
    """`path` relative to the recording's working directory when under it (CI annotations
    need repository-relative paths), else as recorded."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def frame_location(frame: Frame | None, cwd: str | None) -> str | None:
    """Where a person (or a CI annotation) finds the frame: diag.paths' one rule for paths."""
    if frame is None or not frame.file:
        return None
    file = shown_path(frame.file, cwd)
    return f"{file}:{frame.line}" if frame.line is not None else file


def frame_key(frame: Frame | None, cwd: str | None) -> str:
    """A frame's identity across recordings: its name and file, without the line (edits move
    lines) and without the checkout or virtualenv prefix (CI workspaces differ)."""
    if frame is None:
        return "<unknown frame>"
    if not frame.file:
        return frame.name
    file = relative(frame.file, cwd)
    if _SITE in file:
        file = file.rsplit(_SITE, 1)[1]
    return f"{frame.name} ({file})"


def frame_name(item: Compile) -> str:
    return item.frame.name if item.frame is not None else "<unknown frame>"


def guard_text(guard: Guard) -> str:
    """The guard's own condition: no compile-id prefix, no source comment, one line."""
    lines = condition_text(guard.raw).splitlines()
    return (lines[0] if lines else "")[:200] or guard.kind


def guard_line(guard: Guard) -> str:
    return guard.describe(guard_text(guard), located=", read at ")


def where(item: Compile) -> str:
    if item.request_id is None:
        return f"{item.phase}, outside a request"
    step = f" step {item.step}" if item.step is not None else ""
    return f"{item.phase} {item.request_id}{step}"


def seconds(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "?"
    if value >= 0.9995:
        return f"{value:.2f} s"
    return f"{value * 1000:.1f} ms"


def run_suffix(label: str) -> str:
    """Findings about the eager baseline run of a recording say so."""
    return "" if label == "compiled" else f" [run {label}]"
