"""bench/ holds scripts, not a package: tests load one by path to call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(script: str, name: str | None = None) -> ModuleType:
    """bench/<script>.py as a module named `name` (default: the script's name), registered in
    sys.modules first because a script's dataclasses look their module up."""
    name = name or script
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
