"""Load a trace directory and run the registered analyzers over it.

The analyzers live in the `diag.analyzers` package (the top-level analyzers/ folder), imported
here by name so that this module, and `diag check`, load only what they run.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from diag.errors import DiagError
from diag.findings import Finding
from diag.run import load_trace


def _registry() -> ModuleType:
    return importlib.import_module("diag.analyzers")


def analyzer_names() -> list[str]:
    return list(_registry().REGISTRY)


def analyze_trace(path: Path, only: list[str] | None = None) -> list[Finding]:
    registry = _registry()
    names = analyzer_names()
    unknown = [name for name in only or [] if name not in names]
    if unknown:
        raise DiagError(f"unknown analyzer {unknown[0]!r}; choose from {', '.join(names)}")
    trace = load_trace(path)
    if not trace.runs:
        raise DiagError(f"{path}: the trace holds no runs (was the recording interrupted?)")
    findings: list[Finding] = registry.run_analyzers(trace, only)
    return findings
