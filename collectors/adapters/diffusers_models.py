"""A diffusers model (`ModelMixin`) called outside any pipeline: each outermost call starts a step.

The step lasts until the loop's next model call (it ends at the last compiled call before it),
so what the loop does between model calls, a scheduler update or a compiled helper and its
compiles, belongs to the denoising step it follows (inferred.py, `spans_calls`).

A hand-written denoising loop over `WanTransformer3DModel` or a UNet has no pipeline call to
take requests and steps from, but each call of the model is one denoising step. Every model
gets a forward pre-hook and an always-called forward hook as it is built (`ModelMixin.__init__`
is wrapped). A call is a step when it is the outermost model call on the program's thread, no
pipeline call is running (inside one, the pipeline hooks in diffusers.py find the steps, as
before) and no other adapter drives the boundaries. Autoencoders (models with `encode` and
`decode`) are not steps. Requests are inferred (adapters/inferred.py): a new latent shape, a
scheduler's `set_timesteps` (any diffusers scheduler), a timestep that turns back (a new
denoising loop), or a long pause between calls starts one.
The shape reported is the latent's frames x height x width (height x width for images).

The hooks stay out of what the program compiles: they are module-level functions (a pickled
model still pickles) that Dynamo is told to skip as frames, that run their work under
`torch._dynamo.disable`, and that do nothing while Dynamo traces. `torch.compile(model)` and
`model.compile()` call a model's own hooks inside the compiled callable's frame callback, which
is why they must be invisible there; per-block compilation (`compile_repeated_blocks`) calls them
eagerly. A model called from inside a compiled graph (a compiled function that calls the model)
has Dynamo trace its `_call_impl`, hooks included: they are then no-ops, but Dynamo guards on the
hook dicts it read.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from typing import TYPE_CHECKING, Any, Protocol

from . import compiled_calls
from .inferred import (
    RANK_MODEL_CALLS,
    InferredSteps,
    compiling_here,
    first_tensor_shape,
    is_autoencoder,
    outside_dynamo,
    timestep_of,
)
from .inferred import skip_code as _skip_code

if TYPE_CHECKING:
    from ..protocol import Session

ADAPTER_NAME = "diffusers model calls (inferred)"
_WHERE = "adapter.diffusers-models"
_SHAPE_NAMES = ("hidden_states", "sample", "latents", "x")
_WRAPPED = "__diag_diffusers_models__"


class PipelineCalls(Protocol):
    """What the model hooks read from the pipeline adapter (adapters/diffusers.py, which
    imports this module): a model called inside a pipeline call makes no steps of its own."""

    @property
    def call(self) -> object | None:
        """The pipeline call open in this thread, if any."""


_MODELS: ModelCalls | None = None
_is_compiling: Any = None


def _model_pre_hook(module: Any, args: Any, kwargs: Any) -> None:
    if _is_compiling is None or _is_compiling() or _MODELS is None:
        return None
    _MODELS.on_pre(module, args, kwargs)
    return None


def _model_post_hook(module: Any, args: Any, output: Any) -> None:
    if _is_compiling is None or _is_compiling() or _MODELS is None:
        return None
    _MODELS.on_post(module)
    return None


class ModelCalls:
    def __init__(self, session: Session, adapter: PipelineCalls) -> None:
        self.session = session
        self.torch = session.torch
        self.adapter = adapter
        self.inferred = InferredSteps(session, ADAPTER_NAME, RANK_MODEL_CALLS)
        self.inferred.spans_calls = True
        self._local = threading.local()
        self._hooks: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
        self._seen: weakref.WeakSet[Any] = weakref.WeakSet()
        self.on_pre = outside_dynamo(self.torch, self._on_pre)
        self.on_post = outside_dynamo(self.torch, self._on_post)

    def install(self, base: type) -> None:
        original = base.__dict__.get("__init__")
        if original is None or getattr(original, _WRAPPED, False):
            return
        guarded = self.session.guarded
        hook = self.hook

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            guarded(_WHERE, hook, self)

        setattr(__init__, _WRAPPED, True)
        base.__init__ = __init__  # type: ignore[misc]
        compiled_calls.claim(self._claims, self._on_pre, self._on_post)
        compiled_calls.before_first_call(self.unhook_reachable)

    def _claims(self, target: Any) -> bool:
        """Calls into this compiled target are calls of a hooked model (its steps are ours)."""
        return isinstance(target, self.torch.nn.Module) and target in self._hooks

    def hook(self, model: Any) -> None:
        if is_autoencoder(model):
            return
        self._hooks[model] = [
            model.register_forward_pre_hook(_model_pre_hook, with_kwargs=True),
            model.register_forward_hook(_model_post_hook, always_call=True),
        ]

    # -- models that Dynamo would trace lose their hooks ------------------------------------------

    def unhook_inner(self, model: Any, keep: Any = None) -> None:
        """Models inside `model` (a submodule that is a model too) are traced with it."""
        for inner in model.modules():
            if inner is not keep and inner in self._hooks:
                for handle in self._hooks.pop(inner):
                    handle.remove()

    def unhook_reachable(self, target: Any) -> None:
        """A compiled callable is about to be traced: the models it can reach (its module, its
        bound `self`, its closure, the globals it names) are traced with it."""
        if isinstance(target, self.torch.nn.Module):
            self.unhook_inner(target, keep=target)  # its own hooks run outside the frame
            return
        owner = getattr(target, "__self__", None)
        if isinstance(owner, self.torch.nn.Module):  # a method: its module's hooks run outside
            self.unhook_inner(owner, keep=owner)
        function = getattr(target, "__func__", target)
        code = getattr(function, "__code__", None)
        if code is None:
            return
        reachable = [cell.cell_contents for cell in function.__closure__ or () if _full(cell)]
        names = getattr(function, "__globals__", {})
        reachable += [names[name] for name in code.co_names if name in names]
        for value in reachable:
            if isinstance(value, self.torch.nn.Module):
                self.unhook_inner(value)

    def _on_pre(self, model: Any, args: Any, kwargs: Any) -> None:
        if model not in self._seen:  # its first call, before any compile can trace it
            self._seen.add(model)  # (even while paused: what Dynamo will trace depends on it)
            self.unhook_inner(model, keep=model)
        if self.session.paused:  # Session.pause: no per-step work
            return
        local = self._local
        depth = local.__dict__.get("depth", 0)
        local.depth = depth + 1
        if depth or self.adapter.call is not None:
            return  # a model inside a model, or inside a pipeline call (its steps are known)
        shape = first_tensor_shape(self.torch, args, kwargs, _SHAPE_NAMES)
        timestep = timestep_of(self.torch, _with_positional_timestep(model, args, kwargs))
        if self.inferred.start(_latent_shape(shape, _in_channels(model)), timestep):
            local.stepping = True

    def _on_post(self, model: Any) -> None:
        if self.session.paused:
            return
        local = self._local
        depth = local.__dict__.get("depth", 0) - 1
        local.depth = max(depth, 0)
        if depth <= 0 and local.__dict__.get("stepping"):
            local.stepping = False
            self.inferred.call_done()


_TIMESTEP_INDEX: dict[type, int | None] = {}


def _with_positional_timestep(model: Any, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs`, plus `timestep` where the call passed it by position (a UNet's
    `unet(latents, t, ...)`): its index in the model's `forward`, found once per class."""
    if "timestep" in kwargs or not args:
        return kwargs
    cls = type(model)
    if cls not in _TIMESTEP_INDEX:
        _TIMESTEP_INDEX[cls] = _parameter_index(cls.forward, "timestep")
    index = _TIMESTEP_INDEX[cls]
    if index is None or index >= len(args):
        return kwargs
    return {**kwargs, "timestep": args[index]}


def _parameter_index(function: Any, name: str) -> int | None:
    try:
        names = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return None
    if names and names[0] == "self":
        names = names[1:]
    return names.index(name) if name in names else None


def _full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _in_channels(model: Any) -> int | None:
    config = getattr(model, "config", None)
    value = getattr(config, "in_channels", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _latent_shape(shape: Any, in_channels: int | None = None) -> list[int] | None:
    """[frames, height, width] of a video latent, [height, width] of an image's. A video latent
    is (B, C, F, H, W), or (B, F, C, H, W) where the model's `in_channels` sits at dim 2 and not
    at dim 1 (CogVideoX)."""
    if shape is None:
        return None
    dims = [int(s) for s in shape]
    if len(dims) == 5:
        if in_channels is not None and dims[2] == in_channels and dims[1] != in_channels:
            return [dims[1], dims[3], dims[4]]
        return dims[2:]
    if len(dims) == 4:
        return dims[2:]
    return dims


def install(session: Session, adapter: PipelineCalls, base: type) -> None:
    global _MODELS, _is_compiling
    torch = session.torch
    _skip_code(torch, _model_pre_hook.__code__)
    _skip_code(torch, _model_post_hook.__code__)
    _is_compiling = compiling_here(torch)
    models = ModelCalls(session, adapter)
    _MODELS = models
    models.install(base)
