"""Did a trial's measured window hold steady state? Each reason read off an event diag recorded.

The window of a trial is its live steps from step `start` on (diag counts steps from 0), left
out: profiled steps (they pay the profiler) and steps that hold a window's stop on the program's
own timer (diag/evidence/own_pauses.py). Where a cost lands decides what counts:

- a compile (Dynamo or MagiCompiler, a fast-path compile of a new size), a CUDA-graph recording
  or an autotuning run costs the step it runs in: flagged when it runs in a measured step;
- a recompile-limit hit changes every later call of that frame (from then on, calls that match
  none of its cache entries run eagerly): flagged when the hit came before the window's last
  step, warmup included;
- `torch.cuda.empty_cache()` costs the allocations after it (cudaMalloc again): flagged when it
  ran after the window's first step began and before its last step ended;
- an offload reload (weights moved back onto the device) shows in the allocator: flagged when a
  measured step's reserved bytes grew, or its in-use bytes rose, by RELOAD_MIN_BYTES or more
  against the step before it. Only CUDA runs have these figures: on others this check cannot
  run and the trial says so (never a silent pass).
"""

from __future__ import annotations

from dataclasses import dataclass

from diag.benchmark.trial import TimedStep, Trial
from diag.trace.run import Compile, Event

#: 64 MiB: a block of a large DiT's weights is hundreds of MB; activations of a steady step come
#: back to the allocator's cache and do not grow `reserved` again.
RELOAD_MIN_BYTES = 64 << 20

COMPILE = "compile"
CUDAGRAPH = "cudagraph-record"
AUTOTUNE = "autotune"
RECOMPILE_LIMIT = "recompile-limit"
EMPTY_CACHE = "empty-cache"
OFFLOAD_RELOAD = "offload-reload"


@dataclass(frozen=True)
class Flaw:
    """One reason a trial's window is not steady state."""

    kind: str
    text: str


def window_steps(trial: Trial, start: int) -> list[TimedStep]:
    return [s for s in trial.steps if s.index >= start and s.counted]


def flaws(trial: Trial, start: int) -> list[Flaw]:
    """Why the window from step `start` on is not steady state; [] when nothing spoiled it."""
    steps = window_steps(trial, start)
    if not steps:
        return []
    found: list[Flaw] = []
    found.extend(_compiles(trial, steps))
    found.extend(_step_events(trial, steps))
    found.extend(_limit_hits(trial, steps))
    found.extend(_empty_cache(trial, steps))
    found.extend(_reloads(trial, steps))
    return found


def _where(step: TimedStep) -> str:
    return f"{step.request_id} step {step.index}"


def _containing(steps: list[TimedStep], t: int | None, request: object, index: object) -> str:
    """The measured step an event belongs to (by its position, else by its time), or ''."""
    for step in steps:
        if request == step.request_id and index == step.index:
            return _where(step)
    if isinstance(t, int):
        for step in steps:
            if step.start_t <= t <= step.end_t:
                return _where(step)
    return ""


def _compiles(trial: Trial, steps: list[TimedStep]) -> list[Flaw]:
    found: list[Flaw] = []
    for item in trial.compiles:
        if item.result == "recompile_limit":
            continue  # a limit hit compiles nothing: _limit_hits says what it does
        where = _containing(steps, item.start_t or item.t, item.request_id, item.step)
        if where:
            found.append(Flaw(COMPILE, f"{_compile_text(item)} in {where}"))
    return found


def _compile_text(item: Compile) -> str:
    name = item.frame.name if item.frame is not None else "a frame"
    what = "recompile" if item.is_recompile else "compile"
    seconds = f", {item.duration_s:.2f} s" if isinstance(item.duration_s, (int, float)) else ""
    return f"{what} {item.compile_id} of {name}{seconds}"


_STEP_EVENTS = {
    "cudagraph_record": (CUDAGRAPH, "CUDA graph recorded"),
    "autotune": (AUTOTUNE, "Inductor autotuned a kernel"),
    "magi_compile_end": (COMPILE, "MagiCompiler compiled"),
    "magi_runtime_compile": (COMPILE, "MagiCompiler compiled a new size on its fast path"),
}


def _step_events(trial: Trial, steps: list[TimedStep]) -> list[Flaw]:
    found: list[Flaw] = []
    for event in trial.events:
        known = _STEP_EVENTS.get(event.kind)
        if known is None:
            continue
        _, request, index = event.position
        start = event.data.get("start_t")
        where = _containing(steps, start if isinstance(start, int) else event.t, request, index)
        if where:
            kind, text = known
            detail = event.data.get("kernel") or event.data.get("name") or ""
            found.append(Flaw(kind, f"{text}{f' ({detail})' if detail else ''} in {where}"))
    return found


def _limit_hits(trial: Trial, steps: list[TimedStep]) -> list[Flaw]:
    last_end = max(s.end_t for s in steps)
    found: list[Flaw] = []
    seen: set[str] = set()
    hits: list[tuple[int, str, str]] = []
    for event in trial.events:
        if event.kind == "recompile_limit":
            frame = event.data.get("frame")
            name = frame.get("name") if isinstance(frame, dict) else None
            hits.append((event.t, str(name or "a frame"), _position(event)))
    for item in trial.compiles:
        if item.result == "recompile_limit":
            name = item.frame.name if item.frame is not None else "a frame"
            where = f"{item.request_id or item.phase} step {item.step}"
            hits.append((item.t, name, where if item.step is not None else item.phase))
    for t, name, where in sorted(hits):
        if t <= last_end and name not in seen:
            seen.add(name)
            found.append(
                Flaw(
                    RECOMPILE_LIMIT,
                    f"{name} hit the recompile limit ({where}): from then on, calls that match "
                    "none of its cache entries run eagerly, so the window may time a partly "
                    "eager program",
                )
            )
    return found


def _position(event: Event) -> str:
    phase, request, index = event.position
    if request is None:
        return phase
    return f"{request} step {index}" if index is not None else str(request)


def _torch_own(trial: Trial) -> list[tuple[int, int]]:
    """Spans in which torch itself calls empty_cache(): a CUDA-graph capture begins with one,
    and so may a compile (warmup-hygiene leaves the same calls out). Those spans are flaws of
    their own when they fall in a measured step."""
    spans = [
        (e.data["start_t"], e.t)
        for e in trial.events
        if e.kind == "cudagraph_record" and isinstance(e.data.get("start_t"), int)
    ]
    spans.extend((c.start_t, c.t) for c in trial.compiles if c.start_t is not None)
    return spans


def _empty_cache(trial: Trial, steps: list[TimedStep]) -> list[Flaw]:
    first_start = min(s.start_t for s in steps)
    last_end = max(s.end_t for s in steps)
    torch_own = _torch_own(trial)
    calls = [
        e
        for e in trial.events
        if e.kind == "empty_cache"
        and first_start <= e.t <= last_end
        and e.position[0] == "live"
        and not any(start <= e.t <= end for start, end in torch_own)
    ]
    if not calls:
        return []
    places = sorted({_position(e) for e in calls})
    return [
        Flaw(
            EMPTY_CACHE,
            f"torch.cuda.empty_cache() called {len(calls)} time(s) inside the window "
            f"({', '.join(places[:4])}{', ...' if len(places) > 4 else ''}): the allocations "
            "after each call pay cudaMalloc again",
        )
    ]


def _reloads(trial: Trial, steps: list[TimedStep]) -> list[Flaw]:
    if not trial.has_memory:
        return []
    previous: dict[str, TimedStep] = {}
    for step in trial.steps:
        previous.setdefault(f"{step.request_id}/{step.index + 1}", step)
    found: list[Flaw] = []
    for step in steps:
        before = previous.get(f"{step.request_id}/{step.index}")
        if before is None:
            continue
        grew = _grew(before.reserved, step.reserved)
        rose = _grew(before.allocated, step.allocated)
        if grew >= RELOAD_MIN_BYTES:
            found.append(
                Flaw(
                    OFFLOAD_RELOAD,
                    f"the allocator reserved {grew / 2**20:.0f} MiB more in {_where(step)} "
                    "(device memory taken anew in a steady step: weights moved back in, or "
                    "what empty_cache() gave back)",
                )
            )
        elif rose >= RELOAD_MIN_BYTES:
            found.append(
                Flaw(
                    OFFLOAD_RELOAD,
                    f"{rose / 2**20:.0f} MiB more device memory in use after {_where(step)} "
                    "than after the step before (weights moved onto the device)",
                )
            )
    return found


def _grew(before: int | None, after: int | None) -> int:
    if before is None or after is None:
        return 0
    return after - before


def unchecked(trial: Trial) -> list[str]:
    """What this trial's evidence cannot check, said rather than passed silently."""
    if trial.usable and not trial.has_memory:
        return ["offload reloads (no device memory figures: not a CUDA run)"]
    return []
