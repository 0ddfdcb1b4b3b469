"""The recording session inside one process: started by the bootstrap right after `import torch`.

It owns the process's event file and installs the collectors (collectors/registry.py says which,
in what order; they see the session through collectors/protocol.py). Everything here runs inside
the user's program, so each collector is installed defensively: a failure is written to the trace
as a `collector_error` event and the program carries on untouched.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import os
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from diag import __version__
from diag.trace.events import EventWriter
from diag.trace.format import (
    ENV_MAX_SIZE,
    ENV_PROFILE,
    ENV_RUN_LABEL,
    ENV_STANCE,
    ENV_TRACE_DIR,
    EVENTS_FILE,
    RUN_COMPILED,
    env_count,
    env_rank,
    env_world_size,
    process_dir_name,
    run_dir,
)
from diag.trace.processes import process_start_ticks

from . import protocol
from .hooks import INSTALL, Hooks
from .registry import COLLECTORS

_SESSION: Session | None = None


def current_session() -> Session | None:
    return _SESSION


def _rank() -> int | None:
    for name in ("RANK", "LOCAL_RANK"):
        rank = env_rank(os.environ.get(name))  # one reading, shared with the reader
        if rank is not None:
            return rank
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
            max_bytes=env_count(max_size),
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
        #: Every hook diag runs inside the program runs through this (collectors/hooks.py).
        self.hooks = Hooks(self.collector_error)

    def emit(self, event: str, **fields: Any) -> None:
        self.writer.emit(event, **fields)

    def _stopped(self) -> None:
        """The recording stopped (a write failed): every per-step hook only calls through from
        now on, as under `pause`, since nothing it measured could be written."""
        self.paused = True

    def _position(self) -> dict[str, Any]:
        """Where the program was (phase, request, step): what a `recording_stopped` event says."""
        return dict(self.steps.position()) if self.steps is not None else {}

    def announce_adapter(self, name: str, rank: int = 3, stand_down: Any = None) -> None:
        """Record which adapter drives the step boundaries (once per process).

        An adapter that only infers boundaries (adapters/inferred.py) passes a lower `rank` and
        a `stand_down` callback: the first adapter of a higher rank replaces it (the event is
        written again) and the callback closes what the inferring one had open. `diag.phase`
        announces diag.api at rank 2: above inference, below an adapter that reports the
        requests inside the phase (a diffusers pipeline's), which then names the process's
        adapter. The same adapter at a higher rank takes the rank without a second event.
        """
        if rank <= self.adapter_rank:
            return
        if name == self.adapter and stand_down is None and self._adapter_stand_down is None:
            self.adapter_rank = rank
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
        """A collector failed: record it (the hook is off from now on) and keep the program
        running."""
        installing = where.startswith(INSTALL)
        try:
            self.emit(
                "collector_error",
                where=where.removeprefix(INSTALL),
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(limit=8),
                disabled=True,
                **({"installing": True} if installing else {}),
            )
        except Exception:  # noqa: BLE001,S110 - never let diag break the program
            pass

    def guarded(self, where: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` as the hook `where`: what it raises is recorded and turns the
        hook off (collectors/hooks.py); None then."""
        return self.hooks.run(where, fn, *args, **kwargs)

    def install(self, name: str, fn: Any, *args: Any) -> Any:
        """Install one collector; a failure records why and leaves the program untouched."""
        return self.hooks.run(INSTALL + name, fn, *args)

    def start(self) -> None:
        torch = self.torch
        if self.writer.stopped:  # not even the event file could be made: record nothing here
            return
        self._process_start()
        if self.stance == "force_eager":
            self.guarded("stance", torch.compiler.set_stance, "force_eager")
        from .importhook import on_import

        session: protocol.Session = self  # the contract every collector reads (mypy checks it)
        for collector in COLLECTORS:  # collectors/registry.py: which, in what order
            if not collector.wanted():
                continue
            install = collector.load()
            if collector.on_import:
                for module_name in collector.on_import:
                    on_import(
                        module_name,
                        functools.partial(self._install_on_import, collector.name, install),
                    )
                continue
            if collector.guarded:
                installed = self.install(collector.name, install, session)
            else:
                installed = install(session)
            if collector.keep is not None:
                setattr(self, collector.keep, installed)
        # An exception in an atexit hook is printed on the program's stderr: guarded too.
        atexit.register(self.guarded, "end", self.end)

    def _install_on_import(self, name: str, install: Any, module: ModuleType) -> None:
        """Install a collector that waits for a module of the program (magi_compiler)."""
        self.install(name, install, self, module)

    def _process_start(self, ppid: int | None = None) -> None:
        torch = self.torch
        self.emit(
            "process_start",
            pid=self.pid,
            ppid=os.getppid() if ppid is None else ppid,
            rank=self.rank,
            world_size=env_world_size(os.environ.get("WORLD_SIZE")),
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

    def forked(self) -> None:
        """In a child made by os.fork() (multiprocessing's fork start method, a pre-forking
        server): the child is a process of its own. Its events go to its own folder under its
        own pid, beginning with its process_start (ppid: the parent); its requests start
        afresh (a request open in the parent at the fork is the parent's). A forked child has
        no rank of its own (RANK is the parent's). Never raises."""
        try:
            parent, self.pid, self.rank = self.pid, os.getpid(), None
            self.proc_dir = self.proc_dir.parent / process_dir_name(self.pid, None)
            self.writer.forked(self.proc_dir / EVENTS_FILE)
            if self.steps is not None:
                phase = self.steps.process_phase
                self.steps = type(self.steps)(self)
                self.steps.process_phase = phase
            self._process_start(ppid=parent)
            # multiprocessing's children end with os._exit (no atexit) after its own exit
            # function ran the finalizers; a child clears them first, then runs the
            # after-fork callbacks: the finalizer that writes process_end is made there.
            util = sys.modules.get("multiprocessing.util")
            if util is not None:
                util.register_after_fork(self, _finalize_in_child)
        except Exception as exc:  # noqa: BLE001 - never let diag break the child
            self.collector_error("fork", exc)

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
        self.emit("process_end", gpu=self._gpu_name(), **self._own_work())
        self.writer.close()

    def _own_work(self) -> dict[str, Any]:
        """diag's own work at step ends, in all and the longest (collectors/steps.py)."""
        steps = self.steps
        if steps is None or not steps.steps_done:
            return {}
        return {
            "step_end_work_s": steps.end_work_ns / 1e9,
            "step_end_work_max_s": steps.end_work_max_ns / 1e9,
            "steps_ended": steps.steps_done,
        }

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
    os.register_at_fork(after_in_child=_after_fork_in_child)
    return session


def _finalize_in_child(session: Session) -> None:
    import multiprocessing.util

    multiprocessing.util.Finalize(None, session.end, exitpriority=-(2**20))


def _after_fork_in_child() -> None:
    session = _SESSION
    if session is not None and not session.ended and not session.writer.stopped:
        session.forked()
