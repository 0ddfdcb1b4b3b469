"""`diag record -- python -m lightx2v.infer ...`: the LightX2V adapter on LightX2V's own structure.

LightX2V cannot run here (no weights, no GPU, heavy dependencies), so each test writes a minimal
*stand-in* package named `lightx2v` into its tmp_path and records that. The stand-in mirrors
ModelTC/LightX2V at commit f8aee98b5462cca8d7288888146ebd95592bf266: the same module paths,
class names and call structure, reduced to what the adapter relies on. It mirrors:

- `lightx2v/utils/registry_factory.py`: `Register(MutableMapping)` (`__call__` registers by key,
  `__getitem__`/`get` read `self._dict`), `RUNNER_REGISTER` and `MM_WEIGHT_REGISTER` of one type;
- `lightx2v/utils/input_info.py`: `T2VInputInfo` with `latent_shape` and `target_shape`
  (`--target_shape H W`), which `get_latent_shape_with_target_hw` prefers over the config's;
- `lightx2v/infer.py`: `init_runner` = `RUNNER_REGISTER[config["model_cls"]](config)` then
  `runner.init_modules()`, then `runner.run_pipeline(input_info)`, run as `python -m`;
- `lightx2v/models/runners/base_runner.py`: `BaseRunner.__init_subclass__` wraps each class's
  `init_modules` so that the outermost call ends with `self.warmup()`, and `run_pipeline`
  so that it ends with `_maybe_freeze_gc()` (gc.collect + gc.freeze);
- `lightx2v/models/runners/default_runner.py`: `warmup` -> `run_warmup` when `config["warmup"]`;
  `init_modules` -> `load_model` (`self.model = self.load_transformer()`, skipped under
  `lazy_load`) -> `model.set_scheduler`; `run_pipeline` -> `run_input_encoder` -> `run_main` ->
  `init_run` (lazy_load: a new model per request; `scheduler.prepare`) -> `run_segment` (per step
  `scheduler.step_pre(step_index=)`, `self.model.infer(self.inputs)`, `scheduler.step_post()`)
  -> `end_run` (lazy_load: `self.model = None`);
- `lightx2v/models/runners/wan/wan_runner.py` (`WanRunner`, "wan2.1"): `run_warmup` loads the
  model itself under `lazy_load`, then `_run_warmup` runs the step loop directly (no
  `run_pipeline`) once per `_WARMUP_RESOLUTIONS`, at `get_warmup_step_indices` = (0,);
- `lightx2v/models/runners/wan/wan_distill_runner.py` (`WanDistillRunner`, "wan2.1_distill"):
  warmup step indices (0, boundary);
- `lightx2v/models/schedulers/scheduler.py`, `.../wan/scheduler.py`,
  `.../wan/step_distill/scheduler.py`: `step_index`, `latents`, `infer_steps` (the distill one
  takes it from `denoising_step_list`; `boundary_step_index` as in Wan22StepDistillScheduler);
- `lightx2v/models/networks/base_model.py`, `.../wan/model.py`: `set_scheduler`, `infer(inputs)`;
- `lightx2v/common/transformer_infer/transformer_infer.py`: `get_compiled_block` caches a
  `torch.compile(block_runner, dynamic=None)` per block index (here with backend="aot_eager").

Tensors and compiles are real (CPU, tiny shapes); encoders and the VAE are trivial stand-ins.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .support import PYTHON, diag_record, events, manifest, of

STANDIN: dict[str, str] = {
    "lightx2v/utils/registry_factory.py": """
        from collections.abc import MutableMapping


        class Register(MutableMapping):
            def __init__(self, *args, **kwargs):
                self._dict = dict(*args, **kwargs)

            def __call__(self, target_or_name):
                if callable(target_or_name):
                    return self.register(target_or_name)
                else:
                    return lambda x: self.register(x, key=target_or_name)

            def register(self, target, key=None):
                if not callable(target):
                    raise Exception(f"Error: {target} must be callable!")
                if key is None:
                    key = target.__name__
                if key in self._dict:
                    raise Exception(f"{key} already exists.")
                self[key] = target
                return target

            def __setitem__(self, key, value):
                self._dict[key] = value

            def __getitem__(self, key):
                return self._dict[key]

            def __delitem__(self, key):
                del self._dict[key]

            def __iter__(self):
                return iter(self._dict)

            def __len__(self):
                return len(self._dict)

            def __contains__(self, key):
                return key in self._dict

            def get(self, key, default=None):
                return self._dict.get(key, default)


        MM_WEIGHT_REGISTER = Register()
        RUNNER_REGISTER = Register()
    """,
    "lightx2v/utils/lockable_dict.py": """
        from contextlib import contextmanager


        class LockableDict(dict):
            _locked = False

            def lock(self):
                self._locked = True

            @contextmanager
            def temporarily_unlocked(self):
                locked, self._locked = self._locked, False
                try:
                    yield self
                finally:
                    self._locked = locked

            def __setitem__(self, key, value):
                if self._locked:
                    raise RuntimeError(f"config is locked: {key}")
                super().__setitem__(key, value)
    """,
    "lightx2v/utils/set_config.py": """
        import json

        from lightx2v.utils.lockable_dict import LockableDict


        def set_config(args):
            config = LockableDict(cpu_offload=False, lazy_load=False, unload_modules=False)
            config.update({k: v for k, v in vars(args).items()})
            with open(args.config_json) as f:
                config.update(json.load(f))
            return config
    """,
    "lightx2v/utils/input_info.py": """
        from dataclasses import dataclass, field


        @dataclass
        class T2VInputInfo:
            seed: int = field(default_factory=int)
            prompt: str = field(default_factory=str)
            prompt_enhanced: str = field(default_factory=str)
            negative_prompt: str = field(default_factory=str)
            save_result_path: str = field(default_factory=str)
            return_result_tensor: bool = field(default_factory=lambda: False)
            resize_mode: str = field(default_factory=str)
            latent_shape: list = field(default_factory=list)
            target_shape: list = field(default_factory=list)


        def init_empty_input_info(task, support_tasks=[]):
            assert task == "t2v"
            return T2VInputInfo()


        def update_input_info_from_dict(input_info, data):
            for key, value in data.items():
                if hasattr(input_info, key) and value is not None:
                    setattr(input_info, key, value)
    """,
    "lightx2v/common/ops/__init__.py": """
        from lightx2v.common.ops.mm.mm_weight import *
    """,
    "lightx2v/common/ops/mm/mm_weight.py": """
        import torch

        from lightx2v.utils.registry_factory import MM_WEIGHT_REGISTER

        __all__ = ["MMWeight"]


        @MM_WEIGHT_REGISTER("Default")
        class MMWeight:
            def __init__(self, dim, generator):
                self.weight = torch.randn(dim, dim, generator=generator) * 0.1
    """,
    "lightx2v/common/transformer_infer/transformer_infer.py": """
        from abc import ABC, abstractmethod

        import torch


        class BaseTransformerInfer(ABC):
            def __init__(self, config):
                self.config = config
                self.use_compile = config.get("use_compile", False)
                self.compiled_blocks = {}

            def set_scheduler(self, scheduler):
                self.scheduler = scheduler

            def get_compiled_block(self, block_idx, block):
                key = self.get_compile_block_key(block_idx, block)
                cached = self.compiled_blocks.get(key)
                if cached is not None and cached[0] is block:
                    return cached[1]

                def block_runner(*args):
                    return self.infer_block(block, *args)

                compiled = torch.compile(block_runner, dynamic=None, backend="aot_eager")
                self.compiled_blocks[key] = (block, compiled)
                return compiled

            def get_compile_block_key(self, block_idx, block):
                return block_idx

            def run_block(self, block_idx, block, *args):
                if self.use_compile:
                    return self.get_compiled_block(block_idx, block)(*args)
                return self.infer_block(block, *args)

            @abstractmethod
            def infer(self):
                pass
    """,
    "lightx2v/models/networks/base_model.py": """
        from abc import ABC, abstractmethod

        import torch


        class BaseTransformerModel(ABC):
            def __init__(self, model_path, config, device):
                self.model_path = model_path
                self.config = config
                self.device = device
                self.cpu_offload = config.get("cpu_offload", False)
                self._init_infer_class()
                self._init_weights()
                self._init_infer()

            def set_scheduler(self, scheduler):
                self.scheduler = scheduler
                self.transformer_infer.set_scheduler(scheduler)

            @abstractmethod
            @torch.no_grad()
            def infer(self, inputs):
                pass
    """,
    "lightx2v/models/networks/wan/infer/transformer_infer.py": """
        import torch

        from lightx2v.common.transformer_infer.transformer_infer import BaseTransformerInfer


        class WanTransformerInfer(BaseTransformerInfer):
            def infer_block(self, block, x, timestep, context):
                h = torch.einsum("cthw,cd->dthw", x, block.weight)
                return x + torch.tanh(h) * (context.mean() + timestep / 1000)

            def infer(self, weights, x, timestep, context):
                for block_idx, block in enumerate(weights.blocks):
                    x = self.run_block(block_idx, block, x, timestep, context)
                return x
    """,
    "lightx2v/models/networks/wan/model.py": """
        import torch

        from lightx2v.models.networks.base_model import BaseTransformerModel
        from lightx2v.models.networks.wan.infer.transformer_infer import WanTransformerInfer
        from lightx2v.utils.registry_factory import MM_WEIGHT_REGISTER


        class WanTransformerWeights:
            def __init__(self, config):
                generator = torch.Generator().manual_seed(0)
                mm_cls = MM_WEIGHT_REGISTER[config.get("mm_type", "Default")]
                dim = config["num_channels_latents"]
                self.blocks = [mm_cls(dim, generator) for _ in range(config["num_layers"])]


        class WanModel(BaseTransformerModel):
            def _init_infer_class(self):
                self.transformer_infer_class = WanTransformerInfer

            def _init_weights(self):
                self.transformer_weights = WanTransformerWeights(self.config)

            def _init_infer(self):
                self.transformer_infer = self.transformer_infer_class(self.config)

            @torch.no_grad()
            def infer(self, inputs):
                context = inputs["text_encoder_output"]
                scheduler = self.scheduler
                self.scheduler.noise_pred = self.transformer_infer.infer(
                    self.transformer_weights, scheduler.latents, scheduler.timestep_input, context
                )


        class WanDistillModel(WanModel):
            pass
    """,
    "lightx2v/models/schedulers/scheduler.py": """
        class BaseScheduler:
            def __init__(self, config):
                self.config = config
                self.generator = None
                self.latents = None
                self.step_index = 0
                self.infer_steps = config["infer_steps"]

            def step_pre(self, step_index):
                self.step_index = step_index

            def clear(self):
                pass
    """,
    "lightx2v/models/schedulers/wan/scheduler.py": """
        import torch

        from lightx2v.models.schedulers.scheduler import BaseScheduler


        class WanScheduler(BaseScheduler):
            def __init__(self, config):
                super().__init__(config)
                self.noise_pred = None

            def prepare(self, seed, latent_shape, image_encoder_output=None):
                self.prepare_latents(seed, latent_shape, dtype=torch.float32)
                self.timesteps = torch.linspace(1000.0, 0.0, self.infer_steps + 1)[:-1]

            def prepare_latents(self, seed, latent_shape, dtype=torch.float32):
                if self.generator is None:
                    self.generator = torch.Generator().manual_seed(seed)
                self.latents = torch.randn(*latent_shape, dtype=dtype, generator=self.generator)

            def reset(self, seed, latent_shape, step_index=None):
                if step_index is not None:
                    self.step_index = step_index
                self.prepare_latents(seed, latent_shape)

            def step_pre(self, step_index):
                super().step_pre(step_index)
                self.timestep_input = torch.stack([self.timesteps[self.step_index]])

            def step_post(self):
                self.latents = self.latents - self.noise_pred / self.infer_steps

            def clear(self):
                for name in ("generator", "latents", "noise_pred", "timesteps", "timestep_input"):
                    setattr(self, name, None)
                self.step_index = 0
    """,
    "lightx2v/models/schedulers/wan/step_distill/scheduler.py": """
        import torch

        from lightx2v.models.schedulers.wan.scheduler import WanScheduler


        class WanStepDistillScheduler(WanScheduler):
            def __init__(self, config):
                super().__init__(config)
                self.denoising_step_list = config["denoising_step_list"]
                self.infer_steps = len(self.denoising_step_list)
                self.boundary_step_index = config["boundary_step_index"]

            def prepare(self, seed, latent_shape, image_encoder_output=None):
                self.prepare_latents(seed, latent_shape, dtype=torch.float32)
                self.timesteps = torch.tensor(self.denoising_step_list, dtype=torch.float32)

            def reset(self, seed, latent_shape, step_index=None):
                self.prepare_latents(seed, latent_shape, dtype=torch.float32)
    """,
    "lightx2v/models/runners/base_runner.py": """
        import functools
        import gc
        from abc import ABC


        class BaseRunner(ABC):
            def __init__(self, config):
                self.config = config
                self.input_info = None
                self._gc_frozen = False
                self._init_modules_depth = 0
                self._warmup_done = False

            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)

                run_pipeline_fn = cls.__dict__.get("run_pipeline")
                if run_pipeline_fn is not None and not getattr(
                    run_pipeline_fn, "_gc_freeze_wrapped", False
                ):

                    @functools.wraps(run_pipeline_fn)
                    def run_pipeline(self, *args, **kwargs):
                        result = run_pipeline_fn(self, *args, **kwargs)
                        self._maybe_freeze_gc()
                        return result

                    run_pipeline._gc_freeze_wrapped = True
                    cls.run_pipeline = run_pipeline

                init_modules_fn = cls.__dict__.get("init_modules")
                if init_modules_fn is not None and not getattr(
                    init_modules_fn, "_warmup_wrapped", False
                ):

                    @functools.wraps(init_modules_fn)
                    def init_modules(self, *args, **kwargs):
                        depth = getattr(self, "_init_modules_depth", 0)
                        self._init_modules_depth = depth + 1
                        try:
                            result = init_modules_fn(self, *args, **kwargs)
                        finally:
                            self._init_modules_depth = depth

                        if depth == 0 and not self._warmup_done:
                            self.warmup()
                            self._warmup_done = True
                        return result

                    init_modules._warmup_wrapped = True
                    cls.init_modules = init_modules

            def warmup(self):
                if self.config.get("warmup", False):
                    raise NotImplementedError(f"Warmup is not supported for {type(self).__name__}")

            def _maybe_freeze_gc(self):
                if getattr(self, "_gc_frozen", False):
                    return
                if self.config.get("lazy_load", False) or self.config.get("unload_modules", False):
                    self._gc_frozen = True
                    return
                gc.collect()
                gc.freeze()
                self._gc_frozen = True

            def init_scheduler(self):
                pass

            def get_video_segment_num(self):
                self.video_segment_num = 1

            def init_run_segment(self, segment_idx):
                self.segment_idx = segment_idx

            def end_run_segment(self, segment_idx=None):
                self.gen_video_final = self.gen_video
    """,
    "lightx2v/models/runners/default_runner.py": """
        import torch

        from lightx2v.models.runners.base_runner import BaseRunner


        class DefaultRunner(BaseRunner):
            def __init__(self, config):
                super().__init__(config)
                self.init_device = torch.device("cpu")
                self.init_scheduler()

            def warmup(self):
                if not self.config.get("warmup", False):
                    return
                self.run_warmup()

            def run_warmup(self):
                raise NotImplementedError(f"Warmup is not supported for {type(self).__name__}")

            def init_modules(self):
                lazy_load = self.config.get("lazy_load", False)
                if not lazy_load and not self.config.get("unload_modules", False):
                    self.load_model()
                elif lazy_load:
                    assert self.config.get("cpu_offload", False)
                if hasattr(self, "model") and self.model is not None:
                    self.model.set_scheduler(self.scheduler)
                if self.config["task"] == "t2v":
                    self.run_input_encoder = self._run_input_encoder_local_t2v
                self.config.lock()

            def load_model(self):
                self.model = self.load_transformer()
                self.text_encoders = self.load_text_encoder()

            def run_segment(self, segment_idx=0):
                infer_steps = self.model.scheduler.infer_steps
                for step_index in range(infer_steps):
                    self.model.scheduler.step_pre(step_index=step_index)
                    self.model.infer(self.inputs)
                    self.model.scheduler.step_post()
                if segment_idx is not None and segment_idx == self.video_segment_num - 1:
                    del self.inputs
                return self.model.scheduler.latents

            def end_run(self):
                release_transformer = self.config.get("lazy_load", False) or self.config.get(
                    "unload_modules", False
                )
                if self.model is not None:
                    self.model.scheduler.clear()
                if hasattr(self, "inputs"):
                    del self.inputs
                self.input_info = None
                if release_transformer:
                    self.model = None

            def _run_input_encoder_local_t2v(self):
                self.input_info.latent_shape = self.get_latent_shape_with_target_hw()
                text_encoder_output = self.run_text_encoder(self.input_info)
                return {"text_encoder_output": text_encoder_output, "image_encoder_output": None}

            def init_run(self):
                self.gen_video_final = None
                self.get_video_segment_num()
                if self.config.get("lazy_load", False) or self.config.get("unload_modules", False):
                    self.model = self.load_transformer()
                    self.model.set_scheduler(self.scheduler)
                self.model.scheduler.prepare(
                    seed=self.input_info.seed,
                    latent_shape=self.input_info.latent_shape,
                    image_encoder_output=self.inputs["image_encoder_output"],
                )

            def run_main(self):
                self.init_run()
                for segment_idx in range(self.video_segment_num):
                    self.init_run_segment(segment_idx)
                    latents = self.run_segment(segment_idx)
                    self.gen_video = self.run_vae_decoder(latents)
                    self.end_run_segment(segment_idx)
                self.end_run()
                return {"video": None}

            def run_vae_decoder(self, latents):
                return latents.clamp(-1, 1)

            def run_pipeline(self, input_info):
                self.input_info = input_info
                self.inputs = self.run_input_encoder()
                gen_video_final = self.run_main()
                print(f"pipeline done: {input_info.latent_shape}", flush=True)
                return gen_video_final
    """,
    "lightx2v/models/runners/wan/wan_runner.py": """
        import torch

        from lightx2v.models.networks.wan.model import WanModel
        from lightx2v.models.runners.default_runner import DefaultRunner
        from lightx2v.models.schedulers.wan.scheduler import WanScheduler
        from lightx2v.utils.input_info import T2VInputInfo
        from lightx2v.utils.registry_factory import RUNNER_REGISTER


        @RUNNER_REGISTER("wan2.1")
        class WanRunner(DefaultRunner):
            _WARMUP_RESOLUTIONS = ((32, 32), (48, 32))
            _WARMUP_TASKS = ("t2v",)
            _SUPPORTS_GENERIC_WARMUP = True

            def __init__(self, config):
                super().__init__(config)

            def run_warmup(self):
                if not type(self).__dict__.get("_SUPPORTS_GENERIC_WARMUP", False):
                    raise NotImplementedError(f"Wan warmup is not supported: {type(self).__name__}")
                if self.config.get("lazy_load", False):
                    try:
                        self.model = self.load_transformer()
                        self.model.set_scheduler(self.scheduler)
                        self._run_warmup()
                    finally:
                        self.clean_lazy_load_warmup()
                else:
                    self._run_warmup()
                self._maybe_freeze_gc()

            def _run_warmup(self):
                input_info = T2VInputInfo(prompt="warmup", prompt_enhanced="warmup")
                inputs = {"text_encoder_output": self.run_text_encoder(input_info)}
                scheduler = self.model.scheduler
                for height, width in self._WARMUP_RESOLUTIONS:
                    latent_shape = self.get_warmup_latent_shape(height, width)
                    try:
                        inputs["image_encoder_output"] = None
                        scheduler.generator = None
                        scheduler.prepare(seed=input_info.seed, latent_shape=latent_shape)
                        previous = None
                        for step_index in self.get_warmup_step_indices(scheduler):
                            if previous is not None and step_index != previous + 1:
                                scheduler.reset(
                                    seed=input_info.seed,
                                    latent_shape=latent_shape,
                                    step_index=step_index,
                                )
                            scheduler.step_pre(step_index=step_index)
                            self.model.infer(inputs)
                            scheduler.step_post()
                            previous = step_index
                        self.run_vae_decoder(scheduler.latents)
                    finally:
                        self.model.scheduler.clear()
                        inputs.pop("image_encoder_output", None)

            def get_warmup_latent_shape(self, target_height, target_width):
                _, stride_h, stride_w = self.config["vae_stride"]
                return self.get_latent_shape_with_lat_hw(
                    target_height // stride_h, target_width // stride_w
                )

            def get_warmup_step_indices(self, scheduler):
                return (0,)

            def clean_lazy_load_warmup(self):
                self.model = None

            def init_scheduler(self):
                self.scheduler = WanScheduler(self.config)

            def load_transformer(self):
                return WanModel(self.config["model_path"], self.config, self.init_device)

            def load_text_encoder(self):
                return []

            def run_text_encoder(self, input_info):
                seed = sum(map(ord, input_info.prompt)) % 1000
                return torch.randn(1, 8, 16, generator=torch.Generator().manual_seed(seed))

            def get_latent_shape_with_lat_hw(self, latent_h, latent_w):
                return [
                    self.config["num_channels_latents"],
                    (self.config["target_video_length"] - 1) // self.config["vae_stride"][0] + 1,
                    latent_h,
                    latent_w,
                ]

            def get_latent_shape_with_target_hw(self):
                target_shape = self.input_info.target_shape
                use_target = target_shape and len(target_shape) == 2
                height = target_shape[0] if use_target else self.config["target_height"]
                width = target_shape[1] if use_target else self.config["target_width"]
                return self.get_latent_shape_with_lat_hw(
                    int(height) // self.config["vae_stride"][1],
                    int(width) // self.config["vae_stride"][2],
                )
    """,
    "lightx2v/models/runners/wan/wan_distill_runner.py": """
        from lightx2v.models.networks.wan.model import WanDistillModel
        from lightx2v.models.runners.wan.wan_runner import WanRunner
        from lightx2v.models.schedulers.wan.step_distill.scheduler import WanStepDistillScheduler
        from lightx2v.utils.registry_factory import RUNNER_REGISTER


        @RUNNER_REGISTER("wan2.1_distill")
        class WanDistillRunner(WanRunner):
            _SUPPORTS_GENERIC_WARMUP = True

            def __init__(self, config):
                super().__init__(config)

            def load_transformer(self):
                return WanDistillModel(self.config["model_path"], self.config, self.init_device)

            def init_scheduler(self):
                self.scheduler = WanStepDistillScheduler(self.config)

            def get_warmup_step_indices(self, scheduler):
                step_count = len(scheduler.timesteps)
                if step_count == 0:
                    return ()
                boundary = scheduler.boundary_step_index
                return (0, boundary) if 0 < boundary < step_count else (0,)
    """,
    "lightx2v/infer.py": """
        import argparse

        import torch

        from lightx2v.common.ops import *
        from lightx2v.models.runners.wan.wan_distill_runner import WanDistillRunner  # noqa: F401
        from lightx2v.models.runners.wan.wan_runner import WanRunner  # noqa: F401
        from lightx2v.utils.input_info import init_empty_input_info, update_input_info_from_dict
        from lightx2v.utils.registry_factory import RUNNER_REGISTER
        from lightx2v.utils.set_config import set_config


        def init_runner(config):
            torch.set_grad_enabled(False)
            runner = RUNNER_REGISTER[config["model_cls"]](config)
            runner.init_modules()
            return runner


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=42)
            parser.add_argument(
                "--model_cls", type=str, required=True, choices=["wan2.1", "wan2.1_distill"]
            )
            parser.add_argument("--task", type=str, choices=["t2v"], default="t2v")
            parser.add_argument("--support_tasks", type=str, nargs="+", default=[])
            parser.add_argument("--model_path", type=str, required=True)
            parser.add_argument("--config_json", type=str, required=True)
            parser.add_argument("--warmup", action="store_true")
            parser.add_argument("--prompt", type=str, default="")
            parser.add_argument("--negative_prompt", type=str, default="")
            parser.add_argument("--save_result_path", type=str, default=None)
            parser.add_argument("--target_shape", nargs="+", type=int, default=[])
            args = parser.parse_args()
            torch.manual_seed(args.seed)

            config = set_config(args)
            config["warmup"] = args.warmup
            input_info = init_empty_input_info(args.task, args.support_tasks)

            runner = init_runner(config)
            data = args.__dict__
            update_input_info_from_dict(input_info, data)
            runner.run_pipeline(input_info)


        if __name__ == "__main__":
            main()
    """,
}

BASE_CONFIG: dict[str, Any] = {
    "use_compile": True,
    "num_layers": 2,
    "num_channels_latents": 4,
    "target_video_length": 5,
    "vae_stride": [4, 8, 8],
    "target_height": 32,
    "target_width": 32,
}
# Latent shapes [C, T, H, W]: the warmup resolutions (32, 32) and (48, 32), and the request's.
WARMUP_SHAPES = [[4, 2, 4, 4], [4, 2, 6, 4]]
LIVE_SHAPE = [4, 2, 4, 4]


def write_standin(root: Path) -> None:
    for rel, source in STANDIN.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip())
    for folder in [root / "lightx2v", *(root / "lightx2v").rglob("*")]:
        if folder.is_dir() and not (folder / "__init__.py").exists():
            (folder / "__init__.py").write_text("")


def record_standin(
    tmp_path: Path,
    model_cls: str,
    config: dict[str, Any],
    *extra: str,
    live_shape: list[int] = LIVE_SHAPE,
) -> list[dict[str, Any]]:
    src = tmp_path / "src"
    write_standin(src)
    config_json = tmp_path / "config.json"
    config_json.write_text(json.dumps({**BASE_CONFIG, **config}))
    env = {**os.environ, "PYTHONPATH": str(src)}
    trace = tmp_path / "trace"
    proc = diag_record(
        trace,
        PYTHON,
        "-m",
        "lightx2v.infer",
        "--model_cls",
        model_cls,
        "--task",
        "t2v",
        "--model_path",
        str(tmp_path / "weights"),
        "--config_json",
        str(config_json),
        "--warmup",
        "--prompt",
        "a cat",
        *extra,
        options=("--profile", "none"),
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"pipeline done: {live_shape}" in proc.stdout
    assert manifest(trace)["status"] == "complete"
    evs = events(trace)
    assert not of("collector_error", evs), of("collector_error", evs)
    return evs


@pytest.mark.parametrize(
    ("model_cls", "config", "warmup_steps", "live_steps"),
    [
        pytest.param("wan2.1", {"infer_steps": 4}, [0], 4, id="wan2.1"),
        pytest.param(
            "wan2.1_distill",
            {
                "infer_steps": 50,
                "denoising_step_list": [1000, 750, 500, 250],
                "boundary_step_index": 2,
                "lazy_load": True,
                "cpu_offload": True,
            },
            [0, 2],
            4,
            id="wan2.1_distill-lazy_load",
        ),
    ],
)
def test_lightx2v_infer_is_recorded(
    tmp_path: Path,
    model_cls: str,
    config: dict[str, Any],
    warmup_steps: list[int],
    live_steps: int,
) -> None:
    """Warmup (inside init_modules, its own step loop, no run_pipeline) then one live request.

    Under lazy_load the runner builds its model inside run_warmup and again inside run_pipeline
    (init_run), after the adapter's warmup / run_pipeline hooks have started.
    """
    evs = record_standin(tmp_path, model_cls, config)
    assert [e["name"] for e in of("adapter", evs)] == ["lightx2v"]
    assert [e["phase"] for e in of("phase", evs)] == ["warmup", "live"]

    requests = [(e["request_id"], e["phase"], e["shape"]) for e in of("request_start", evs)]
    # One warmup request per warmup resolution (each restarts at step 0 with a new shape);
    # the live request is opened by run_pipeline, before the latents exist: its shape is the
    # latent shape the runner computes from the request's input_info and the config.
    assert requests == [
        ("w1", "warmup", WARMUP_SHAPES[0]),
        ("w2", "warmup", WARMUP_SHAPES[1]),
        ("r3", "live", LIVE_SHAPE),
    ]
    assert [e["steps"] for e in of("request_start", evs)][-1] == live_steps
    ends = [(e["request_id"], e["phase"]) for e in of("request_end", evs)]
    assert ends == [("w1", "warmup"), ("w2", "warmup"), ("r3", "live")]

    starts = of("step_start", evs)
    expected = [("w1", "warmup", s, WARMUP_SHAPES[0]) for s in warmup_steps]
    expected += [("w2", "warmup", s, WARMUP_SHAPES[1]) for s in warmup_steps]
    expected += [("r3", "live", s, LIVE_SHAPE) for s in range(live_steps)]
    assert [(e["request_id"], e["phase"], e["step"], e["shape"]) for e in starts] == expected
    step_ends = of("step_end", evs)
    assert [(e["request_id"], e["step"]) for e in step_ends] == [(r, s) for r, _, s, _ in expected]
    assert all(e["wall_s"] > 0 for e in step_ends)

    # The block compiles during the warmup's first step; the second warmup shape recompiles.
    compiles = of("compile_end", evs)
    assert compiles and all(e["result"] == "ok" for e in compiles)
    assert {(e["phase"], e["request_id"], e["step"]) for e in compiles} == {
        ("warmup", "w1", 0),
        ("warmup", "w2", 0),
    }
    assert {e["frame"]["name"] for e in compiles} == {"block_runner"}
    recompiles = of("recompile", evs)
    assert [(e["phase"], e["request_id"]) for e in recompiles] == [("warmup", "w2")]


def test_live_request_shape_is_read_from_input_info_target_shape(tmp_path: Path) -> None:
    """`--target_shape 48 32` (pixels) puts [48, 32] in input_info.target_shape, which
    LightX2V prefers over the config's 32x32: the request's shape at request_start is the
    latent shape of 48x32 (the second warmup resolution), before any step has run."""
    target = [4, 2, 6, 4]
    evs = record_standin(
        tmp_path, "wan2.1", {"infer_steps": 2}, "--target_shape", "48", "32", live_shape=target
    )
    live = [e for e in of("request_start", evs) if e["phase"] == "live"]
    assert [(e["request_id"], e["shape"], e["steps"]) for e in live] == [("r3", target, 2)]
    first_live_step = next(e for e in of("step_start", evs) if e["phase"] == "live")
    assert live[0]["t"] < first_live_step["t"]
    assert first_live_step["shape"] == target
    # A warmed shape: nothing compiles in the live request.
    assert not [e for e in of("compile_end", evs) if e["phase"] == "live"]
