"""diag: profiling and diagnostics for torch.compile'd diffusion-transformer inference.

`diag.open(PATH)` opens a trace for a notebook (diag.notebook, docs/API.md); it is looked up
on first use, so `import diag` (and every CLI path) stays free of pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports it on first use
    from diag.notebook import open as open  # noqa: A004

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "open":
        from diag.notebook import open as open_trace

        return open_trace
    raise AttributeError(f"module 'diag' has no attribute {name!r}")
