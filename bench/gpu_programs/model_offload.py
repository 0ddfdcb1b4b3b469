"""A diffusers WanPipeline with `enable_model_cpu_offload()`, as users save GPU memory: each
request moves the transformer to the GPU at its first use and back at the end (then
`torch.cuda.empty_cache()`), so step 0 of every request reloads the weights.

Components from diffusers' Wan configs (random weights: no hub), a 12-block transformer of
width 1536 (about 1 GB in bf16) so the reload shows; prompt embeddings passed directly (no text
encoder). Three requests of 6 steps at 256x256, 9 frames. Needs CUDA and `transformers`
(WanPipeline's signature names its tokenizer and text encoder types; None is passed for both).

    diag record -o OUT -- python3 model_offload.py [--requests 3]
"""

import argparse

import torch
from diffusers import (
    AutoencoderKLWan,
    FlowMatchEulerDiscreteScheduler,
    WanPipeline,
    WanTransformer3DModel,
)

parser = argparse.ArgumentParser()
parser.add_argument("--requests", type=int, default=3)
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)
transformer = WanTransformer3DModel(
    patch_size=(1, 2, 2),
    num_attention_heads=12,
    attention_head_dim=128,
    in_channels=16,
    out_channels=16,
    text_dim=4096,
    freq_dim=256,
    ffn_dim=8960,
    num_layers=12,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    rope_max_seq_len=1024,
).to(torch.bfloat16)
vae = AutoencoderKLWan(
    base_dim=3,
    z_dim=16,
    dim_mult=[1, 1, 1, 1],
    num_res_blocks=1,
    temperal_downsample=[False, True, True],
)
pipe = WanPipeline(
    tokenizer=None,
    text_encoder=None,
    transformer=transformer,
    vae=vae,
    scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
)
pipe.enable_model_cpu_offload()
embeds = torch.randn(1, 64, 4096, dtype=torch.bfloat16, device="cuda")
negative = torch.randn(1, 64, 4096, dtype=torch.bfloat16, device="cuda")
for i in range(args.requests):
    video = pipe(
        prompt_embeds=embeds,
        negative_prompt_embeds=negative,
        height=256,
        width=256,
        num_frames=9,
        num_inference_steps=args.steps,
        guidance_scale=5.0,
        output_type="pt",
        generator=torch.Generator("cuda").manual_seed(i),
    ).frames
    print(f"request {i}: {tuple(video.shape)} sum {float(video.double().sum()):.4f}", flush=True)
