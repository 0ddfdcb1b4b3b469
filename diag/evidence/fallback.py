"""What a recompile-limit hit did: which calls of the frame ran eagerly, and which still ran a
compiled entry. The one place every analyzer, check and view reads it from.

After the limit Dynamo compiles nothing more for the frame but keeps checking its entries, so
only calls that pass none of them run eagerly. The recorder checks each later call's guards
(collectors/limit_calls.py, `limit_calls` events per step); the call that hit the limit ran
eagerly itself. Without those events (older recordings, TORCH_TRACE logs, a callable the
recorder could not wrap) the extent is unknown and says so: never "eager from then on".

Under `set_stance("eager_on_recompile")` the recorder checks every compiled frame's calls the
same way (`limit_calls` events with `stance`): `stance_checks` and `stance_eager_calls` read
those for the stances analyzer; under `force_eager` it counts every call (`stance`
`force_eager`: all of them ran eagerly).

A compile failure that `suppress_errors` swallowed makes Dynamo skip the frame's code from then
on: every later call runs eagerly, entries compiled before it unused. The recorder counts those
calls (`limit_calls` events with `suppressed`); `suppressed_extent` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diag.trace.run import Compile, Event, Frame, RunData

#: How the extent was learnt (docs/FINDINGS.md, claims: `eager-calls.extent`).
CHECKED = "checked"
COUNTED = "counted"  # every call counted: Dynamo skipped the frame, nothing to check
UNKNOWN = "unknown"

Spot = tuple[str, str | None, int | None]  # phase, request id, step


@dataclass
class EagerExtent:
    """The calls of one limited frame after its hit, by where they ran."""

    frame: Frame | None
    hit: Spot
    how: str
    eager: dict[Spot, int] = field(default_factory=dict)
    compiled: dict[Spot, int] = field(default_factory=dict)
    unchecked: int = 0

    @property
    def eager_calls(self) -> int:
        return sum(self.eager.values())

    @property
    def compiled_calls(self) -> int:
        return sum(self.compiled.values())

    @property
    def known(self) -> bool:
        return self.how in (CHECKED, COUNTED)

    def claim(self, run: RunData, pid: int, frame: str) -> dict[str, object]:
        from diag.evidence.claims import claim

        return claim(
            "eager-calls",
            run,
            pid,
            frame=self.frame,
            label=frame,
            calls=[{"request": rid, "step": step} for (_, rid, step) in self.eager],
            count=self.eager_calls if self.known else None,
            compiled=self.compiled_calls if self.known else None,
            extent=self.how,
        )


def eager_extent(run: RunData, hit: Event) -> EagerExtent:
    """The calls after `hit` (a `recompile_limit` event) of its frame, in its process."""
    frame = Frame.from_event(hit.data.get("frame"))
    spot = hit.position
    extent = EagerExtent(frame, spot, UNKNOWN)
    events = [
        e
        for e in run.of("limit_calls")
        if e.pid == hit.pid
        and e.t >= hit.t
        and not e.data.get("stance")  # counted for a stance, not checked for the limit
        and not e.data.get("suppressed")
        and Frame.from_event(e.data.get("frame")) == frame
    ]
    # The call that hit the limit was not compiled: it ran eagerly.
    extent.eager[spot] = 1
    if not events:
        return extent
    extent.how = CHECKED
    for event in events:
        where = event.position
        eager = _count(event.data.get("eager"))
        compiled = _count(event.data.get("compiled"))
        if eager:
            extent.eager[where] = extent.eager.get(where, 0) + eager
        if compiled:
            extent.compiled[where] = extent.compiled.get(where, 0) + compiled
        extent.unchecked += _count(event.data.get("unchecked"))
    return extent


def suppressed_extent(run: RunData, failed: Compile) -> EagerExtent:
    """The calls of `failed`'s frame from its failure on, when suppress_errors swallowed it:
    the failing call ran eagerly, and so did every later one (Dynamo skips the code). Counted
    by the recorder for a callable it wrapped; a frame it never saw (an inner function, a
    TORCH_TRACE log) leaves the extent unknown."""
    frame = failed.frame
    spot: Spot = (failed.phase, failed.request_id, failed.step)
    extent = EagerExtent(frame, spot, UNKNOWN)
    extent.eager[spot] = 1
    if frame is None:
        return extent
    events = [
        e
        for e in run.of("limit_calls")
        if e.pid == failed.pid
        and e.t >= failed.t
        and e.data.get("suppressed") is True
        and Frame.from_event(e.data.get("frame")) == frame
    ]
    wrapped = any(
        o.pid == failed.pid and Frame.from_event(o.data.get("frame")) == frame
        for o in run.of("compile_options")
    )
    if not events and not wrapped:
        return extent
    extent.how = COUNTED
    for event in events:
        where = event.position
        eager = _count(event.data.get("eager"))
        if eager:
            extent.eager[where] = extent.eager.get(where, 0) + eager
    return extent


def spots_text(spots: list[Spot], limit: int = 6) -> str:
    """`r2 steps 0-10; r3 step 4`: calls grouped by request, steps as ranges."""
    by_request: dict[str, list[int]] = {}
    outside: list[str] = []
    for phase, rid, step in spots:
        if rid is None:
            outside.append(f"{phase}, outside a request")
        elif step is None:
            by_request.setdefault(rid, [])
        else:
            by_request.setdefault(rid, []).append(step)
    parts: list[str] = []
    for rid, steps in by_request.items():
        if not steps:
            parts.append(f"{rid} (outside a step)")
            continue
        parts.append(f"{rid} {_ranges(sorted(set(steps)))}")
    parts.extend(dict.fromkeys(outside))
    if len(parts) > limit:
        parts = [*parts[:limit], f"and {len(parts) - limit} more"]
    return "; ".join(parts)


def _ranges(steps: list[int]) -> str:
    runs: list[tuple[int, int]] = []
    for step in steps:
        if runs and step == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], step)
        else:
            runs.append((step, step))
    text = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)
    return ("steps " if len(steps) > 1 else "step ") + text


def stance_checks(run: RunData, stance: str) -> list[Event]:
    """The `limit_calls` events written because `stance` was in force (not a limit hit)."""
    return [e for e in run.of("limit_calls") if e.data.get("stance") == stance]


def stance_eager_calls(checks: list[Event]) -> dict[str, list[Spot]]:
    """Frame name -> the positions of its checked calls that passed no cache entry (one per
    call), from `stance_checks`."""
    found: dict[str, list[Spot]] = {}
    for event in checks:
        count = _count(event.data.get("eager"))
        if not count:
            continue
        frame = Frame.from_event(event.data.get("frame"))
        name = frame.name if frame is not None and frame.name else "a compiled frame"
        found.setdefault(name, []).extend([event.position] * count)
    return found


def checks_since(run: RunData, checks: list[Event], pid: int, spot: Spot, t: int) -> list[Event]:
    """The checks of process `pid` for calls made at or after `spot` (reached at time `t`).
    A `limit_calls` event is written when its step is over, so its own time is no guide: the
    same request's steps from `spot`'s on, and requests that began at `t` or later, are."""
    _, request_id, step = spot
    started = {r.request_id: r.start_t for r in run.requests if r.pid == pid}
    found = []
    for check in checks:
        if check.pid != pid:
            continue
        _, rid, at = check.position
        if rid is not None and rid == request_id:
            keep = step is None or at is None or at >= step
        elif rid is not None and rid in started:
            keep = started[rid] >= t
        else:
            keep = check.t >= t
        if keep:
            found.append(check)
    return found


def compiled_count(checks: list[Event]) -> int:
    """Checked calls that passed a cache entry and ran compiled."""
    return sum(_count(e.data.get("compiled")) for e in checks)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
