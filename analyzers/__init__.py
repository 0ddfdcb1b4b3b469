"""One analyzer per module: a pure function `analyze(trace) -> list[Finding]`, registered here.

Analyzers read the Run model (diag.trace.run) and nothing else: no torch, no Textual, no plotly.
Modules are imported on demand so that `diag check` loads only the analyzers its policy needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from diag.findings.model import Finding
from diag.trace.run import Trace

Analyzer = Callable[[Trace], list[Finding]]

#: Analyzer name -> module (in this package) defining `analyze(trace)`.
REGISTRY: dict[str, str] = {
    "live-compile": "live_compiles",
    "step0-spike": "step0_spike",
    "guard-churn": "guard_churn",
    "recompile-limit": "recompile_limit",
    "recompiles": "recompiles",
    "cache-bloat": "cache_bloat",
    "graph-breaks": "graph_breaks",
    "dynamic-shapes": "dynamic_shapes",
    "compile-time": "compile_time",
    "trace-boundary": "trace_boundary",
    "cudagraphs": "cudagraphs",
    "warmup-hygiene": "hygiene",
    "magi-compile": "magi",
    "kernel-routing": "kernel_routing",
    "trace-diff": "trace_diff",
    "offload-bound": "offload_bound",
    "rank-divergence": "rank_divergence",
    "compile-failure": "failures",
    "crash": "crashes",
    "stances": "stances",
}


def get_analyzer(name: str) -> Analyzer:
    module = importlib.import_module(f"{__name__}.{REGISTRY[name]}")
    analyze: Analyzer = module.analyze
    return analyze


def run_analyzers(trace: Trace, only: list[str] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    for name in only or list(REGISTRY):
        findings.extend(get_analyzer(name)(trace))
    return findings
