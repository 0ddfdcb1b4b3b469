"""torch.profiler windows over chosen steps, and region markers around compiled callables.

A window's profiler is started before the window's first step begins (at the request start, or
at the end of the step before), so the profiler's own start-up lands in no measured step; its
trace is exported after the last step ends, and at the latest after the request's last step
(when the adapter declared the step count) or when the request ends: a window never runs on
into what follows the steps (a VAE decode, a video save) nor into the next request's steps.
Steps inside a window are marked `profiled`. The export is budgeted (kineto_export.py): a
window that would not fit on the trace's disk is skipped with why (`profile_window_skipped`).

Threads. torch's profiler (not the on-demand one) lives in the thread that started it: its op
callbacks are that thread's, and stopping it from another thread finds no session there and
leaves Kineto half-stopped (a service serving from two threads died with SIGSEGV). So a window
belongs to the thread that started it: only that thread's steps are in it (`active` is per
thread), only it stops and exports it, at its own step or request end, or when the thread ends
(a thread-local guard); one window is open at a time in the process (Kineto has one trace).
A window another thread would start meanwhile is skipped with why. Kineto's first start also
prints "External init callback must run in same thread as registerClient" unless it runs on the
thread that imported torch, so a warmup request on that thread starts and stops an empty
profiler there first (about 1 ms, outside any step).

Forks. Kineto's threads do not survive fork(): a child of a process that ran the profiler hangs
or aborts at exit in Kineto's destructors. A window open in the forking thread is ended before
the fork; in the child the profiler's state is dropped without touching Kineto, no window is
started (one `profile_window_skipped` says why), and C++ static destructors are skipped at its
exit (`_skip_static_destructors`), after Python's own shutdown and a flush of C stdio.

Cost. A window's stop and JSON write run on the program's thread between steps (Kineto holds the
GIL for both, so no other thread could take them without stalling the program inside a step);
their time is in `profile_window_end` (`stop_s`, `save_s`, `export_s` their sum: what the
program waited). The gzip runs on diag's own thread (kineto_export.WindowExporter) and is joined
at exit within EXPORT_JOIN_S.

Dynamo drops `record_function` inside a compiled frame, so the marker is placed around the
compiled callable, outside the frame: `diag.region:<function>#<n>` for the n-th call in the
step. The eager baseline (`set_stance("force_eager")`) calls the same wrappers, so kernels of the
same call line up in both runs. Markers cost a flag test per call outside windows.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diag.record.profilespec import ProfileSpec, parse_profile_spec
from diag.trace.format import KINETO_DIR, safe_name

from .kineto_export import WindowExporter, WindowSkipped, save_json

if TYPE_CHECKING:
    from .protocol import Session
    from .steps import StepTracker

#: Set on the callables `mark` returns (functools.wraps carries it to outer wrappers).
_MARKED = "_diag_region"
#: At exit, how long diag waits for windows still being compressed.
EXPORT_JOIN_S = 30.0
#: torch 2.7-2.12 warn this at every profile's start, cycles or not (pytorch #180387).
_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


class ProfilerWindows:
    def __init__(self, session: Session, spec: ProfileSpec) -> None:
        self.session = session
        self.spec = spec
        self.torch = session.torch
        self._prof: Any = None
        #: The thread the open window belongs to (None: no window open).
        self._owner: int | None = None
        self._serial = 0  # windows started so far: which one a thread-exit guard is for
        self._window: str | None = None
        self._window_steps = 0
        self._steps_left = 0
        self._seen_shapes: set[tuple[int, ...]] = set()
        self._steady_done = False
        self._steady_window: str | None = None
        self._steady_left = spec.steady  # steady steps still to profile
        self.windows = 0
        #: The thread that imported torch (the session starts right after): Kineto's client.
        self._torch_thread = threading.get_ident()
        #: diag ran Kineto in this process (then a forked child must not, see module doc).
        self._kineto_used = False
        #: This process is a fork of one where diag ran Kineto: no window here.
        self._forked = False
        self._fork_reported = False
        self._exporter = WindowExporter()
        self._guards = threading.local()
        self._orphans: list[Any] = []  # windows whose thread could not stop them (kept alive)
        #: Held while diag's export thread writes an event, and across a fork: a child never
        #: inherits the event file's lock held by a thread it does not have.
        self._emit_lock = threading.Lock()
        #: Held while a thread claims or releases the one window: two threads ending steps at
        #: once must not both start a profiler, nor one start while another's still stops.
        self._claim = threading.Lock()
        self._fork_held = False

    @classmethod
    def install(cls, session: Session) -> ProfilerWindows:
        windows = cls(session, parse_profile_spec(session.profile_spec))
        if windows.spec.enabled:
            windows._wrap_torch_compile()
            _quiet_cycle_warning(windows.torch)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(
                    before=windows._before_fork,
                    after_in_parent=windows._after_fork_in_parent,
                    after_in_child=windows._after_fork_in_child,
                )
        return windows

    @property
    def active(self) -> bool:
        """A window is open and it is this thread's: this thread's steps are in it."""
        return self._owner == threading.get_ident()

    # -- choosing windows -------------------------------------------------------------------------

    def on_request_start(self, tracker: StepTracker) -> None:
        if tracker.phase != "live":
            if (
                self.spec.enabled
                and not self._kineto_used
                and threading.get_ident() == self._torch_thread
            ):
                self._prime()
            return
        if self.active:
            return
        shape = tuple(tracker.request_shape or ())
        if self.spec.all_live or tracker.request_id in self.spec.requests:
            self._start(f"{tracker.request_id}-all", steps=10**9)
        elif self.spec.new_shapes and shape not in self._seen_shapes:
            self._seen_shapes.add(shape)
            self._start(f"{tracker.request_id}-s0-new-shape", steps=1)

    def on_request_end(self, tracker: StepTracker) -> None:
        """A window never outlives its request: what follows the last step (a VAE decode, a
        video save, the next request's new-shape compile) is no step of the window."""
        if not self.active:
            return  # another thread's request, or no window: the window's own thread ends it
        if self._window == self._steady_window and self._steps_left > 0:
            # The request ended before the steady window had its N steps: the next live
            # request long enough profiles the rest from its own step 2, in a window of its own.
            self._steady_left = self._steps_left
            self._steady_done = False
        self._stop()

    def before_step(self, tracker: StepTracker) -> bool:
        return self.active

    def after_step(self, tracker: StepTracker) -> None:
        if self.active:
            self._window_steps += 1
            self._steps_left -= 1
            if self._steps_left <= 0:
                self._stop()
            elif tracker.request_steps is not None and tracker.next_step >= tracker.request_steps:
                # The request's last step (as its adapter declared the count): what follows
                # (LightX2V's VAE decode and video save, up to 11 s) is no step of the window.
                self.on_request_end(tracker)
        if self._owner is not None or tracker.phase != "live" or self._steady_done:
            return  # another thread's window open: the steady window waits for a later request
        if not self.spec.steady:
            return
        # The steady window starts at the third step of a live request (step index 2).
        if tracker.next_step == 2:
            if self._start(f"{tracker.request_id}-s2-steady", steps=self._steady_left):
                self._steady_done = True
                self._steady_window = self._window

    # -- the profiler -----------------------------------------------------------------------------

    def _start(self, window: str, steps: int) -> bool:
        """Open a window on this thread; False when it was not (skipped, with why)."""
        if self.session.writer.stopped:
            return False  # the recording stopped: no window could be written
        name = safe_name(window)
        if self._forked:
            if not self._fork_reported:
                self._fork_reported = True
                self._skipped(
                    name,
                    0,
                    "this process was forked from one that had run torch's profiler, whose "
                    "threads do not survive fork(): no profiler window in this process",
                )
            return False
        with self._claim:
            claimed = self._owner is None
            if claimed:
                self._owner = threading.get_ident()
        if not claimed:
            self._skipped(
                name,
                0,
                "another thread's profiler window was open (torch profiles one thread's ops "
                "per window, and one window at a time)",
            )
            return False
        try:
            torch = self.torch
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_initialized():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=activities)
            with _Quiet():
                prof.start()
        except BaseException:
            self._owner = None
            raise
        self._kineto_used = True
        self._prof = prof
        self._serial += 1
        self._guards.guard = _ThreadEndGuard(self, self._serial)
        self._window = name
        self._window_steps = 0
        self._steps_left = steps
        self.windows += 1
        # The clock anchor of this window: diag's event clock (monotonic) and unix time, which
        # Kineto stamps its events in, read side by side now rather than at process start, so
        # a window hours into a run is cut into steps without the clocks' drift since then.
        t, wall_ns = time.monotonic_ns(), time.time_ns()
        self.session.emit("profile_window_start", t=t, window=self._window, wall_ns=wall_ns)
        return True

    def _prime(self) -> None:
        """Start and stop an empty profiler on the thread that imported torch, so that Kineto's
        one-time set-up runs there (it prints an ERROR line on any other thread)."""
        self._kineto_used = True
        profile = self.torch.autograd.profiler.profile
        with _Quiet():
            empty = profile(use_kineto=True, use_device=None)
            empty.__enter__()
            empty.__exit__(None, None, None)

    def _stop(self, why: str | None = None) -> None:
        """Stop and write this thread's window (only its own thread may: see module doc)."""
        window, steps = self._window or "window", self._window_steps
        if self._prof is None or self._owner != threading.get_ident():
            return
        # Handed over in a list, so that no frame of this one keeps the profiler alive (a failed
        # write must release it: see _stop_and_save).
        held, self._prof = [self._prof], None
        self._guards.__dict__.pop("guard", None)
        try:
            self._stop_and_save(held, window, steps, why)
        finally:
            # Released only once this thread's profiler is stopped and written: no other thread
            # starts one meanwhile.
            with self._claim:
                self._owner = None

    def _stop_and_save(self, held: list[Any], window: str, steps: int, why: str | None) -> None:
        prof = held.pop()
        started = time.monotonic_ns()
        prof.stop()
        stopped = time.monotonic_ns()
        writer = self.session.writer
        if writer.stopped:
            return  # the recording stopped (a full disk): nothing more is written
        folder = self.session.proc_dir / KINETO_DIR
        failure: OSError | None = None
        try:
            raw = save_json(prof, folder, window, self._exporter.pending_bytes())
        except WindowSkipped as skipped:
            self._skipped(window, steps, str(skipped))
            return
        except OSError as exc:
            failure = exc.with_traceback(None)  # its frames hold the profiler: see below
        if failure is not None:
            # kineto keeps a file it failed to write open (deleted, its space still taken) until
            # the profiler is released: release it before the last event needs the room.
            del prof
            writer.stop(failure, f"{KINETO_DIR}/{window}.json")
            return
        del prof
        saved = time.monotonic_ns()
        # The window ended at `stopped` (its steps are those before it): the event carries that
        # moment, whenever the gzip lets it be written.
        fields = {
            "t": stopped,
            "window": window,
            "steps": steps,
            "export_s": (saved - started) / 1e9,
            "stop_s": (stopped - started) / 1e9,
            "save_s": (saved - stopped) / 1e9,
            **({"ended_by": why} if why else {}),
        }

        def done(packed: Path | None, error: BaseException | None, gzip_s: float) -> None:
            with self._emit_lock:
                reported(packed, error, gzip_s)

        def reported(packed: Path | None, error: BaseException | None, gzip_s: float) -> None:
            if packed is not None:
                self.session.emit(
                    "profile_window_end",
                    file=f"{KINETO_DIR}/{packed.name}",
                    gzip_s=round(gzip_s, 6),
                    **fields,
                )
            elif isinstance(error, OSError) and not writer.stopped:
                writer.stop(error, f"{KINETO_DIR}/{window}.json.gz")
            else:
                self._skipped(window, steps, f"its compression failed: {error}")

        self._exporter.submit(raw, done)

    def _skipped(self, window: str, steps: int, reason: str) -> None:
        self.session.emit("profile_window_skipped", window=window, steps=steps, reason=reason)

    def close(self) -> None:
        """At exit: this thread's window is written; another live thread's is left alone
        (stopping it here could crash the program) and reported; compressions are joined."""
        if self._prof is not None:
            if self.active:
                self._stop()
            else:
                self._orphans.append(self._prof)
                self._skipped(
                    self._window or "window",
                    self._window_steps,
                    "its thread was still running at exit, and torch's profiler can be stopped "
                    "only by the thread that started it",
                )
                self._prof, self._owner = None, None
        for raw in self._exporter.drain(EXPORT_JOIN_S):
            raw.unlink(missing_ok=True)  # nothing named in the trace is left half-written
            self._skipped(
                raw.name.removesuffix(".json"),
                0,
                f"its compression was still running {EXPORT_JOIN_S:.0f} s after the program ended",
            )

    # -- threads and forks ------------------------------------------------------------------------

    def _thread_ended(self, serial: int) -> None:
        """The thread-local guard of window `serial` was released: its thread is ending."""
        if self._serial == serial and self.active:
            self._stop("thread_end")

    def _before_fork(self) -> None:
        if self.active:  # the forking thread's own window ends here, in the parent
            self.session.guarded("profiling.fork", self._stop, "fork")
        # An event being written by the export thread is finished first (microseconds).
        self._fork_held = self._emit_lock.acquire(timeout=1.0)

    def _after_fork_in_parent(self) -> None:
        if self._fork_held:
            self._fork_held = False
            self._emit_lock.release()

    def _after_fork_in_child(self) -> None:
        """Drop what was the parent's without touching Kineto (its threads are not here)."""
        try:
            if self._prof is not None:
                self._orphans.append(self._prof)
            self._prof, self._owner = None, None
            self._exporter = WindowExporter()
            self._guards = threading.local()
            self._emit_lock, self._fork_held = threading.Lock(), False
            if self._kineto_used:
                self._forked = True
                _skip_static_destructors()
        except Exception as exc:  # noqa: BLE001 - a fork hook never raises into the program
            self.session.collector_error("profiling.fork_child", exc)

    # -- region markers ---------------------------------------------------------------------------

    def _wrap_torch_compile(self) -> None:
        torch = self.torch
        original = torch.compile
        windows = self

        @functools.wraps(original)
        def compile(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            target = args[0] if args else kwargs.get("model")
            if target is None:  # used as @torch.compile(...): wrap what the decorator returns
                return lambda fn: windows.mark(fn, result(fn))
            return windows.mark(target, result)

        compile.__wrapped__ = original  # type: ignore[attr-defined]
        torch.compile = compile  # type: ignore[attr-defined]

    def mark(self, target: Any, compiled: Any) -> Any:
        """Wrap a compiled callable so that calls inside a window carry a region marker."""
        torch = self.torch
        name = getattr(target, "__qualname__", None) or type(target).__name__
        if getattr(compiled, _MARKED, False):
            return compiled  # `@torch.compile(...)` re-enters torch.compile: marked already
        if isinstance(compiled, torch.nn.Module):
            return self._mark_module(name, compiled)
        if not callable(compiled):
            return compiled
        windows = self
        record_function = torch.profiler.record_function
        is_compiling = torch.compiler.is_compiling
        session = self.session
        get_ident = threading.get_ident

        @functools.wraps(compiled)
        def region(*args: Any, **kwargs: Any) -> Any:
            # Session.pause: call through (read only outside Dynamo's tracing: no guard on it).
            if not is_compiling() and session.paused:
                return compiled(*args, **kwargs)
            if windows._owner != get_ident():  # no window open on this thread
                return compiled(*args, **kwargs)
            calls = windows.session.steps.region_calls
            n = calls.get(name, 0)
            calls[name] = n + 1
            with record_function(f"diag.region:{name}#{n}"):
                return compiled(*args, **kwargs)

        setattr(region, _MARKED, True)
        return region

    def _mark_module(self, name: str, module: Any) -> Any:
        windows = self
        local = threading.local()  # each thread's open markers: a marker ends in its thread

        def pre(mod: Any, args: Any) -> None:
            if windows.active:
                calls = windows.session.steps.region_calls
                n = calls.get(name, 0)
                calls[name] = n + 1
                marker = windows.torch.profiler.record_function(f"diag.region:{name}#{n}")
                marker.__enter__()
                local.__dict__.setdefault("stack", []).append(marker)

        def post(mod: Any, args: Any, output: Any) -> None:
            stack = local.__dict__.get("stack")
            if stack:
                stack.pop().__exit__(None, None, None)

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module


class _ThreadEndGuard:
    """Held in the window's thread's thread-local storage: released when that thread ends
    (CPython clears a thread's locals on the ending thread itself), so a window whose thread
    ends without a step or request end is still stopped by its own thread."""

    def __init__(self, windows: ProfilerWindows, serial: int) -> None:
        self.windows = windows
        self.serial = serial

    def __del__(self) -> None:
        try:
            self.windows.session.guarded(
                "profiling.thread_end", self.windows._thread_ended, self.serial
            )
        except Exception:  # noqa: BLE001,S110 - a finaliser never raises
            pass


class _Quiet:
    """Around diag's own profiler starts: Kineto's log lines and torch's cycle warning off.

    Kineto prints "USDT: ... profiler_start/stop" lines at its default log level; the program
    never asked for a profiler, so keep them quiet. Kineto reads the level when it first starts;
    the variable is put back at once, so the program never sees it. The cycle warning is muted
    for this thread only (`_quiet_cycle_warning`)."""

    def __enter__(self) -> None:
        self.env = "KINETO_LOG_LEVEL" not in os.environ
        if self.env:
            os.environ["KINETO_LOG_LEVEL"] = "6"
        _QUIET.on = True

    def __exit__(self, *exc: object) -> None:
        _QUIET.on = False
        if self.env:
            os.environ.pop("KINETO_LOG_LEVEL", None)


_QUIET = threading.local()


class _SeenWarnings(set):  # type: ignore[type-arg]
    """torch.profiler's warn-once set, which also holds the cycle warning while diag's own
    profiler starts on this thread: torch 2.7-2.12 then skip it, as if already shown. Any other
    caller (the program's own profiler included) sees the set as it was."""

    def __contains__(self, item: object) -> bool:
        if getattr(_QUIET, "on", False) and str(item).startswith(_CYCLE_WARNING):
            return True
        return super().__contains__(item)


def _quiet_cycle_warning(torch: Any) -> None:
    """torch 2.7-2.12 warn "Profiler clears events at the end of each cycle" at a profile's
    first start, cycles or not, through `_warn_once` and its module's `_WARNINGS_SHOWN` set.
    A filter in `warnings` would have to be swapped in and out around the start, for every
    thread at once; this set answers differently only on the thread starting diag's window.
    (acc_events=True silenced it too, at 14-28x the window's stop time.)"""
    module = sys.modules.get("torch.profiler.profiler")
    seen = getattr(module, "_WARNINGS_SHOWN", None)
    if isinstance(seen, set) and not isinstance(seen, _SeenWarnings):
        module._WARNINGS_SHOWN = _SeenWarnings(seen)  # type: ignore[union-attr]


def _skip_static_destructors() -> None:
    """In a forked child of a process that ran Kineto: at exit, flush C stdio and end with the
    exit status before the C++ static destructors registered before the fork run (Kineto's
    joins a thread that is not in this process: it hangs, or aborts with std::system_error).
    Python's own shutdown (atexit, sys.stdout) has run by then. glibc only; elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None)
    on_exit = getattr(libc, "on_exit", None)
    cxa_atexit = getattr(libc, "__cxa_atexit", None)
    if on_exit is None or cxa_atexit is None:
        return
    # Exit handlers run last-registered first: fflush(NULL), then _exit(status).
    on_exit(libc._exit, None)
    cxa_atexit(libc.fflush, None, None)
