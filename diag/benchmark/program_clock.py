"""The program's own step clock, read from its captured log: LightX2V's `infer_main` timing.

LightX2V wraps each step's `self.model.infer(...)` in `ProfilingContext4DebugL1("🚀 infer_main")`
(lightx2v/models/runners/default_runner.py, run_segment) and, with PROFILING_DEBUG_LEVEL >= 1,
logs `[Profile] Single GPU - Level1_Log 🚀 infer_main cost 0.132959 seconds` (`Rank N` when
distributed) after an `==> step_index: 3 / 8` line (1-based). The posts' sign-off measures
exactly this figure, so where the program logs it diag bench uses it.

A logged time is only used when it can be tied to one of diag's steps without guessing: the
program's lines, in order, must pair one to one with the process's live steps (or with all of its
steps, when warmup logs them too), and every step index a line carries must be that step's. If
not, the reason is returned and diag's own step clock is used instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diag.trace.run import Step

#: Terminal colour codes (loguru colours its lines on a terminal) are not part of the text.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_COST = re.compile(
    r"\[Profile\]\s+(?P<who>Single GPU|Rank \d+)\b.*?infer_main cost (?P<s>[0-9]+(?:\.[0-9]+)?)"
    r"(?:[eE][-+]?[0-9]+)? seconds"
)
_STEP = re.compile(r"==> step_index: (?P<i>\d+) / (?P<n>\d+)")

CLOCK_PROGRAM = "infer_main (the program's own log)"
CLOCK_GPU = "diag step, GPU time"
CLOCK_WALL = "diag step, host wall time"


@dataclass(frozen=True)
class LoggedStep:
    """One `infer_main cost` line: seconds, the 0-based step index the log gave (if any)."""

    seconds: float
    index: int | None
    rank: int | None


def parse_infer_main(text: str) -> list[LoggedStep]:
    """Every `infer_main cost` line of a log, in order, with the step index logged before it."""
    found: list[LoggedStep] = []
    index: int | None = None
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        step = _STEP.search(line)
        if step is not None:
            index = int(step.group("i")) - 1
            continue
        cost = _COST.search(line)
        if cost is None:
            continue
        who = cost.group("who")
        rank = int(who.split()[1]) if who.startswith("Rank") else None
        found.append(LoggedStep(float(cost.group("s")), index, rank))
        index = None
    return found


@dataclass(frozen=True)
class Alignment:
    """Program seconds per diag step (keyed by (request id, step index)), or why there are none."""

    seconds: dict[tuple[str, int], float]
    reason: str  # empty when aligned

    @property
    def aligned(self) -> bool:
        return not self.reason


def align(logged: list[LoggedStep], steps: list[Step]) -> Alignment:
    """Pair logged times with diag's steps of one process (in time order)."""
    if not logged:
        return Alignment({}, "the program logged no infer_main times")
    ranks = {item.rank for item in logged}
    if len(ranks) > 1:
        return Alignment({}, f"infer_main lines from {len(ranks)} ranks in one log")
    ordered = sorted(steps, key=lambda s: s.start_t)
    live = [s for s in ordered if s.phase == "live"]
    for candidates in (live, ordered):
        if len(candidates) != len(logged):
            continue
        if all(
            item.index is None or item.index == step.index
            for item, step in zip(logged, candidates, strict=True)
        ):
            return Alignment(
                {
                    (step.request_id, step.index): item.seconds
                    for item, step in zip(logged, candidates, strict=True)
                },
                "",
            )
        return Alignment({}, "the logged step indices do not match diag's steps")
    return Alignment(
        {},
        f"{len(logged)} infer_main line(s) against {len(live)} live step(s) "
        f"({len(ordered)} in all): cannot pair them",
    )
