"""torch.profiler windows over chosen steps, and region markers around compiled callables.

A window's profiler is started before the window's first step begins (at the request start, or
at the end of the step before), so the profiler's own start-up lands in no measured step; its
trace is exported after the last step ends, and at the latest after the request's last step
(when the adapter declared the step count) or when the request ends: a window never runs on
into what follows the steps (a VAE decode, a video save) nor into the next request's steps.
Steps inside a window are marked `profiled`. The export is budgeted (kineto_export.py): a
window that would not fit on the trace's disk is skipped with why (`profile_window_skipped`).

Dynamo drops `record_function` inside a compiled frame, so the marker is placed around the
compiled callable, outside the frame: `diag.region:<function>#<n>` for the n-th call in the
step. The eager baseline (`set_stance("force_eager")`) calls the same wrappers, so kernels of the
same call line up in both runs. Markers cost a flag test per call outside windows.
"""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING, Any

from diag.profilespec import ProfileSpec, parse_profile_spec
from diag.trace.format import KINETO_DIR, safe_name

from .kineto_export import WindowSkipped, export_window

if TYPE_CHECKING:
    from .session import Session
    from .steps import StepTracker

#: Set on the callables `mark` returns (functools.wraps carries it to outer wrappers).
_MARKED = "_diag_region"


class ProfilerWindows:
    def __init__(self, session: Session, spec: ProfileSpec) -> None:
        self.session = session
        self.spec = spec
        self.torch = session.torch
        self.active = False
        self._prof: Any = None
        self._window: str | None = None
        self._window_steps = 0
        self._steps_left = 0
        self._seen_shapes: set[tuple[int, ...]] = set()
        self._steady_done = False
        self._steady_window: str | None = None
        self._steady_left = spec.steady  # steady steps still to profile
        self.windows = 0

    @classmethod
    def install(cls, session: Session) -> ProfilerWindows:
        windows = cls(session, parse_profile_spec(session.profile_spec))
        if windows.spec.enabled:
            windows._wrap_torch_compile()
        return windows

    # -- choosing windows -------------------------------------------------------------------------

    def on_request_start(self, tracker: StepTracker) -> None:
        if tracker.phase != "live" or self.active:
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
        if self.active and self._window == self._steady_window and self._steps_left > 0:
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
        if self.active or tracker.phase != "live" or self._steady_done or not self.spec.steady:
            return
        # The steady window starts at the third step of a live request (step index 2).
        if tracker.next_step == 2:
            self._steady_done = True
            self._start(f"{tracker.request_id}-s2-steady", steps=self._steady_left)
            self._steady_window = self._window

    # -- the profiler -----------------------------------------------------------------------------

    def _start(self, window: str, steps: int) -> None:
        if self.session.writer.stopped:
            return  # the recording stopped: no window could be written
        torch = self.torch
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_initialized():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # acc_events=True: torch before 2.13 warns "Profiler clears events at the end of each
        # cycle" on the program's stderr at a profile's start even with no cycles (pytorch
        # #180387); one window is one cycle of its own profile, so accumulating changes nothing.
        self._prof = torch.profiler.profile(activities=activities, acc_events=True)
        # Kineto prints "USDT: ... profiler_start/stop" lines at its default log level; the
        # program never asked for a profiler, so keep them quiet. Kineto reads the level when it
        # first starts; the variable is put back at once, so the program never sees it.
        quiet = "KINETO_LOG_LEVEL" not in os.environ
        if quiet:
            os.environ["KINETO_LOG_LEVEL"] = "6"
        try:
            self._prof.start()
        finally:
            if quiet:
                os.environ.pop("KINETO_LOG_LEVEL", None)
        self.active = True
        self._window = safe_name(window)
        self._window_steps = 0
        self._steps_left = steps
        self.windows += 1
        # The clock anchor of this window: diag's event clock (monotonic) and unix time, which
        # Kineto stamps its events in, read side by side now rather than at process start, so
        # a window hours into a run is cut into steps without the clocks' drift since then.
        t, wall_ns = time.monotonic_ns(), time.time_ns()
        self.session.emit("profile_window_start", t=t, window=self._window, wall_ns=wall_ns)

    def _stop(self) -> None:
        if not self.active or self._prof is None:
            return
        started = time.monotonic_ns()
        prof, self._prof = self._prof, None
        self.active = False
        prof.stop()
        writer = self.session.writer
        if writer.stopped:
            return  # the recording stopped (a full disk): nothing more is written
        failure: OSError | None = None
        try:
            export_window(prof, self.session.proc_dir / KINETO_DIR, self._window or "window")
        except WindowSkipped as skipped:
            self.session.emit(
                "profile_window_skipped",
                window=self._window,
                steps=self._window_steps,
                reason=str(skipped),
            )
            return
        except OSError as exc:
            failure = exc.with_traceback(None)  # its frames hold the profiler: see below
        if failure is not None:
            # kineto keeps a file it failed to write open (deleted, its space still taken) until
            # the profiler is released: release it before the last event needs the room.
            del prof
            writer.stop(failure, f"{KINETO_DIR}/{self._window}.json")
            return
        self.session.emit(
            "profile_window_end",
            window=self._window,
            file=f"{KINETO_DIR}/{self._window}.json.gz",
            steps=self._window_steps,
            export_s=(time.monotonic_ns() - started) / 1e9,
        )

    def close(self) -> None:
        self._stop()

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

        @functools.wraps(compiled)
        def region(*args: Any, **kwargs: Any) -> Any:
            # Session.pause: call through (read only outside Dynamo's tracing: no guard on it).
            if not is_compiling() and session.paused:
                return compiled(*args, **kwargs)
            if not windows.active:
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
        stack: list[Any] = []

        def pre(mod: Any, args: Any) -> None:
            if windows.active:
                calls = windows.session.steps.region_calls
                n = calls.get(name, 0)
                calls[name] = n + 1
                marker = windows.torch.profiler.record_function(f"diag.region:{name}#{n}")
                marker.__enter__()
                stack.append(marker)

        def post(mod: Any, args: Any, output: Any) -> None:
            if stack:
                stack.pop().__exit__(None, None, None)

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module
