"""The magi_compile blind spot: record that the program uses it.

`@magi_compile` (MAGI's magi_compiler, used by LightX2V with `use_magi_compile`) swaps a
function's `__code__` after its first compile, so Dynamo never re-checks guards there and its
recompile logs say nothing about that code. A trace with no recompiles would then be misread as
clean; this event lets analyzers say "recompiles of these targets are invisible" instead.
"""

from __future__ import annotations

import functools
import inspect
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session

NOTE = (
    "magi_compile swaps __code__ after its first compile: Dynamo does not re-check guards of "
    "magi-compiled code, so its recompiles do not appear in Dynamo's logs"
)


def _describe(target: Any) -> dict[str, Any] | None:
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        return None
    try:
        file, line = inspect.getsourcefile(target), inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        file, line = None, None
    return {"name": getattr(target, "__qualname__", repr(target)), "file": file, "line": line}


def install(session: Session, module: ModuleType) -> None:
    if not getattr(session, "magi_seen", False):
        session.magi_seen = True  # type: ignore[attr-defined]
        session.emit("magi_compile", module=module.__name__, note=NOTE, target=None)
    original = getattr(module, "magi_compile", None)
    if original is None or getattr(original, "__diag_wrapped__", False):
        return

    @functools.wraps(original)
    def magi_compile(*args: Any, **kwargs: Any) -> Any:
        target = _describe(args[0]) if args else None
        if target is not None:
            session.emit("magi_compile", module=module.__name__, note=NOTE, target=target)
        return original(*args, **kwargs)

    magi_compile.__diag_wrapped__ = True  # type: ignore[attr-defined]
    module.magi_compile = magi_compile  # type: ignore[attr-defined]
