"""The program behind the cudagraph-diffusers-* recordings: a diffusers WanPipeline of dummy
components (diffusers' own tiny Wan2.1 test configs, no tokenizer or text encoder, prompt
embeddings passed in) whose transformer is compiled with mode="reduce-overhead" (CUDA graphs),
serving requests at the sizes given, with classifier-free guidance. It follows torch's advice
for loops of model calls: torch.compiler.cudagraph_mark_step_begin() before each request and
after each step (diffusers' callback_on_step_end), so the cond and uncond passes of one step
are one cudagraph-trees generation and nothing is overwritten.

    diag record --warmup-requests 2 -o OUT -- python3 program.py --sizes 32x32,48x32,32x32,64x32
    ... --dynamic false     # one static graph per size (pipe.transformer.compile(dynamic=False))
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
parser.add_argument("--sizes", default="32x32,48x32,32x32,64x32", help="HEIGHTxWIDTH,...")
parser.add_argument("--dynamic", choices=("auto", "false"), default="auto")
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(0)
vae = AutoencoderKLWan(
    base_dim=3,
    z_dim=16,
    dim_mult=[1, 1, 1, 1],
    num_res_blocks=1,
    temperal_downsample=[False, True, True],
)
torch.manual_seed(0)
transformer = WanTransformer3DModel(
    patch_size=(1, 2, 2),
    num_attention_heads=2,
    attention_head_dim=12,
    in_channels=16,
    out_channels=16,
    text_dim=32,
    freq_dim=256,
    ffn_dim=32,
    num_layers=2,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    rope_max_seq_len=32,
)
scheduler = FlowMatchEulerDiscreteScheduler(shift=7.0)
pipe = WanPipeline(
    tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=scheduler
).to("cuda")
pipe.set_progress_bar_config(disable=True)
pipe.transformer.compile(mode="reduce-overhead", dynamic=None if args.dynamic == "auto" else False)
gen = torch.Generator().manual_seed(0)
embeds = torch.randn(1, 16, 32, generator=gen).to("cuda")
negative = torch.randn(1, 16, 32, generator=gen).to("cuda")


def new_generation(pipe, step, timestep, callback_kwargs):
    torch.compiler.cudagraph_mark_step_begin()
    return callback_kwargs


for index, size in enumerate(args.sizes.split(",")):
    height, width = (int(v) for v in size.split("x"))
    torch.compiler.cudagraph_mark_step_begin()
    video = pipe(
        prompt_embeds=embeds,
        negative_prompt_embeds=negative,
        height=height,
        width=width,
        num_frames=5,
        num_inference_steps=args.steps,
        guidance_scale=5.0,
        output_type="pt",
        generator=torch.Generator().manual_seed(index),
        callback_on_step_end=new_generation,
    ).frames
    print("video", size, tuple(video.shape), round(float(video.double().sum()), 4), flush=True)
