"""`--step-fn`, `--request-fn`, `--warmup-fn MODULE:QUALNAME`: each call of the named function
is one step, one request, or runs in the warmup phase. The function is wrapped where it is
defined, as soon as its module is imported."""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

from diag.trace.format import ENV_REQUEST_FN, ENV_STEP_FN, ENV_WARMUP_FN

from ..importhook import on_import

if TYPE_CHECKING:
    from ..protocol import Session
    from ..steps import StepTracker


def _wrap(session: Session, kind: str, fn: Any) -> Any:
    steps: StepTracker = session.steps
    hook = f"adapter.generic.{kind}"

    def begin() -> None:
        session.announce_adapter("generic")
        if kind == "step":
            steps.step_start()
        elif kind == "request":
            steps.request_start()
        else:
            steps.set_phase("warmup")

    def finish() -> None:
        if kind == "step":
            steps.step_end()
        elif kind == "request":
            steps.request_end()
        else:
            steps.request_end()
            steps.set_phase("live")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if session.paused:  # Session.pause: no per-step work
            return fn(*args, **kwargs)
        # diag's work around the program's call never raises into it (collectors/hooks.py);
        # the program's call, its result and its exceptions pass unchanged.
        session.guarded(hook, begin)
        try:
            return fn(*args, **kwargs)
        finally:
            session.guarded(hook, finish)

    return wrapper


def _install_one(session: Session, kind: str, target: str, module: ModuleType) -> None:
    owner: Any = module
    parts = target.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    original = getattr(owner, parts[-1])
    if isinstance(original, (staticmethod, classmethod)):
        raise TypeError(f"{target}: static and class methods are not supported")
    setattr(owner, parts[-1], _wrap(session, kind, original))


def install(session: Session) -> None:
    for kind, env in (
        ("step", ENV_STEP_FN),
        ("request", ENV_REQUEST_FN),
        ("warmup", ENV_WARMUP_FN),
    ):
        spec = os.environ.get(env)
        if not spec:
            continue
        module_name, _, qualname = spec.partition(":")

        def hook(
            module: ModuleType, kind: str = kind, qualname: str = qualname, spec: str = spec
        ) -> None:
            session.guarded(
                f"adapter.generic {spec}", _install_one, session, kind, qualname, module
            )

        on_import(module_name, hook)
