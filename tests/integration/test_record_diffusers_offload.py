"""The `pipeline_offload` event of a diffusers pipeline with group offloading, recorded on CPU:
diffusers' `apply_group_offloading` (what `enable_group_offload` calls) with `use_stream=False`
runs on a CPU (a stream needs an accelerator), and the event says so (`group_stream`), which
offload-bound reads to name the switch."""

from __future__ import annotations

import textwrap
from pathlib import Path

from .support import PYTHON, diag_record, events, of

APP = """
import torch
from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline
from diffusers.hooks import apply_group_offloading
from diffusers.models import DiTTransformer2DModel

torch.manual_seed(0)
vae = AutoencoderKL(
    sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,),
    layers_per_block=1, latent_channels=4, norm_num_groups=1,
    down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
)
transformer = DiTTransformer2DModel(
    sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=2,
    in_channels=4, out_channels=8, num_embeds_ada_norm=1000,
)
pipe = DiTPipeline(transformer=transformer, vae=vae, scheduler=DDIMScheduler())
pipe.set_progress_bar_config(disable=True)
cpu = torch.device("cpu")
apply_group_offloading(
    pipe.transformer, onload_device=cpu, offload_device=cpu, offload_type="block_level",
    num_blocks_per_group=1, use_stream=False,
)
out = pipe(class_labels=[1], num_inference_steps=2, output_type="pt",
           generator=torch.Generator().manual_seed(0))
print("images", tuple(torch.as_tensor(out.images).shape))
"""


def test_group_offload_without_a_stream(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    trace = tmp_path / "t"
    proc = diag_record(trace, PYTHON, "app.py", options=("--profile", "none"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "images (1, 3, 8, 8)" in proc.stdout
    (event,) = of("pipeline_offload", events(trace))
    assert (event["pipeline"], event["model"], event["group"]) == ("DiTPipeline", False, True)
    assert event["group_stream"] is False
