"""LightX2V: hooks set from outside on the runner instance (see FACTS).

`RUNNER_REGISTER[model_cls](config)` builds the runner; its `init_modules` runs `self.warmup()`
at the end (BaseRunner.__init_subclass__ wraps it), so hooks must exist before init_modules. We
wrap the registry lookup to reach each runner class, and that class's `__init__` to reach the
instance, then set instance attributes: `runner.warmup` (the warmup phase), `runner.run_pipeline`
(one request) and, once the model exists, `runner.model.infer` (one step; index in
`model.scheduler.step_index`, shape in `scheduler.latents.shape`). `step_pre` is not patched:
many schedulers override it without calling super().
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session

_HOOKED = "__diag_hooked__"
_CLASS_HOOKED = "__diag_class_hooked__"


def _hooked(obj: Any) -> bool:
    """Set on this very object (an instance flag must not be read through its class)."""
    return bool(getattr(obj, "__dict__", {}).get(_HOOKED, False))


def _shape(scheduler: Any) -> list[int] | None:
    latents = getattr(scheduler, "latents", None)
    shape = getattr(latents, "shape", None)
    return [int(s) for s in shape] if shape is not None else None


def hook_model(session: Session, model: Any) -> None:
    """`model.infer` is one denoising step."""
    if model is None or _hooked(model):
        return
    infer = model.infer
    steps = session.steps

    @functools.wraps(infer)
    def step_infer(*args: Any, **kwargs: Any) -> Any:
        scheduler = getattr(model, "scheduler", None)
        index = getattr(scheduler, "step_index", None)
        steps.step_start(index if isinstance(index, int) else None, _shape(scheduler))
        try:
            return infer(*args, **kwargs)
        finally:
            steps.step_end()

    model.infer = step_infer
    setattr(model, _HOOKED, True)


def hook_runner(session: Session, runner: Any, adapter_name: str) -> None:
    """Set the phase, request and step hooks on one runner instance."""
    if _hooked(runner):
        return
    setattr(runner, _HOOKED, True)
    steps = session.steps
    warmup = runner.warmup
    run_pipeline = runner.run_pipeline

    @functools.wraps(warmup)
    def hooked_warmup(*args: Any, **kwargs: Any) -> Any:
        session.announce_adapter(adapter_name)
        hook_model(session, getattr(runner, "model", None))
        steps.set_phase("warmup")
        try:
            return warmup(*args, **kwargs)
        finally:
            steps.request_end()
            steps.set_phase("live")

    @functools.wraps(run_pipeline)
    def hooked_run_pipeline(*args: Any, **kwargs: Any) -> Any:
        session.announce_adapter(adapter_name)
        hook_model(session, getattr(runner, "model", None))
        request = args[0] if args else None
        request_id = getattr(request, "request_id", None)
        shape = getattr(request, "shape", None)
        dims = (
            [int(getattr(shape, a)) for a in ("frames", "height", "width")]
            if shape is not None and hasattr(shape, "frames")
            else None
        )
        steps.request_start(
            request_id if isinstance(request_id, str) else None,
            dims,
            getattr(request, "steps", None),
        )
        try:
            return run_pipeline(*args, **kwargs)
        finally:
            steps.request_end()

    runner.warmup = hooked_warmup
    runner.run_pipeline = hooked_run_pipeline


def hook_runner_class(session: Session, cls: type, adapter_name: str) -> None:
    """Hook every instance of `cls` right after its __init__ (before init_modules runs)."""
    if cls.__dict__.get(_CLASS_HOOKED, False):
        return
    original_init = cls.__init__  # type: ignore[misc]

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if type(self) is cls or not type(self).__dict__.get(_CLASS_HOOKED, False):
            session.guarded("adapter.hook_runner", hook_runner, session, self, adapter_name)

    cls.__init__ = __init__  # type: ignore[misc]
    setattr(cls, _CLASS_HOOKED, True)


def install(session: Session, module: ModuleType) -> None:
    registry = getattr(module, "RUNNER_REGISTER", None)
    if registry is None:
        return
    registry_type = type(registry)
    original_getitem = registry_type.__getitem__

    def __getitem__(self: Any, key: Any) -> Any:
        cls = original_getitem(self, key)
        if self is registry and isinstance(cls, type):
            session.guarded("adapter.lightx2v", hook_runner_class, session, cls, "lightx2v")
        return cls

    registry_type.__getitem__ = __getitem__  # type: ignore[method-assign]
