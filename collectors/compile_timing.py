"""Compile time by phase and cache hits, per compile (`compile_timing` events).

A handler on `torch.__trace` (as collectors/compiles.py) reads each `compilation_metrics` record
and its `_runtime` twin (autotuning and CUDA-graph capture done at the first call) through
diag.trace.compile_metrics, so recorded runs and imported logs read alike.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from diag.trace.compile_metrics import breakdown

from .structured import listen

if TYPE_CHECKING:
    from .protocol import Session

_KEYS = ("compilation_metrics", "compilation_metrics_runtime")


class CompileTiming:
    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def install(cls, session: Session) -> CompileTiming:
        collector = cls(session)
        listen(session, "compile_timing", collector.on_structured)
        return collector

    def on_structured(self, metadata: dict[str, Any], record: logging.LogRecord) -> None:
        for key in _KEYS:
            if isinstance(metadata.get(key), dict):
                self.on_metrics(metadata[key], runtime=key.endswith("_runtime"))

    def on_metrics(self, metrics: dict[str, Any], runtime: bool) -> None:
        phases = breakdown(metrics)
        if not phases:
            return
        compiles = self.session.compiles
        steps = self.session.steps
        self.session.emit(
            "compile_timing",
            compile_id=str(metrics.get("compile_id") or "?"),
            epoch=compiles.epoch if compiles is not None else 0,
            runtime=runtime,
            **phases,
            **(steps.position() if steps is not None else {}),
        )
