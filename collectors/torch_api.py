"""The torch internals diag reads from inside the program, and how each supported torch differs.

One place per concern (shared/DESIGN.md, "Torch differences live in one place"): a collector
asks here, never torch directly, so a release that renames or reshapes something changes one
function, and a field a torch lacks comes back as None ("not recorded on torch X"), never a
guess. The differences known, each checked in a venv of that release (docs/COMPAT.md):

- Dynamo's compile start/end callbacks are called with no argument on torch 2.6 and 2.7, and
  with a `CallbackArgs` (trigger, compile id) from 2.8 on.
- Cache entries (`_debug_get_cache_entry_list`) carry `compile_id` only on newer releases;
  their guards are checked with `guard_manager.check(f_locals)`.
- Tensor guard failures name a frame's local `L['x']` on torch 2.6 and 2.7, `x` later
  (diag/trace/guards.py reads both as `x`).
- torch's structured-log intern table (file names in stacks) lives in
  `torch._logging.structured.INTERN_TABLE`.

Nothing here imports torch._dynamo on its own: importing it early changes what some programs
compile (FACTS); callers ask only once the program has imported it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any


def register_compile_callbacks(start: Callable[..., None], end: Callable[..., None]) -> None:
    """Register Dynamo compile start/end callbacks; they must accept any arguments (torch 2.6
    and 2.7 pass none, 2.8 and later one `CallbackArgs`): see hooks.Hooks.callback."""
    from torch._dynamo import callback

    handler = getattr(callback, "callback_handler", None)
    if handler is not None and hasattr(handler, "register_start_callback"):
        handler.register_start_callback(start)
        handler.register_end_callback(end)
        return
    callback.on_compile_start(start)
    callback.on_compile_end(end)


_entry_list: Callable[[types.CodeType], Any] | None = None


def cache_entries(code: types.CodeType) -> list[Any]:
    """The compiled entries Dynamo holds for a code object, newest first ([] when unknown)."""
    global _entry_list
    if _entry_list is None:
        try:
            from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
        except ImportError:
            return []
        _entry_list = _debug_get_cache_entry_list
    return list(_entry_list(code))


def compiled_codes() -> Iterator[types.CodeType]:
    """Every code object Dynamo has compiled in this process (none before Dynamo is imported)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    tracker = getattr(convert_frame, "input_codes", None)
    for ref in list(getattr(tracker, "seen", ())):
        code = ref() if callable(ref) else ref
        if isinstance(code, types.CodeType):
            yield code


def entry_compile_id(entry: Any) -> str | None:
    """A cache entry's compile id (`0/3`), or None on a torch whose entries do not carry it."""
    compile_id = getattr(entry, "compile_id", None)
    return None if compile_id is None else str(compile_id)


def entry_passes(entry: Any, f_locals: dict[str, Any]) -> bool | None:
    """Whether a cache entry's guards pass for these frame locals (None: cannot be checked)."""
    manager = getattr(entry, "guard_manager", None)
    check = getattr(manager, "check", None)
    if check is None:
        return None
    return bool(check(f_locals))


def stance() -> str | None:
    """Dynamo's current stance (`default`, `eager_on_recompile`, ...), None before Dynamo is
    imported or on a torch without stances. One attribute read: called per compiled call."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    current = getattr(eval_frame, "_stance", None)
    name = getattr(current, "stance", None)
    return name if isinstance(name, str) else None


def intern_table() -> dict[str, int]:
    """torch's structured-log intern table (file name -> id), {} where there is none."""
    try:
        from torch._logging.structured import INTERN_TABLE
    except ImportError:
        return {}
    return dict(INTERN_TABLE)
