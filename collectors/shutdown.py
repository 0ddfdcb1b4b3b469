"""How a process ends when it skips diag's exit hook: `os._exit`.

A server's own shutdown often ends in `os._exit(0)` (LightX2V's SIGINT/SIGTERM handler calls it
after uvicorn's graceful shutdown), which runs no atexit hook: without a word from the process,
its trace cannot tell that ending from a kill. `os._exit` is wrapped to write one `os_exit` event
first (synchronously, one write): the exit code, the signal whose Python handler is on the stack
(read by comparing code objects with `signal.getsignal`, nothing installed), that handler, and
what was in flight (the position and the compiles started and not ended). Then the real
`os._exit` runs, unchanged, whatever the event did.

Forked children (multiprocessing's workers end with `os._exit`) inherit the wrapper: it writes
only in the process that installed it.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol import Session

#: Signals a program's shutdown handler is installed for.
_SHUTDOWN_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
#: Frames walked outward from os._exit's caller when looking for a handler.
_MAX_DEPTH = 64


def _code(handler: Any) -> Any:
    function = getattr(handler, "__func__", handler)
    return getattr(function, "__code__", None)


def _describe(frame: FrameType) -> dict[str, Any]:
    code = frame.f_code
    return {"name": code.co_qualname, "file": code.co_filename, "line": code.co_firstlineno}


def running_handler(frame: FrameType | None) -> tuple[str, dict[str, Any]] | None:
    """(signal name, handler frame) when a Python signal handler installed for a shutdown
    signal is running in `frame` or a frame that called it. One handler installed for several
    signals is told apart by the signal number it was called with (its argument)."""
    handlers: dict[Any, list[int]] = {}
    for number in _SHUTDOWN_SIGNALS:
        try:
            code = _code(signal.getsignal(number))
        except (ValueError, OSError):
            continue
        if code is not None:
            handlers.setdefault(code, []).append(int(number))
    depth = 0
    while frame is not None and depth < _MAX_DEPTH and handlers:
        numbers = handlers.get(frame.f_code)
        if numbers is not None:
            return _which(frame, numbers), _describe(frame)
        frame = frame.f_back
        depth += 1
    return None


def _which(frame: FrameType, numbers: list[int]) -> str:
    """The signal a handler frame is handling: its int argument among `numbers`, else all."""
    code = frame.f_code
    arguments = frame.f_locals
    for name in code.co_varnames[: code.co_argcount]:
        value = arguments.get(name)
        if isinstance(value, int) and value in numbers:
            return signal.Signals(value).name
    return "/".join(signal.Signals(n).name for n in numbers)


def exit_event(session: Session, code: Any, frame: FrameType | None) -> dict[str, Any]:
    """The fields of the `os_exit` event for an `os._exit(code)` called from `frame`."""
    found = running_handler(frame)
    steps = session.steps
    compiles = session.compiles
    return {
        "code": code if isinstance(code, int) else None,
        "signal": found[0] if found else None,
        "handler": found[1] if found else None,
        "caller": _describe(frame) if frame is not None else None,
        "compiling": sorted(compiles.started) if compiles is not None else [],
        **(steps.position() if steps is not None else {}),
    }


def install(session: Session) -> None:
    original = os._exit
    if getattr(original, "__diag_os_exit__", False):
        return

    def record(code: Any, frame: FrameType) -> None:
        session.emit("os_exit", **exit_event(session, code, frame))

    def _exit(code: int, /) -> Any:
        try:
            if os.getpid() == session.pid and not session.ended:
                session.guarded("shutdown.os_exit", record, code, sys._getframe(1))
        except BaseException:  # noqa: BLE001, S110 - the program's exit must happen regardless
            pass
        return original(code)

    _exit.__diag_os_exit__ = True  # type: ignore[attr-defined]
    _exit.__wrapped__ = original  # type: ignore[attr-defined]
    _exit.__doc__ = original.__doc__
    os._exit = _exit  # type: ignore[assignment]
