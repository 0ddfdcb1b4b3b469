"""The program's own crash: an uncaught exception, recorded as a `crash` event before it dies.

A crash ends the run, so it is the finding that matters most, and the one a trace loses first:
the exception is written (one line, flushed, like every event) from inside the exception hooks,
before Python starts shutting down. Both hooks are chained, never replaced in spirit: the
program's previous hook runs with the same arguments, so what is printed and the exit code do
not change. A program that installs its own `sys.excepthook` later (rich, IPython) bypasses
ours; Python still leaves the exception in `sys.last_value`, which is read once more when the
interpreter shuts down (before the session closes its event file). A thread's exception has no
such trace: a program that replaces `threading.excepthook` leaves its thread crashes unrecorded.

What the event says (docs/FORMAT.md): the exception's type and message (bounded), the innermost
frame of the program's own code, and, judged from the traceback's frames and the message,
whether it was raised inside compiled code, a CUDA-graph replay, a collective, or while Dynamo
was compiling; with the position (phase, request, step) and the compiles in flight.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .userframes import is_user_file

if TYPE_CHECKING:
    from .protocol import Session

MAX_MESSAGE = 8192
_MAX_FRAMES = 12  # innermost frames kept whole (file, line, function)
_MAX_USER_FRAMES = 6

# Frames that run a compiled graph (aot_autograd's runtime wrappers, inductor's generated
# module, an FX graph module), versus frames of Dynamo compiling one.
_COMPILED_FRAME = re.compile(
    r"_aot_autograd/runtime_wrappers\.py|_inductor/output_code\.py|torchinductor_|"
    r"^<eval_with_key>|_dynamo/backends/debugging\.py"
)
_COMPILING_FRAME = re.compile(
    r"_dynamo/(?:convert_frame|symbolic_convert|output_graph)\.py|_inductor/compile_fx\.py"
)
_CUDAGRAPH_FRAME = re.compile(r"_inductor/cudagraph_trees\.py|cuda/graphs\.py")
_CUDAGRAPH_MESSAGE = re.compile(r"CUDAGraphs?|cudagraph", re.IGNORECASE)
_COLLECTIVE_FRAME = re.compile(r"torch/distributed/(?:distributed_c10d|_functional_collectives)")
_COLLECTIVE_MESSAGE = re.compile(
    r"NCCL|ProcessGroup|c10d|Gloo|collective operation|Watchdog caught", re.IGNORECASE
)
_COLLECTIVE_TYPES = ("DistError", "DistBackendError", "DistNetworkError", "DistStoreError")
# Exceptions Dynamo raises when a compile fails (the compile_end event has the details).
_COMPILE_TYPES = (
    "BackendCompilerFailed",
    "Unsupported",
    "ConstraintViolationError",
    "InternalTorchDynamoError",
    "TorchRuntimeError",
    "UserError",
    "FailOnRecompileLimitHit",
    "RecompileError",
)


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... ({len(text) - limit} more characters)"


def _frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    try:
        # No source lines: nothing is read from disk while the process is dying.
        return list(traceback.StackSummary.extract(traceback.walk_tb(tb), lookup_lines=False))
    except Exception:  # noqa: BLE001 - a broken traceback still leaves type and message
        return []


def _frame(entry: traceback.FrameSummary) -> dict[str, Any]:
    return {"file": entry.filename, "line": entry.lineno, "name": entry.name}


def describe(exc: BaseException, thread: str | None) -> dict[str, Any]:
    """The `crash` event's fields for one exception (pure: no torch, no session)."""
    kind = type(exc)
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that raises
        message = "<the exception's message could not be read>"
    frames = _frames(exc.__traceback__)
    files = [f.filename for f in frames]
    user = [f for f in frames if is_user_file(f.filename)]
    name = kind.__name__
    inside = []
    if any(_COMPILING_FRAME.search(f) for f in files) or name in _COMPILE_TYPES:
        inside.append("compiling")
    elif any(_COMPILED_FRAME.search(f) for f in files):
        inside.append("compiled_code")
    if any(_CUDAGRAPH_FRAME.search(f) for f in files) or _CUDAGRAPH_MESSAGE.search(message):
        inside.append("cudagraph")
    if (
        any(_COLLECTIVE_FRAME.search(f) for f in files)
        or name in _COLLECTIVE_TYPES
        or _COLLECTIVE_MESSAGE.search(message)
    ):
        inside.append("collective")
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return {
        "type": f"{kind.__module__}.{kind.__qualname__}"
        if kind.__module__ != "builtins"
        else kind.__qualname__,
        "message": bounded(message),
        "thread": thread,
        "user_frame": _frame(user[-1]) if user else None,
        "user_stack": [_frame(f) for f in user[-_MAX_USER_FRAMES:]],
        "frames": [_frame(f) for f in frames[-_MAX_FRAMES:]],
        "inside": inside,
        "cause": None
        if cause is None
        else {"type": type(cause).__qualname__, "message": bounded(str(cause), 2048)},
    }


class CrashCollector:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.seen: set[int] = set()  # ids of exceptions already recorded
        self.previous_hook = sys.excepthook
        self.previous_thread_hook = threading.excepthook

    def record(self, exc: BaseException, how: str, thread: str | None) -> None:
        if id(exc) in self.seen:
            return
        self.seen.add(id(exc))
        fields = describe(exc, thread)
        if thread is None and not {"compiling", "compiled_code"} & set(fields["inside"]):
            # Raised outside compiled code after a model call returned: the step left open
            # for the loop's next call ends at its last compiled call, before the crash.
            from .adapters.inferred import close_returned

            close_returned()
        steps = self.session.steps
        position = steps.position() if steps is not None else {}
        compiles = self.session.compiles
        compiling = sorted(compiles.started) if compiles is not None else []
        # The crash's own `thread` (None: the main thread) over the position's thread name.
        self.session.emit("crash", seen_by=how, compiling=compiling, **{**position, **fields})

    # -- the hooks -------------------------------------------------------------------------------

    def excepthook(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> Any:
        if value is not None and not isinstance(value, SystemExit):
            # The program's own hook runs whatever this did (collectors/hooks.py).
            self.session.guarded("crash.excepthook", self.record, value, "sys.excepthook", None)
        return self.previous_hook(kind, value, tb)

    def thread_excepthook(self, args: Any) -> Any:
        self.session.guarded("crash.thread_excepthook", self._record_thread, args)
        return self.previous_thread_hook(args)

    def _record_thread(self, args: Any) -> None:
        value = args.exc_value
        if value is not None and not isinstance(value, SystemExit):
            thread = getattr(args.thread, "name", None) or "?"
            self.record(value, "threading.excepthook", thread)

    def at_shutdown(self) -> None:
        """The last chance: an exception whose hook was not ours (the program replaced it)."""
        value = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if isinstance(value, BaseException) and not isinstance(value, SystemExit):
            self.record(value, "sys.last_value", None)


_WRAPPED = "__diag_crash__"


def hook_process_bootstrap(collector: CrashCollector, module: Any) -> None:
    """A `multiprocessing` child's uncaught exception never reaches `sys.excepthook`:
    `BaseProcess._bootstrap` catches it, prints it with `traceback.print_exc()` and exits 1.
    `traceback.print_exc` is seen through a function that, when `_bootstrap` itself calls it,
    records the exception being printed, then prints exactly as before (the traceback printed
    is the exception's own, so no frame of diag's shows; every other caller just prints)."""
    cls = getattr(module, "BaseProcess", None)
    code = getattr(cls.__dict__.get("_bootstrap") if cls is not None else None, "__code__", None)
    original = traceback.print_exc
    if code is None or getattr(original, _WRAPPED, False):
        return

    @functools.wraps(original)
    def print_exc(*args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code is code:
            value = sys.exc_info()[1]
            if value is not None and not isinstance(value, SystemExit):
                collector.session.guarded(
                    "crash.process", collector.record, value, "multiprocessing.Process", None
                )
        return original(*args, **kwargs)

    setattr(print_exc, _WRAPPED, True)
    traceback.print_exc = print_exc


def install(session: Session) -> CrashCollector:
    collector = CrashCollector(session)
    sys.excepthook = collector.excepthook
    threading.excepthook = collector.thread_excepthook
    from .importhook import on_import

    on_import(
        "multiprocessing.process",
        lambda module: session.install("crash.process", hook_process_bootstrap, collector, module),
    )
    # threading's shutdown hooks run before atexit's (where the session closes its file), and
    # after Python has stored an uncaught exception in sys.last_value.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(lambda: session.guarded("crash.shutdown", collector.at_shutdown))
    return collector
