"""A tiny diffusers DiTPipeline (built from a config: no download) served as a bench subject.

`python bench/diffusers_tiny.py [--compile] [--backend aot_eager|inductor] [--steps N]`: one
warmup call, then two live calls at each of two class-label batch sizes (a second shape), each
`--steps` denoising steps. diffusers' own pipeline and scheduler; with `--compile` each
transformer block is `block.compile()`d, as diffusers' `compile_repeated_blocks` does. The
program has no warmup diag knows of: bench it with `diag bench --warmup-requests 1`, e.g.

    diag bench --warmup-requests 1 \\
        --config eager='python bench/diffusers_tiny.py' \\
        --config compiled='python bench/diffusers_tiny.py --compile'
"""

from __future__ import annotations

import argparse

import torch
from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline
from diffusers.models import DiTTransformer2DModel


def build(compile_backend: str | None) -> DiTPipeline:
    torch.manual_seed(0)
    transformer = DiTTransformer2DModel(
        sample_size=16, num_layers=2, patch_size=2, attention_head_dim=16,
        num_attention_heads=2, in_channels=4, out_channels=8, num_embeds_ada_norm=1000,
    )  # fmt: skip
    vae = AutoencoderKL(
        sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,),
        layers_per_block=1, latent_channels=4, norm_num_groups=1,
        down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
    )  # fmt: skip
    pipe = DiTPipeline(transformer=transformer, vae=vae, scheduler=DDIMScheduler())
    pipe.set_progress_bar_config(disable=True)
    if compile_backend is not None:
        for block in pipe.transformer.transformer_blocks:
            block.compile(backend=compile_backend)
    return pipe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    pipe = build(args.backend if args.compile else None)
    calls = [[1]] + [[1], [1]] + [[2, 3], [2, 3]]  # warmup, then two shapes twice each
    with torch.no_grad():
        for labels in calls:
            generator = torch.Generator().manual_seed(0)
            out = pipe(
                class_labels=labels,
                num_inference_steps=args.steps,
                output_type="pt",
                generator=generator,
            )
            images = torch.as_tensor(out.images)
            print("dit", tuple(images.shape), round(float(images.double().sum()), 4), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
