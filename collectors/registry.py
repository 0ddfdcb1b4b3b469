"""The collectors a session installs, in the order it installs them.

session.py walks this table instead of naming each collector, so the session imports no
collector and the collectors import only the session's contract (collectors/protocol.py): no
import goes both ways. Each collector's module is imported only when its turn comes, and one
that is switched off is never imported: the record path stays light.

The order matters: a collector may read what an earlier one left on the session (cudagraphs
hooks into `session.compiles` as it installs; the adapters drive `session.steps`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diag.trace.format import ENV_METRICS_JOIN


@dataclass(frozen=True)
class Collector:
    """One collector: where its install function lives and what the session does with it."""

    #: Its hook name: a failed install is recorded as `install:<name>` (and DIAG_FAULTS names it
    #: so).
    name: str
    #: Its module under diag.collectors.
    module: str
    #: The callable there that installs it, called with the session (dotted: a class's method).
    attr: str
    #: The session's attribute that keeps what the install returned (None when it failed).
    keep: str | None = None
    #: Installed only when this environment variable is "1".
    env: str | None = None
    #: Installed when one of these modules is imported (the module is passed after the session),
    #: rather than when the session starts.
    on_import: tuple[str, ...] = ()
    #: False for the step tracker alone: built outside the hook guard, as every per-step hook
    #: reads it; a failure there ends the start (the bootstrap records why).
    guarded: bool = True

    def wanted(self) -> bool:
        return self.env is None or os.environ.get(self.env) == "1"

    def load(self) -> Callable[..., Any]:
        """Import the collector's module (now, not before) and return its install callable."""
        found: Any = importlib.import_module(f".{self.module}", __package__)
        for name in self.attr.split("."):
            found = getattr(found, name)
        install: Callable[..., Any] = found
        return install


COLLECTORS: tuple[Collector, ...] = (
    Collector("compiles", "compiles", "CompileCollector.install", keep="compiles"),
    Collector("stances", "stances", "Stances.install"),
    Collector("cache", "cache", "CacheCollector", keep="cache"),
    Collector("profiling", "profiling", "ProfilerWindows.install", keep="profiler"),
    Collector("shapes", "shapes", "ShapeCollector.install", keep="shapes"),
    Collector("compile_timing", "compile_timing", "CompileTiming.install"),
    Collector("trace_boundary", "trace_boundary", "TraceBoundary.install"),
    Collector("cudagraphs", "cudagraphs", "CudaGraphCollector.install"),
    Collector("torch_trace", "torch_trace_guard", "install"),
    Collector("steps", "steps", "StepTracker", keep="steps", guarded=False),
    Collector("hygiene", "hygiene", "install"),
    Collector("gc_pauses", "gc_pauses", "GcPauses.install", keep="gc_pauses"),
    Collector("crash", "crash", "install"),
    Collector("shutdown", "shutdown", "install"),
    Collector("metrics_join", "metrics_join", "install", env=ENV_METRICS_JOIN),
    Collector("adapters", "adapters", "install_adapters"),
    Collector("magi", "magi", "install", on_import=("magi_compiler", "magi_compiler.api")),
)
