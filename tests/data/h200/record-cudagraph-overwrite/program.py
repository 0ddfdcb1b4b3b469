"""The program behind this recording: a diffusers WanPipeline of dummy components (diffusers' own
tiny Wan2.1 test configs, no tokenizer or text encoder, prompt embeddings passed in) whose
transformer is compiled with mode="reduce-overhead" (CUDA graphs), serving two requests with
classifier-free guidance. The cond pass's output is read after the uncond pass replayed the same
graph, so it dies with "accessing tensor output of CUDAGraphs that has been overwritten".

    diag record -o OUT -- python3 program.py [--backend aot_eager --device cpu]
"""

import argparse

import torch
from diffusers import (
    AutoencoderKLWan,
    DiffusionPipeline,
    FlowMatchEulerDiscreteScheduler,
    WanPipeline,  # without transformers, a placeholder that raises when built
    WanTransformer3DModel,
)


class WanCFG(DiffusionPipeline):
    """WanPipeline's denoising loop with guidance, for machines without transformers."""

    def __init__(self, transformer, vae, scheduler):
        super().__init__()
        self.register_modules(transformer=transformer, vae=vae, scheduler=scheduler)

    @torch.no_grad()
    def __call__(
        self,
        prompt_embeds,
        negative_prompt_embeds,
        height,
        width,
        num_frames,
        num_inference_steps,
        guidance_scale,
        output_type,
        generator,
    ):
        frames = (num_frames - 1) // 4 + 1
        latents = torch.randn(1, 16, frames, height // 8, width // 8, generator=generator)
        latents = latents.to(prompt_embeds.device)
        self.scheduler.set_timesteps(num_inference_steps)
        with self.progress_bar(total=num_inference_steps) as bar:
            for t in self.scheduler.timesteps:
                timestep = t.expand(1).to(latents.device)
                cond = self.transformer(
                    hidden_states=latents,
                    timestep=timestep,
                    encoder_hidden_states=prompt_embeds,
                    return_dict=False,
                )[0]
                uncond = self.transformer(
                    hidden_states=latents,
                    timestep=timestep,
                    encoder_hidden_states=negative_prompt_embeds,
                    return_dict=False,
                )[0]
                noise = uncond + guidance_scale * (cond - uncond)
                latents = self.scheduler.step(noise, t, latents, return_dict=False)[0]
                bar.update()
        video = self.vae.decode(latents.to(self.vae.dtype), return_dict=False)[0]
        return type("Output", (), {"frames": video})()


parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")
parser.add_argument("--backend", default="inductor")
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
try:
    pipe = WanPipeline(
        tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=scheduler
    )
    print("pipeline: WanPipeline", flush=True)
except (ImportError, TypeError):  # no transformers here: the same loop, written out
    pipe = WanCFG(transformer, vae, scheduler)
    print("pipeline: WanCFG (WanPipeline unavailable)", flush=True)
pipe = pipe.to(args.device)
pipe.set_progress_bar_config(disable=True)
if args.backend == "inductor":
    pipe.transformer.compile(mode="reduce-overhead")
else:
    pipe.transformer.compile(backend=args.backend)
gen = torch.Generator().manual_seed(0)
embeds = torch.randn(1, 16, 32, generator=gen).to(args.device)
negative = torch.randn(1, 16, 32, generator=gen).to(args.device)
for request in range(2):
    video = pipe(
        prompt_embeds=embeds,
        negative_prompt_embeds=negative,
        height=32,
        width=32,
        num_frames=5,
        num_inference_steps=3,
        guidance_scale=5.0,
        output_type="pt",
        generator=torch.Generator().manual_seed(request),
    ).frames
    print("video", tuple(video.shape), round(float(video.double().sum()), 4), flush=True)
