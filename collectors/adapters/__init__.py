"""Adapters report phases, requests and steps for frameworks that cannot be annotated by hand.

Each adapter waits for its framework's module to be imported and then hooks it from outside;
the first one that reports anything is named in the trace (`adapter` event) and in the summary.
Two of them only infer steps (adapters/inferred.py): diffusers models called outside a pipeline,
and, for any other program, the outermost calls into compiled code; both give way to an adapter
that knows the steps, and the compiled-calls fallback stays off where one is known to come.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

from diag.trace.format import ENV_REQUEST_FN, ENV_STEP_FN, ENV_WARMUP_FN

from ..importhook import on_import
from . import compiled_calls, diffusers, fixtures, generic, lightx2v

if TYPE_CHECKING:
    from ..protocol import Session


def _knows_steps(install: Any) -> Any:
    """An adapter that will report the program's steps: the compiled-calls fallback stays off."""

    def install_then_turn_off(session: Session, module: ModuleType) -> None:
        compiled_calls.turn_off()
        install(session, module)

    return install_then_turn_off


def install_adapters(session: Session) -> None:
    session.install("adapter.compiled-calls", compiled_calls.install, session)
    if any(os.environ.get(env) for env in (ENV_STEP_FN, ENV_REQUEST_FN, ENV_WARMUP_FN)):
        compiled_calls.turn_off()
    generic.install(session)
    on_import("diag.api", lambda module: compiled_calls.turn_off())
    on_import(
        "diag.fixtures.runner",
        lambda module: session.install(
            "adapter.fixtures", _knows_steps(fixtures.install), session, module
        ),
    )
    on_import(
        "lightx2v.utils.registry_factory",
        lambda module: session.install(
            "adapter.lightx2v", _knows_steps(lightx2v.install), session, module
        ),
    )
    on_import(
        "diffusers.pipelines.pipeline_utils",
        lambda module: session.install(
            "adapter.diffusers.pipelines", diffusers.install, session, module
        ),
    )
    on_import(
        "diffusers.schedulers.scheduling_utils",
        lambda module: session.install(
            "adapter.diffusers.schedulers", diffusers.install_schedulers, session, module
        ),
    )
    on_import(
        "diffusers.models.modeling_utils",
        lambda module: session.install(
            "adapter.diffusers.models", diffusers.install_models, session, module
        ),
    )
