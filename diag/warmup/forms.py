"""A warmup plan in the forms people paste: text, JSON, a LightX2V runner's
`_WARMUP_RESOLUTIONS`, a diffusers pipeline loop's `(height, width[, frames])` list, and the
reference service's `--warmup-shapes`."""

from __future__ import annotations

import json

from diag.errors import DiagError
from diag.warmup.plan import VARIANT, WarmupPlan

FORMS = ("text", "json", "lightx2v", "diffusers", "fixture")


#: LightX2V records latents [C, T, H, W]; its resolutions are pixels: H and W times the VAE's
#: spatial stride (8 for Wan2.1: `--target_shape 64 96` recorded latents 8x12, tests/data/lightx2v).
#: The recorded runner's own `vae_stride` is used when the recording has it.
LIGHTX2V_VAE_STRIDE = 8


def render(plan: WarmupPlan, form: str, vae_stride: int | None = None) -> str:
    if form == "json":
        return json.dumps(plan.as_dict(), indent=1)
    latents = _lightx2v_latents(plan)
    sh, sw = strides(plan, vae_stride) if latents else (1, 1)
    if form == "lightx2v":
        return _lightx2v_form(plan, vae_stride)
    if form == "diffusers":
        rows = [(h * sh, w * sw) if f is None else (h * sh, w * sw, f) for h, w, f in _hwf(plan)]
        return f"WARMUP_SHAPES = {rows!r}  # (height, width[, frames])" + _variants_comment(plan)
    if form == "fixture":
        return "--warmup-shapes " + fixture_shapes(plan)
    return plan_text(plan)


def strides(plan: WarmupPlan, vae_stride: int | None = None) -> tuple[int, int]:
    """Pixels per latent pixel in height and width: `--vae-stride`, else the recorded runner's
    `vae_stride` (its config: (4, 8, 8) for Wan2.1), else 8."""
    if vae_stride is not None:
        return vae_stride, vae_stride
    recorded = (plan.runner or {}).get("vae_stride")
    if (
        isinstance(recorded, list)
        and len(recorded) == 3
        and all(isinstance(v, int) and v > 0 for v in recorded)
    ):
        return recorded[1], recorded[2]
    return LIGHTX2V_VAE_STRIDE, LIGHTX2V_VAE_STRIDE


def lightx2v_resolutions(plan: WarmupPlan, vae_stride: int | None = None) -> list[list[int]]:
    """The plan as a LightX2V runner's warmup resolutions, `[[height, width], ...]` in pixels."""
    sh, sw = strides(plan, vae_stride) if _lightx2v_latents(plan) else (1, 1)
    return [[h * sh, w * sw] for h, w, _ in _hwf(plan)]


def _lightx2v_form(plan: WarmupPlan, vae_stride: int | None) -> str:
    """`_WARMUP_RESOLUTIONS = (...)` for the recorded runner: its own entry's name (LTX-2 with
    its upsampler reads another), its VAE's stride, and what that entry cannot say."""
    runner = plan.runner or {}
    attr = runner.get("warmup_attr") or "_WARMUP_RESOLUTIONS"
    pairs = tuple(tuple(pair) for pair in lightx2v_resolutions(plan, vae_stride))
    lines = [f"{attr} = {pairs!r}"]
    if _lightx2v_latents(plan):
        sh, sw = strides(plan, vae_stride)
        source = (
            "--vae-stride"
            if vae_stride is not None
            else "the runner's vae_stride"
            if runner.get("vae_stride")
            else "Wan2.1's, not recorded: --vae-stride"
        )
        lines[0] += f"  # latent height x {sh}, width x {sw} ({source})"
    owner = runner.get("warmup_owner") or runner.get("runner")
    if owner:
        recorded = runner.get("warmup_resolutions")
        lines.append(
            f"# in {owner} (model_cls {runner.get('model_cls') or '?'}, task "
            f"{runner.get('task') or '?'}); recorded with "
            + (
                f"{attr} = {tuple(tuple(p) for p in recorded)!r}"
                if isinstance(recorded, list)
                else "its default"
            )
        )
    lines += _lightx2v_limits(plan)
    return "\n".join(lines) + _variants_comment(plan)


def _lightx2v_limits(plan: WarmupPlan) -> list[str]:
    """What a LightX2V warmup entry cannot warm: latents that are not a multiple of the patch
    (its warmup rounds the latent height and width down to one), a frame count or channel count
    that varied (the entry holds height and width; frames come from the config)."""
    if not _lightx2v_latents(plan) or plan.runner is None:
        return []
    patch = plan.runner.get("patch_size")
    ph, pw = (patch[1], patch[2]) if isinstance(patch, list) and len(patch) == 3 else (2, 2)
    lines = [
        f"# latents {h}x{w}: LightX2V's warmup rounds latents down to a multiple of the patch "
        f"({ph}x{pw}), so this entry cannot warm them: warm a request of that size instead"
        for h, w, _ in _hwf(plan)
        if (ph and h % ph) or (pw and w % pw)
    ]
    fixed = [d for d in plan.varied if d in ("channels", "frames")]
    if fixed:
        lines.append(
            f"# live requests varied {', '.join(fixed)}: the entry holds height and width only "
            "(frames come from the config), so it cannot warm them"
        )
    return lines


def _lightx2v_latents(plan: WarmupPlan) -> bool:
    """LightX2V's adapter names its latents' dims channels x frames x height x width."""
    return plan.dims == ["channels", "frames", "height", "width"]


def fixture_shapes(plan: WarmupPlan) -> str:
    """`2x8x8,2x8x12`: the reference service's request syntax (frames x height x width)."""
    if plan.dims != ["frames", "height", "width"]:
        raise DiagError(
            "--as fixture: these recordings' request shapes are not the reference service's "
            f"(frames x height x width); they are {' x '.join(plan.dims) or 'unknown'}"
        )
    return ",".join("x".join(str(v) for v in shape) for shape in distinct_shapes(plan))


def distinct_shapes(plan: WarmupPlan) -> list[list[int]]:
    """The plan's shapes in order, each once: a variant that only repeats a shape (CFG off in a
    request shape without the batch) adds nothing a shape list can say."""
    shapes: list[list[int]] = []
    for request in plan.requests:
        if request.shape not in shapes:
            shapes.append(request.shape)
    return shapes


def distinct_requests(plan: WarmupPlan) -> list[dict[str, object]]:
    """The plan's requests in order as `{"shape": [...], "params": {...}}`, each once: a variant
    of a repeated shape stays when its call arguments differ (CFG off, `guidance_scale=1.0`)."""
    out: list[dict[str, object]] = []
    for request in plan.requests:
        item: dict[str, object] = {"shape": request.shape, "params": request.params or {}}
        if item not in out:
            out.append(item)
    return out


def _hwf(plan: WarmupPlan) -> list[tuple[int, int, int | None]]:
    if "height" not in plan.dims or "width" not in plan.dims:
        raise DiagError(
            "these recordings' request shapes have no height and width "
            f"({' x '.join(plan.dims) or 'no shape recorded'}): use --json"
        )
    h, w = plan.dims.index("height"), plan.dims.index("width")
    f = plan.dims.index("frames") if "frames" in plan.dims else None
    rows: list[tuple[int, int, int | None]] = []
    for request in plan.requests:
        row = (request.shape[h], request.shape[w], request.shape[f] if f is not None else None)
        if row not in rows:
            rows.append(row)
    return rows


def _variants_comment(plan: WarmupPlan) -> str:
    """Variants a shape list cannot say (another dtype, grad mode, CFG off): one comment each."""
    lines = [
        f"\n# also warm up a request like {r.like}: {r.why}"
        + (f"\n#   its call arguments: {_call(r.params)}" if r.params else "")
        for r in plan.requests
        if r.role == VARIANT and r.like is not None
    ]
    return "".join(lines)


def _call(params: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def _secs(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.2f} s"


def _shape(shape: list[int]) -> str:
    return "x".join(str(v) for v in shape) if shape else "?"


def plan_text(plan: WarmupPlan) -> str:
    live = plan.live_compiles
    lines = [
        f"request shape: {' x '.join(plan.dims) or 'none recorded'}; "
        f"live shapes {', '.join(_shape(s) for s in plan.live_shapes) or 'none'}; "
        f"recorded warmup {', '.join(_shape(s) for s in plan.recorded_warmup) or 'none'}",
        f"live compiles: {len(live)} ({len(plan.unpreventable)} no warmup can prevent)",
        *(f"note: {n}" for n in plan.notes),
        "",
    ]
    if plan.requests:
        total = sum(r.cost_s or 0.0 for r in plan.requests)
        count = len(plan.requests)
        lines.append(f"warmup plan ({count} request(s), about {total:.2f} s of compile):")
    for index, request in enumerate(plan.requests):
        lines.append(f"  {index + 1}. {_shape(request.shape)}  [{request.role}] {request.why}")
        if request.like:
            lines.append(f"     like live request {request.like}")
        lines.append(
            f"     cost: {_secs(request.cost_s)}"
            + (f" ({request.cost_from})" if request.cost_s is not None else "")
        )
        if request.covers:
            shown = "; ".join(request.covers[:4])
            more = f" and {len(request.covers) - 4} more" if len(request.covers) > 4 else ""
            lines.append(f"     covers: {shown}{more}")
    for frame in plan.frames:
        lines += ["", f"{frame.frame}: warmup compiled it {frame.warmup_compile_s:.2f} s"]
        needs = ", ".join(str(i + 1) for i in frame.requests)
        lines.append(f"  needs request(s) {needs}")
        if frame.magi:
            lines.append(f"  {frame.magi}")
        for item in frame.live:
            where = f"{item.request} step {item.step}"
            verdict = (
                f"NO WARMUP CAN PREVENT IT: {item.cannot}"
                + (
                    f"; then request {item.covered_by + 1} covers it"
                    if item.covered_by is not None
                    else ""
                )
                if item.cannot is not None
                else f"covered by request {item.covered_by + 1}"
                if item.covered_by is not None
                else "not covered"
            )
            lines.append(
                f"  - live compile {item.compile_id} at {where} ({_secs(item.duration_s)}): "
                f"{item.cause}; {verdict}"
                + (f" (finding {item.finding})" if item.finding and item.cannot else "")
            )
    if not live:
        lines.append("no live compile was recorded: the recorded warmup covered live traffic")
    return "\n".join(lines)
