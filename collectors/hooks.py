"""The one way diag's code runs inside the program: a hook that never raises.

Everything diag registers inside the recorded program (Dynamo, Inductor and profiler callbacks,
logging handlers, `gc.callbacks`, exit and signal hooks, import hooks, the wrappers around
compiled callables and framework methods) runs its own work through `Hooks.run`. An exception
there is caught, written as a `collector_error` event naming the hook, and turns that hook off
for the rest of the process: the program never sees it, and analyze says what was not recorded
(shared/DESIGN.md, "A hook never raises").

The program's own calls never go through `run`: a wrapper calls the program's function itself,
outside, so the program's exceptions and return values pass unchanged.

`DIAG_FAULTS` (tests only) makes hooks raise on purpose, to prove the program cannot tell:
a comma-separated list of hook names or shell patterns (`cudagraphs.start`, `adapter.*`, `*`),
each optionally preceded by `!` to leave those hooks alone (`*,!adapter.*`: every hook but the
adapters', so steps are still reported and the per-step hooks get to raise). Installation steps
(named `install:<name>`) match only a pattern that names them: a failed install would keep the
later hooks from ever running.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from typing import Any, TypeVar

ENV_FAULTS = "DIAG_FAULTS"
#: Hook names of installation steps start with this (left out of DIAG_FAULTS=*).
INSTALL = "install:"

T = TypeVar("T")


class InjectedFault(RuntimeError):
    """Raised inside a hook named in DIAG_FAULTS (tests only)."""


def _faults_from_env() -> frozenset[str]:
    value = os.environ.get(ENV_FAULTS, "")
    return frozenset(part.strip() for part in value.split(",") if part.strip())


class Hooks:
    """Which of diag's hooks are still on in this process, and the guard every hook runs in."""

    def __init__(self, on_error: Callable[[str, BaseException], None]) -> None:
        self._on_error = on_error
        self.off: set[str] = set()
        self._faults = _faults_from_env()

    def is_on(self, name: str) -> bool:
        return name not in self.off

    def run(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """`fn(*args, **kwargs)`, or None when it raised or the hook is off."""
        if name in self.off:
            return None
        try:
            if self._faults and self._injected(name):
                raise InjectedFault(f"{ENV_FAULTS} names the hook {name!r}")
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - nothing diag does may raise into the program
            self.off.add(name)
            try:
                self._on_error(name, exc)
            except Exception:  # noqa: BLE001, S110
                pass
            return None

    def injects(self, name: str) -> bool:
        """Whether DIAG_FAULTS makes the hook `name` raise (for a hook that cannot run through
        `run`: gc_pauses.py's callback, which may not write an event where it runs)."""
        return bool(self._faults) and self._injected(name)

    def _injected(self, name: str) -> bool:
        hit = False
        for pattern in self._faults:
            negate = pattern.startswith("!")
            pattern = pattern.removeprefix("!")
            if name.startswith(INSTALL) and not pattern.startswith(INSTALL):
                continue
            if fnmatch.fnmatchcase(name, pattern):
                if negate:
                    return False
                hit = True
        return hit

    def callback(self, name: str, fn: Callable[..., Any]) -> Callable[..., None]:
        """`fn` as a callback whatever arguments its caller passes (torch's callbacks take none
        on some releases and one on others): it is called with the first positional argument,
        or None, through `run`."""

        def call(*args: Any, **kwargs: Any) -> None:
            self.run(name, fn, args[0] if args else None)

        call.__qualname__ = f"diag:{name}"
        return call
