"""The recording session inside one process: started by the bootstrap right after `import torch`.

It owns the process's event file and installs the collectors. Everything here runs inside the
user's program, so each collector is installed defensively: a failure is written to the trace as
a `collector_error` event and the program carries on untouched.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from diag import __version__
from diag.processes import process_start_ticks
from diag.trace.events import EventWriter
from diag.trace.format import (
    ENV_MAX_SIZE,
    ENV_METRICS_JOIN,
    ENV_PROFILE,
    ENV_RUN_LABEL,
    ENV_STANCE,
    ENV_TRACE_DIR,
    EVENTS_FILE,
    RUN_COMPILED,
    process_dir_name,
    run_dir,
)

_SESSION: Session | None = None


def current_session() -> Session | None:
    return _SESSION


def _rank() -> int | None:
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name)
        if value is not None and value.isdigit():
            return int(value)
    return None


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class Session:
    def __init__(self, trace_dir: Path, label: str) -> None:
        import torch

        self.torch = torch
        self.pid = os.getpid()
        self.rank = _rank()
        self.label = label
        self.proc_dir = run_dir(trace_dir, label) / process_dir_name(self.pid, self.rank)
        max_size = os.environ.get(ENV_MAX_SIZE, "")
        self.writer = EventWriter(
            self.proc_dir / EVENTS_FILE,
            max_bytes=int(max_size) if max_size.isdigit() else 0,
            position=self._position,
            on_stop=self._stopped,
        )
        self.profile_spec = os.environ.get(ENV_PROFILE, "default")
        self.stance = os.environ.get(ENV_STANCE, "default")
        self.ended = False
        #: Per-step and per-call collection switched off (see `pause`): read by every hook
        #: that runs per step or per call, which then only calls through.
        self.paused = False
        # Filled by the collectors as they install.
        self.steps: Any = None
        self.compiles: Any = None
        self.cache: Any = None
        self.profiler: Any = None
        self.shapes: Any = None
        self.gc_pauses: Any = None
        self.adapter: str | None = None
        self.adapter_rank = -1
        self._adapter_stand_down: Any = None

    def emit(self, event: str, **fields: Any) -> None:
        self.writer.emit(event, **fields)

    def _stopped(self) -> None:
        """The recording stopped (a write failed): every per-step hook only calls through from
        now on, as under `pause`, since nothing it measured could be written."""
        self.paused = True

    def _position(self) -> dict[str, Any]:
        """Where the program was (phase, request, step): what a `recording_stopped` event says."""
        return dict(self.steps.position()) if self.steps is not None else {}

    def announce_adapter(self, name: str, rank: int = 2, stand_down: Any = None) -> None:
        """Record which adapter drives the step boundaries (once per process).

        An adapter that only infers boundaries (adapters/inferred.py) passes a lower `rank` and
        a `stand_down` callback: the first adapter of a higher rank replaces it (the event is
        written again) and the callback closes what the inferring one had open.
        """
        if rank <= self.adapter_rank:
            return
        previous = self._adapter_stand_down
        self.adapter, self.adapter_rank, self._adapter_stand_down = name, rank, stand_down
        if previous is not None:
            self.guarded("adapter.stand_down", previous)
        self.emit("adapter", name=name, **({"inferred": True} if stand_down is not None else {}))

    def pause(self) -> None:
        """Switch off every collector's per-step and per-call work (bench/
        record_overhead_interleaved.py measures diag's cost by requests with it off and on, in
        one process).

        Meant for between requests: a step or request still open is closed first. While paused,
        the step tracker, the adapters' hooks, the call-shape sampler, the region markers and the
        compiled-call wrappers only call through; compiles are still recorded (they are not
        per-step work). Nothing Dynamo traces reads the switch, so guards are unchanged.
        """
        if self.paused:
            return
        if self.steps is not None:
            self.guarded("steps.pause", self.steps.request_end)
        self.paused = True
        self.emit("collectors_paused", paused=True, t=time.monotonic_ns())

    def resume(self) -> None:
        """Switch the per-step and per-call work back on (see `pause`)."""
        if not self.paused:
            return
        self.paused = False
        self.emit("collectors_paused", paused=False, t=time.monotonic_ns())

    def collector_error(self, where: str, exc: BaseException) -> None:
        """A collector failed: record it and keep the program running."""
        try:
            self.emit(
                "collector_error",
                where=where,
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(limit=8),
            )
        except Exception:  # noqa: BLE001,S110 - never let diag break the program
            pass

    def guarded(self, where: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001
            self.collector_error(where, exc)
            return None

    def start(self) -> None:
        torch = self.torch
        if self.writer.stopped:  # not even the event file could be made: record nothing here
            return
        self.emit(
            "process_start",
            pid=self.pid,
            ppid=os.getppid(),
            rank=self.rank,
            world_size=int(os.environ["WORLD_SIZE"])
            if os.environ.get("WORLD_SIZE", "").isdigit()
            else None,
            argv=sys.argv,
            wall_ns=time.time_ns(),
            start_ticks=process_start_ticks(self.pid),
            label=self.label,
            stance=self.stance,
            versions={
                "python": sys.version.split()[0],
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "triton": _package_version("triton"),
                "diag": __version__,
            },
        )
        if self.stance == "force_eager":
            self.guarded("stance", torch.compiler.set_stance, "force_eager")
        from . import cache, compile_timing, compiles, hygiene, profiling, shapes, steps
        from .adapters import install_adapters

        self.compiles = self.guarded("compiles", compiles.CompileCollector.install, self)
        from .stances import Stances

        self.guarded("stances", Stances.install, self)
        self.cache = self.guarded("cache", cache.CacheCollector, self)
        self.profiler = self.guarded("profiling", profiling.ProfilerWindows.install, self)
        self.shapes = self.guarded("shapes", shapes.ShapeCollector.install, self)
        self.guarded("compile_timing", compile_timing.CompileTiming.install, self)
        from .trace_boundary import TraceBoundary

        self.guarded("trace_boundary", TraceBoundary.install, self)
        from .cudagraphs import CudaGraphCollector

        self.guarded("cudagraphs", CudaGraphCollector.install, self)
        from . import torch_trace_guard

        self.guarded("torch_trace", torch_trace_guard.install, self)
        self.steps = steps.StepTracker(self)
        self.guarded("hygiene", hygiene.install, self)
        from .gc_pauses import GcPauses

        self.gc_pauses = self.guarded("gc_pauses", GcPauses.install, self)
        from . import crash

        self.guarded("crash", crash.install, self)
        from . import shutdown

        self.guarded("shutdown", shutdown.install, self)
        if os.environ.get(ENV_METRICS_JOIN) == "1":
            from . import metrics_join

            self.guarded("metrics_join", metrics_join.install, self)
        self.guarded("adapters", install_adapters, self)
        from . import magi
        from .importhook import on_import

        for name in ("magi_compiler", "magi_compiler.api"):
            on_import(name, lambda module: self.guarded("magi", magi.install, self, module))
        atexit.register(self.end)

    def end(self) -> None:
        """At exit: the final cache entries, the profiler flushed, the process's last event."""
        if self.ended:
            return
        self.ended = True
        if self.steps is not None:
            from .adapters.inferred import close_all

            self.guarded("inferred.end", close_all)
            self.guarded("steps.end", self.steps.close)
        if self.gc_pauses is not None:
            self.guarded("gc_pauses.end", self.gc_pauses.flush)
        if self.profiler is not None:
            self.guarded("profiling.end", self.profiler.close)
        if self.shapes is not None:
            self.guarded("shapes.end", self.shapes.close)
        if self.cache is not None:
            self.guarded("cache.end", self.cache.snapshot, "exit", True)
        self.emit("process_end", gpu=self._gpu_name())
        self.writer.close()

    def _gpu_name(self) -> str | None:
        # Never initialise CUDA ourselves: only name the GPU if the program used one.
        torch = self.torch
        try:
            if torch.cuda.is_initialized():
                return str(torch.cuda.get_device_name())
        except Exception:  # noqa: BLE001
            return None
        return None


def _is_helper_process() -> bool:
    """torch's own worker processes (inductor's compile workers) are not the program."""
    argv0 = sys.argv[0] if sys.argv else ""
    return "compile_worker" in argv0 and "_inductor" in argv0


def start_session() -> Session | None:
    """Called once per process by the bootstrap, right after torch finished importing."""
    global _SESSION
    trace_dir = os.environ.get(ENV_TRACE_DIR)
    if _SESSION is not None or not trace_dir or _is_helper_process():
        return _SESSION
    session = Session(Path(trace_dir), os.environ.get(ENV_RUN_LABEL, RUN_COMPILED))
    _SESSION = session
    session.start()
    return session
