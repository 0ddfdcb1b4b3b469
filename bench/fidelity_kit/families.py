"""Model families for generated programs: diffusers' transformers built from the tiny configs of
diffusers' own tests (tests/models/transformers/test_models_*.py, read at huggingface/diffusers
58eb52c), called the way a hand-written denoising loop calls them: prompt embeddings passed
directly, no hub, no weights, no text encoder.

Each family gives the source of two functions the program pastes in: `make_inputs(res, gen)`,
which returns the latents and the other keyword arguments for a resolution, and `call(model,
latents, extra)`, which returns the model's prediction shaped like the latents. A resolution
is a tuple of small ints (height and width in latent pixels, and frames for video models).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    cls: str
    config: str  # a Python dict literal
    inputs: str  # body of make_inputs(res, gen) -> (latents, extra)
    call: str  # body of call(model, latents, extra) -> prediction like latents
    resolutions: tuple[tuple[int, ...], ...]
    blocks: tuple[str, ...]  # attributes holding the repeated blocks
    repeated: bool  # the class declares _repeated_blocks (compile_repeated_blocks works)
    #: Names of the call's arguments (and model attributes) whose guards follow the resolution:
    #: a recompile on them is a shape change.
    shape_sources: tuple[str, ...] = ("hidden_states",)
    #: The model's own source, for a hand-written model (None: the class is diffusers').
    source: str | None = None

    @property
    def constructor(self) -> str:
        return self.cls if self.source is not None else f"diffusers.{self.cls}"


_TEXT = "    text = torch.randn(1, {seq}, {dim}, generator=gen)\n"

FAMILIES: dict[str, Family] = {
    "wan": Family(
        name="wan",
        cls="WanTransformer3DModel",
        config="""dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
    in_channels=4, out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2,
    cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32)""",
        inputs="    f, h, w = res\n"
        "    latents = torch.randn(1, 4, f, h, w, generator=gen)\n"
        + _TEXT.format(seq=12, dim=16)
        + "    return latents, {'encoder_hidden_states': text}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],"
        " return_dict=False)[0]\n",
        resolutions=((2, 16, 16), (2, 16, 24), (2, 24, 16), (2, 24, 24)),
        blocks=("blocks",),
        repeated=True,
        shape_sources=("hidden_states", "rotary_emb", "temb", "timestep_proj"),
    ),
    "flux": Family(
        name="flux",
        cls="FluxTransformer2DModel",
        config="""dict(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
    attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
    pooled_projection_dim=32, axes_dims_rope=[4, 4, 8])""",
        inputs="    h, w = res\n"
        "    latents = torch.randn(1, h * w, 4, generator=gen)\n"
        + _TEXT.format(seq=24, dim=32)
        + "    ids = torch.zeros(h, w, 3)\n"
        "    ids[..., 1] = torch.arange(h)[:, None]\n"
        "    ids[..., 2] = torch.arange(w)[None, :]\n"
        "    return latents, {'encoder_hidden_states': text,\n"
        "        'pooled_projections': torch.randn(1, 32, generator=gen),\n"
        "        'img_ids': ids.reshape(h * w, 3), 'txt_ids': torch.zeros(24, 3)}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'] / 1000,\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],\n"
        "                 pooled_projections=extra['pooled_projections'],\n"
        "                 img_ids=extra['img_ids'], txt_ids=extra['txt_ids'],"
        " return_dict=False)[0]\n",
        resolutions=((4, 4), (4, 8), (8, 4), (8, 8)),
        blocks=("transformer_blocks", "single_transformer_blocks"),
        repeated=True,
        shape_sources=("hidden_states", "image_rotary_emb", "img_ids"),
    ),
    "sd3": Family(
        name="sd3",
        cls="SD3Transformer2DModel",
        config="""dict(sample_size=32, patch_size=1, in_channels=4, num_layers=2,
    attention_head_dim=8, num_attention_heads=4, caption_projection_dim=32,
    joint_attention_dim=32, pooled_projection_dim=64, out_channels=4, pos_embed_max_size=96,
    dual_attention_layers=(), qk_norm=None)""",
        inputs="    h, w = res\n"
        "    latents = torch.randn(1, 4, h, w, generator=gen)\n"
        + _TEXT.format(seq=16, dim=32)
        + "    return latents, {'encoder_hidden_states': text,\n"
        "        'pooled_projections': torch.randn(1, 64, generator=gen)}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],\n"
        "                 pooled_projections=extra['pooled_projections'],"
        " return_dict=False)[0]\n",
        resolutions=((8, 8), (8, 16), (16, 8), (16, 16)),
        blocks=("transformer_blocks",),
        repeated=False,
    ),
    "cogvideox": Family(
        name="cogvideox",
        cls="CogVideoXTransformer3DModel",
        config="""dict(num_attention_heads=2, attention_head_dim=8, in_channels=4,
    out_channels=4, time_embed_dim=2, text_embed_dim=8, num_layers=2, sample_width=8,
    sample_height=8, sample_frames=8, patch_size=2, patch_size_t=None,
    temporal_compression_ratio=4, max_text_seq_length=8)""",
        inputs="    f, h, w = res\n"
        "    latents = torch.randn(1, f, 4, h, w, generator=gen)\n"
        + _TEXT.format(seq=8, dim=8)
        + "    return latents, {'encoder_hidden_states': text}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],"
        " return_dict=False)[0]\n",
        resolutions=((1, 8, 8), (1, 8, 16), (1, 16, 8), (1, 16, 16)),
        blocks=("transformer_blocks",),
        repeated=False,
    ),
    "ltx": Family(
        name="ltx",
        cls="LTXVideoTransformer3DModel",
        config="""dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
    cross_attention_dim=16, num_layers=1, qk_norm="rms_norm_across_heads", caption_channels=16)""",
        inputs="    f, h, w = res\n"
        "    latents = torch.randn(1, f * h * w, 4, generator=gen)\n"
        + _TEXT.format(seq=16, dim=16)
        + "    return latents, {'encoder_hidden_states': text,\n"
        "        'encoder_attention_mask': torch.ones(1, 16, dtype=torch.bool),\n"
        "        'num_frames': f, 'height': h, 'width': w}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],\n"
        "                 encoder_attention_mask=extra['encoder_attention_mask'],\n"
        "                 num_frames=extra['num_frames'], height=extra['height'],\n"
        "                 width=extra['width'], return_dict=False)[0]\n",
        resolutions=((2, 8, 8), (2, 8, 12), (2, 12, 8), (2, 12, 12)),
        blocks=("transformer_blocks",),
        repeated=True,
        shape_sources=("hidden_states", "height", "width", "num_frames", "image_rotary_emb"),
    ),
    "pixart": Family(
        name="pixart",
        cls="PixArtTransformer2DModel",
        config="""dict(sample_size=8, num_layers=1, patch_size=2, attention_head_dim=2,
    num_attention_heads=2, in_channels=4, cross_attention_dim=8, out_channels=8,
    attention_bias=True, activation_fn="gelu-approximate", num_embeds_ada_norm=8,
    norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
    use_additional_conditions=False, caption_channels=None)""",
        inputs="    h, w = res\n"
        "    latents = torch.randn(1, 4, h, w, generator=gen)\n"
        + _TEXT.format(seq=8, dim=8)
        + "    return latents, {'encoder_hidden_states': text}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],\n"
        "                 added_cond_kwargs={'aspect_ratio': None, 'resolution': None},\n"
        "                 return_dict=False)[0][:, :4]\n",
        resolutions=((8, 8), (8, 16), (16, 8), (16, 16)),
        blocks=("transformer_blocks",),
        repeated=False,
    ),
    "sana": Family(
        name="sana",
        cls="SanaTransformer2DModel",
        config="""dict(patch_size=1, in_channels=4, out_channels=4, num_layers=1,
    attention_head_dim=4, num_attention_heads=2, num_cross_attention_heads=2,
    cross_attention_head_dim=4, cross_attention_dim=8, caption_channels=8, sample_size=32)""",
        inputs="    h, w = res\n"
        "    latents = torch.randn(1, 4, h, w, generator=gen)\n"
        + _TEXT.format(seq=8, dim=8)
        + "    return latents, {'encoder_hidden_states': text}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],"
        " return_dict=False)[0]\n",
        resolutions=((8, 8), (8, 16), (16, 8), (16, 16)),
        blocks=("transformer_blocks",),
        repeated=False,
    ),
    "auraflow": Family(
        name="auraflow",
        cls="AuraFlowTransformer2DModel",
        config="""dict(sample_size=32, patch_size=2, in_channels=4, num_mmdit_layers=1,
    num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=4,
    caption_projection_dim=32, joint_attention_dim=32, out_channels=4, pos_embed_max_size=256)""",
        inputs="    h, w = res\n"
        "    latents = torch.randn(1, 4, h, w, generator=gen)\n"
        + _TEXT.format(seq=16, dim=32)
        + "    return latents, {'encoder_hidden_states': text}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'],\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],"
        " return_dict=False)[0]\n",
        resolutions=((8, 8), (8, 16), (16, 8), (16, 16)),
        blocks=("joint_transformer_blocks", "single_transformer_blocks"),
        repeated=False,
    ),
    "qwenimage": Family(
        name="qwenimage",
        cls="QwenImageTransformer2DModel",
        config="""dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2,
    attention_head_dim=16, num_attention_heads=4, joint_attention_dim=16,
    guidance_embeds=False, axes_dims_rope=(8, 4, 4))""",
        inputs="    h, w = res\n"
        "    latents = torch.randn(1, h * w, 16, generator=gen)\n"
        + _TEXT.format(seq=8, dim=16)
        + "    return latents, {'encoder_hidden_states': text,\n"
        "        'encoder_hidden_states_mask': torch.ones(1, 8, dtype=torch.long),\n"
        "        'img_shapes': [(1, h, w)]}\n",
        call="    return model(hidden_states=latents, timestep=extra['t'] / 1000,\n"
        "                 encoder_hidden_states=extra['encoder_hidden_states'],\n"
        "                 encoder_hidden_states_mask=extra['encoder_hidden_states_mask'],\n"
        "                 img_shapes=extra['img_shapes'], return_dict=False)[0]\n",
        resolutions=((4, 4), (4, 8), (8, 4), (8, 8)),
        blocks=("transformer_blocks",),
        repeated=True,
        shape_sources=("hidden_states", "image_rotary_emb", "img_shapes", "temb"),
    ),
}


#: A hand-written DiT in the style of LightX2V's (attention behind a processor, blocks in a
#: ModuleList): no diffusers import, so a program starts in half the time. The CI sample uses it.
TINY_DIT = """
class TinyAttnProcessor:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None):
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        b, n, _ = hidden_states.shape
        q = attn.to_q(hidden_states).view(b, n, attn.heads, -1).transpose(1, 2)
        k = attn.to_k(context).view(b, context.shape[1], attn.heads, -1).transpose(1, 2)
        v = attn.to_v(context).view(b, context.shape[1], attn.heads, -1).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return attn.to_out(out.transpose(1, 2).reshape(b, n, -1))


class TinyAttention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q = torch.nn.Linear(dim, dim)
        self.to_k = torch.nn.Linear(dim, dim)
        self.to_v = torch.nn.Linear(dim, dim)
        self.to_out = torch.nn.Linear(dim, dim)
        self.processor = TinyAttnProcessor()

    def forward(self, hidden_states, encoder_hidden_states=None):
        return self.processor(self, hidden_states, encoder_hidden_states)


class TinyBlock(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(dim)
        self.attn1 = TinyAttention(dim, heads)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.attn2 = TinyAttention(dim, heads)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(), torch.nn.Linear(2 * dim, dim)
        )
        self.modulation = torch.nn.Linear(dim, 2 * dim)

    def forward(self, hidden_states, encoder_hidden_states, temb):
        shift, scale = self.modulation(temb).unsqueeze(1).chunk(2, dim=-1)
        x = self.norm1(hidden_states) * (1 + scale) + shift
        hidden_states = hidden_states + self.attn1(x)
        hidden_states = hidden_states + self.attn2(self.norm2(hidden_states), encoder_hidden_states)
        return hidden_states + self.ff(hidden_states)


class TinyDiT(torch.nn.Module):
    def __init__(self, in_channels=4, dim=32, heads=2, layers=2, text_dim=16):
        super().__init__()
        self.proj_in = torch.nn.Linear(in_channels, dim)
        self.text = torch.nn.Linear(text_dim, dim)
        self.time = torch.nn.Sequential(torch.nn.Linear(1, dim), torch.nn.SiLU())
        self.blocks = torch.nn.ModuleList(TinyBlock(dim, heads) for _ in range(layers))
        self.proj_out = torch.nn.Linear(dim, in_channels)

    @property
    def attn_processors(self):
        return {
            name + ".processor": module.processor
            for name, module in self.named_modules()
            if isinstance(module, TinyAttention)
        }

    def set_attn_processor(self, processors):
        for name, module in self.named_modules():
            if isinstance(module, TinyAttention):
                module.processor = processors[name + ".processor"]

    def forward(self, hidden_states, encoder_hidden_states, timestep):
        b, c, h, w = hidden_states.shape
        x = self.proj_in(hidden_states.flatten(2).transpose(1, 2))
        context = self.text(encoder_hidden_states)
        temb = self.time(timestep.view(-1, 1) / 1000)
        for block in self.blocks:
            x = block(x, context, temb)
        return self.proj_out(x).transpose(1, 2).reshape(b, c, h, w)
"""

FAMILIES["tinydit"] = Family(
    name="tinydit",
    cls="TinyDiT",
    config="dict(in_channels=4, dim=32, heads=2, layers=2, text_dim=16)",
    inputs="    h, w = res\n"
    "    latents = torch.randn(1, 4, h, w, generator=gen)\n"
    + _TEXT.format(seq=8, dim=16)
    + "    return latents, {'encoder_hidden_states': text}\n",
    call="    return model(hidden_states=latents, timestep=extra['t'],\n"
    "                 encoder_hidden_states=extra['encoder_hidden_states'])\n",
    resolutions=((8, 8), (8, 12), (12, 8), (12, 12)),
    blocks=("blocks",),
    repeated=False,
    source=TINY_DIT,
)
#: The families of diffusers' tiny test configs (the default set).
DIFFUSERS = [name for name, family in FAMILIES.items() if family.source is None]
