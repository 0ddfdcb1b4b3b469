"""`diag record` on unmodified diffusers programs: pipeline calls are requests, denoising
iterations are steps, and the program's output does not change.

Tiny pipelines built from configs (no downloads, no text encoders): diffusers' own DiTPipeline
(its loop is `for t in self.progress_bar(timesteps)`, DDIM has no `step_index`), and a
flow-matching pipeline written in the program the way most diffusers pipelines are
(`with self.progress_bar(total=...)`, FlowMatchEulerDiscreteScheduler), called through a
subclass whose `__call__` calls its parent's; and one with an outer loop over batches and a
second, copied scheduler, called inside diag.api's warmup phase and an already open request.
"""

from __future__ import annotations

import importlib.util
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .support import PYTHON, diag_record, events, of

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("diffusers") is None, reason="diffusers is not installed (dev extra)"
)

APP = """
import copy, sys
import torch
import diag.api as diag
from diffusers import (
    AutoencoderKL, DDIMScheduler, DiffusionPipeline, DiTPipeline, FlowMatchEulerDiscreteScheduler,
)
from diffusers.models import DiTTransformer2DModel, SD3Transformer2DModel

mode, compiled = sys.argv[1], "compile" in sys.argv


def tiny_vae():
    torch.manual_seed(0)
    return AutoencoderKL(
        sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,),
        layers_per_block=1, latent_channels=4, norm_num_groups=1,
        down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
    )


def report(name, images):
    images = torch.as_tensor(images)  # older DiTPipelines give numpy for output_type="pt"
    print(name, tuple(images.shape), round(float(images.double().sum()), 4), flush=True)


class FlowPipeline(DiffusionPipeline):
    def __init__(self, transformer, vae, scheduler):
        super().__init__()
        self.register_modules(transformer=transformer, vae=vae, scheduler=scheduler)

    @torch.no_grad()
    def __call__(self, embeds, pooled, height=16, width=16, num_inference_steps=4, generator=None):
        latents = torch.randn(1, 4, height // 2, width // 2, generator=generator)
        self.scheduler.set_timesteps(num_inference_steps)
        timesteps = self.scheduler.timesteps
        with self.progress_bar(total=num_inference_steps) as progress_bar:
            for t in timesteps:
                noise = self.transformer(
                    hidden_states=latents, encoder_hidden_states=embeds,
                    pooled_projections=pooled, timestep=t.expand(1), return_dict=False,
                )[0]
                latents = self.scheduler.step(noise, t, latents, return_dict=False)[0]
                progress_bar.update()
        return self.vae.decode(latents, return_dict=False)[0]


class NestedFlowPipeline(FlowPipeline):
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs)


# Marigold's outer loop over batches (a progress bar, not a denoising loop), and LTX-2's second
# scheduler, a copy of the first, stepped in the same iteration.
class TwoBranchPipeline(FlowPipeline):
    @torch.no_grad()
    def __call__(self, embeds, pooled, batches=2, num_inference_steps=2):
        results = []
        for _ in self.progress_bar(range(batches)):
            latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1))
            self.scheduler.set_timesteps(num_inference_steps)
            other = copy.deepcopy(self.scheduler)
            other_latents = latents.clone()
            for t in self.progress_bar(self.scheduler.timesteps):
                noise = self.transformer(
                    hidden_states=latents, encoder_hidden_states=embeds,
                    pooled_projections=pooled, timestep=t.expand(1), return_dict=False,
                )[0]
                latents = self.scheduler.step(noise, t, latents, return_dict=False)[0]
                other_latents = other.step(-noise, t, other_latents, return_dict=False)[0]
            results.append(latents + other_latents)
        return torch.cat(results)


def dit():
    torch.manual_seed(0)
    transformer = DiTTransformer2DModel(
        sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=2,
        in_channels=4, out_channels=8, num_embeds_ada_norm=1000,
    )
    pipe = DiTPipeline(transformer=transformer, vae=tiny_vae(), scheduler=DDIMScheduler())
    pipe.set_progress_bar_config(disable=True)
    if compiled:
        pipe.transformer.compile(backend="aot_eager")
    for steps, labels in ((3, [1]), (2, [2, 3])):
        generator = torch.Generator().manual_seed(0)
        out = pipe(class_labels=labels, num_inference_steps=steps, output_type="pt",
                   generator=generator)
        report("dit", out.images)


def flow():
    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(
        sample_size=8, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8,
        num_attention_heads=2, caption_projection_dim=16, joint_attention_dim=16,
        pooled_projection_dim=8, out_channels=4, pos_embed_max_size=16,
    )
    scheduler = FlowMatchEulerDiscreteScheduler()
    pipe = NestedFlowPipeline(transformer=transformer, vae=tiny_vae(), scheduler=scheduler)
    pipe.set_progress_bar_config(disable=True)
    if compiled:
        for block in pipe.transformer.transformer_blocks:
            block.compile(backend="aot_eager")
    embeds, pooled = torch.randn(1, 5, 16), torch.randn(1, 8)
    for steps, (height, width) in ((3, (16, 16)), (2, (24, 16))):
        generator = torch.Generator().manual_seed(0)
        images = pipe(embeds, pooled, height=height, width=width, num_inference_steps=steps,
                      generator=generator)
        report("flow", images)


def api():
    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(
        sample_size=8, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8,
        num_attention_heads=2, caption_projection_dim=16, joint_attention_dim=16,
        pooled_projection_dim=8, out_channels=4, pos_embed_max_size=16,
    )
    scheduler = FlowMatchEulerDiscreteScheduler()
    pipe = TwoBranchPipeline(transformer=transformer, vae=tiny_vae(), scheduler=scheduler)
    pipe.set_progress_bar_config(disable=True)
    embeds, pooled = torch.randn(1, 5, 16), torch.randn(1, 8)
    with diag.phase("warmup"):
        report("warmup", pipe(embeds, pooled, batches=1))
    with diag.request("both"):
        report("both", pipe(embeds, pooled, batches=1, num_inference_steps=1))
        report("both", pipe(embeds, pooled, batches=1, num_inference_steps=2))
    report("batches", pipe(embeds, pooled, batches=2, num_inference_steps=3))


{"dit": dit, "flow": flow, "api": api}[mode]()
"""


# Two calls: 3 steps, then 2.
LIVE_STEPS = [("r1", s, "live") for s in range(3)] + [("r2", s, "live") for s in range(2)]


def _record(tmp: Path, *args: str) -> tuple[list[dict[str, Any]], str, str]:
    """The program run plainly and under `diag record`: the trace's events and both stdouts."""
    app = tmp / "app.py"
    app.write_text(textwrap.dedent(APP))
    plain = subprocess.run(
        [PYTHON, str(app), *args], capture_output=True, text=True, timeout=240, check=True
    )
    proc = diag_record(tmp / "trace", PYTHON, str(app), *args)
    assert proc.returncode == 0, proc.stderr
    return events(tmp / "trace"), plain.stdout, proc.stdout


def _requests(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["request_id"], e["phase"], e["shape"], e["steps"]) for e in of("request_start", evs)]


def _steps(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["request_id"], e["step"], e["phase"]) for e in of("step_end", evs)]


def _well_nested(evs: list[dict[str, Any]]) -> None:
    """Steps lie inside requests, one at a time; compiles happen inside steps."""
    request = step = None
    for e in evs:
        kind = e["ev"]
        if kind == "request_start":
            assert request is None and step is None
            request = e["request_id"]
        elif kind == "request_end":
            assert (e["request_id"], step) == (request, None)
            request = None
        elif kind == "step_start":
            assert step is None and e["request_id"] == request
            step = e["step"]
        elif kind == "step_end":
            assert (e["request_id"], e["step"]) == (request, step)
            step = None
        elif kind == "compile_end":
            assert (e["request_id"], e["step"]) == (request, step) and step is not None


@pytest.fixture(scope="module")
def dit(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str, str]:
    return _record(tmp_path_factory.mktemp("dit"), "dit", "compile")


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str, str]:
    return _record(tmp_path_factory.mktemp("flow"), "flow", "compile")


def test_dit_pipeline_calls_are_requests_and_iterations_steps(
    dit: tuple[list[dict[str, Any]], str, str],
) -> None:
    evs, plain, recorded = dit
    assert recorded == plain and plain.count("dit (") == 2
    assert [e["name"] for e in of("adapter", evs)] == ["diffusers"]
    assert _requests(evs) == [("r1", "live", None, 3), ("r2", "live", None, 2)]
    assert _steps(evs) == LIVE_STEPS
    # No height/width arguments: the steps carry the latents' shape from the loop's start.
    assert [e["shape"] for e in of("step_start", evs)] == [[1, 4, 8, 8]] * 3 + [[2, 4, 8, 8]] * 2
    _well_nested(evs)
    first = of("compile_end", evs)[0]
    assert (first["request_id"], first["step"], first["result"]) == ("r1", 0, "ok")
    # The second call's batch of two recompiles the transformer, in its first step.
    assert [(e["request_id"], e["step"]) for e in of("recompile", evs)] == [("r2", 0)]
    assert not of("collector_error", evs)


def test_flow_pipeline_nested_calls_and_a_new_resolution(
    flow: tuple[list[dict[str, Any]], str, str],
) -> None:
    evs, plain, recorded = flow
    assert recorded == plain and plain.count("flow (") == 2
    assert [e["name"] for e in of("adapter", evs)] == ["diffusers"]
    # NestedFlowPipeline.__call__ -> FlowPipeline.__call__: still one request per call.
    assert _requests(evs) == [("r1", "live", [16, 16], 3), ("r2", "live", [24, 16], 2)]
    assert _steps(evs) == LIVE_STEPS
    _well_nested(evs)
    compiles = of("compile_end", evs)
    assert compiles and all(e["result"] == "ok" for e in compiles)
    assert [(e["request_id"], e["step"]) for e in of("recompile", evs)] == [("r2", 0)]
    assert not of("collector_error", evs)


def test_phases_open_requests_outer_loops_and_copied_schedulers(tmp_path: Path) -> None:
    evs, plain, recorded = _record(tmp_path, "api")
    assert recorded == plain and plain.count("\n") == 4
    # The warmup phase reports no step: it announces diag.api only to keep inferred boundaries
    # out, and the pipeline's adapter, first to report requests, replaces it (diag.request,
    # later, does not: the process's adapter names the request shape's dims).
    assert [e["name"] for e in of("adapter", evs)] == ["diag.api", "diffusers"]
    # diag.api's warmup phase is kept; a request already open takes both pipeline calls.
    assert [(r[0], r[1], r[3]) for r in _requests(evs)] == [
        ("w1", "warmup", 2),
        ("both", "live", None),
        ("r3", "live", 3),
    ]
    # The outer progress bar over batches is no loop of steps, and the copied scheduler's
    # step() stays inside the step: one step per iteration, numbered within the request.
    assert _steps(evs) == [
        ("w1", 0, "warmup"),
        ("w1", 1, "warmup"),
        ("both", 0, "live"),
        ("both", 1, "live"),
        ("both", 2, "live"),
    ] + [("r3", s, "live") for s in range(6)]
    assert [e["shape"] for e in of("step_start", evs)] == [[1, 4, 8, 8]] * 11
    _well_nested(evs)
    assert not of("collector_error", evs)
