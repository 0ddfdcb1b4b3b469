"""Compile, recompile, graph-break and recompile-limit events from torch's structured trace.

A handler on the `torch.__trace` logger receives every structured event in process, with no
TORCH_TRACE file and nothing printed (FACTS: 3-8 ms per aot_eager compile, nothing per step).
Unlike `torch._dynamo.callback` hooks, a logging handler survives `torch._dynamo.reset()`;
compile ids repeat after a reset, so every event carries the reset epoch.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from diag.trace.guards import (
    guard_tree_locations,
    guard_tree_tensors,
    guard_tree_values,
    parse_recompile_reasons,
)

from .structured import listen
from .torch_api import intern_table
from .userframes import innermost_user_frame

if TYPE_CHECKING:
    from .protocol import Session

_LIMIT_RE = re.compile(r"recompile[_ ]limit|cache_size_limit|cache size limit", re.IGNORECASE)
_BREAK_AT_RE = re.compile(r"Graph break in user code at (?P<where>\S+)")
_BREAK_REASON_RE = re.compile(r"Graph Break Reason:\s*(?P<reason>.+)")
# A failed compile's reason is kept whole up to this many characters: torch puts the backend's
# own exception on its second line and a ConstraintViolationError's user stack at its end.
MAX_FAIL_REASON = 8192
#: torch._dynamo.config settings that decide when a frame recompiles or runs eagerly (read at
#: each compile; `cache_size_limit` is recompile_limit's old name, read where it is the only one).
SETTINGS = (
    "recompile_limit",
    "cache_size_limit",
    "accumulated_recompile_limit",
    "automatic_dynamic_shapes",
    "assume_static_by_default",
    "allow_unspec_int_on_nn_module",
    "specialize_int",
    "specialize_float",
    "force_parameter_static_shapes",
    "suppress_errors",
)


def _first_line(text: object) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip().splitlines()[0][:500]


def bounded_reason(text: object) -> str | None:
    """A failed compile's whole reason, cut at MAX_FAIL_REASON characters (marked as cut)."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    if len(text) <= MAX_FAIL_REASON:
        return text
    return text[:MAX_FAIL_REASON] + f"\n... ({len(text) - MAX_FAIL_REASON} more characters)"


#: torch's intern table read backwards (id -> file name), refreshed when an id is missing.
_FILES: dict[int, str] = {}


def _interned_file(value: Any) -> str | None:
    """A file name torch's structured logger interned (`intern_string`) as `value`."""
    if isinstance(value, str):
        return value
    if not isinstance(value, int) or value < 0:
        return None
    if value not in _FILES:
        _FILES.update({number: name for name, number in intern_table().items()})
    return _FILES.get(value)


def _limit_hit_as_backward(metrics: object) -> bool:
    """Whether `bwd_compilation_metrics` is torch 2.6's record of a forward frame's compile
    refused by the recompile limit (its fail reason names the limit)."""
    return (
        isinstance(metrics, dict)
        and bool(metrics.get("fail_type"))
        and _LIMIT_RE.search(str(metrics.get("fail_reason") or "")) is not None
    )


class CompileCollector:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.epoch = 0
        self.frames: dict[int, dict[str, Any]] = {}  # frame_id -> frame, in this epoch
        self.started: dict[str, int] = {}  # compile id -> start time (monotonic ns)
        self.limited: set[tuple[str, str, int]] = set()
        #: Frames whose compile failed with `suppress_errors` on: Dynamo skips their code from
        #: then on (every later call runs eagerly, entries compiled before unused) until a reset.
        self.suppressed: set[tuple[str, str, int]] = set()
        self.compiles = 0
        # compile id -> the `dynamo_error` traceback torch logs just before a failed compile ends.
        self.errors: dict[str, str] = {}
        #: Called after each torch._dynamo.reset() (collectors that register Dynamo callbacks).
        self.after_reset: list[Callable[[], None]] = []
        self.last_settings: dict[str, Any] | None = None

    @classmethod
    def install(cls, session: Session) -> CompileCollector:
        collector = cls(session)
        listen(session, "compiles", collector.on_structured)
        # Not `torch._dynamo` now: importing it early changes what a program that patches torch
        # after `import torch` compiles (FACTS). Wrap reset when the program first imports it.
        from .importhook import on_import

        on_import(
            "torch._dynamo",
            lambda module: session.install("compiles.reset", collector._wrap_reset, module),
        )
        return collector

    def _wrap_reset(self, dynamo: Any) -> None:
        original = dynamo.reset

        def reset() -> None:
            original()
            self.session.guarded("compiles.reset_call", self._after_reset)

        reset.__wrapped__ = original  # type: ignore[attr-defined]
        dynamo.reset = reset

    def _after_reset(self) -> None:
        self.epoch += 1
        self.frames.clear()
        self.started.clear()
        self.suppressed.clear()  # reset clears each code's skip with its cache entries
        self.session.emit("dynamo_reset", epoch=self.epoch)
        for hook in self.after_reset:  # reset clears Dynamo's callbacks: register again
            self.session.install("compiles.after_reset", hook)

    # -- structured events ------------------------------------------------------------------------

    def on_structured(self, metadata: dict[str, Any], record: logging.LogRecord) -> None:
        if "dynamo_start" in metadata:
            compile_id = self._compile_id(metadata)
            self.started[compile_id] = time.monotonic_ns()
            self._settings(compile_id)
            # The frame and position now, not only at compile_end: a compile the process never
            # finishes (shutdown, os._exit, a crash) is still a compile of this frame, here.
            self.session.emit(
                "compile_start",
                compile_id=compile_id,
                epoch=self.epoch,
                frame=self._starting_frame(metadata),
                **self._where(),
            )
            return
        if "compilation_metrics" in metadata:
            self._on_metrics(metadata["compilation_metrics"])
            return
        if _limit_hit_as_backward(metadata.get("bwd_compilation_metrics")):
            # torch 2.6 fills `is_forward` only after the limit check, so a refused compile's
            # metrics arrive under the backward name (no co_name; the frame id names it).
            self._on_metrics(metadata["bwd_compilation_metrics"])
            return
        if "dynamo_cpp_guards_str" in metadata:
            # The compiled entry's guard tree: where in user code each guarded source is read,
            # which a recompile reason on that source (a dict's length) does not say.
            # Its TENSOR_MATCH guards say which tensors the entry was compiled for: at a later
            # recompile they tell the entry that could have served the call (diag.evidence.causes).
            payload = getattr(record, "payload", None)
            if not isinstance(payload, str):
                return
            lines = guard_tree_locations(payload)
            tensors = guard_tree_tensors(payload)
            values = guard_tree_values(payload)
            if lines or tensors or values:
                self.session.emit(
                    "guard_sources",
                    compile_id=self._compile_id(metadata),
                    epoch=self.epoch,
                    sources=lines,
                    tensors=tensors,
                    values=values,
                )
            return
        artifact = metadata.get("artifact")
        if not isinstance(artifact, dict):
            return
        name = artifact.get("name")
        if name == "dynamo_error":
            payload = getattr(record, "payload", None)
            if isinstance(payload, str):
                self.errors[self._compile_id(metadata)] = payload[-65536:]
        elif name == "recompile_reasons":
            payload = getattr(record, "payload", None)
            guards = parse_recompile_reasons(payload if isinstance(payload, str) else "")
            self.session.emit(
                "recompile",
                compile_id=self._compile_id(metadata),
                epoch=self.epoch,
                guards=[dataclasses.asdict(g) for g in guards],
                **self._where(),
            )
        elif name == "dynamo_graph_break_reason":
            payload = getattr(record, "payload", None)
            text = payload if isinstance(payload, str) else ""
            at = _BREAK_AT_RE.search(text)
            reason = _BREAK_REASON_RE.search(text)
            self.session.emit(
                "graph_break",
                compile_id=self._compile_id(metadata),
                epoch=self.epoch,
                user_location=at.group("where") if at else None,
                reason=reason.group("reason").strip()[:500] if reason else _first_line(text),
                raw=text[:4000],
                **self._where(),
            )

    def _settings(self, compile_id: str) -> None:
        """The Dynamo settings that decide recompiles, as the program left them when this compile
        started: one `compile_settings` event each time they differ from the last one written
        (with torch's defaults, so analyzers can say "the program lowered recompile_limit")."""
        config = sys.modules.get("torch._dynamo.config")
        if config is None:
            return
        values: dict[str, Any] = {}
        defaults: dict[str, Any] = {}
        table = getattr(config, "_config", None)
        for name in SETTINGS:
            if name == "cache_size_limit" and "recompile_limit" in values:
                continue
            try:
                value = getattr(config, name)
            except AttributeError:  # not on this torch
                continue
            if isinstance(value, bool | int | float | str) or value is None:
                values[name] = value
                entry = table.get(name) if isinstance(table, dict) else None
                default = getattr(entry, "default", None)
                if isinstance(default, bool | int | float | str):
                    defaults[name] = default
        if values == self.last_settings:
            return
        self.last_settings = values
        self.session.emit(
            "compile_settings",
            compile_id=compile_id,
            epoch=self.epoch,
            settings=values,
            defaults=defaults,
        )

    def _starting_frame(self, metadata: dict[str, Any]) -> dict[str, Any] | None:
        """The frame a compile starts on: as an earlier compile of the same frame id named it,
        else the last entry of dynamo_start's stack (the compiled code: its co_firstlineno and
        name, the file interned by torch's structured logger)."""
        frame_id = metadata.get("frame_id")
        known = self.frames.get(frame_id) if isinstance(frame_id, int) else None
        if known is not None:
            return known
        start = metadata.get("dynamo_start")
        stack = start.get("stack") if isinstance(start, dict) else None
        last = stack[-1] if isinstance(stack, list) and stack else None
        if not isinstance(last, dict) or not isinstance(last.get("name"), str):
            return None
        return {
            "name": last["name"],
            "file": _interned_file(last.get("filename")),
            "line": last.get("line") if isinstance(last.get("line"), int) else None,
        }

    @staticmethod
    def _compile_id(metadata: dict[str, Any]) -> str:
        frame, attempt = metadata.get("frame_id"), metadata.get("frame_compile_id")
        return f"{frame}/{attempt}"

    def _where(self) -> dict[str, Any]:
        steps = self.session.steps
        return steps.position() if steps is not None else {}

    def _on_metrics(self, metrics: dict[str, Any]) -> None:
        compile_id = str(metrics.get("compile_id") or "?")
        frame_id = int(compile_id.split("/")[0]) if compile_id.split("/")[0].isdigit() else -1
        frame = None
        if metrics.get("co_name"):
            frame = {
                "name": metrics.get("co_name"),
                "file": metrics.get("co_filename"),
                "line": metrics.get("co_firstlineno"),
            }
            self.frames[frame_id] = frame
        else:
            frame = self.frames.get(frame_id)
        fail_reason = _first_line(metrics.get("fail_reason"))
        fail_type = metrics.get("fail_type")
        error = self.errors.pop(compile_id, None)
        if fail_type and _LIMIT_RE.search(str(fail_reason or "")):
            result = "recompile_limit"
        elif fail_type:
            result = "failed"
        else:
            result = "ok"
        now = time.monotonic_ns()
        started = self.started.pop(compile_id, None)
        if started is None:
            # Torch refuses a compile over the recompile limit before it logs dynamo_start, so
            # the settings are read here too: a limit lowered by `config.patch` around serving
            # (warmup compiled under another value) is the one this refusal used.
            self._settings(compile_id)
        duration = metrics.get("entire_frame_compile_time_s")
        if duration is None and started is not None:
            duration = (now - started) / 1e9
        self.compiles += 1
        failure = self._failure(metrics, error) if result == "failed" else {}
        self.session.emit(
            "compile_end",
            compile_id=compile_id,
            epoch=self.epoch,
            frame=frame,
            result=result,
            duration_s=duration,
            start_t=started,
            fail_type=fail_type,
            fail_reason=bounded_reason(metrics.get("fail_reason"))
            if result == "failed"
            else fail_reason,
            **failure,
            cache_size=metrics.get("cache_size"),
            graph_op_count=metrics.get("graph_op_count"),
            guard_count=metrics.get("guard_count"),
            restart_reasons=metrics.get("restart_reasons"),
            **self._where(),
        )
        if failure.get("suppress_errors") is True and frame is not None:
            self.suppressed.add((str(frame["name"]), str(frame["file"]), int(frame["line"] or 0)))
        if result == "recompile_limit" and frame is not None:
            # The limit event keeps the first line, as it always has (recompile-limit quotes it).
            self.limited.add((str(frame["name"]), str(frame["file"]), int(frame["line"] or 0)))
            self.session.emit(
                "recompile_limit",
                compile_id=compile_id,
                epoch=self.epoch,
                frame=frame,
                reason=fail_reason,
                **self._where(),
            )

    def _failure(self, metrics: dict[str, Any], error: str | None) -> dict[str, Any]:
        """What a failed compile adds: the user line torch names (`fail_user_frame_*`, set for
        `Unsupported`), else the innermost user frame of the logged traceback (a user backend
        that raised); and whether Dynamo was told to swallow the error and run the frame eagerly
        (read, never set: `suppress_errors` is the program's own choice)."""
        filename, lineno = (
            metrics.get("fail_user_frame_filename"),
            metrics.get("fail_user_frame_lineno"),
        )
        where = f"{filename}:{lineno}" if isinstance(filename, str) and filename else None
        if where is None and error:
            where = innermost_user_frame(error)
        try:
            suppressed = bool(self.session.torch._dynamo.config.suppress_errors)
        except Exception:  # noqa: BLE001 - a config that moved must not cost the event
            suppressed = None
        return {"fail_user_frame": where, "suppress_errors": suppressed}
