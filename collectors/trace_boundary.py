"""What non-model code Dynamo traced into: stdlib I/O, locks, clocks, importlib, and functions
behind `functools.lru_cache` (a kernel library's JIT loader), per compile (`traced_code` events).

Dynamo keeps, for the attempt it is tracing, the code objects it finished inlining
(`TracingContext.traced_code`, kept for the FX-graph cache). A handler on `torch.__trace` (as
collectors/compiles.py) reads that list when Dynamo writes a graph-break reason (the attempt
that broke) and when it writes the output graph (the attempt that produced it); the break's own
user-code traceback gives the calls Dynamo was inside. This reads Dynamo's state, never changes
it, and prints nothing: the `torch._dynamo.symbolic_convert` DEBUG log that names every inlined
function would print torch's trace to the program's stderr.

Only code outside the model is written (stdlib modules in `BOUNDARY_MODULES`, lru_cache-wrapped
functions, `filelock`, torch's cpp_extension loader), so a clean program writes no event.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import sysconfig
from typing import TYPE_CHECKING, Any

from .structured import listen

if TYPE_CHECKING:
    from .protocol import Session

#: Top-level modules whose code is never model computation: files, paths, clocks, locks,
#: processes, imports, logging, serialisation.
BOUNDARY_MODULES = frozenset(
    {
        "functools", "importlib", "os", "posixpath", "genericpath", "ntpath", "pathlib",
        "datetime", "time", "threading", "_thread", "logging", "subprocess", "shutil",
        "tempfile", "glob", "fnmatch", "socket", "json", "hashlib", "pickle", "sysconfig",
        "site", "platform", "uuid", "ctypes", "zipfile", "tarfile", "locale", "getpass",
        "shlex", "filecmp", "filelock", "torch.utils.cpp_extension",
    }
)  # fmt: skip
_TB_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')
_MAX_CODES = 128
_MAX_CHAIN = 32
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_TORCH_DIR = os.sep + "torch" + os.sep
#: diag's own wrappers around compiled callables (shapes, profiling, step adapters).
_COLLECTORS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _module_of_file(file: str) -> str | None:
    """The top-level module of a stdlib or site-packages file, `<frozen os>` included."""
    if file.startswith("<frozen "):
        return file[len("<frozen ") : -1].split(".")[0]
    if "site-packages" + os.sep in file or "dist-packages" + os.sep in file:
        rest = re.split(r"(?:site|dist)-packages" + re.escape(os.sep), file)[-1]
        parts = rest.split(os.sep)
        if parts[0] == "torch":
            return (
                "torch.utils.cpp_extension"
                if rest.startswith("torch/utils/cpp_extension")
                else "torch"
            )
        return parts[0].removesuffix(".py")
    real = os.path.realpath(file) if os.path.isabs(file) else file
    if real.startswith(_STDLIB):
        return real[len(_STDLIB) :].split(os.sep)[0].removesuffix(".py")
    return None


class TraceBoundary:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.modules_by_file: dict[str, Any] = {}
        self.cached_functions: dict[tuple[str, str], bool] = {}

    @classmethod
    def install(cls, session: Session) -> TraceBoundary:
        collector = cls(session)
        listen(session, "trace_boundary", collector.on_structured)
        return collector

    def on_structured(self, metadata: dict[str, Any], record: logging.LogRecord) -> None:
        artifact = metadata.get("artifact")
        if isinstance(artifact, dict) and artifact.get("name") == "dynamo_graph_break_reason":
            payload = getattr(record, "payload", None)
            self._emit(metadata, "graph_break", payload if isinstance(payload, str) else "")
        elif "dynamo_output_graph" in metadata:
            self._emit(metadata, "graph", "")

    # -- classification ---------------------------------------------------------------------------

    def _lru_cached(self, file: str, name: str) -> bool:
        """Whether `name` in the module at `file` is a `functools.lru_cache`/`cache` wrapper."""
        key = (file, name)
        if key not in self.cached_functions:
            module = self._module_at(file)
            target = vars(module).get(name) if module is not None else None  # no module __getattr__
            self.cached_functions[key] = hasattr(target, "cache_info") and hasattr(
                target, "__wrapped__"
            )
        return self.cached_functions[key]

    def _module_at(self, file: str) -> Any:
        if file not in self.modules_by_file:
            found = None
            for module in list(sys.modules.values()):
                if getattr(module, "__file__", None) == file:
                    found = module
                    break
            self.modules_by_file[file] = found
        return self.modules_by_file[file]

    def _describe(self, file: str, line: int, name: str) -> dict[str, Any]:
        module = _module_of_file(file)
        entry: dict[str, Any] = {"name": name, "file": file, "line": line, "module": module}
        if module in BOUNDARY_MODULES:
            entry["boundary"] = module
        elif module != "torch" and self._lru_cached(file, name):
            entry["boundary"] = "functools.lru_cache"
        return entry

    # -- events -----------------------------------------------------------------------------------

    def _traced_codes(self) -> list[dict[str, Any]]:
        from torch._guards import TracingContext

        context = TracingContext.try_get()
        codes = list(getattr(context, "traced_code", None) or ()) if context is not None else []
        seen: dict[tuple[str, int, str], dict[str, Any]] = {}
        for code in codes:
            key = (code.co_filename, code.co_firstlineno, code.co_name)
            if key in seen:
                seen[key]["count"] += 1
                continue
            if _TORCH_DIR in code.co_filename and "cpp_extension" not in code.co_filename:
                continue
            entry = self._describe(*key)
            if "boundary" in entry and len(seen) < _MAX_CODES:
                seen[key] = {**entry, "count": 1}
        return list(seen.values())

    def _chain(self, payload: str) -> list[dict[str, Any]]:
        """The user-code traceback of a graph break: the calls Dynamo was inside, outermost
        first (torch's own polyfill frames left out)."""
        _, _, tail = payload.partition("User code traceback:")
        frames = []
        for text in tail.splitlines():
            if text.lstrip().startswith("Traceback (most recent call last)"):
                break
            match = _TB_FRAME_RE.match(text)
            if (
                match
                and _TORCH_DIR not in match["file"]
                and not match["file"].startswith(_COLLECTORS_DIR)
            ):
                frames.append(self._describe(match["file"], int(match["line"]), match["name"]))
        return frames[-_MAX_CHAIN:]

    def _emit(self, metadata: dict[str, Any], at: str, payload: str) -> None:
        codes = self._traced_codes()
        chain = self._chain(payload) if at == "graph_break" else []
        if not codes and not any("boundary" in frame for frame in chain):
            return
        compiles = self.session.compiles
        steps = self.session.steps
        self.session.emit(
            "traced_code",
            compile_id=f"{metadata.get('frame_id')}/{metadata.get('frame_compile_id')}",
            attempt=metadata.get("attempt"),
            epoch=compiles.epoch if compiles is not None else 0,
            at=at,
            codes=codes,
            chain=chain,
            **(steps.position() if steps is not None else {}),
        )
