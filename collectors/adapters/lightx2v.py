"""LightX2V: hooks set from outside on the runner instance (see FACTS).

`RUNNER_REGISTER[model_cls](config)` builds the runner (`Register.__getitem__`, a method of the
registry's class); its `init_modules` runs `self.warmup()` at the end (BaseRunner.__init_subclass__
wraps it), so hooks must exist before init_modules. We wrap the registry lookup to reach each
runner class, and that class's `__init__` to reach the instance, then set instance attributes:
`runner.warmup` (the warmup phase), `runner.run_pipeline` (one request) and `runner.model.infer`
(one step; index in `model.scheduler.step_index`, shape in `scheduler.latents.shape`).
A request's shape is known before its first step: `request_shape` has the runner compute it
from this request's `target_shape`, never from `input_info.latent_shape`, which LightX2V fills only
later in the request (its server reuses one `input_info`, so there it still holds the previous
request's). The first step's latents must agree; when they do not, that is a collector error and
the request takes the latents' shape. A request is named by the task id the server put in
`runner.config["task_id"]` before run_pipeline (diag's own id stays `r<N>`).
`step_pre` is not patched: many schedulers override it without calling super().

The model is not always there when warmup or run_pipeline starts: under `lazy_load` (and
`unload_modules`) LightX2V builds it inside `run_warmup` and again inside each request's
`init_run`, and drops it in `end_run`. So the runner class's `__setattr__` also hooks every model
assigned to `runner.model`.

LightX2V's warmup does not call run_pipeline: it runs the step loop itself once per warmup
resolution (`scheduler.prepare`, then `step_pre`/`model.infer`/`step_post` at a few step indices).
Steps outside any request open one implicitly; such an implicit request ends when the next step
restarts (its index does not advance) or comes with other latents' shape, so each warmup
resolution is its own request.
"""

from __future__ import annotations

import functools
import operator
import weakref
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..protocol import Session
    from ..steps import StepTracker

_HOOKED = "__diag_hooked__"
_CLASS_HOOKED = "__diag_class_hooked__"


class _Implicit:
    """The request a step opened by itself (none was open; `request_seq` names it, since ids can
    repeat), and that request's last step."""

    def __init__(self) -> None:
        self.request_seq: int | None = None
        self.step: int | None = None
        self.shape: list[int] | None = None


_implicit: weakref.WeakKeyDictionary[StepTracker, _Implicit] = weakref.WeakKeyDictionary()
#: The request run_pipeline opened whose first step has not come yet (its shape is checked then).
_opened: weakref.WeakKeyDictionary[StepTracker, tuple[int, str]] = weakref.WeakKeyDictionary()


def _hooked(obj: Any) -> bool:
    """Set on this very object (an instance flag must not be read through its class)."""
    return bool(getattr(obj, "__dict__", {}).get(_HOOKED, False))


def _shape(scheduler: Any) -> list[int] | None:
    latents = getattr(scheduler, "latents", None)
    shape = getattr(latents, "shape", None)
    return [int(s) for s in shape] if shape is not None else None


def _ints(value: Any) -> list[int] | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    try:
        return [operator.index(v) for v in value]
    except TypeError:
        return None


def request_shape(runner: Any, input_info: Any) -> list[int] | None:
    """The latent shape the request will denoise, as its steps report it (`scheduler.latents`,
    [C, T, H, W] for Wan), known before its first step.

    LightX2V's request is an `input_info` dataclass (lightx2v/utils/input_info.py) with
    `target_shape` ([height, width] in pixels, from `--target_shape` or the server's request;
    empty: the config's `target_height`/`target_width`) and `latent_shape`. `latent_shape` is not
    read: the runner sets it in `run_input_encoder`, after run_pipeline starts, so here it is
    empty (`lightx2v.infer`) or the previous request's (the server reuses one `input_info`).
    The runner's own `get_latent_shape_with_target_hw()` computes it from this request's
    `target_shape`: run_pipeline's first act is `self.input_info = input_info`, which is done
    here a moment early and then undone. Only for text-to-video/image tasks: for
    image-conditioned ones the shape comes from the image, and the first step's latents give it.
    """
    if _fixture_request(input_info):
        shape = input_info.shape
        return [int(getattr(shape, a)) for a in ("frames", "height", "width")]
    config = getattr(runner, "config", None)
    task = config.get("task") if isinstance(config, dict) else None
    compute = getattr(runner, "get_latent_shape_with_target_hw", None)
    if input_info is None or task not in ("t2v", "t2i") or not callable(compute):
        return None
    missing = object()
    previous = runner.__dict__.get("input_info", missing)
    runner.input_info = input_info
    try:
        return _ints(compute())
    finally:
        if previous is missing:
            del runner.input_info
        else:
            runner.input_info = previous


def _fixture_request(request: Any) -> bool:
    """diag.fixtures' Request: its shape is frames x height x width, not its latents' shape."""
    return hasattr(getattr(request, "shape", None), "frames")


def request_label(runner: Any) -> str | None:
    """The program's own name for the request: the task id LightX2V's server sets in the runner's
    config (`set_config(task_data)`) before each run_pipeline; None for `lightx2v.infer`."""
    config = getattr(runner, "config", None)
    task_id = config.get("task_id") if isinstance(config, dict) else None
    return task_id if isinstance(task_id, str) and task_id else None


def _fmt(shape: list[int] | None) -> str:
    return "x".join(map(str, shape)) if shape else "none"


def check_request_shape(session: Session, steps: StepTracker, actual: list[int] | None) -> None:
    """At a request's first step: the shape the request was opened with must be the latents'
    shape. A disagreement means diag read the request wrong: a collector error that says so,
    and the request's steps (and, in the reader, the request) take the latents' shape."""
    reported = steps.request_shape
    if actual is None or reported is None or reported == actual:
        if reported is None and actual is not None:
            steps.request_shape = actual
        return
    steps.request_shape = actual
    session.emit(
        "collector_error",
        where="adapter.request_shape",
        error=f"request {steps.request_id} was opened with shape {_fmt(reported)}, but its "
        f"first step's latents are {_fmt(actual)}: the request and its steps take the latents' "
        "shape",
        traceback="",
        request_id=steps.request_id,
        reported=reported,
        shape=actual,
    )


def _infer_steps(runner: Any) -> int | None:
    """Denoising steps per request: the scheduler's count (distill schedulers take it from
    `denoising_step_list`), else the config's `infer_steps`."""
    scheduler = getattr(getattr(runner, "model", None), "scheduler", None)
    scheduler = scheduler if scheduler is not None else getattr(runner, "scheduler", None)
    config = getattr(runner, "config", None)
    for value in (
        getattr(scheduler, "infer_steps", None),
        config.get("infer_steps") if isinstance(config, dict) else None,
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _index(scheduler: Any) -> int | None:
    index = getattr(scheduler, "step_index", None)
    if index is None or isinstance(index, bool):
        return None
    try:
        return operator.index(index)
    except TypeError:
        return None


def _start_step(steps: StepTracker, index: int | None, shape: list[int] | None) -> None:
    """step_start, first ending an implicit request that this step does not continue."""
    implicit = _implicit.setdefault(steps, _Implicit())
    if steps.request_id is not None and steps.request_seq == implicit.request_seq:
        restarted = index is not None and implicit.step is not None and index <= implicit.step
        reshaped = shape is not None and implicit.shape is not None and shape != implicit.shape
        if restarted or reshaped:
            steps.request_end()
    opens = steps.request_id is None
    steps.step_start(index, shape)
    if opens:
        implicit.request_seq = steps.request_seq
    implicit.step = steps.step_index
    implicit.shape = shape


def hook_model(session: Session, model: Any) -> None:
    """`model.infer` is one denoising step."""
    if model is None or _hooked(model):
        return
    infer = model.infer
    steps = session.steps

    @functools.wraps(infer)
    def step_infer(*args: Any, **kwargs: Any) -> Any:
        if session.paused:  # Session.pause: no per-step work
            return infer(*args, **kwargs)
        scheduler = getattr(model, "scheduler", None)
        shape = _shape(scheduler)
        opened = _opened.get(steps)
        if opened is not None and opened == (steps.request_seq, steps.request_id):
            del _opened[steps]  # this request's first step: its shape is checked once
            session.guarded("adapter.check_shape", check_request_shape, session, steps, shape)
        _start_step(steps, _index(scheduler), shape)
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
        if session.paused:
            return run_pipeline(*args, **kwargs)
        session.announce_adapter(adapter_name)
        hook_model(session, getattr(runner, "model", None))
        request = args[0] if args else kwargs.get("input_info")
        request_id = getattr(request, "request_id", None)
        count = getattr(request, "steps", None)
        steps.request_start(
            request_id if isinstance(request_id, str) else None,
            session.guarded("adapter.request_shape", request_shape, runner, request),
            count
            if isinstance(count, int)
            else session.guarded("adapter.steps", _infer_steps, runner),
            label=session.guarded("adapter.request_label", request_label, runner),
        )
        if steps.request_id is not None and not _fixture_request(request):
            _opened[steps] = (steps.request_seq, steps.request_id)
        try:
            return run_pipeline(*args, **kwargs)
        finally:
            steps.request_end()

    runner.warmup = hooked_warmup
    runner.run_pipeline = hooked_run_pipeline
    hook_model(session, getattr(runner, "model", None))
    session.guarded("adapter.compile_config", _emit_compile_config, session, runner)
    session.guarded("adapter.warmup_entry", _warmup_entry, session, runner)


#: The runner config keys that decide how LightX2V compiles (magi-compile reads them).
_COMPILE_KEYS = ("use_compile", "use_magi_compile", "cpu_offload", "offload_granularity")


def _emit_compile_config(session: Session, runner: Any) -> None:
    config = getattr(runner, "config", None)
    if isinstance(config, dict):
        keys = {key: config[key] for key in _COMPILE_KEYS if key in config}
        if keys:
            session.emit("lightx2v_config", **keys)


#: Set by `diag warmup-plan --verify` alone: the plan's resolutions ([[height, width], ...] in
#: pixels) for the runner's own warmup entry.
WARMUP_ENV = "DIAG_LIGHTX2V_WARMUP"


def warmup_attr(runner: Any) -> str | None:
    """The class attribute the runner's warmup reads its resolutions from: LTX-2 with its
    upsampler reads `_UPSAMPLER_WARMUP_RESOLUTIONS`, every other runner `_WARMUP_RESOLUTIONS`."""
    config = getattr(runner, "config", None)
    upsampler = isinstance(config, dict) and bool(config.get("use_upsampler"))
    for name in ("_UPSAMPLER_WARMUP_RESOLUTIONS",) * upsampler + ("_WARMUP_RESOLUTIONS",):
        if _pairs(getattr(runner, name, None)) is not None:
            return name
    return None


def _pairs(value: Any) -> list[list[int]] | None:
    if not isinstance(value, (list, tuple)):
        return None
    pairs = [_ints(item) for item in value]
    if any(p is None or len(p) != 2 for p in pairs):
        return None
    return [p for p in pairs if p is not None]


def _planned(text: str | None) -> tuple[tuple[int, int], ...] | None:
    import json

    if not text:
        return None
    try:
        pairs = _pairs(json.loads(text))
    except ValueError:
        return None
    return tuple((h, w) for h, w in pairs) if pairs else None


def _warmup_entry(session: Session, runner: Any) -> None:
    """Record the runner and how it warms up (what `diag warmup-plan --as lightx2v` writes for),
    and, only under `diag warmup-plan --verify` (WARMUP_ENV set), put the plan's resolutions in
    the runner's own warmup entry: an instance attribute, read by its warmup as
    `self._WARMUP_RESOLUTIONS`, set before init_modules runs it."""
    import os

    config = getattr(runner, "config", None)
    config = config if isinstance(config, dict) else {}
    attr = warmup_attr(runner)
    if attr is None:  # no warmup entry of LightX2V's kind (diag.fixtures' runner)
        return
    planned = _planned(os.environ.get(WARMUP_ENV))
    if planned is not None:
        setattr(runner, attr, planned)
    owner = next((c for c in type(runner).__mro__ if attr in c.__dict__), type(runner))
    session.emit(
        "lightx2v_runner",
        runner=f"{type(runner).__module__}.{type(runner).__qualname__}",
        warmup_owner=f"{owner.__module__}.{owner.__qualname__}",
        model_cls=config.get("model_cls") if isinstance(config.get("model_cls"), str) else None,
        task=config.get("task") if isinstance(config.get("task"), str) else None,
        warmup_attr=attr,
        warmup_resolutions=_pairs(getattr(runner, attr, None)),
        vae_stride=_ints(config.get("vae_stride")),
        patch_size=_ints(config.get("patch_size")),
        applied=planned is not None,
    )


def hook_runner_class(session: Session, cls: type, adapter_name: str) -> None:
    """Hook every instance of `cls` right after its __init__ (before init_modules runs), and
    every model later assigned to `instance.model`."""
    if cls.__dict__.get(_CLASS_HOOKED, False):
        return
    original_init = cls.__init__  # type: ignore[misc]
    original_setattr: Any = cls.__setattr__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if type(self) is cls or not type(self).__dict__.get(_CLASS_HOOKED, False):
            session.guarded("adapter.hook_runner", hook_runner, session, self, adapter_name)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        original_setattr(self, name, value)
        if name == "model" and value is not None and _hooked(self):
            session.guarded("adapter.hook_model", hook_model, session, value)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
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
