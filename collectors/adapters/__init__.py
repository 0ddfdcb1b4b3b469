"""Adapters report phases, requests and steps for frameworks that cannot be annotated by hand.

Each adapter waits for its framework's module to be imported and then hooks it from outside;
the first one that reports anything is named in the trace (`adapter` event) and in the summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..importhook import on_import
from . import diffusers, fixtures, generic, lightx2v

if TYPE_CHECKING:
    from ..session import Session


def install_adapters(session: Session) -> None:
    generic.install(session)
    on_import(
        "diag.fixtures.runner",
        lambda module: session.guarded("adapter.fixtures", fixtures.install, session, module),
    )
    on_import(
        "lightx2v.utils.registry_factory",
        lambda module: session.guarded("adapter.lightx2v", lightx2v.install, session, module),
    )
    on_import(
        "diffusers.pipelines.pipeline_utils",
        lambda module: session.guarded("adapter.diffusers", diffusers.install, session, module),
    )
