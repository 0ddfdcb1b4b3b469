"""The fallback for programs no adapter knows: steps from the calls into compiled code.

`torch.compile` is wrapped (after profiling.py's region markers, around them), so every callable
it returns is seen: a compiled function or `nn.Module.compile()`'s compiled `_call_impl` gets a
wrapper function, a compiled module (`OptimizedModule`) a forward pre-hook and an always-called
forward hook. These sit outside the compiled code: Dynamo is told to skip the wrapper's frame, and
while Dynamo traces (a compiled callable called inside another compiled graph) they only call
through, so they change no graph and no guard.

Outermost such calls in each thread (a worker pool serving several requests at once: each
thread's calls are its own steps and requests), outside any step another adapter knows, make the
steps. When a call is made from inside an `nn.Module` call that runs eagerly (a model whose
blocks are compiled one by one), the step is the outermost such module's call: the module gets
the same pair of hooks, so its calls are steps from its second call on; its first call's step
ends where the next one starts. Otherwise (a loop of the program's own over compiled blocks, a
compiled helper between model calls, magi's fast path) a step is one period of the sequence of
outermost compiled calls the loop repeats (call_period.py), ending at its last call.
Requests are inferred (adapters/inferred.py): a new input shape,
a diffusers scheduler's `set_timesteps`, or a long pause starts one.

The fallback yields to every adapter that knows steps: it is off from the start when `--step-fn`,
`--request-fn` or `--warmup-fn` is given or the program imports `diag.api`, once the LightX2V or
reference-service adapter is installed, and as soon as any other adapter reports a boundary. It
also leaves alone compiled calls into diffusers models, whose own calls are steps (diffusers.py).
It is named `compiled-calls (inferred)` in the `adapter` event.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..stances import begin_call, note_error
from .call_period import REQUEST, CallPeriod, call_key
from .inferred import (
    RANK_COMPILED_CALLS,
    InferredSteps,
    compiling_here,
    every_adapter_silent,
    first_tensor_shape,
    note_call_end,
    outside_dynamo,
    step_open_after_call,
    timestep_of,
)
from .inferred import skip_code as _skip_code

if TYPE_CHECKING:
    from ..protocol import Session

ADAPTER_NAME = "compiled-calls (inferred)"
_WHERE = "adapter.compiled-calls"
#: Set on the callables `mark` returns (functools.wraps carries it to outer wrappers).
_MARKED = "_diag_compiled_call"
_SHAPE_NAMES = ("hidden_states", "x", "input", "sample", "latents")

#: Compiled targets whose calls another adapter makes steps of (diffusers models): a predicate,
#: and what to call as such a call begins (target, args, kwargs) and ends (target).
_CLAIMED: list[tuple[Callable[[Any], bool], Callable[..., None], Callable[[Any], None]]] = []
_FALLBACK: CompiledCalls | None = None


#: Called once per compiled callable, before its first call, with what was compiled.
_BEFORE_FIRST_CALL: list[Callable[[Any], None]] = []


def claim(
    predicate: Callable[[Any], bool], enter: Callable[..., None], leave: Callable[[Any], None]
) -> None:
    """Another adapter makes its own steps of calls into targets for which `predicate` holds:
    it is told here, outermost (before the profiler's region marker opens), as well as by its
    own hooks, which then see a nested call."""
    _CLAIMED.append((predicate, enter, leave))


def before_first_call(callback: Callable[[Any], None]) -> None:
    """`callback(target)` once per compiled callable, before Dynamo first traces it (diffusers
    models reached from it then lose their hooks: Dynamo would trace those)."""
    _BEFORE_FIRST_CALL.append(callback)


def _first_call(session: Session, target: Any) -> None:
    for callback in _BEFORE_FIRST_CALL:
        session.guarded(_WHERE, callback, target)


def enter_call(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A call into compiled code that does not go through torch.compile's callable (magi's fast
    path) begins: it counts for inferred steps like one that does. Returns the token for
    `leave_call`."""
    fallback = _FALLBACK
    if fallback is None or fallback.is_compiling():
        return None
    return (fallback, fallback.session.guarded(_WHERE, fallback._enter, target, args, kwargs))


def leave_call(token: Any) -> None:
    if token is not None:
        fallback, inner = token
        fallback.session.guarded(_WHERE, fallback._leave, inner)


#: The token of a call made while the fallback was idle: nothing to undo when it returns.
_IDLE = object()


def _idle() -> bool:
    """Nothing reads calls into compiled code now: the fallback and every other inferring adapter
    stood down (an adapter, `--step-fn` or diag.api knows the steps) and no adapter claims
    targets. A call then goes straight through: the enter/leave bookkeeping (call depth, the
    call's end time, the step an open lane may end at) was the largest per-call cost diag had
    (bench/record_costs.py, docs/BENCHMARKS.md)."""
    return not _CLAIMED and every_adapter_silent()


def turn_off() -> None:
    """An adapter that knows the program's steps is installed: the fallback stays silent."""
    if _FALLBACK is not None:
        _FALLBACK.inferred.stand_down()


class CompiledCalls:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.torch = session.torch
        self.inferred = InferredSteps(session, ADAPTER_NAME, RANK_COMPILED_CALLS)
        self._local = threading.local()
        self.is_compiling = compiling_here(self.torch)
        self._call_impl_code = self.torch.nn.Module._call_impl.__code__
        self._step_modules: dict[int, Any] = {}  # id -> module whose calls are steps
        # While the session is paused (Session.pause) these hooks and the wrappers only call
        # through.
        self._module_pre = outside_dynamo(self.torch, self._on_module_pre, session)
        self._module_post = outside_dynamo(self.torch, self._on_module_post, session)
        self._compiled_pre = outside_dynamo(self.torch, self._on_compiled_pre, session)
        self._compiled_post = outside_dynamo(self.torch, self._on_compiled_post, session)

    # -- per thread: each thread's calls are its own steps ---------------------------------------

    @property
    def _module_step(self) -> Any:
        """The step module whose call opened this thread's open step."""
        return self._local.__dict__.get("module_step")

    @_module_step.setter
    def _module_step(self, module: Any) -> None:
        self._local.module_step = module

    @property
    def _period(self) -> CallPeriod:
        """The period of this thread's outermost compiled calls."""
        period: CallPeriod | None = self._local.__dict__.get("period")
        if period is None:
            period = self._local.period = CallPeriod()
        return period

    # -- installing --------------------------------------------------------------------------------

    def install(self) -> None:
        torch = self.torch
        original = torch.compile
        fallback = self

        @functools.wraps(original)
        def compile(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            target = args[0] if args else kwargs.get("model")
            if target is None:  # used as @torch.compile(...): mark what the decorator returns
                return lambda fn: fallback.mark(fn, result(fn))
            return fallback.mark(target, result)

        compile.__wrapped__ = original  # type: ignore[attr-defined]
        torch.compile = compile  # type: ignore[attr-defined]

    def mark(self, target: Any, compiled: Any) -> Any:
        if getattr(compiled, _MARKED, False):
            # `@torch.compile(...)`: torch's decorator calls torch.compile again with the
            # function, which this wrapper already marked; marking twice enters twice.
            return compiled
        guarded = self.session.guarded
        if isinstance(compiled, self.torch.nn.Module):
            marked = guarded(_WHERE, self._mark_module, target, compiled)
            return compiled if marked is None else marked
        if not callable(compiled):
            return compiled
        return guarded(_WHERE, self._mark_function, target, compiled) or compiled

    def _mark_module(self, target: Any, module: Any) -> Any:
        module.__dict__["_diag_compiled_target"] = getattr(module, "_orig_mod", target)
        _first_call(self.session, module.__dict__["_diag_compiled_target"])
        # First in, last out: step and request edges (which start and stop profiler windows)
        # stay outside the region markers profiling.py puts on the same module.
        module.register_forward_pre_hook(self._compiled_pre, prepend=True, with_kwargs=True)
        module.register_forward_hook(self._compiled_post, always_call=True)
        return module

    def _mark_function(self, target: Any, compiled: Any) -> Any:
        fallback = self
        # nn.Module.compile() compiles the module's _call_impl: calls into it are module calls.
        is_call = getattr(target, "__name__", None) == "_call_impl"
        owner = target.__self__ if is_call and hasattr(target, "__self__") else target
        is_compiling = self.is_compiling
        enter, leave = self._enter, self._leave
        idle = _idle
        first = [True]

        session = self.session

        def compiled_call(*args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                return compiled(*args, **kwargs)
            if first[0]:  # even while paused: what Dynamo will trace depends on it
                first[0] = False
                _first_call(fallback.session, target)
            if session.paused:
                return compiled(*args, **kwargs)
            begin_call()
            if idle():
                try:
                    return compiled(*args, **kwargs)
                except BaseException as exc:  # seen on its way to the program, never changed
                    note_error(exc)
                    raise
            token = fallback.session.guarded(_WHERE, enter, owner, args, kwargs)
            try:
                return compiled(*args, **kwargs)
            except BaseException as exc:  # seen on its way to the program, never changed
                note_error(exc)
                fallback._local.raised = True
                raise
            finally:
                fallback.session.guarded(_WHERE, leave, token)

        _skip_code(self.torch, compiled_call.__code__)
        wrapper = functools.update_wrapper(compiled_call, compiled)
        setattr(wrapper, _MARKED, True)
        return wrapper

    # -- calls into compiled code --------------------------------------------------------------

    def _on_compiled_pre(self, module: Any, args: Any, kwargs: Any) -> None:
        begin_call()
        stack = self._local.__dict__.setdefault("tokens", [])
        if _idle():
            stack.append(_IDLE)  # the post hook leaves nothing either
            return
        stack.append(None)  # first: a failure below still leaves one token for the post hook
        target = module.__dict__.get("_diag_compiled_target", module)
        stack[-1] = self._enter(target, args, kwargs)

    def _on_compiled_post(self, module: Any, args: Any, output: Any) -> None:
        error = sys.exc_info()[1] if output is None else None
        if error is not None:  # torch calls an always-called hook with None when forward raised
            self._local.raised = True
        stack = self._local.__dict__.get("tokens")
        if stack:
            token = stack.pop()
            if token is not _IDLE:
                self._leave(token)
        if error is not None:
            note_error(error)

    def _enter(self, target: Any, args: Any, kwargs: Any) -> Any:
        """A call into compiled code begins; returns what `_leave` needs (a claimed target's)."""
        local = self._local
        depth = local.__dict__.get("depth", 0)
        local.depth = depth + 1
        if depth:
            return None
        local.raised = False  # set if this call raises (the period is then learnt again)
        local.outer_target = target
        for predicate, enter, leave in _CLAIMED:
            if predicate(target):
                enter(target, args, kwargs)
                return (leave, target)
        inferred = self.inferred
        if inferred.silent or self._module_step is not None:
            return None
        if not inferred.stepping and not inferred.may_step():
            return None
        module = self._enclosing_module(target)
        if module is not None:  # blocks compiled one by one: the module's call is the step
            if inferred.stepping:
                return None
            self._adopt(module)
            if inferred.start(self._shape(args, kwargs), timestep_of(self.torch, kwargs)):
                self._module_step = module
            return None
        # A loop of the program's own: the steps are the period of its compiled calls.
        local.outermost = True
        key = call_key(target, args)
        starts = self._period.boundary(key)
        if not starts:
            return None
        if inferred.stepping:
            inferred.end(at_last_call=True)
            if not inferred.may_step():
                return None
        if starts == REQUEST:
            inferred.boundary = True  # the loop was entered anew
        if (
            inferred.start(self._shape(args, kwargs), timestep_of(self.torch, kwargs))
            and inferred.new_request
        ):
            # A new request (a new shape, a pause, a new denoising loop): its calls are
            # counted from this one.
            self._period.reset()
            self._period.boundary(key)
        return None

    def _leave(self, token: Any) -> None:
        local = self._local
        depth = max(local.__dict__.get("depth", 1) - 1, 0)
        local.depth = depth
        if token is not None:
            leave, target = token
            leave(target)
        if depth == 0:
            steps = self.inferred.session.steps
            outermost = bool(local.__dict__.get("outermost"))
            may_end = step_open_after_call() or (outermost and self._period.may_end_step())
            now = (
                steps.call_ended(may_end)
                if steps is not None
                else (time.monotonic_ns(), time.process_time_ns())
            )
            note_call_end(now, local.__dict__.pop("outer_target", None), self.torch)
            if outermost:
                local.outermost = False
                self.inferred.last_call = now
                if local.__dict__.get("raised"):
                    self._period.relearn()
            local.raised = False

    def _shape(self, args: Any, kwargs: Any) -> list[int] | None:
        shape = first_tensor_shape(self.torch, args, kwargs, _SHAPE_NAMES)
        return [int(s) for s in shape] if shape is not None else None

    # -- the eager module around compiled blocks ---------------------------------------------------

    def _enclosing_module(self, target: Any) -> Any:
        """The outermost module whose call (running eagerly) holds this compiled call."""
        code = self._call_impl_code
        found = None
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if frame.f_code is code:
                module = frame.f_locals.get("self")
                if module is not target and getattr(module, "_orig_mod", None) is not target:
                    found = module
            frame = frame.f_back
        return found

    def _adopt(self, module: Any) -> None:
        if id(module) in self._step_modules:
            return
        self._step_modules[id(module)] = module
        module.register_forward_pre_hook(self._module_pre, prepend=True)
        module.register_forward_hook(self._module_post, always_call=True)

    def _on_module_pre(self, module: Any, args: Any) -> None:
        local = self._local
        if local.__dict__.get("module_depth", 0):
            local.module_depth += 1
            return
        local.module_depth = 1
        if self._module_step is not None:  # the first call's step, left open: it ends here
            self._module_step = None
            self.inferred.end()
        if not self.inferred.stepping and self.inferred.may_step():
            if self.inferred.start(self._shape(args, {})):
                self._module_step = module

    def _on_module_post(self, module: Any, args: Any, output: Any) -> None:
        local = self._local
        depth = local.__dict__.get("module_depth", 0)
        if depth <= 0:
            return  # the first call: its pre-hook was registered while it ran
        local.module_depth = depth - 1
        if depth == 1 and self._module_step is module:
            self._module_step = None
            self.inferred.end()


def install(session: Session) -> None:
    global _FALLBACK
    fallback = CompiledCalls(session)
    fallback.install()
    _FALLBACK = fallback
