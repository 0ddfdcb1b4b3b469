"""Hugging Face diffusers: one pipeline `__call__` is one request, one denoising iteration one step.

Hooked from outside, once the program imports `diffusers.pipelines.pipeline_utils` (the module
defining `DiffusionPipeline`); nothing of diffusers is imported here. The hooks are set on
classes, not on pipeline or scheduler instances: copies (`copy.deepcopy(scheduler)`, done by
some pipelines) then never call back into the object they were copied from. Models called inside
a pipeline call are left to these hooks; a model called outside any pipeline (a hand-written
loop) makes its own steps (diffusers_models.py, hooks that Dynamo never sees), and so does a
scheduler's `set_timesteps` outside a pipeline: it starts that loop's next inferred request.

Requests: each pipeline class defines its own `__call__`, so there is no one method to wrap.
`DiffusionPipeline` gets an `__init_subclass__` that wraps the `__call__` in each subclass's
body as the class is defined (diffusers' own, lazily imported; community and the program's own
pipelines), and the subclasses that already exist are wrapped at install. Only the outermost
call on a thread is a request: a pipeline calling another one (combined pipelines), or its
parent's `__call__` through `super()`, adds none. Each thread's outermost call is its own
request (a worker pool running pipelines at once): the open call is per thread. If a request
is already open (diag.api, or `--request-fn` around several pipeline calls), the calls report
their steps into it.

Steps: the scheduler is stepped once per iteration, and the pipelines wrap their denoising loop
in `self.progress_bar(timesteps)` or `with self.progress_bar(total=n)`. `set_timesteps` and
`step` are wrapped on the class of each scheduler registered on a called pipeline, and
`DiffusionPipeline.progress_bar` is wrapped. A progress bar opened by a called pipeline after its
scheduler's `set_timesteps` starts a loop and its step 0 (a bar before that, like Marigold's loop
over image batches, is no denoising loop). A step ends when the scheduler's `step()` returns,
and the next starts right then unless that was the loop's last iteration: the bar's length
(`len(timesteps)`), or its `total=` with a first-order scheduler, or the scheduler's own
`step_index` reaching `len(scheduler.timesteps)` says so. So step i holds iteration i's model
call(s) and scheduler step (from step 1 on, also the previous iteration's tail: callbacks, the
bar's update). The bar's `close()` (end of the `with`, or of its iteration; the one hook set on
an instance, the pipeline's own short-lived bar) ends a step left open by a loop that stopped
early, which then shows as a short last step. A `step()` outside any known loop (a loop without
a progress bar) is a step of its own, and when its scheduler keeps a `step_index` it starts such
a loop for the iterations that follow. Steps are numbered within the request, across its loops.
Only the schedulers registered on the called pipelines count: another one's `step()` (LTX-2's
audio scheduler, a copy of the video one) is part of the step.

Shape: `[num_frames, height, width]` or `[height, width]` from the call's arguments (signature
defaults applied); when those are None, from the same names (else the `latents` shape) among
the pipeline's locals when its loop starts, for the steps.

Everything is bookkeeping around the original calls, guarded; while Dynamo traces (a whole
pipeline compiled) the wrappers only call through.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import types
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

from . import diffusers_models
from .inferred import compiling_here, mark_request_boundary

if TYPE_CHECKING:
    from ..protocol import Session
    from ..steps import StepTracker

ADAPTER_NAME = "diffusers"
_WRAPPED = "__diag_diffusers__"
_WHERE = "adapter.diffusers"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shape_from(values: dict[str, Any], latents: bool) -> list[int] | None:
    height, width = _int(values.get("height")), _int(values.get("width"))
    if height is not None and width is not None:
        frames = _int(values.get("num_frames"))
        return [frames, height, width] if frames is not None else [height, width]
    shape = getattr(values.get("latents"), "shape", None) if latents else None
    if shape is not None and all(_int(s) is not None for s in shape):
        return [int(s) for s in shape]
    return None


#: Scalars of a call that the request shape already holds.
_SHAPE_ARGUMENTS = ("height", "width", "num_frames")
_PARAMS_MAX = 32


def _params(passed: dict[str, Any], signature: inspect.Signature) -> dict[str, Any]:
    """The numbers and booleans the call site passed (`guidance_scale=1.0`,
    `num_inference_steps=4`), besides the shape: what tells a CFG-off request from a CFG-on one
    of the same shape, for `diag warmup-plan`. Strings (prompts), tensors and lists are never
    recorded."""
    out: dict[str, Any] = {}
    for name, value in passed.items():
        parameter = signature.parameters.get(name)
        items: list[tuple[Any, Any]] = [(name, value)]
        if parameter is not None and parameter.kind is parameter.VAR_KEYWORD:
            items = list(value.items()) if isinstance(value, dict) else []
        for key, item in items:
            if key in _SHAPE_ARGUMENTS or key == "self" or len(out) >= _PARAMS_MAX:
                continue
            if isinstance(item, bool) or (
                isinstance(item, (int, float)) and abs(item) < 2**53 and item == item
            ):
                out[str(key)] = item
    return out


class _Loop:
    """One denoising loop: `expected` iterations when known, `steps` done so far."""

    def __init__(self, pipe: Any, expected: int | None, by_count: bool) -> None:
        self.pipe = pipe  # the pipeline running it: its call's end ends the loop
        self.expected = expected
        self.by_count = by_count  # the length of the bar's iterable: exact
        self.steps = 0


class _Call:
    """The outermost pipeline call on one thread: one request."""

    def __init__(self, owner: int, shape: list[int] | None) -> None:
        self.owner = owner
        self.shape = shape
        self.pipes: list[Any] = []
        self.schedulers: list[Any] = []
        self.owns_request = False
        self.armed = False  # a scheduler of the call had set_timesteps: a loop may start
        self.loop: _Loop | None = None
        self.step_open = False
        self.in_step = 0

    def is_scheduler(self, obj: Any) -> bool:
        return any(obj is s for s in self.schedulers)

    def is_pipe(self, obj: Any) -> bool:
        return any(obj is p for p in self.pipes)


class DiffusersAdapter:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.steps: StepTracker = session.steps
        self.torch = session.torch
        self._calls = threading.local()
        self._lock = threading.Lock()
        self._signatures: dict[Any, inspect.Signature | None] = {}
        self._offload_seen: set[int] = set()

    @property
    def call(self) -> _Call | None:
        """The pipeline call open in this thread: each thread's call is its own request (a
        worker pool running two pipelines at once)."""
        call: _Call | None = self._calls.__dict__.get("call")
        return call

    @call.setter
    def call(self, call: _Call | None) -> None:
        self._calls.call = call

    # -- installing ------------------------------------------------------------------------------

    def install(self, base: Any) -> None:
        self._wrap_method(base, "progress_bar", self._progress_bar_wrapper)
        self._each_subclass(base, self.wrap_pipeline_class)

    def install_schedulers(self, base: Any) -> None:
        """Every scheduler class: `set_timesteps` outside a pipeline starts an inferred request."""
        self._each_subclass(base, self.wrap_scheduler_class)

    def _each_subclass(self, base: Any, wrap: Callable[[type], None]) -> None:
        """`wrap` each subclass of `base`, those that exist and those defined later."""
        session = self.session
        previous = base.__dict__.get("__init_subclass__")

        def __init_subclass__(cls: Any, /, **kwargs: Any) -> None:
            if previous is not None:
                previous.__get__(None, cls)(**kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            session.guarded(_WHERE, wrap, cls)

        base.__init_subclass__ = classmethod(__init_subclass__)
        pending: list[type] = list(base.__subclasses__())
        while pending:
            cls = pending.pop()
            session.guarded(_WHERE, wrap, cls)
            pending.extend(cls.__subclasses__())

    def wrap_pipeline_class(self, cls: type) -> None:
        original = cls.__dict__.get("__call__")
        if isinstance(original, types.FunctionType) and not getattr(original, _WRAPPED, False):
            wrapper = self._call_wrapper(original)
            setattr(wrapper, _WRAPPED, True)
            cls.__call__ = wrapper  # type: ignore[method-assign]

    def wrap_scheduler_class(self, cls: type) -> None:
        self._wrap_method(cls, "set_timesteps", self._set_timesteps_wrapper)
        self._wrap_method(cls, "step", self._step_wrapper)

    def _wrap_method(self, cls: type, name: str, make: Callable[[Any], Any]) -> None:
        """Wrap `name` where the class or its nearest base defines it (once)."""
        for owner in cls.__mro__:
            if name in owner.__dict__:
                original = owner.__dict__[name]
                if isinstance(original, types.FunctionType) and not getattr(
                    original, _WRAPPED, False
                ):
                    wrapper = make(original)
                    setattr(wrapper, _WRAPPED, True)
                    setattr(owner, name, wrapper)
                return

    # -- wrappers ----------------------------------------------------------------------------------

    def _call_wrapper(self, original: Any) -> Any:
        adapter = self
        guarded = self.session.guarded
        is_compiling = compiling_here(self.torch)

        @functools.wraps(original)
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            if is_compiling() or adapter.session.paused:  # paused: Session.pause
                return original(self, *args, **kwargs)
            call = guarded(_WHERE, adapter.call_enter, self, original, args, kwargs)
            try:
                return original(self, *args, **kwargs)
            finally:
                if call is not None:
                    guarded(_WHERE, adapter.call_exit, call, self)

        return __call__

    def _progress_bar_wrapper(self, original: Any) -> Any:
        adapter = self
        guarded = self.session.guarded
        is_compiling = compiling_here(self.torch)

        @functools.wraps(original)
        def progress_bar(self: Any, *args: Any, **kwargs: Any) -> Any:
            bar = original(self, *args, **kwargs)
            if adapter.call is not None and not is_compiling() and not adapter.session.paused:
                guarded(_WHERE, adapter.loop_start, self, bar, args, kwargs, sys._getframe(1))
            return bar

        return progress_bar

    def _set_timesteps_wrapper(self, original: Any) -> Any:
        adapter = self
        guarded = self.session.guarded
        is_compiling = compiling_here(self.torch)

        @functools.wraps(original)
        def set_timesteps(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            if is_compiling():
                return result
            if adapter.call is not None:
                guarded(_WHERE, adapter.on_set_timesteps, self)
            else:  # a hand-written loop over a model: a new denoising loop, a new request
                mark_request_boundary()
            return result

        return set_timesteps

    def _step_wrapper(self, original: Any) -> Any:
        adapter = self
        guarded = self.session.guarded
        is_compiling = compiling_here(self.torch)

        @functools.wraps(original)
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            if adapter.call is None or is_compiling() or adapter.session.paused:
                return original(self, *args, **kwargs)
            call = guarded(_WHERE, adapter.step_enter, self)
            try:
                result = original(self, *args, **kwargs)
            except BaseException:
                if call is not None:
                    guarded(_WHERE, adapter.step_exit, call, self, False)
                raise
            if call is not None:
                guarded(_WHERE, adapter.step_exit, call, self, True)
            return result

        return step

    # -- requests ----------------------------------------------------------------------------------

    def _mine(self) -> _Call | None:
        call = self.call
        return call if call is not None and call.owner == threading.get_ident() else None

    def _add_pipe(self, call: _Call, pipe: Any) -> None:
        """The pipeline joins the call; its schedulers count for steps (hooked on their class)."""
        config = getattr(pipe, "config", None)
        keys = config.keys() if isinstance(config, dict) else ()
        names = ["scheduler"] + [k for k in keys if k.endswith("scheduler")]
        for name in dict.fromkeys(names):
            scheduler = getattr(pipe, name, None)
            if scheduler is None or call.is_scheduler(scheduler):
                continue
            if callable(getattr(scheduler, "step", None)) and callable(
                getattr(scheduler, "set_timesteps", None)
            ):
                self.session.guarded(_WHERE, self.wrap_scheduler_class, type(scheduler))
                call.schedulers.append(scheduler)
        call.pipes.append(pipe)

    def _arguments(
        self, original: Any, pipe: Any, args: Any, kwargs: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The call's arguments with the signature's defaults applied, and the scalar ones the
        call site passed itself (`params`)."""
        if original not in self._signatures:
            try:
                self._signatures[original] = inspect.signature(original)
            except (TypeError, ValueError):
                self._signatures[original] = None
        signature = self._signatures[original]
        if signature is None:
            return {}, {}
        try:
            bound = signature.bind(pipe, *args, **kwargs)
        except TypeError:
            return {}, {}
        params = _params(bound.arguments, signature)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for name, parameter in signature.parameters.items():
            extra = arguments.pop(name, None) if parameter.kind is parameter.VAR_KEYWORD else None
            if isinstance(extra, dict):  # `**kwargs` passed on to a parent's __call__
                arguments = {**extra, **arguments}
        return arguments, params

    def call_enter(self, pipe: Any, original: Any, args: Any, kwargs: Any) -> _Call | None:
        ident = threading.get_ident()
        with self._lock:
            call = self.call
            nested = call is not None
            if call is None:
                call = self.call = _Call(ident, None)
        try:
            arguments: dict[str, Any] = {}
            params: dict[str, Any] = {}
            if call.shape is None:  # a nested call may know the shape: it is then for the steps
                arguments, params = self._arguments(original, pipe, args, kwargs)
                call.shape = _shape_from(arguments, latents=False)
            self._add_pipe(call, pipe)  # last: a nested call that fails before is not tracked
            if nested:
                return call
            self.session.announce_adapter(ADAPTER_NAME)
            if id(pipe) not in self._offload_seen:
                self._offload_seen.add(id(pipe))
                self.session.guarded(_WHERE, self._offload_event, pipe)
            if self.steps.request_id is None:
                call.owns_request = True
                self.steps.request_start(
                    None,
                    call.shape,
                    _int(arguments.get("num_inference_steps")),
                    params=params or None,
                )
        except BaseException:
            if not nested:
                with self._lock:
                    if self.call is call:
                        self.call = None
            raise
        return call

    def _offload_event(self, pipe: Any) -> None:
        """How the pipeline offloads its models (once per pipeline, at its first call): with
        `enable_model_cpu_offload()` each request moves the models back to the GPU at their
        first use, which a step-0 spike's cause is read off (diag.evidence.spikes)."""
        hooks = getattr(pipe, "_all_hooks", None)
        group = False
        streams: set[bool] = set()
        components: dict[str, int] = {}
        items = getattr(pipe, "components", {})
        for name, module in items.items() if isinstance(items, dict) else ():
            if not isinstance(module, self.session.torch.nn.Module):
                continue
            components[name] = sum(p.numel() * p.element_size() for p in module.parameters())
            registry = getattr(module, "_diffusers_hook", None)
            order = getattr(registry, "_hook_order", ())
            if any("group_offloading" in str(h) for h in order):
                group = True
                stream = _group_stream(registry)
                if stream is not None:
                    streams.add(stream)
        self.session.emit(
            "pipeline_offload",
            pipeline=type(pipe).__name__,
            model=bool(hooks),
            group=group,
            # enable_group_offload(use_stream=...): without a stream every group is copied in
            # and written back in line with compute (offload-bound names the switch).
            group_stream=streams.pop() if len(streams) == 1 else None,
            param_bytes=components,
        )

    def call_exit(self, call: _Call, pipe: Any) -> None:
        for i in range(len(call.pipes) - 1, -1, -1):
            if call.pipes[i] is pipe:
                del call.pipes[i]
                break
        if call.loop is not None and call.loop.pipe is pipe:  # it stopped early (or raised)
            call.loop = None
            self._end_step(call)
        if call.pipes:
            return
        try:
            self._end_step(call)
            if call.owns_request:
                self.steps.request_end()
        finally:
            with self._lock:
                if self.call is call:
                    self.call = None

    # -- steps -------------------------------------------------------------------------------------

    def _start_step(self, call: _Call) -> None:
        self.steps.step_start(None, call.shape)
        call.step_open = True

    def _end_step(self, call: _Call) -> None:
        if call.step_open:
            call.step_open = False
            self.steps.step_end()

    def on_set_timesteps(self, scheduler: Any) -> None:
        call = self._mine()
        if call is not None and call.loop is None and call.is_scheduler(scheduler):
            call.armed = True

    def loop_start(
        self, pipe: Any, bar: Any, args: Any, kwargs: Any, frame: FrameType | None
    ) -> None:
        call = self._mine()
        if call is None or not call.armed or call.loop is not None or not call.is_pipe(pipe):
            return
        iterable = args[0] if args else kwargs.get("iterable")
        total = args[1] if len(args) > 1 else kwargs.get("total")
        expected: int | None = None
        if iterable is not None:
            try:
                expected = len(iterable)
            except TypeError:
                expected = None
        else:
            expected = _int(total)
        loop = _Loop(pipe, expected, by_count=iterable is not None and expected is not None)
        call.armed = False
        call.loop = loop
        if call.shape is None and frame is not None:
            call.shape = _shape_from(frame.f_locals, latents=True)
        self._hook_close(bar, loop)
        self._start_step(call)

    def _hook_close(self, bar: Any, loop: _Loop) -> None:
        """The bar's close() (end of `with`, or of its iteration) ends the loop."""
        close = getattr(bar, "close", None)
        if not callable(close) or not hasattr(bar, "__dict__"):
            return
        adapter = self
        guarded = self.session.guarded

        @functools.wraps(close)
        def closing(*args: Any, **kwargs: Any) -> Any:
            bar.__dict__.pop("close", None)  # once; and no cycle left behind
            guarded(_WHERE, adapter.loop_end, loop)
            return close(*args, **kwargs)

        bar.close = closing

    def loop_end(self, loop: _Loop) -> None:
        call = self._mine()
        if call is not None and call.loop is loop:
            call.loop = None
            self._end_step(call)

    def step_enter(self, scheduler: Any) -> _Call | None:
        call = self._mine()
        if call is None or call.in_step or not call.is_scheduler(scheduler):
            return None
        call.in_step += 1
        if not call.step_open:
            self._start_step(call)
        return call

    def step_exit(self, call: _Call, scheduler: Any, ok: bool) -> None:
        call.in_step -= 1
        self._end_step(call)
        loop = call.loop
        index = _int(getattr(scheduler, "step_index", None))
        if loop is None and ok and call.armed and index is not None:
            # A loop without a progress bar: its steps are told apart by the scheduler alone.
            call.armed = False
            loop = call.loop = _Loop(call.pipes[-1] if call.pipes else None, None, False)
        if loop is None:
            return
        loop.steps += 1
        if ok and not self._loop_done(loop, scheduler):
            self._start_step(call)
        else:
            call.loop = None

    @staticmethod
    def _loop_done(loop: _Loop, scheduler: Any) -> bool:
        if loop.expected is not None and loop.steps >= loop.expected:
            if loop.by_count or _int(getattr(scheduler, "order", 1)) == 1:
                return True
        if loop.by_count:
            return False
        index = _int(getattr(scheduler, "step_index", None))
        timesteps = getattr(scheduler, "timesteps", None)
        try:
            return index is not None and timesteps is not None and index >= len(timesteps)
        except TypeError:
            return False


_ADAPTER: DiffusersAdapter | None = None


def adapter_for(session: Session) -> DiffusersAdapter:
    """The one adapter of the process: pipelines, schedulers and models share its state."""
    global _ADAPTER
    if _ADAPTER is None or _ADAPTER.session is not session:
        _ADAPTER = DiffusersAdapter(session)
    return _ADAPTER


def install(session: Session, module: ModuleType) -> None:
    base = getattr(module, "DiffusionPipeline", None)
    if isinstance(base, type):
        adapter_for(session).install(base)


def install_schedulers(session: Session, module: ModuleType) -> None:
    base = getattr(module, "SchedulerMixin", None)
    if isinstance(base, type):
        adapter_for(session).install_schedulers(base)


def install_models(session: Session, module: ModuleType) -> None:
    base = getattr(module, "ModelMixin", None)
    if isinstance(base, type):
        diffusers_models.install(session, adapter_for(session), base)


def _group_stream(registry: Any) -> bool | None:
    """Whether a component's group offloading copies on a side stream (`use_stream=True`):
    its top-level group hook's ModuleGroup holds the stream. None: not readable here."""
    get_hook = getattr(registry, "get_hook", None)
    hook = get_hook("group_offloading") if callable(get_hook) else None
    group = getattr(hook, "group", None)
    if group is None or not hasattr(group, "stream"):
        return None
    return group.stream is not None
