"""After a frame hits the recompile limit, or under the `eager_on_recompile` stance: which of
its calls still run compiled, which eagerly.

Dynamo stops compiling a frame at the limit, but it keeps checking the frame's cache entries:
a call that passes one runs that compiled entry, and only a call that passes none runs eagerly,
with no event or message. So "eager from then on" is rarely true, and which calls ran eagerly
can only be read off the entries' guards. For a frame that hit the limit, each call (up to a
budget) is checked here the way Dynamo checks it, before the call and outside compiled code:
every entry's guard manager against the call's arguments as the frame's locals. Counts per
step are written as `limit_calls` events; nothing is written for frames that never hit it, and
the program's call, guards and results are untouched.

`torch.compiler.set_stance("eager_on_recompile")` makes the same silent fallback for every
frame: a call that passes no entry runs eagerly, and torch records nothing (no compile, no guard
failure, no log line; checked on torch 2.13). While that stance is set, every compiled frame's
calls are checked the same way, and their events carry `stance`. A frame with no entry yet
compiles as usual under that stance: its first call counts as compiled.

A compile failure that `torch._dynamo.config.suppress_errors` swallowed is harsher: Dynamo marks
the frame's code to be skipped, so every later call of it runs eagerly, even one an entry
compiled before the failure would serve (the entries stay in the cache, unused, until
`torch._dynamo.reset()`; seen with a counting backend on torch 2.6 and 2.13). Those calls need
no check: each is counted eager, and their events carry `suppressed`. Not under
`fullgraph=True`, where Dynamo raises the error whatever suppress_errors says. Under
`set_stance("force_eager")` (a program's own fallback after a refused or failed compile) every
call runs eagerly: counted the same way, with `stance` `force_eager`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .torch_api import cache_entries, entry_compile_id, entry_passes, stance

if TYPE_CHECKING:
    from .protocol import Session

#: The stance under which a call that passes no cache entry runs eagerly, silently.
EAGER_ON_RECOMPILE = "eager_on_recompile"
#: The stance under which every call runs eagerly (a program's own fallback, say).
FORCE_EAGER = "force_eager"
#: Stances under which `observe` looks at every call.
_CHECKED_STANCES = frozenset({EAGER_ON_RECOMPILE, FORCE_EAGER})

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
    stance: str | None = None  # set when checked for the stance, not a limit hit
    suppressed: bool = False  # counted because Dynamo skips the frame after a suppressed error


class LimitCalls:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.open: dict[FrameKey, _Counts] = {}
        self.checks: dict[FrameKey, int] = {}
        self.signatures: dict[Any, inspect.Signature | None] = {}
        #: Frames compiled with fullgraph=True (collectors/shapes.py fills it): their compile
        #: errors always raise, so suppress_errors never makes Dynamo skip them.
        self.fullgraph: set[FrameKey] = set()

    def may_observe(self, key: FrameKey) -> bool:
        """Whether `observe` may have work for a call of `key`: the frame hit its limit or is
        skipped after a suppressed error, or the stance runs calls eagerly. A few reads that
        never raise: asked before every compiled call, so `observe` runs only when this holds."""
        compiles = self.session.compiles
        if compiles is not None and (key in compiles.limited or key in compiles.suppressed):
            return True
        return stance() in _CHECKED_STANCES

    def observe(
        self,
        key: FrameKey,
        code: Any,
        function: Any,
        owner: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        """Called before each call of a compiled callable; works only for limited frames, frames
        Dynamo skips after a suppressed error, and under eager_on_recompile or force_eager."""
        compiles = self.session.compiles
        suppressed = (
            compiles is not None and key in compiles.suppressed and key not in self.fullgraph
        )
        current = None if suppressed else stance()
        forced = current == FORCE_EAGER
        limited = not suppressed and not forced and compiles is not None and key in compiles.limited
        eager_stance = not suppressed and not limited and current == EAGER_ON_RECOMPILE
        if not suppressed and not forced and not limited and not eager_stance:
            return
        steps = self.session.steps
        position = steps.position() if steps is not None else {}
        counts = self.open.get(key)
        why = FORCE_EAGER if forced else EAGER_ON_RECOMPILE if eager_stance else None
        if (
            counts is None
            or _where(counts.position) != _where(position)
            or counts.stance != why
            or counts.suppressed != suppressed
        ):
            self._flush(key)
            counts = self.open[key] = _Counts(position, stance=why, suppressed=suppressed)
        if suppressed or forced:  # Dynamo runs the code without looking at its entries
            counts.eager += 1
            return
        done = self.checks.get(key, 0)
        if done >= MAX_CHECKS:
            counts.unchecked += 1
            return
        self.checks[key] = done + 1
        served = self._served_by(code, function, owner, args, kwargs, first_compiles=eager_stance)
        if served is True:  # no entry yet: the stance lets a first compile happen
            counts.compiled += 1
        elif served is False:
            counts.unchecked += 1
        elif served is None:
            counts.eager += 1
        else:
            counts.compiled += 1
            counts.served_by = str(served)

    def _served_by(
        self,
        code: Any,
        function: Any,
        owner: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        first_compiles: bool = False,
    ) -> str | None | bool:
        """The compile id of the entry whose guards pass (None: no entry does: the call runs
        eagerly; False: the check could not be made; True: no entry yet and `first_compiles`:
        the call compiles its first entry)."""
        entries = cache_entries(code)
        if first_compiles and not entries:
            return True
        f_locals = self._locals(function, owner, args, kwargs)
        if f_locals is None:
            return False
        for entry in entries:
            passes = entry_passes(entry, f_locals)
            if passes is None:
                return False
            if passes:
                return entry_compile_id(entry) or "?"
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
            **({"stance": counts.stance} if counts.stance else {}),
            **({"suppressed": True} if counts.suppressed else {}),
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
