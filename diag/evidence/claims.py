"""The position part of a finding's claims (docs/FINDINGS.md, "Claims"): one place builds it,
so every analyzer names a process, rank, frame and step the same way.

A claim is a plain dict: `kind`, then `process` (pid) and `rank`, `frame` (the frame's label,
as in finding ids) and `code` (`file:line` of its code object), `phase`, `request` and `step`,
each None when it does not apply or is not known; then the fields of its kind. `live` is claimed
only in a process where diag identified a warmup: elsewhere every request reads as live (the
no-warmup notice), which says nothing about what the program meant, so the phase is not known.
"""

from __future__ import annotations

from typing import Any

from diag.trace.run import Frame, RunData


def claim(
    kind: str,
    run: RunData,
    pid: int | None,
    *,
    frame: Frame | None = None,
    label: str | None = None,
    phase: str | None = None,
    request: str | None = None,
    step: int | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A claim of `kind` about what happened in process `pid` (its rank looked up in `run`),
    at the frame (`label` as the finding names it) and position given, with `fields`."""
    process = next((p for p in run.processes if p.pid == pid), None)
    if phase == "live" and not any(r.pid == pid and r.phase == "warmup" for r in run.requests):
        phase = None
    return {
        "kind": kind,
        "process": pid,
        "rank": process.rank if process is not None else None,
        "frame": label if label is not None else (frame.name if frame is not None else None),
        "code": frame.location if frame is not None and frame.file else None,
        "phase": phase,
        "request": request,
        "step": step,
        **fields,
    }
