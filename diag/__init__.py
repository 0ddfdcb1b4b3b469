"""diag: profiling and diagnostics for torch.compile'd diffusion-transformer inference.

`diag.open(PATH)` opens a trace for a notebook (diag.notebook, docs/API.md); it is looked up
on first use, so `import diag` (and every CLI path) stays free of pandas.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "open":
        from diag.notebook import open as open_trace

        return open_trace
    raise AttributeError(f"module 'diag' has no attribute {name!r}")
