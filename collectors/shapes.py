"""Dynamic-shape facts: which input dims each compile made symbolic, which it specialised, and
the input shapes compiled callables were really called with.

Two sources. Dynamo's structured trace (a handler on `torch.__trace`, as collectors/compiles.py
uses) says, per compile, each symbol it created (`create_symbol`: symbol, value, source such as
`L['x'].size()[1]`, the user line) and each symbol it baked into a constant
(`symbolic_shape_specialization`). Whether a dim really varies is a fact of the calls, not of
the compile: the callables `torch.compile` returns are wrapped (outside the compiled code, so
guards and graphs are untouched) and the shapes of their tensor arguments sampled, bounded per
callable, and written once at exit.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import TYPE_CHECKING, Any

from .limit_calls import LimitCalls
from .structured import listen

if TYPE_CHECKING:
    from .protocol import Session

#: Every call is sampled until this many, then one call in `_STRIDE`: shapes change at request
#: boundaries, so a sparse sample still sees them, and a hot per-block callable stays cheap.
_DENSE_CALLS = 64
_STRIDE = 16
#: Distinct argument signatures kept per callable.
_SIGNATURES = 64
_VALUE_CHARS = 200
#: Set on the callables `watch` returns (functools.wraps carries it to outer wrappers).
_WATCHED = "_diag_shapes_watched"


def _user_frame(stack: Any, strings: dict[int, str]) -> str | None:
    """`file:line` of the innermost frame of a structured-trace stack, filenames resolved."""
    if not isinstance(stack, list) or not stack:
        return None
    frame = stack[-1]
    if not isinstance(frame, dict):
        return None
    name = frame.get("filename")
    file = strings.get(name, str(name)) if isinstance(name, int) else str(name)
    line = frame.get("line")
    return f"{file}:{line}" if isinstance(line, int) else file


class _Calls:
    """The sampled call shapes of one compiled callable."""

    def __init__(self, frame: dict[str, Any] | None, params: list[str]) -> None:
        self.frame = frame
        self.params = params
        self.calls = 0
        self.sampled = 0
        self.signatures: dict[tuple[Any, ...], int] = {}
        self.overflow = False

    def due(self) -> bool:
        """Count one call; whether it is one to sample (inlined by the hot path in `watch`)."""
        self.calls += 1
        return self.calls <= _DENSE_CALLS or not self.calls % _STRIDE

    def sample(self, args: tuple[Any, ...], kwargs: dict[str, Any], tensor: Any) -> None:
        """Record the call's signature (the caller counted the call and found it due)."""
        self.sampled += 1
        named: list[tuple[str, tuple[int, ...]]] = []
        for index, value in enumerate(args):
            if isinstance(value, tensor):
                name = self.params[index] if index < len(self.params) else f"arg{index}"
                named.append((name, tuple(value.shape)))
        for name, value in kwargs.items():
            if isinstance(value, tensor):
                named.append((name, tuple(value.shape)))
        signature = tuple(named)
        if signature in self.signatures:
            self.signatures[signature] += 1
        elif len(self.signatures) < _SIGNATURES:
            self.signatures[signature] = 1
        else:
            self.overflow = True

    def as_event(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "calls": self.calls,
            "sampled": self.sampled,
            "overflow": self.overflow,
            "signatures": [
                {"count": count, "args": {name: list(shape) for name, shape in signature}}
                for signature, count in self.signatures.items()
            ],
        }


def _function_of(target: Any) -> Any:
    """What Dynamo compiles for `target`: a module's forward (also behind `Module.compile()`,
    which compiles the bound `_call_impl`), else the callable itself."""
    owner = getattr(target, "__self__", None)
    if getattr(target, "__name__", "") in ("_call_impl", "_wrapped_call_impl") and owner:
        return owner.forward
    forward = getattr(target, "forward", None)
    return forward if forward is not None and not inspect.isfunction(target) else target


def _code_of(function: Any) -> Any:
    code = getattr(function, "__code__", None)
    if code is None and hasattr(function, "__func__"):
        code = getattr(function.__func__, "__code__", None)
    return code


def _params(function: Any) -> list[str]:
    """Parameter names in call order (a bound method's `self` is not among them)."""
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


class ShapeCollector:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.strings: dict[int, str] = {}
        self.calls: list[_Calls] = []
        self.optioned: set[tuple[str, str, int]] = set()
        self.limit_calls = LimitCalls(session)

    @classmethod
    def install(cls, session: Session) -> ShapeCollector:
        collector = cls(session)
        listen(session, "shapes", collector.on_structured)
        collector._wrap_torch_compile()
        return collector

    def _compile_fields(self, metadata: dict[str, Any]) -> dict[str, Any]:
        compiles = self.session.compiles
        return {
            "compile_id": f"{metadata.get('frame_id')}/{metadata.get('frame_compile_id')}",
            "epoch": compiles.epoch if compiles is not None else 0,
        }

    def on_structured(self, metadata: dict[str, Any], record: logging.LogRecord) -> None:
        if "str" in metadata:
            entry = metadata["str"]
            if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[1], int):
                self.strings[entry[1]] = str(entry[0])
        elif "create_symbol" in metadata:
            data = metadata["create_symbol"]
            self.session.emit(
                "shape_symbol",
                symbol=str(data.get("symbol")),
                value=str(data.get("val"))[:_VALUE_CHARS],
                range=str(data.get("vr"))[:_VALUE_CHARS],
                source=str(data.get("source"))[:_VALUE_CHARS],
                user_location=_user_frame(data.get("user_stack"), self.strings),
                **self._compile_fields(metadata),
            )
        elif "symbolic_shape_specialization" in metadata:
            data = metadata["symbolic_shape_specialization"]
            sources = data.get("sources") if isinstance(data.get("sources"), list) else []
            self.session.emit(
                "shape_specialization",
                symbol=str(data.get("symbol")),
                sources=[str(s)[:_VALUE_CHARS] for s in sources[:16]],
                value=str(data.get("value"))[:_VALUE_CHARS],
                reason=str(data.get("reason"))[:_VALUE_CHARS],
                user_location=_user_frame(data.get("user_stack"), self.strings)
                or _user_frame(data.get("stack"), self.strings),
                **self._compile_fields(metadata),
            )

    # -- call shapes ------------------------------------------------------------------------------

    def _wrap_torch_compile(self) -> None:
        torch = self.session.torch
        original = torch.compile
        collector = self

        session = self.session

        def watched(target: Any, compiled: Any, options: dict[str, Any]) -> Any:
            wrapped = session.guarded("shapes.watch", collector.watch, target, compiled, options)
            return compiled if wrapped is None else wrapped

        @functools.wraps(original)
        def compile(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            target = args[0] if args else kwargs.get("model")
            if target is None:  # @torch.compile(...) as a decorator factory
                return lambda fn: watched(fn, result(fn), kwargs)
            return watched(target, result, kwargs)

        compile.__wrapped__ = original  # type: ignore[attr-defined]
        torch.compile = compile  # type: ignore[attr-defined]

    def watch(self, target: Any, compiled: Any, options: dict[str, Any] | None = None) -> Any:
        """Sample the tensor shapes `compiled` is called with (outside its compiled code), and
        after a recompile-limit hit check its calls' guards (collectors/limit_calls.py)."""
        if getattr(compiled, _WATCHED, False):
            # `@torch.compile(...)`: torch's decorator calls torch.compile again with the
            # function, which this wrapper already saw; wrapping twice would count calls twice.
            return compiled
        torch = self.session.torch
        function = _function_of(target)
        code = _code_of(function)
        frame = (
            {"name": code.co_name, "file": code.co_filename, "line": code.co_firstlineno}
            if code is not None
            else None
        )
        self._options(frame, options or {})
        calls = _Calls(frame, _params(function))
        self.calls.append(calls)
        tensor = torch.Tensor
        session = self.session
        limit = self.limit_calls
        key = (frame["name"], frame["file"], frame["line"]) if frame is not None else None
        owner = getattr(function, "__self__", None)
        # Session.pause: no sampling. The switch is read only outside Dynamo's tracing (while it
        # traces, is_compiling() is constant True and short-circuits), so it adds no guard.
        is_compiling = torch.compiler.is_compiling

        guarded = session.guarded

        def sample(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            # Per compiled call, so the common case is inlined: count the call; sample one in
            # `_STRIDE` after the first `_DENSE_CALLS`; go to the guard check only while the
            # frame is limited or the stance may let a call run eagerly. The guarded calls this
            # replaces were the largest per-call cost itemised on an H200 (bench/record_costs.py).
            if is_compiling():  # traced by an outer compile: no hook guard (it would add guards)
                if calls.due():
                    calls.sample(args, kwargs, tensor)
                return
            count = calls.calls = calls.calls + 1
            if count <= _DENSE_CALLS or not count % _STRIDE:
                guarded("shapes.sample", calls.sample, args, kwargs, tensor)
            if key is not None and limit.may_observe(key):
                guarded("limit_calls", limit.observe, key, code, function, owner, args, kwargs)

        if isinstance(compiled, torch.nn.Module):

            def pre(module: Any, args: Any, kwargs: Any) -> None:
                if is_compiling() or not session.paused:
                    sample(tuple(args), dict(kwargs))

            compiled.register_forward_pre_hook(pre, with_kwargs=True)
            return compiled
        if not callable(compiled):
            return compiled

        @functools.wraps(compiled)
        def sampled(*args: Any, **kwargs: Any) -> Any:
            if is_compiling() or not session.paused:
                sample(args, kwargs)
            return compiled(*args, **kwargs)

        setattr(sampled, _WATCHED, True)
        return sampled

    def _options(self, frame: dict[str, Any] | None, options: dict[str, Any]) -> None:
        """One `compile_options` event per frame: how the program asked torch.compile to compile
        it (dynamic=False makes every new size a recompile: analyzers name it as the cause)."""
        if frame is None:
            return
        key = (frame["name"], frame["file"], frame["line"])
        if key in self.optioned:
            return
        self.optioned.add(key)
        if options.get("fullgraph"):
            self.limit_calls.fullgraph.add(key)
        backend = options.get("backend", "inductor")
        self.session.emit(
            "compile_options",
            frame=frame,
            dynamic=options.get("dynamic"),
            backend=backend if isinstance(backend, str) else getattr(backend, "__name__", "?"),
            mode=options.get("mode"),
            fullgraph=bool(options.get("fullgraph", False)),
        )

    def close(self) -> None:
        """At exit: one `call_shapes` event per compiled callable that was called."""
        self.limit_calls.close()
        for calls in self.calls:
            if calls.calls:
                self.session.emit("call_shapes", **calls.as_event())
