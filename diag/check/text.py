"""How the check words trace facts: frame locations (diag.trace.paths' rule), guard lines,
positions. Shared by the rules and the baseline comparison so they read alike."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from diag.evidence.frames import label as frame_label
from diag.trace.guards import condition_text, full_user_location
from diag.trace.paths import shown_location, shown_path
from diag.trace.run import Compile, Frame, Guard, RunData, Trace

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
    """Where a person (or a CI annotation) finds the frame: diag.trace.paths' one rule for paths."""
    if frame is None or not frame.file:
        return None
    file = shown_path(frame.file, cwd)
    return f"{file}:{frame.line}" if frame.line is not None else file


def frame_key(frame: Frame | None, cwd: str | None, with_line: bool = False) -> str:
    """A frame's identity across recordings: its name and file, without the checkout or
    virtualenv prefix (CI workspaces differ), and without the line (edits move lines) unless
    `with_line`: when several code objects of one file share the name (LightX2V's three phase
    lambdas), only the line tells them apart."""
    if frame is None:
        return "<unknown frame>"
    if not frame.file:
        return frame.name
    file = relative(frame.file, cwd)
    if _SITE in file:
        file = file.rsplit(_SITE, 1)[1]
    if with_line and frame.line is not None:
        return f"{frame.name} ({file}:{frame.line})"
    return f"{frame.name} ({file})"


def shared_names(frames: Iterable[Frame | None]) -> set[Frame]:
    """The frames whose name and file another frame also has (they need `with_line`)."""
    by_place: dict[tuple[str, str | None], set[Frame]] = {}
    for frame in frames:
        if frame is not None:
            by_place.setdefault((frame.name, frame.file), set()).add(frame)
    return {frame for group in by_place.values() if len(group) > 1 for frame in group}


def frame_name(run: RunData, item: Compile) -> str:
    """The frame as findings name it: unique in the run (diag.evidence.frames)."""
    return frame_label(run, item.frame)


def guard_text(guard: Guard) -> str:
    """The guard's own condition: no compile-id prefix, no source comment, one line."""
    lines = condition_text(guard.raw).splitlines()
    return (lines[0] if lines else "")[:200] or guard.kind


def guard_line(guard: Guard, recorded_cwd: str | None = None) -> str:
    """The guard as check lines quote it, its user line with the whole path (diag.trace.paths)."""
    if guard.user_location:
        where = full_user_location(guard.user_location, guard.raw) or guard.user_location
        guard = msgspec.structs.replace(guard, user_location=shown_location(where, recorded_cwd))
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
