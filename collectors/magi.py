"""MagiCompiler (`magi_compiler`, LightX2V's `use_magi_compile`): what magi compiled, and whether
its fast path later ran code whose guards no longer hold.

magi compiles each target once through Dynamo (declared `dynamic_arg_dims` marked dynamic, the
rest static), captures the compiled bytecode, and from then on swaps it in directly: Dynamo's
guards are never checked again (`_run_orchestration`, the JIT fast path). So this collector wraps
`magi_compiler._api._run_orchestration` from outside, changing nothing it compiles or runs:

- each target's first call: its config (compile mode, backend, cache_root_dir, compile_sizes,
  splitting_ops, cudagraph and offload settings) and declared dims (`magi_state`);
- each compile: start, end, duration, the exception if it failed, magi's own counters before and
  after (piecewise subgraphs, backend compiles, cache entries: a cold compile or a cache hit),
  the guards Dynamo built, and the magi_depyf dump magi wrote (`magi_compile_start/_end`);
- sampled fast-path calls (each new input signature, the first calls of each request): the guards
  captured at compile time evaluated against the call's arguments, as Dynamo would have
  (`magi_guard_check`), with the failing guard, the value seen and the value baked in;
- a region marker (`diag.region:<fn>#<n>`) around fast-path calls inside profiler windows, the
  same one diag puts around torch.compile'd calls, so `--baseline eager` lines regions up.

The `magi_compile` event (the program uses magi, and each decorated target) is kept as it was.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import time
import weakref
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from diag.trace.format import ENV_GUARD_CHECKS

from .adapters import compiled_calls
from .torch_api import cache_entries

if TYPE_CHECKING:
    from .protocol import Session

NOTE = (
    "magi_compile compiles each target once and then runs the captured bytecode without "
    "Dynamo's guards; diag records its compiles and checks the captured guards on sampled calls"
)

#: Guard checks per compiled target at most (each new signature, first calls of each request).
MAX_CHECKS_PER_TARGET = 64
#: Calls of a target checked at the start of each request.
CHECKS_PER_REQUEST = 3
#: Guard code parts kept per compile, and failing guards reported per check.
MAX_GUARDS = 200
MAX_FAILURES = 8
MAX_DUMP_FILES = 60
_COUNTERS = (
    "num_piecewise_graphs_seen",
    "num_piecewise_capturable_graphs_seen",
    "num_backend_compilations",
    "num_cache_entries",
    "num_inductor_compiles",
    "num_eager_compiles",
    "num_compiled_artifacts_saved",
)
_SOURCE = re.compile(
    r"^(?P<len>len\()?L\[(?P<q>['\"])(?P<root>\w+)(?P=q)\](?P<path>(?:\.\w+(?:\(\))?|\[\d+\]"
    r"|\[(?P<kq>['\"])[^'\"]*(?P=kq)\])*)\)?"
    r"\s*(?P<op>==|!=|<=|>=|<|>| is not | is )?\s*(?P<rhs>.*)$"
)
_STEP = re.compile(r"\.(\w+)(\(\))?|\[(\d+)\]|\[['\"]([^'\"]*)['\"]\]")


def _describe(target: Any) -> dict[str, Any] | None:
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        return None
    try:
        file, line = inspect.getsourcefile(target), inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        file, line = None, None
    return {"name": getattr(target, "__qualname__", repr(target)), "file": file, "line": line}


def _jsonable(value: Any) -> Any:
    """Config values as plain JSON: enums by value, pydantic models by model_dump."""
    if hasattr(value, "model_dump"):
        try:
            return _jsonable(value.model_dump(mode="json"))
        except Exception:  # noqa: BLE001
            return str(value)
    if hasattr(value, "value") and type(value).__module__.startswith("magi_compiler"):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _config(conf: Any) -> dict[str, Any]:
    keys = (
        "compile_mode",
        "backend",
        "cache_root_dir",
        "aot",
        "disable_cache",
        "compile_sizes",
        "splitting_ops",
        "cudagraph_mode",
        "offload_config",
        "enable_inductor_max_autotune",
        "enable_inductor_coordinate_descent_tuning",
    )
    return {key: _jsonable(getattr(conf, key, None)) for key in keys}


def _counters() -> dict[str, int]:
    try:
        from magi_compiler.utils import compilation_counter
    except Exception:  # noqa: BLE001
        return {}
    return {name: int(getattr(compilation_counter, name, 0)) for name in _COUNTERS}


def _code_target(code: Any) -> dict[str, Any]:
    return {
        "name": code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
        "file": code.co_filename,
        "line": code.co_firstlineno,
    }


def _tensor_meta(torch: Any, value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), str(value.dtype), str(value.device))
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("V", value)
    if isinstance(value, (list, tuple)) and len(value) <= 8:
        return ("S", tuple(_tensor_meta(torch, v) for v in value))
    return ("O", type(value).__name__, id(value))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


class _Target:
    """What the collector keeps per MagiCompileState (held weakly)."""

    def __init__(self, state: Any, index: int) -> None:
        self.index = index
        self.name = getattr(state.original_entry, "__qualname__", None) or type(state.obj).__name__
        self.code = state.original_code_for_hook
        self.guard_manager: Any = None
        self.baked: dict[str, Any] = {}
        self.signatures: set[Any] = set()
        self.checks = 0
        self.calls = 0
        self.request: Any = None
        self.request_calls = 0
        self.compiled = False
        self.signature = inspect.signature(state.original_entry)


class MagiCollector:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.torch = session.torch
        self.targets: weakref.WeakKeyDictionary[Any, _Target] = weakref.WeakKeyDictionary()
        try:
            from magi_compiler.utils import compilation_counter

            self.counter: Any = compilation_counter
        except Exception:  # noqa: BLE001
            self.counter = None

    # -- helpers --------------------------------------------------------------------------------

    def _position(self) -> dict[str, Any]:
        steps = self.session.steps
        return steps.position() if steps is not None else {}

    def _target(self, state: Any) -> _Target:
        target = self.targets.get(state)
        if target is None:
            target = _Target(state, len(self.targets))
            self.targets[state] = target
            conf = state.compile_config
            self.session.emit(
                "magi_state",
                target=_code_target(target.code),
                name=target.name,
                model_idx=getattr(state, "model_idx", None),
                model_tag=getattr(state, "model_tag", None),
                method=getattr(state, "target_method_name", None),
                dynamic_arg_dims=_jsonable(getattr(state, "dynamic_arg_dims", None)),
                config=_config(conf),
                **self._position(),
            )
        return target

    def _locals(self, state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The frame locals Dynamo saw: the original function's bound arguments."""
        target = self.targets.get(state)
        sig = target.signature if target is not None else inspect.signature(state.original_entry)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        f_locals = dict(bound.arguments)
        if getattr(state, "target_method_name", None):
            f_locals = {"self": state.obj, **f_locals}
        return f_locals

    # -- compile ----------------------------------------------------------------------------------

    def _will_compile(self, state: Any) -> bool:
        conf = state.compile_config
        mode = _jsonable(getattr(conf, "compile_mode", None))
        if mode != "MAGI_COMPILE":
            return False
        if state.jit_compiled_code is not None:
            return False
        return not (conf.aot and state.aot_compiled_fn is not None)

    def _compile(
        self,
        original: Any,
        state: Any,
        target: _Target,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        session = self.session
        torch = self.torch
        f_locals: dict[str, Any] = {}
        try:
            f_locals = self._locals(state, args, kwargs)
        except Exception:  # noqa: BLE001
            f_locals = {}
        signature = {
            k: _short(_tensor_meta(torch, v)[1:]) for k, v in f_locals.items() if k != "self"
        }
        before = _counters()
        started = time.monotonic_ns()
        wall = time.time()
        session.emit(
            "magi_compile_start",
            t=started,
            target=_code_target(target.code),
            name=target.name,
            model_idx=getattr(state, "model_idx", None),
            inputs=signature,
            **self._position(),
        )
        error: BaseException | None = None
        try:
            return original(state, args, kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            ended = time.monotonic_ns()
            session.guarded(
                "magi.compile_end",
                self._compile_end,
                state,
                target,
                f_locals,
                before,
                started,
                ended,
                wall,
                error,
            )

    def _compile_end(
        self,
        state: Any,
        target: _Target,
        f_locals: dict[str, Any],
        before: dict[str, int],
        started: int,
        ended: int,
        wall: float,
        error: BaseException | None,
    ) -> None:
        after = _counters()
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        ok = error is None and (
            state.jit_compiled_code is not None or state.aot_compiled_fn is not None
        )
        guards: list[str] = []
        if ok:
            target.compiled = True
            target.guard_manager = self._capture_guards(target.code)
            guards = self._guard_parts(target.guard_manager)
            target.baked = {k: _tensor_meta(self.torch, v) for k, v in f_locals.items()}
            target.signatures.add(self._signature(f_locals))
        conf = state.compile_config
        fields: dict[str, Any] = {
            "target": _code_target(target.code),
            "name": target.name,
            "model_idx": getattr(state, "model_idx", None),
            "start_t": started,
            "duration_s": (ended - started) / 1e9,
            "result": "ok" if ok else "failed",
            "counters": delta,
            "cache": _cache_verdict(delta, conf),
            "guards": guards[:MAX_GUARDS],
            "guard_count": len(guards),
            "depyf_dump": _depyf_dump(conf, state, wall),
            "magi_cache_dir": _magi_cache_dir(conf, state),
        }
        if error is not None:
            fields["error_type"] = f"{type(error).__module__}.{type(error).__qualname__}"
            fields["error"] = str(error)[:8192]
        self.session.emit("magi_compile_end", t=ended, **fields, **self._position())

    def _capture_guards(self, code: Any) -> Any:
        """The guard manager Dynamo built for this compile: the newest cache entry of the code.

        Kept here because magi drops the code object's cache before each target's compile (all
        blocks of one class share one code object): without this copy only the last one's stay.
        """
        entries = cache_entries(code)
        return getattr(entries[0], "guard_manager", None) if entries else None

    @staticmethod
    def _guard_parts(guard_manager: Any) -> list[str]:
        if guard_manager is None:
            return []
        parts: list[str] = []
        seen: set[int] = set()

        def visit(mgr: Any) -> None:
            if id(mgr) in seen or len(parts) >= MAX_GUARDS:
                return
            seen.add(id(mgr))
            for leaf in mgr.get_leaf_guards():
                parts.extend(str(p).split("#")[0].rstrip() for p in leaf.verbose_code_parts())
            for child in mgr.get_child_managers():
                visit(child)

        try:
            visit(guard_manager.root)
            epilogue = getattr(guard_manager.root, "get_epilogue_lambda_guards", None)
            for leaf in epilogue() if epilogue is not None else ():
                parts.extend(str(p).split("#")[0].rstrip() for p in leaf.verbose_code_parts())
        except Exception:  # noqa: BLE001
            return parts
        return parts

    # -- the fast path ----------------------------------------------------------------------------

    def _signature(self, f_locals: dict[str, Any]) -> Any:
        return tuple((k, _tensor_meta(self.torch, v)) for k, v in f_locals.items())

    def _sample(
        self, state: Any, target: _Target, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Check the captured guards on this call if it is one of the sampled ones."""
        target.calls += 1
        position = self._position()
        request = position.get("request_id")
        if request != target.request:
            target.request, target.request_calls = request, 0
        target.request_calls += 1
        if (
            target.guard_manager is None
            or target.checks >= MAX_CHECKS_PER_TARGET
            or os.environ.get(ENV_GUARD_CHECKS) == "0"
        ):
            return
        f_locals = self._locals(state, args, kwargs)
        signature = self._signature(f_locals)
        new_signature = signature not in target.signatures
        if not new_signature and target.request_calls > CHECKS_PER_REQUEST:
            return
        target.signatures.add(signature)
        target.checks += 1
        started = time.monotonic_ns()
        failures, reason = self._check(target, f_locals)
        self.session.emit(
            "magi_guard_check",
            t=started,
            target=_code_target(target.code),
            name=target.name,
            call=target.calls,
            ok=not failures and reason is None,
            new_signature=new_signature,
            inputs={
                k: _short(_tensor_meta(self.torch, v)[1:])
                for k, v in f_locals.items()
                if k != "self"
            },
            reason=reason,
            failures=failures,
            check_s=(time.monotonic_ns() - started) / 1e9,
            **position,
        )

    def _check(
        self, target: _Target, f_locals: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str | None]:
        manager = target.guard_manager
        result = manager.check_verbose(f_locals)
        if result.result:
            return [], None
        parts = [str(p) for p in getattr(result, "verbose_code_parts", [])]
        reason: str | None = None
        try:
            from torch._dynamo.guards import get_guard_fail_reason_helper

            reason = str(get_guard_fail_reason_helper(manager, f_locals, None, None))
            reason = re.sub(r"^None: ", "", reason)
        except Exception:  # noqa: BLE001
            reason = "; ".join(parts) or "guard check failed"
        failures = [_explain(part, f_locals, target.baked) for part in parts[:MAX_FAILURES]]
        if not failures:
            failures.append({"guard": reason, "seen": None, "baked": None})
        return failures, reason

    def orchestrate(
        self, original: Any, state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.session.stance == "force_eager":
            # The eager baseline: nothing compiles, every call goes through torch.compile's
            # wrapper (which diag marks); magi's state is not worth recording there.
            return original(state, args, kwargs)
        # A magi call counts for inferred steps here, the first compile and the fast path
        # alike (the fast path never enters torch.compile's callable), keyed by its module.
        owner = getattr(state, "obj", None)
        if not isinstance(owner, self.torch.nn.Module):
            owner = None  # a decorated function: the state is the target
        # A decorated module's instance is the target (its own module call is no "eager module
        # around compiled blocks"), and keys its calls.
        token = compiled_calls.enter_call(
            owner if owner is not None else state,
            (owner, *args) if owner is not None else tuple(args),
            kwargs,
        )
        try:
            return self._orchestrate(original, state, args, kwargs)
        finally:
            compiled_calls.leave_call(token)

    def _orchestrate(
        self, original: Any, state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        target = self._target(state)
        if self._will_compile(state):
            return self._compile(original, state, target, args, kwargs)
        if target.compiled:
            try:
                self._sample(state, target, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - one error, then this target goes unchecked
                target.checks = MAX_CHECKS_PER_TARGET
                self.session.collector_error("magi.guards", exc)
        counter = self.counter
        before = counter.num_backend_compilations if counter is not None else 0
        started = time.monotonic_ns()
        try:
            return self._run_marked(original, state, target, args, kwargs)
        finally:
            if counter is not None and counter.num_backend_compilations != before:
                self.session.guarded(
                    "magi.runtime_compile", self._runtime_compile, target, before, started
                )

    def _runtime_compile(self, target: _Target, before: int, started: int) -> None:
        """A fast-path call that compiled (a `compile_sizes` entry at its first use): magi's
        piecewise backend compiles there, outside the first compile."""
        ended = time.monotonic_ns()
        self.session.emit(
            "magi_runtime_compile",
            t=started,
            target=_code_target(target.code),
            name=target.name,
            backend_compilations=self.counter.num_backend_compilations - before,
            duration_s=(ended - started) / 1e9,
            **self._position(),
        )

    def _run_marked(
        self,
        original: Any,
        state: Any,
        target: _Target,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """The fast-path call, inside a region marker when a profiler window is open (the first
        compile and the eager baseline go through torch.compile's wrapper, which marks itself)."""
        windows = self.session.profiler
        steps = self.session.steps
        fast = state.jit_compiled_code is not None or state.aot_compiled_fn is not None
        if not fast or windows is None or steps is None or not getattr(windows, "active", False):
            return original(state, args, kwargs)
        calls = steps.region_calls
        n = calls.get(target.name, 0)
        calls[target.name] = n + 1
        with self.torch.profiler.record_function(f"diag.region:{target.name}#{n}"):
            return original(state, args, kwargs)


def _cache_verdict(delta: dict[str, int], conf: Any) -> str:
    """cold (Inductor or eager compiled something), hit (magi loaded every subgraph from its
    cache), disabled, or unknown (counters unavailable)."""
    if not delta:
        return "unknown"
    if getattr(conf, "disable_cache", False):
        return "disabled"
    if delta.get("num_inductor_compiles", 0) or delta.get("num_eager_compiles", 0):
        return "cold"
    if delta.get("num_backend_compilations", 0):
        return "hit"
    return "unknown"


def _magi_cache_dir(conf: Any, state: Any) -> str | None:
    try:
        from magi_compiler.config import magi_cache_dump_path

        return str(magi_cache_dump_path(conf.cache_root_dir, state.model_idx, state.model_tag))
    except Exception:  # noqa: BLE001
        return None


def _depyf_dump(conf: Any, state: Any, since: float) -> dict[str, Any] | None:
    """The magi_depyf folder this compile wrote (cache_root_dir/magi_depyf/run_*/model_*), and
    the files in it: magi's own account of the compile (timeline, decompiled code, subgraphs)."""
    root = Path(str(getattr(conf, "cache_root_dir", ""))) / "magi_depyf"
    try:
        from magi_compiler.config import model_rank_dir_name

        name = model_rank_dir_name(state.model_idx, state.model_tag)
        candidates = [p / name for p in root.glob("run_*") if (p / name).is_dir()]
    except Exception:  # noqa: BLE001
        return None
    fresh = [p for p in candidates if p.stat().st_mtime >= since - 2]
    if not fresh:
        return None
    folder = max(fresh, key=lambda p: p.stat().st_mtime)
    files = [
        {"path": str(path.relative_to(folder)), "bytes": path.stat().st_size}
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]
    # Dynamo may restart the analysis, leaving one compiled_fn folder per attempt: the newest
    # holds the split that runs.
    fns = [
        p for p in (folder / "compiled_functions").glob("*/entry_*/compiled_fns/*") if p.is_dir()
    ]
    newest = max(fns, key=lambda p: p.stat().st_mtime) if fns else None
    subgraphs = (
        sorted(
            int(p.name[len("submod_") :])
            for p in newest.glob("submod_*")
            if p.is_dir() and p.name[len("submod_") :].isdigit()
        )
        if newest is not None
        else []
    )
    return {
        "dir": str(folder),
        "files": files[:MAX_DUMP_FILES],
        "file_count": len(files),
        "subgraphs": len(subgraphs),
    }


def _resolve(f_locals: dict[str, Any], root: str, path: str) -> Any:
    value = f_locals[root]
    for match in _STEP.finditer(path):
        attr, call, index, key = match.groups()
        if attr is not None:
            value = getattr(value, attr)
            if call:
                value = value()
        elif index is not None:
            value = value[int(index)]
        else:
            value = value[key]
    return value


def _explain(part: str, f_locals: dict[str, Any], baked: dict[str, Any]) -> dict[str, Any]:
    """One failing guard: its text, the value the call has, the value compiled in."""
    text = part.split("#")[0].strip()
    entry: dict[str, Any] = {"guard": text, "seen": None, "baked": None}
    where = re.search(r"#\s*(\S+:\d+) in (\w+)\s*$", part)
    if where:
        entry["where"] = f"{where.group(1)} in {where.group(2)}"
        comment = part.split("#")[1].strip() if part.count("#") >= 2 else None
        entry["code"] = comment
    mismatch = re.search(r"expected (.+?), actual (.+?)$", text)
    if mismatch:
        entry["baked"], entry["seen"] = mismatch.group(1), mismatch.group(2)
        return entry
    match = _SOURCE.match(text)
    if match is None or match.group("root") not in f_locals:
        return entry
    try:
        value = _resolve(f_locals, match.group("root"), match.group("path") or "")
        if match.group("len"):
            value = len(value)
        entry["seen"] = _short(value)
    except Exception:  # noqa: BLE001
        entry["seen"] = None
    if match.group("op") and match.group("op").strip() == "==" and match.group("rhs"):
        entry["baked"] = match.group("rhs").strip()
    elif not match.group("path") and match.group("root") in baked:
        entry["baked"] = _short(baked[match.group("root")][1:])
    return entry


def install(session: Session, module: ModuleType) -> None:
    if not getattr(session, "magi_seen", False):
        session.magi_seen = True  # type: ignore[attr-defined]
        session.emit("magi_compile", module=module.__name__, note=NOTE, target=None)
        session.install("magi.orchestration", _wrap_orchestration, session)
    original = getattr(module, "magi_compile", None)
    if original is None or getattr(original, "__diag_wrapped__", False):
        return

    def announce(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        target = _describe(args[0]) if args else None
        if target is not None:
            dims = kwargs.get("dynamic_arg_dims")
            session.emit(
                "magi_compile",
                module=module.__name__,
                note=NOTE,
                target=target,
                dynamic_arg_dims=_jsonable(dims) if dims is not None else None,
            )

    @functools.wraps(original)
    def magi_compile(*args: Any, **kwargs: Any) -> Any:
        session.guarded("magi.decorate", announce, args, kwargs)
        return original(*args, **kwargs)

    magi_compile.__diag_wrapped__ = True  # type: ignore[attr-defined]
    module.magi_compile = magi_compile  # type: ignore[attr-defined]


def _wrap_orchestration(session: Session) -> None:
    """Wrap `_run_orchestration`, which every magi-compiled call goes through (looked up in
    `magi_compiler._api`'s globals at call time, so replacing the module attribute suffices)."""
    import importlib

    api = importlib.import_module("magi_compiler._api")
    original = getattr(api, "_run_orchestration", None)
    if original is None or getattr(original, "__diag_wrapped__", False):
        return
    collector = MagiCollector(session)
    session.magi = collector  # type: ignore[attr-defined]

    @functools.wraps(original)
    def _run_orchestration(state: Any, args: Any, kwargs: Any) -> Any:
        if session.paused:  # Session.pause: a compiled target's calls are not sampled
            known = collector.targets.get(state)
            if known is not None and known.compiled:
                return original(state, args, kwargs)
        try:
            target_ok = True
            collector._target(state)
        except Exception as exc:  # noqa: BLE001
            session.collector_error("magi.state", exc)
            target_ok = False
        if not target_ok:
            return original(state, args, kwargs)
        return collector.orchestrate(original, state, args, kwargs)

    _run_orchestration.__diag_wrapped__ = True  # type: ignore[attr-defined]
    api._run_orchestration = _run_orchestration  # type: ignore[attr-defined]
    from .importhook import on_import

    on_import(
        "torch._inductor.runtime.triton_heuristics",
        lambda module: session.install("magi.autotune", _wrap_autotune, session, module),
    )


def _wrap_autotune(session: Session, module: ModuleType) -> None:
    """Time Inductor's runtime autotuning (a kernel benchmarking its configs at its first launch
    for a size): one of the costs a step 0 at a new shape can carry under magi."""
    autotuner = getattr(module, "CachingAutotuner", None)
    original = getattr(autotuner, "autotune_to_one_config", None)
    if original is None or getattr(original, "__diag_wrapped__", False):
        return

    def timed(tuner: Any, started: int) -> None:
        steps = session.steps
        fn = getattr(tuner, "fn", None)
        session.emit(
            "autotune",
            t=started,
            kernel=str(
                getattr(fn, "__name__", None)
                or getattr(tuner, "inductor_meta", {}).get("kernel_name", "?")
            ),
            duration_s=(time.monotonic_ns() - started) / 1e9,
            **(steps.position() if steps is not None else {}),
        )

    @functools.wraps(original)
    def autotune_to_one_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic_ns()
        try:
            return original(self, *args, **kwargs)
        finally:
            session.guarded("magi.autotune_call", timed, self, started)

    autotune_to_one_config.__diag_wrapped__ = True  # type: ignore[attr-defined]
    autotuner.autotune_to_one_config = autotune_to_one_config  # type: ignore[union-attr]
