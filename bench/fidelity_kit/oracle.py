"""The fidelity oracle: torch's own record of what a program compiled, kept without diag.

A generated program imports this module (copied beside it as `fidelity_oracle.py`), calls
`install(role)` where it would first use torch.compile, and marks its own requests and steps
with `request()` and `step()`. The oracle never imports diag and reads nothing diag writes:

- compile ids started, per position: `torch._dynamo.callback.on_compile_start/_end`; the code
  object being compiled and the cache entries it already had are read off Dynamo's own
  `_compile` frame (its `code` and `cache_entries` locals);
- why each recompile happened: `torch._dynamo.utils.guard_failures`, which gains one reason per
  existing entry (prefixed with that entry's compile id) before each recompile;
- every compile's outcome: `torch._dynamo.utils.get_compilation_metrics()` (fail type and
  reason, cache size, timings), read often enough that its 64-entry window loses nothing;
- cache entries per code object at each step end (`_debug_get_cache_entry_list`);
- recompile-limit warnings: a handler on the `torch._dynamo` logger;
- graph breaks: `counters["graph_break"]` and `counters["unimplemented"]` before and after
  each compile (torch 2.13 counts a break it resumes after in the top frame, and one that makes
  it skip the frame, under "unimplemented" only; the recompile-limit entry there is not a break);
- whether each call of a watched compiled callable ran compiled: every cache entry's guards
  checked against the call's arguments before the call (`watch_module`, `watch_callable`),
  except for a code object whose compile failed with `config_suppress_errors` (its
  compilation_metrics say so): Dynamo skips that code from then on, so each later call runs
  eagerly whatever its entries' guards say (seen with a counting backend on torch 2.6 and 2.13:
  the entries stay in the cache, unused);
- counters (aot_autograd's cache counters included) at each step end and at exit, each
  request's output digest, and an uncaught exception at exit (`sys.last_value`).

Records go to `$FIDELITY_ORACLE_DIR/oracle-<role>-<pid>.jsonl`, one JSON object a line, flushed
per record, so a program that dies still leaves what it did. Without that variable the oracle
does nothing (the program runs as written).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import inspect
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

ENV_DIR = "FIDELITY_ORACLE_DIR"
_METRIC_FIELDS = (
    "compile_id",
    "co_name",
    "co_filename",
    "co_firstlineno",
    "cache_size",
    "accumulated_cache_size",
    "fail_type",
    "fail_reason",
    "fail_user_frame_filename",
    "fail_user_frame_lineno",
    "recompile_reason",
    "guard_count",
    "graph_op_count",
    "start_time_us",
    "entire_frame_compile_time_s",
    "config_suppress_errors",
    "is_forward",
    "is_runtime",
)


class _Oracle:
    def __init__(self, role: str, folder: str) -> None:
        import torch

        self.torch = torch
        self.role = role
        self.pid = os.getpid()
        self.file = open(  # noqa: SIM115 - open for the life of the process
            os.path.join(folder, f"oracle-{role}-{self.pid}.jsonl"), "a", encoding="utf-8"
        )
        self.phase = "live"
        self.request: str | None = None
        self.step: int | None = None
        #: The last request and step entered, kept after they end.
        self.last_request: str | None = None
        self.last_step: int | None = None
        self.step_started = 0.0
        self.compile_seconds = 0.0
        self.open_compiles: dict[str, tuple[float, dict[str, int]]] = {}
        self.started: list[str] = []  # compile ids in the order they started
        self.failures_seen: dict[int, int] = {}
        self.metrics_seen: set[tuple[str, int]] = set()
        self.entries_seen: dict[str, list[str]] = {}
        self.counters_seen: dict[str, dict[str, int]] = {}
        self.calls: dict[tuple[str, str, str | None, int | None], dict[str, Any]] = {}
        #: Code objects (`_code_key`) Dynamo skips: a compile of theirs failed and
        #: suppress_errors swallowed it. `harvested` compiles had started at the last harvest.
        self.skipped_codes: set[str] = set()
        self.harvested = 0

    # -- output ---------------------------------------------------------------------------------

    def emit(self, event: str, /, **fields: Any) -> None:
        record = {"ev": event, "t": time.monotonic_ns(), **fields}
        self.file.write(json.dumps(record, default=str) + "\n")
        self.file.flush()

    def position(self) -> dict[str, Any]:
        return {"phase": self.phase, "request": self.request, "step": self.step}

    # -- torch's record -------------------------------------------------------------------------

    def on_compile_start(self, args: Any) -> None:
        compile_id = str(args.compile_id)
        code, entries = _compiling_frame()
        reasons = self._new_failures(code) if code is not None else []
        self.harvest_metrics()
        breaks = self.break_counts()
        self.open_compiles[compile_id] = (time.perf_counter(), breaks)
        self.started.append(compile_id)
        self.emit(
            "compile_start",
            compile_id=compile_id,
            code=_code_key(code) if code is not None else None,
            entries_before=[str(e.compile_id) for e in entries or []],
            reasons=reasons,
            **self.position(),
        )

    def on_compile_end(self, args: Any) -> None:
        compile_id = str(args.compile_id)
        started, breaks = self.open_compiles.pop(compile_id, (time.perf_counter(), {}))
        seconds = time.perf_counter() - started
        self.compile_seconds += seconds
        now = self.break_counts()
        added = {k[:300]: v - breaks.get(k, 0) for k, v in now.items() if v > breaks.get(k, 0)}
        self.emit(
            "compile_end",
            compile_id=compile_id,
            seconds=round(seconds, 6),
            graph_breaks=added,
            **self.position(),
        )

    def break_counts(self) -> dict[str, int]:
        """Graph breaks counted so far, by torch's reason text (both counters that hold them)."""
        counters = self.torch._dynamo.utils.counters
        found: dict[str, int] = {}
        for group in ("graph_break", "unimplemented"):
            for reason, count in counters[group].items():
                if "recompile limit" not in str(reason).lower():
                    found[str(reason)] = found.get(str(reason), 0) + int(count)
        return found

    def on_limit(self, message: str) -> None:
        """Dynamo's `hit config.recompile_limit` warning: the frame, its reasons, where."""
        first = message.splitlines()
        function = next((line.strip() for line in first if "function:" in line), "")
        code = self._code_named(function)
        self.emit(
            "recompile_limit",
            message=message[:2000],
            function=function,
            code=_code_key(code) if code is not None else None,
            reasons=self._new_failures(code) if code is not None else [],
            **self.position(),
        )

    def _new_failures(self, code: Any) -> list[str]:
        """The guard_failures reasons added for `code` since last read: one per cache entry of
        the recompile being started (each prefixed with that entry's compile id)."""
        failures = self.torch._dynamo.utils.guard_failures.get(code, [])
        seen = self.failures_seen.get(id(code), 0)
        self.failures_seen[id(code)] = len(failures)
        return [str(reason)[:2000] for reason in failures[seen:]]

    def _code_named(self, function: str) -> Any:
        """The code object the limit warning names (`'f' (/path/file.py:12)`)."""
        for code in list(self.torch._dynamo.utils.guard_failures):
            if f"'{code.co_name}' ({code.co_filename}:{code.co_firstlineno})" in function:
                return code
        return None

    def harvest_metrics(self) -> None:
        """New compilation_metrics records (torch keeps the last 64)."""
        for item in self.torch._dynamo.utils.get_compilation_metrics():
            key = (
                str(getattr(item, "compile_id", None)),
                int(getattr(item, "start_time_us", 0) or 0),
            )
            if key in self.metrics_seen:
                continue
            self.metrics_seen.add(key)
            fields = {name: getattr(item, name, None) for name in _METRIC_FIELDS}
            if isinstance(fields.get("fail_reason"), str):
                fields["fail_reason"] = fields["fail_reason"][:4000]
            self.emit("metrics", **{k: v for k, v in fields.items() if v is not None})
            limit = "recompile limit" in str(fields.get("fail_reason") or "").lower()
            if fields.get("fail_type") and fields.get("config_suppress_errors") and not limit:
                name, file, line = (
                    fields.get(k) for k in ("co_name", "co_filename", "co_firstlineno")
                )
                self.skipped_codes.add(f"{name}@{file}:{line}")
        self.harvested = len(self.started)

    def skipped(self, code: Any) -> bool:
        """Whether Dynamo skips `code` now (a suppressed failure of it was harvested; a
        compile started since the last harvest is read first)."""
        if len(self.started) > self.harvested:
            self.harvest_metrics()
        return _code_key(code) in self.skipped_codes

    def snapshot(self, where: str) -> None:
        """Cache entries per code object and Dynamo's counters, when they changed."""
        self.harvest_metrics()
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        entries: dict[str, list[str]] = {}
        for ref in list(self.torch._dynamo.convert_frame.input_codes.seen):
            code = ref()
            if code is None:
                continue
            found = [str(e.compile_id) for e in _debug_get_cache_entry_list(code)]
            if found:
                entries[_code_key(code)] = found
        if entries != self.entries_seen:
            self.entries_seen = entries
            self.emit("entries", where=where, entries=entries, **self.position())
        counters = {
            group: {str(k)[:300]: int(v) for k, v in values.items()}
            for group, values in self.torch._dynamo.utils.counters.items()
            if values
        }
        if counters != self.counters_seen:
            self.counters_seen = counters
            self.emit("counters", where=where, counters=counters, **self.position())

    # -- calls of watched compiled callables ----------------------------------------------------

    def check_call(self, code: Any, f_locals: dict[str, Any]) -> tuple[str | None, int]:
        """The compile id of the first cache entry whose guards pass for these arguments (the
        entry Dynamo would run), or None; and how many entries there were."""
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        entries = _debug_get_cache_entry_list(code)
        for entry in entries:
            try:
                if entry.guard_manager.check(f_locals):
                    return str(entry.compile_id), len(entries)
            except Exception:  # noqa: BLE001, S112 - a guard that cannot run does not match
                continue
        return None, len(entries)

    def record_call(self, code: Any, matched: str | None, entries: int, since: int) -> None:
        """One call: it ran the entry `matched`, or an entry compiled during the call (a compile
        started since index `since` whose entry now exists), or else eagerly. A row also counts
        the calls that ran compiled after the step's first eager one: blocks sharing a code
        object share its recompile limit, so one block can compile in the step another hits it."""
        compiled = 0
        if matched is None and len(self.started) > since and not self.skipped(code):
            from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

            now = {str(e.compile_id) for e in _debug_get_cache_entry_list(code)}
            compiled = int(bool(now & set(self.started[since:])))
        key = (_code_key(code), self.phase, self.request, self.step)
        row = self.calls.setdefault(
            key,
            {
                "calls": 0,
                "matched": {},
                "compiled_new": 0,
                "eager": 0,
                "compiled_after_eager": 0,
                "entries": 0,
            },
        )
        row["calls"] += 1
        row["entries"] = entries
        if matched is None and not compiled:
            row["eager"] += 1
            return
        if matched is not None:
            row["matched"][matched] = row["matched"].get(matched, 0) + 1
        else:
            row["compiled_new"] += 1
        if row["eager"]:
            row["compiled_after_eager"] += 1

    def flush_calls(self) -> None:
        for (code, phase, request, step), row in self.calls.items():
            self.emit("calls", code=code, phase=phase, request=request, step=step, **row)
        self.calls.clear()

    # -- the program's own marks ----------------------------------------------------------------

    def step_start(self, index: int) -> None:
        self.step = self.last_step = index
        self.compile_seconds = 0.0
        self.emit("step_start", **self.position())
        self.step_started = time.perf_counter()

    def step_end(self) -> None:
        wall = time.perf_counter() - self.step_started
        self.emit(
            "step_end",
            wall_s=round(wall, 6),
            compile_s=round(self.compile_seconds, 6),
            **self.position(),
        )
        self.flush_calls()
        self.snapshot("step_end")
        self.step = None

    def unwound(self, exc: BaseException) -> None:
        """An exception left a step or request: the first such record says where it was
        raised (a crash's position, in the program's own terms)."""
        kind = type(exc)
        self.emit("unwound", type=f"{kind.__module__}.{kind.__qualname__}", **self.position())

    def at_exit(self) -> None:
        kind = getattr(sys, "last_type", None)
        if kind is not None:
            value = getattr(sys, "last_value", None)
            self.emit(
                "crash",
                type=f"{kind.__module__}.{kind.__qualname__}",
                message=str(value)[:2000],
                last_request=self.last_request,
                last_step=self.last_step,
                **self.position(),
            )
        self.flush_calls()
        self.snapshot("exit")
        self.emit("exit", **self.position())
        self.file.close()


_ORACLE: _Oracle | None = None


def _compiling_frame() -> tuple[Any, Any]:
    """(code, cache_entries) of the compile in progress, read off Dynamo's `_compile` frame."""
    frame = sys._getframe()
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            local = frame.f_locals
            code = local.get("code")
            entries = local.get("cache_entries")
            if entries is None and code is not None:
                # torch 2.11's `_compile` holds no `cache_entries` local: the code object's
                # cache list, read before the new entry is added, is the same list.
                from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

                entries = _debug_get_cache_entry_list(code)
            return code, entries
        frame = frame.f_back
    return None, None


def _code_key(code: Any) -> str:
    return f"{code.co_name}@{code.co_filename}:{code.co_firstlineno}"


class _LimitHandler(logging.Handler):
    def __init__(self, oracle: _Oracle) -> None:
        super().__init__(level=logging.WARNING)
        self.oracle = oracle

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if "recompile_limit" in message or "cache_size_limit" in message:
                self.oracle.on_limit(message)
        except Exception:  # noqa: BLE001, S110 - a logging handler must never raise
            pass


# --- the program's interface ------------------------------------------------------------------


def install(role: str = "main") -> None:
    """Start recording (once per process); a no-op without $FIDELITY_ORACLE_DIR."""
    global _ORACLE
    folder = os.environ.get(ENV_DIR)
    if _ORACLE is not None or not folder:
        return
    import torch
    import torch._dynamo

    oracle = _Oracle(role, folder)
    torch._dynamo.callback.on_compile_start(oracle.on_compile_start)
    torch._dynamo.callback.on_compile_end(oracle.on_compile_end)
    logging.getLogger("torch._dynamo").addHandler(_LimitHandler(oracle))
    atexit.register(oracle.at_exit)
    _ORACLE = oracle
    oracle.emit("start", role=role, pid=oracle.pid, torch=torch.__version__, argv=sys.argv)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    oracle = _ORACLE
    if oracle is None:
        yield
        return
    oracle.phase = name
    try:
        yield
    finally:
        oracle.phase = "live"


@contextlib.contextmanager
def request(request_id: str, shape: list[int] | None = None, **facts: Any) -> Iterator[None]:
    oracle = _ORACLE
    if oracle is None:
        yield
        return
    oracle.request = oracle.last_request = request_id
    oracle.last_step = None
    oracle.emit("request_start", shape=shape, facts=facts, **oracle.position())
    try:
        yield
    except BaseException as exc:
        oracle.unwound(exc)
        raise
    finally:
        oracle.emit("request_end", **oracle.position())
        oracle.request = None


@contextlib.contextmanager
def step(index: int) -> Iterator[None]:
    oracle = _ORACLE
    if oracle is None:
        yield
        return
    oracle.step_start(index)
    try:
        yield
    except BaseException as exc:
        oracle.unwound(exc)
        raise
    finally:
        oracle.step_end()


def note(kind: str, **fields: Any) -> None:
    """Something the program did on purpose (a planted call), at the current position."""
    if _ORACLE is not None:
        _ORACLE.emit("note", kind=kind, fields=fields, **_ORACLE.position())


def output(request_id: str, tensor: Any) -> None:
    """A digest of a request's result: the same program must produce the same bytes."""
    if _ORACLE is None:
        return
    data = tensor.detach().cpu().contiguous()
    digest = hashlib.sha256(data.numpy().tobytes()).hexdigest()[:16]
    _ORACLE.emit(
        "output",
        request_id=request_id,
        digest=digest,
        shape=list(data.shape),
        sum=float(data.double().sum()),
    )


def watch_module(module: Any) -> None:
    """Check, before each call of `module` (a block compiled on its own), whether one of its
    forward's cache entries will serve the call. The hook runs eagerly, outside the graph."""
    if _ORACLE is None:
        return
    import torch

    forward = type(module).forward
    code = forward.__code__
    signature = inspect.signature(forward, follow_wrapped=False)
    free = _free_variables(forward)

    @torch._dynamo.disable
    def before(mod: Any, args: Any, kwargs: Any) -> None:
        _checked(code, signature, free, (mod, *args), kwargs)

    module.register_forward_pre_hook(before, with_kwargs=True)
    module.register_forward_hook(torch._dynamo.disable(_after_call), with_kwargs=True)


def watch_callable(
    compiled: Callable[..., Any], original: Callable[..., Any]
) -> Callable[..., Any]:
    """`compiled` (torch.compile of `original`), with each call's guards checked first."""
    if _ORACLE is None:
        return compiled
    import torch

    target = original.forward if isinstance(original, torch.nn.Module) else original
    function = getattr(target, "__func__", target)
    code = function.__code__
    signature = inspect.signature(function, follow_wrapped=False)
    free = _free_variables(function)
    bound_self = getattr(target, "__self__", None)

    def call(*args: Any, **kwargs: Any) -> Any:
        head = (bound_self, *args) if bound_self is not None else args
        _checked(code, signature, free, head, kwargs)
        try:
            return compiled(*args, **kwargs)
        finally:
            _after_call()

    return call


_PENDING: list[tuple[Any, str | None, int, int]] = []


def _free_variables(function: Any) -> dict[str, Any]:
    """A closure's free variables: a frame's locals hold them too (a decorator's `fn`), and
    Dynamo guards on them like on arguments."""
    cells = getattr(function, "__closure__", None) or ()
    names = function.__code__.co_freevars
    found = {}
    for name, cell in zip(names, cells, strict=False):
        try:
            found[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return found


def _checked(
    code: Any, signature: inspect.Signature, free: dict[str, Any], args: Any, kwargs: Any
) -> None:
    """Before a watched call: which entry, if any, its arguments pass (the frame's locals at
    entry are its bound arguments, defaults applied, and its closure's free variables)."""
    oracle = _ORACLE
    if oracle is None:
        return
    try:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        f_locals = {**free, **bound.arguments}
        matched, entries = oracle.check_call(code, f_locals)
        if matched is not None and oracle.skipped(code):
            matched = None  # the entry passes, but Dynamo no longer looks: the call is eager
    except Exception:  # noqa: BLE001 - an unbindable call is recorded as unknown
        matched, entries = "unknown", -1
    _PENDING.append((code, matched, entries, len(oracle.started)))


def _after_call(*_: Any, **__: Any) -> None:
    oracle = _ORACLE
    if oracle is None or not _PENDING:
        return
    code, matched, entries, since = _PENDING.pop()
    oracle.record_call(code, matched, entries, since)
