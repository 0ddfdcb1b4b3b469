"""After a frame hits the recompile limit: which of its calls still run compiled, which eagerly.

Dynamo stops compiling a frame at the limit, but it keeps checking the frame's cache entries:
a call that passes one runs that compiled entry, and only a call that passes none runs eagerly,
with no event or message. So "eager from then on" is rarely true, and which calls ran eagerly
can only be read off the entries' guards. For a frame that hit the limit, each call (up to a
budget) is checked here the way Dynamo checks it, before the call and outside compiled code:
every entry's guard manager against the call's arguments as the frame's locals. Counts per
step are written as `limit_calls` events; nothing is written for frames that never hit it, and
the program's call, guards and results are untouched.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session

#: Calls checked per frame; later calls are counted as unchecked.
MAX_CHECKS = 20_000

FrameKey = tuple[str, str, int]


@dataclass
class _Counts:
    position: dict[str, Any]
    eager: int = 0
    compiled: int = 0
    unchecked: int = 0
    served_by: str | None = None  # the entry that served the last compiled call


class LimitCalls:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.open: dict[FrameKey, _Counts] = {}
        self.checks: dict[FrameKey, int] = {}
        self.signatures: dict[Any, inspect.Signature | None] = {}

    def observe(
        self,
        key: FrameKey,
        code: Any,
        function: Any,
        owner: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        """Called before each call of a compiled callable; works only for limited frames."""
        compiles = self.session.compiles
        if compiles is None or key not in compiles.limited:
            return
        steps = self.session.steps
        position = steps.position() if steps is not None else {}
        counts = self.open.get(key)
        if counts is None or _where(counts.position) != _where(position):
            self._flush(key)
            counts = self.open[key] = _Counts(position)
        done = self.checks.get(key, 0)
        if done >= MAX_CHECKS:
            counts.unchecked += 1
            return
        self.checks[key] = done + 1
        served = self._served_by(code, function, owner, args, kwargs)
        if served is False:
            counts.unchecked += 1
        elif served is None:
            counts.eager += 1
        else:
            counts.compiled += 1
            counts.served_by = str(served)

    def _served_by(
        self, code: Any, function: Any, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> str | None | bool:
        """The compile id of the entry whose guards pass (None: no entry does: the call runs
        eagerly; False: the check could not be made)."""
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        f_locals = self._locals(function, owner, args, kwargs)
        if f_locals is None:
            return False
        for entry in _debug_get_cache_entry_list(code):
            if entry.guard_manager.check(f_locals):
                return str(getattr(entry, "compile_id", "?"))
        return None

    def _locals(
        self, function: Any, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The frame's locals at entry, as Dynamo sees them: the compiled code's own parameters
        bound to the call (a `functools.wraps` decorator's `*args, **kwargs`, not the wrapped
        function's names: `inspect.signature` would follow `__wrapped__`), with defaults, `self`
        for a module's forward, and the closure's cells by their free-variable names."""
        if function not in self.signatures:
            try:
                self.signatures[function] = inspect.signature(function, follow_wrapped=False)
            except (TypeError, ValueError):
                self.signatures[function] = None
        signature = self.signatures[function]
        if signature is None:
            return None
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        f_locals = dict(bound.arguments)
        f_locals.update(_free_variables(function))
        return {"self": owner, **f_locals} if owner is not None else f_locals

    def _flush(self, key: FrameKey) -> None:
        counts = self.open.pop(key, None)
        if counts is None or not (counts.eager or counts.compiled or counts.unchecked):
            return
        self.session.emit(
            "limit_calls",
            frame={"name": key[0], "file": key[1], "line": key[2]},
            eager=counts.eager,
            compiled=counts.compiled,
            unchecked=counts.unchecked,
            served_by=counts.served_by,
            **counts.position,
        )

    def close(self) -> None:
        for key in list(self.open):
            self._flush(key)


def _where(position: dict[str, Any]) -> tuple[Any, ...]:
    return (position.get("phase"), position.get("request_id"), position.get("step"))


def _free_variables(function: Any) -> dict[str, Any]:
    """The closure's cells as the frame reads them: free-variable name -> the cell's value
    (empty cells left out: the frame cannot read them either)."""
    raw = getattr(function, "__func__", function)
    code = getattr(raw, "__code__", None)
    closure = getattr(raw, "__closure__", None) or ()
    names = getattr(code, "co_freevars", ()) if code is not None else ()
    found: dict[str, Any] = {}
    for name, cell in zip(names, closure, strict=False):
        try:
            found[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return found
