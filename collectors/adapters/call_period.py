"""Denoising steps of a hand-written loop, read off the calls into compiled code it repeats.

A program no adapter knows (a loop over compiled blocks, a magi-compiled model, a compiled
helper between model calls) calls compiled code many times per denoising iteration, the same
sequence each time: block 0, block 1, ..., the guidance helper. One outermost call is then no
step; the period of that sequence is. Each call gets a key: which compiled target it calls (and
the module it is given, for one compiled function shared by every block) and the chain of call
sites that led to it (file and line of the innermost frames of the program's own, no frame
identities): the cond and uncond passes through the same blocks come from different lines of
the loop and so differ, while the same call one iteration later has the same key.

The period is the shortest one that every call of the request so far repeats; a step starts at
each multiple of it from the request's first call. Until the first key comes back, everything
is the request's first step. When a later call breaks the period (a helper that first runs at
the end of the first iteration), the period grows to the first call's next return; the steps
already closed stay as they were. The call sites outside the loop (the line that served the
request) are learnt from the first period and left out of keys, so the loop entered again from
elsewhere keeps its keys; where the period expects the loop's first call and finds another, the
loop was entered anew: a new request. A call that raised makes the period be learnt again from
its step (a program that catches a compile error may retry the call from another line).
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

#: Calls remembered per request: beyond this many the learned period is kept as it is.
MAX_SEQUENCE = 4096
#: Frames of a call-site chain (innermost first).
MAX_DEPTH = 24

#: What a call starts.
STEP = "step"
REQUEST = "request"

Key = tuple[int, int | None, tuple[tuple[str, int], ...]]


class CallPeriod:
    def __init__(self) -> None:
        self.sequence: list[Key] = []
        #: Calls of the request so far (the sequence keeps the first MAX_SEQUENCE of them).
        self.calls = 0
        self.period: int | None = None
        #: Outermost call sites every call of the first period shared (the code around the
        #: denoising loop: the line that served this request); left out of keys once learned,
        #: so that the same loop entered from another line is the same loop.
        self.outer: int | None = None
        #: A call of this request raised and the period was learnt again (relearn).
        self.relearned = False

    def reset(self) -> None:
        """A new request: its calls are counted from its first. A period learnt again after a
        call raised (a retry's calls in it) is not the loop's: the next request learns its own."""
        self.sequence = []
        self.calls = 0
        if self.relearned:
            self.period = None
            self.relearned = False

    def boundary(self, key: Key) -> str:
        """Record one call: STEP when it starts a step (the request's first call, or a call at
        a multiple of the period), REQUEST when the loop was entered anew (a call where the
        period expected the first key finds another), else ""."""
        key = self._normal(key)
        sequence = self.sequence
        index = self.calls
        self.calls += 1
        if index >= MAX_SEQUENCE:  # the learned period is kept as it is
            return STEP if self.period is not None and index % self.period == 0 else ""
        if index == 0:
            sequence.append(key)
            return STEP
        period = self.period
        if period is not None and index % period == 0 and key != sequence[0]:
            self.sequence = [key]  # the loop's first call is not what the period expects
            self.calls = 1
            return REQUEST
        sequence.append(key)
        if period is not None and index >= period and sequence[index - period] != key:
            period = self._next_period(period + 1)
        elif period is None and key == sequence[0]:
            period = self._next_period(1)
            if period is not None and self.outer is None:
                self._learn_outer(period)
        self.period = period
        return STEP if period is not None and index % period == 0 else ""

    def relearn(self) -> None:
        """The call recorded last raised: a program that catches the error may run the call
        again another way (under `force_eager`, from another line), which the period learnt
        from earlier requests would read as the loop entered anew. The period is learnt again
        from the start of the step that call was in; the steps already closed stay."""
        index = self.calls - 1
        if index < 0 or index >= MAX_SEQUENCE:
            return
        period = self.period
        start = index - index % period if period else 0
        self.sequence = self.sequence[start:]
        self.calls -= start
        self.period = None
        self.relearned = True

    def may_end_step(self) -> bool:
        """Whether the call recorded last may be a step's last: it completes a period, or no
        period is known yet. Only such a call's end is marked on the GPU
        (StepTracker.call_ended)."""
        period = self.period
        return period is None or self.calls % period == 0

    def _normal(self, key: Key) -> Key:
        if not self.outer:
            return key
        target, module, sites = key
        return (target, module, sites[: len(sites) - self.outer])

    def _learn_outer(self, period: int) -> None:
        """The outermost sites every call of the first period shares (keeping one site)."""
        chains = [sites for _, _, sites in self.sequence[:period]]
        shared = 0
        while (
            all(len(c) > shared + 1 for c in chains) and len({c[-1 - shared] for c in chains}) == 1
        ):
            shared += 1
        self.outer = shared
        self.sequence = [self._normal(k) for k in self.sequence]

    def _next_period(self, start: int) -> int | None:
        """The shortest period >= start that every call so far repeats; None while none has
        come back yet (a candidate must begin a repetition of the first key)."""
        sequence = self.sequence
        for period in range(max(start, 1), len(sequence)):
            if sequence[period] != sequence[0]:
                continue
            if all(sequence[i] == sequence[i - period] for i in range(period, len(sequence))):
                return period
        return None


#: Modules whose frames are no call sites of the program: diag's wrappers, torch's module-call
#: and Dynamo frames, magi's orchestration (its compile path and fast path differ there).
SKIP_MODULES = ("diag", "torch", "magi_compiler", "runpy", "importlib")


def call_key(target: Any, args: tuple[Any, ...]) -> Key:
    """The key of one call: the module among its first arguments (one compiled function applied
    to every block; magi's fast path passes the module too), else the target, and the call
    sites of the program's own code that led here (innermost first)."""
    module = next((id(a) for a in args[:2] if hasattr(a, "_forward_hooks")), None)
    sites: list[tuple[str, int]] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and len(sites) < MAX_DEPTH:
        name = frame.f_globals.get("__name__")
        if not (isinstance(name, str) and name.startswith(SKIP_MODULES)):
            sites.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return (module if module is not None else id(target), None, tuple(sites))
