"""Compile stances as the program sets them, and the recompiles a stance refused.

`torch.compiler.set_stance` (called, used as `with`, or as a decorator) sets Dynamo's stance for
the whole process through one function, `torch._dynamo.decorators._set_stance`, which is
wrapped here: every change is a `stance` event (the stance, the one before it, and where the
calling thread was). The wrapper calls torch's function first and returns what it returns, so
an error (set_stance inside a compiled region) is the program's as before.

Under `fail_on_recompile` a call that needs a new compile raises a plain RuntimeError from
Dynamo's frame callback: no compile starts, no guard failure is logged, so neither the compile
callbacks nor the recompile log see it. The error passes through the wrappers diag puts around
compiled callables (adapters/compiled_calls.py), which hand it to `note_error` whether or not
the program then catches it: a `recompile_refused` event with the frame and the failing guards
torch wrote into the message, and the thread's request and step.
"""

from __future__ import annotations

import re
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .importhook import on_import

if TYPE_CHECKING:
    from .protocol import Session

_WHERE = "stances"
#: The start of the message Dynamo's fail_on_recompile callback raises (torch 2.6 to 2.13).
REFUSED = "Detected recompile when torch.compile stance is 'fail_on_recompile'"
_FRAME = re.compile(
    r"filename: '(?P<file>[^']*)', function name: '(?P<name>[^']*)', line number: (?P<line>\d+)"
)
#: At most this many guard lines are kept from one message.
MAX_GUARDS = 16

_STANCES: Stances | None = None


class Stances:
    def __init__(self, session: Session) -> None:
        self.session = session
        #: Per thread, (id, message) of the refused error noted since the thread's last call
        #: into compiled code began: one error passes several wrappers on its way out. Cleared
        #: at each call's start (`begin_call`), since a later error may reuse a freed one's id.
        self._local = threading.local()

    @classmethod
    def install(cls, session: Session) -> Stances:
        global _STANCES
        stances = cls(session)
        _STANCES = stances
        on_import(
            "torch._dynamo.decorators",
            lambda module: session.install(_WHERE, stances.wrap, module),
        )
        return stances

    def wrap(self, module: ModuleType) -> None:
        original = getattr(module, "_set_stance", None)
        if original is None or getattr(original, "_diag_stance", False):
            return
        note = self.note_stance
        guarded = self.session.guarded

        def _set_stance(*args: Any, **kwargs: Any) -> Any:
            # Whatever arguments this torch's set_stance passes go through unchanged.
            prior = original(*args, **kwargs)
            guarded(_WHERE, note, args[0] if args else kwargs.get("stance"), prior)
            return prior

        # What torch marks on its own function: Dynamo refuses to trace it.
        _set_stance._dynamo_forbidden = True  # type: ignore[attr-defined]
        _set_stance._diag_stance = True  # type: ignore[attr-defined]
        _set_stance.__wrapped__ = original  # type: ignore[attr-defined]
        module._set_stance = _set_stance  # type: ignore[attr-defined]

    def note_stance(self, stance: Any, prior: Any) -> None:
        name, before = _name(stance), _name(prior)
        if name == before:
            return
        steps = self.session.steps
        self.session.emit(
            "stance",
            stance=name,
            prior=before,
            **(steps.position() if steps is not None else {}),
        )

    def note_error(self, exc: BaseException) -> None:
        """An exception left a compiled callable: a refused recompile is recorded, once."""
        if not isinstance(exc, RuntimeError):
            return
        message = str(exc)
        if not message.startswith(REFUSED):
            return
        key = (id(exc), message)
        if key == getattr(self._local, "last", None):
            return
        self._local.last = key
        match = _FRAME.search(message)
        frame = (
            {"name": match["name"], "file": match["file"], "line": int(match["line"])}
            if match
            else None
        )
        guards = [
            line.strip()[2:].strip()
            for line in message.splitlines()[1:]
            if line.strip().startswith("- ")
        ][:MAX_GUARDS]
        steps = self.session.steps
        self.session.emit(
            "recompile_refused",
            stance="fail_on_recompile",
            frame=frame,
            guards=guards,
            **(steps.position() if steps is not None else {}),
        )


def _name(stance: Any) -> str:
    name = getattr(stance, "stance", None)
    return name if isinstance(name, str) else "unknown"


def begin_call() -> None:
    """Called by diag's wrappers as a call into compiled code begins: an error leaving it is a
    new one, whatever its id."""
    stances = _STANCES
    if stances is not None:
        stances._local.last = None


def note_error(exc: BaseException) -> None:
    """Called by diag's wrappers around compiled callables with an exception that left one."""
    stances = _STANCES
    if stances is not None:
        stances.session.guarded(_WHERE, stances.note_error, exc)
