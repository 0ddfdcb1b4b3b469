"""Run a callback right after a given module is imported (or now, if it already is).

Adapters use it to hook a framework the moment the program imports it, before the program can
build a runner or pipeline, without importing the framework themselves.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import FrameType, ModuleType
from typing import Any

_callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}
_lock = threading.Lock()
_finder: _PostImportFinder | None = None
_after_body_callbacks: dict[int, list[Callable[[ModuleType], None]]] = {}


def _call(callback: Callable[[ModuleType], None], module: ModuleType) -> None:
    """Run one callback inside the program's import: what it raises stays here (callbacks
    record their own errors through the session's hooks; this is the last line)."""
    try:
        callback(module)
    except Exception:  # noqa: BLE001, S110 - the program's import must succeed as without diag
        pass


class _PostImportFinder:
    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name not in _callbacks or name in self._busy:
            return None
        self._busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def run_then_call(module: ModuleType) -> None:
            exec_module(module)
            for callback in _callbacks.pop(name, []):
                _call(callback, module)

        loader.exec_module = run_then_call  # type: ignore[method-assign]
        return spec


def _module_frame(module: ModuleType) -> FrameType | None:
    """The frame still executing `module`'s body, if the module is half imported."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(module):
            return frame
        frame = frame.f_back
    return None


def _after_body(
    frame: FrameType, module: ModuleType, callback: Callable[[ModuleType], None]
) -> None:
    """Call back when a half-imported module's body returns (a local trace on that frame only).

    Needed when the program imports torch at the top of the very module that defines the hooked
    function (`--step-fn __main__:denoise`): the function does not exist yet when torch loads.
    """
    waiting = _after_body_callbacks.get(id(frame))
    if waiting is not None:  # already tracing this body: one more callback for its end
        waiting.append(callback)
        return
    callbacks = _after_body_callbacks[id(frame)] = [callback]
    previous = sys.gettrace()

    def global_trace(f: FrameType, event: str, arg: Any) -> Any:
        return previous(f, event, arg) if previous is not None else None  # type: ignore[arg-type]

    def local_trace(f: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            sys.settrace(previous)
            frame.f_trace = None
            del _after_body_callbacks[id(frame)]
            for pending in callbacks:
                _call(pending, module)
            return None
        return local_trace

    frame.f_trace = local_trace
    frame.f_trace_lines = False
    sys.settrace(global_trace)


def on_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    global _finder
    module = sys.modules.get(name)
    if module is not None:
        frame = _module_frame(module)
        if frame is None:
            callback(module)
        else:
            _after_body(frame, module, callback)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if _finder is None:
            _finder = _PostImportFinder()
            sys.meta_path.insert(0, _finder)
