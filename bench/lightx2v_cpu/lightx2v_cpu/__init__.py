"""Run the real LightX2V (ModelTC/LightX2V, unmodified) on a CPU: an out-of-tree platform plugin.

LightX2V's own plugin mechanism loads it: `lightx2v_platform.set_ai_device` calls every entry
point of the group `lightx2v.platform_plugins` during `import lightx2v`, before it looks the
platform up. The `lightx2v_cpu-0.1.dist-info` folder beside this package declares the entry
point, so putting `bench/lightx2v_cpu` on PYTHONPATH (and `PLATFORM=cpu`) is all it takes; nothing
is imported at interpreter start-up, so diag's collectors still start on the program's first
`import torch` (a sitecustomize that imported torch would keep them from starting).

What it supplies, and why each piece is needed on a CPU:
- a `cpu` device in `PLATFORM_DEVICE_REGISTER` (LightX2V knows only accelerators);
- stand-ins on `torch.cpu` for the few `torch.cuda` calls LightX2V makes through
  `getattr(torch, AI_DEVICE)` (`empty_cache`, memory figures, `Stream.synchronize`): CPU work is
  synchronous, so they do nothing; and plain allocations where LightX2V asks for pinned host
  memory, which a CPU-only torch cannot give;
- a stand-in for the 5.7 B-parameter umt5-xxl text encoder: a seeded random context of the
  width the tiny DiT's `text_embedding` expects (the DiT's compile behaviour does not depend on
  the prompt's values);
- the warmup resolutions, from `LIGHTX2V_CPU_WARMUP` (`64x64,96x64`), since WanRunner's own
  (480x480 and 720x1280) take minutes per step on two cores.

Two optional pieces, for tests that compare runs: `LIGHTX2V_CPU_SEED` seeds torch's global RNG
at start-up (the dummy weights and the random VAE draw from it, so two processes then build the
same model), and `LIGHTX2V_CPU_RECORD=FILE` has the server's worker write the program's own
record of each request it serves, one JSON line each (`task_id`, `thread`, `ident`: the thread
that ran `TorchrunInferenceWorker.process_request`), beside LightX2V's code, not in it.

Everything else (config handling, runner, scheduler, Wan DiT, compiled-block cache, offload
managers, VAE decode, video save) is LightX2V's own code.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

_WAN_RUNNER = "lightx2v.models.runners.wan.wan_runner"
_SERVER_WORKER = "lightx2v.server.services.inference.worker"


class CpuDevice:
    """The device protocol of lightx2v_platform/base/nvidia.py (CudaDevice), for a CPU."""

    name = "cpu"

    @staticmethod
    def init_device_env() -> None:
        pass

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def get_device() -> str:
        return "cpu"

    @staticmethod
    def init_parallel_env() -> None:
        import torch.distributed as dist

        dist.init_process_group(backend="gloo")


class TinyTextEncoder:
    """Stands in for `T5EncoderModel` (`infer(texts) -> [context (tokens, text_dim)]`)."""

    def __init__(self, text_len: int, text_dim: int) -> None:
        self.text_len = text_len
        self.text_dim = text_dim

    def infer(self, texts: Sequence[str]) -> list[Any]:
        import torch

        out = []
        for text in texts:
            tokens = max(1, min(self.text_len, len(text.split()) + 1))
            generator = torch.Generator().manual_seed(zlib.crc32(text.encode()))
            context = torch.randn(tokens, self.text_dim, generator=generator)
            out.append(context.to(torch.bfloat16))
        return out


def _torch_cpu_standins() -> None:
    import torch

    cpu = torch.cpu
    defaults: dict[str, Callable[..., Any]] = {
        "empty_cache": lambda: None,
        "manual_seed": torch.manual_seed,
        "manual_seed_all": torch.manual_seed,
        "max_memory_allocated": lambda *a, **k: 0,
        "memory_allocated": lambda *a, **k: 0,
        "memory_reserved": lambda *a, **k: 0,
        "reset_peak_memory_stats": lambda *a, **k: None,
        "mem_get_info": lambda *a, **k: (1 << 34, 1 << 34),
    }
    for name, value in defaults.items():
        if not hasattr(cpu, name):
            setattr(cpu, name, value)
    if not hasattr(cpu.Stream, "synchronize"):

        class Stream(cpu.Stream):  # type: ignore[misc,name-defined]
            """torch.cpu.Stream has no synchronize/query; CPU ops are synchronous."""

            def synchronize(self) -> None:
                pass

            def query(self) -> bool:
                return True

        cpu.Stream = Stream  # type: ignore[misc]
    _no_pinned_memory(torch)


def _no_pinned_memory(torch: Any) -> None:
    """LightX2V stages every weight in pinned host memory (`torch.empty(..., pin_memory=True)`,
    `tensor.pin_memory()`), which a CPU-only torch refuses ("no pinned memory allocator"). On
    a CPU the staging buffer and the device tensor are both host memory: allocate plainly."""
    if getattr(torch.empty, "__lightx2v_cpu__", False):
        return
    empty = torch.empty

    def empty_unpinned(*args: Any, pin_memory: bool = False, **kwargs: Any) -> Any:
        return empty(*args, **kwargs)

    empty_unpinned.__lightx2v_cpu__ = True  # type: ignore[attr-defined]
    torch.empty = empty_unpinned
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: self


_TORCHVISION_LIB: Any = None


def _torchvision_schemas() -> None:
    """PyPI's torchvision is a CUDA build: on a machine without CUDA its `_C` library does not
    load, and `import torchvision` then fails registering fakes for `torchvision::nms` and
    `::qnms`, ops that only that library defines. Define the two schemas (never called here)."""
    global _TORCHVISION_LIB
    import importlib.util

    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations or _TORCHVISION_LIB is not None:
        return
    folder = Path(next(iter(spec.submodule_search_locations)))
    for library in sorted(folder.glob("_C*.so")):
        try:
            torch.ops.load_library(str(library))
        except OSError:
            continue
        return
    _TORCHVISION_LIB = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        _TORCHVISION_LIB.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def _warmup_resolutions() -> tuple[tuple[int, int], ...] | None:
    text = os.environ.get("LIGHTX2V_CPU_WARMUP", "").strip()
    if not text:
        return None
    pairs = []
    for item in text.split(","):
        height, _, width = item.strip().partition("x")
        pairs.append((int(height), int(width)))
    return tuple(pairs)


def _patch_wan_runner(module: ModuleType) -> None:
    runner_cls = module.WanRunner
    resolutions = _warmup_resolutions()
    if resolutions is not None:
        runner_cls._WARMUP_RESOLUTIONS = resolutions

    def load_text_encoder(self: Any) -> list[TinyTextEncoder]:
        return [TinyTextEncoder(self.config["text_len"], self.config["text_dim"])]

    runner_cls.load_text_encoder = load_text_encoder


def _record_requests(module: ModuleType) -> None:
    """Append (task id, thread) of each request the server's worker processes to the file
    `LIGHTX2V_CPU_RECORD` names: the program's own record of where each request ran."""
    import functools
    import json
    import threading

    path = os.environ["LIGHTX2V_CPU_RECORD"]
    worker_cls = module.TorchrunInferenceWorker
    original = worker_cls.process_request

    @functools.wraps(original)
    async def process_request(self: Any, task_data: dict[str, Any]) -> Any:
        thread = threading.current_thread()
        line = {"task_id": task_data.get("task_id"), "thread": thread.name}
        line["ident"] = threading.get_ident()
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
        return await original(self, task_data)

    worker_cls.process_request = process_request


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a patch right after one named module has executed (its classes then exist)."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self.patches = patches

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patch = self.patches.pop(fullname, None)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_patch(module: ModuleType) -> None:
            exec_module(module)
            patch(module)

        loader.exec_module = exec_then_patch  # type: ignore[method-assign]
        return spec


def register() -> None:
    """The `lightx2v.platform_plugins` entry point."""
    from lightx2v_platform.registry_factory import PLATFORM_DEVICE_REGISTER

    if "cpu" not in PLATFORM_DEVICE_REGISTER:
        PLATFORM_DEVICE_REGISTER("cpu")(CpuDevice)
    _torch_cpu_standins()
    _torchvision_schemas()
    seed = os.environ.get("LIGHTX2V_CPU_SEED", "").strip()
    if seed:
        import torch

        torch.manual_seed(int(seed))
    patches: dict[str, Callable[[ModuleType], None]] = {_WAN_RUNNER: _patch_wan_runner}
    if os.environ.get("LIGHTX2V_CPU_RECORD"):
        patches[_SERVER_WORKER] = _record_requests
    sys.meta_path.insert(0, _AfterImport(patches))
