"""diag's bootstrap, put first on the recorded program's PYTHONPATH by `diag record`.

Python imports `sitecustomize` at start-up. This one (1) runs the sitecustomize the user already
had, if any, and (2) when DIAG_TRACE_DIR is set, waits for the program's first `import torch`
and only then starts diag's collectors. A program that never imports torch runs unchanged, and
nothing of diag beyond this file is imported before torch is. When the user's sitecustomize
already imported torch, the collectors start at once. A process that ends with torch imported
and no collectors running says so in the trace (bootstrap-errors.txt), never silently.

This folder must hold nothing but this file: every module in it shadows the program's own.
"""

import atexit
import importlib
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_user_sitecustomize() -> None:
    """Import the next `sitecustomize` on sys.path (the user's), as if ours were not there."""
    ours = sys.modules.get("sitecustomize")
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        if ours is not None:
            sys.modules["sitecustomize"] = ours


def _record_bootstrap_error(message: str) -> None:
    """The collectors could not start: say so in the trace directory, never on the console."""
    trace_dir = os.environ.get("DIAG_TRACE_DIR")
    label = os.environ.get("DIAG_RUN_LABEL", "compiled")
    if not trace_dir:
        return
    try:
        folder = os.path.join(trace_dir, "runs", label)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "bootstrap-errors.txt"), "a", encoding="utf-8") as handle:
            handle.write(f"pid {os.getpid()}: {message}\n")
    except OSError:
        pass


def _activate() -> None:
    try:
        session = importlib.import_module("diag.collectors.session")
        session.start_session()
    except Exception as exc:  # noqa: BLE001 - the recorded program must never fail because of diag
        _record_bootstrap_error(f"{type(exc).__name__}: {exc}")


def _is_helper_process() -> bool:
    """torch's own worker processes (inductor's compile workers) are not the program."""
    argv0 = sys.argv[0] if getattr(sys, "argv", None) else ""
    return "compile_worker" in argv0 and "_inductor" in argv0


def _check_collectors_ran() -> None:
    """At exit: torch ran in this process but diag never started (a hook that was bypassed,
    torch imported some way the bootstrap could not see): leave a line for analyze to show."""
    if "torch" not in sys.modules or _is_helper_process():
        return
    session = sys.modules.get("diag.collectors.session")
    if session is not None and getattr(session, "current_session", lambda: None)() is not None:
        return
    if session is None:
        _record_bootstrap_error(
            "torch was imported but diag's collectors never started: nothing this process "
            "compiled or ran was recorded"
        )


class _TorchImportHook:
    """A one-shot meta-path finder: lets torch import normally, then starts the collectors."""

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return None
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_torch = loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            exec_torch(module)
            _activate()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _install() -> None:
    if not os.environ.get("DIAG_TRACE_DIR"):
        return
    atexit.register(_check_collectors_ran)
    if "torch" in sys.modules:  # the user's sitecustomize imported it: start now
        _activate()
    else:
        sys.meta_path.insert(0, _TorchImportHook())


try:
    _chain_user_sitecustomize()
finally:
    _install()
