"""kernel-routing: a kernel that eager runs and compiled code does not, region by region.

Why: a hand-written or third-party kernel (a Triton RMSNorm, a FlashInfer or sgl-kernel op)
often sits behind a Python branch or a library dispatch that Dynamo traces differently: under
`torch.compiler.is_compiling()` the code takes another path, or the library falls back to plain
ATen ops that inductor then fuses into its own kernels. The model still runs, compiled output is
close, and the kernel someone tuned silently stops running. The same happens to library kernels:
SDPA can pick another attention backend under compile. Only a side-by-side of the same step,
eager and compiled, shows it (diag.evidence.regions); the compiled region's time says whether it
matters.

Needs a reference run: `diag record --baseline eager`, or `diag analyze DIR --against OTHER`.

Whether the reroute costs time is judged on the region's time per aligned steady profiled step
(steps that compiled nothing) with diag.evidence.stats.compare: medians, a noise band of at least
COST_BAND or 3 robust spreads, and "too noisy to judge" when a side has fewer than 2 steps or
spreads more than ±25%. Means over two CPU steps flipped the demo's fix between "this costs
time now" and "keep it" from one run to the next. The verdict also sets the severity: only a
compiled region measurably slower than its reference is a warning; as fast, faster or too noisy
to judge is info, with a fix that says so (a warning whose own evidence says "as fast as eager"
asks for work that gains nothing).
"""

from __future__ import annotations

import dataclasses
import re

from diag.evidence.regions import KernelStat, RegionComparison, compare_regions
from diag.evidence.stats import FASTER, NOISY, SLOWER, Comparison, compare
from diag.findings.model import Finding
from diag.trace.run import Trace

from .common import format_seconds

ANALYZER = "kernel-routing"

#: The compiled region counts as slower (or faster) than the reference past this share ...
COST_BAND = 0.10


def cost(comparison: RegionComparison) -> Comparison:
    """Compiled against reference time in the region, per aligned steady step."""
    return compare(
        comparison.compiled_steps_s,
        comparison.reference_steps_s,
        min_band=COST_BAND,
        labels=("compiled", "reference"),
    )


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for found in compare_regions(trace):
        comparison = _without_template_variants(found)
        if comparison.missing:
            findings.append(_missing(trace, comparison))
        if comparison.swapped_attention is not None:
            findings.append(_swapped(trace, comparison))
    return findings


def _location(trace: Trace, region: str) -> str | None:
    compiled = trace.compiled
    for compile_ in compiled.compiles if compiled else []:
        if compile_.frame is not None and compile_.frame.name == region and compile_.frame.file:
            return compile_.frame.location
    return None


def _stat(stats: list[KernelStat], name: str) -> KernelStat | None:
    return next((s for s in stats if s.name == name), None)


def _side_line(label: str, stats: list[KernelStat], names: list[str], unit: str) -> str:
    parts = []
    for name in names:
        stat = _stat(stats, name)
        if stat is not None:
            parts.append(f"{name} ×{stat.count} ({format_seconds(stat.total_s)})")
    return f"{label}: " + ("; ".join(parts) if parts else f"no such {unit}")


def _reference_label(trace: Trace) -> str:
    plain = _plain_files(trace)
    if plain is not None:
        return plain[1]
    return "against" if "against" in trace.runs else "eager"


def _plain_files(trace: Trace) -> tuple[str, str] | None:
    """(this file, the --against file) for two plain profiler traces: neither is known to be
    eager or compiled, so findings name the files, not "eager" and "torch.compile"."""
    if trace.manifest.get("format") != "kineto" or "against" not in trace.runs:
        return None
    profiles = trace.runs["against"].profiles or []
    against = profiles[0].window.rsplit("/", 1)[-1] if profiles else "the --against trace"
    return trace.path.name, against


_TEMPLATE = re.compile(r"<.*")


def _template_base(name: str) -> str:
    """`void ns::kernel<float, 2ul>(args)` -> `void ns::kernel`: one kernel, any instantiation."""
    return _TEMPLATE.sub("", name.split("(", 1)[0]).strip()


def _without_template_variants(comparison: RegionComparison) -> RegionComparison:
    """A kernel whose compiled side runs another template instantiation of it (FBGEMM's
    `…2ul>` and `…5ul>`) was not routed around: the same kernel, other sizes."""
    compiled = {_template_base(k.name) for k in comparison.compiled}
    missing = [n for n in comparison.missing if _template_base(n) not in compiled]
    if missing == comparison.missing:
        return comparison
    bases = {_template_base(n) for n in comparison.missing}
    replacements = [n for n in comparison.replacements if _template_base(n) not in bases]
    return dataclasses.replace(comparison, missing=missing, replacements=replacements)


def short_name(name: str, limit: int = 120) -> str:
    """A kernel name for a title: its parameter list dropped, then cut to `limit`."""
    head = name.split("(", 1)[0] if "(" in name else name
    return head if len(head) <= limit else head[: limit - 1] + "…"


def _times(comparison: RegionComparison, reference: str) -> str:
    what = "kernel time" if comparison.device == "gpu" else "time in the region"
    verdict = cost(comparison)
    if verdict.current is not None and verdict.reference is not None:
        ratio = f" ({verdict.ratio:.2f}x)" if verdict.ratio is not None else ""
        return (
            f"{what} per step in {comparison.region}, median ± spread: {reference} "
            f"{format_seconds(verdict.reference.median)} ± "
            f"{format_seconds(verdict.reference.spread)}, compiled "
            f"{format_seconds(verdict.current.median)} ± "
            f"{format_seconds(verdict.current.spread)}{ratio}, over {comparison.steps} aligned "
            "profiled step(s)"
        )
    ratio = ""
    if comparison.reference_s > 0:
        ratio = f" ({comparison.compiled_s / comparison.reference_s:.2f}x)"
    return (
        f"{what} per step in {comparison.region}: {reference} "
        f"{format_seconds(comparison.reference_s)}, compiled "
        f"{format_seconds(comparison.compiled_s)}{ratio}, over {comparison.steps} aligned "
        "profiled step(s)"
    )


def _cost_line(verdict: Comparison, reference: str) -> str:
    if verdict.verdict == NOISY:
        return f"cost: too noisy to judge ({verdict.reason.replace('reference', reference)})"
    word = {SLOWER: "slower than", FASTER: "faster than"}.get(verdict.verdict, "as fast as")
    return (
        f"cost: compiled is {word} {reference} (the medians differ "
        f"{((verdict.ratio or 1.0) - 1.0):+.0%}; the noise band is ±{verdict.band:.0%})"
    )


def severity(verdict: Comparison) -> str:
    """A warning only when compiled is measurably slower: a reroute that costs nothing (as fast,
    faster) or whose cost the steps cannot tell (too noisy) is context, not a problem."""
    return "warning" if verdict.verdict == SLOWER else "info"


def _missing_fix(verdict: Comparison, kernel: str) -> str:
    """The fix follows the cost: restore the kernel when it costs time, keep the replacement when
    it does not, measure first when the steps cannot tell."""
    restore = (
        f"find the branch that routes around {kernel} when compiling "
        "(torch.compiler.is_compiling(), a library's Dynamo fallback) and call the kernel as a "
        "custom op (torch.library.custom_op with a register_fake) so the compiled graph keeps it"
    )
    if verdict.verdict == SLOWER:
        return f"The compiled region is slower than eager here, so this costs time now: {restore}."
    if verdict.verdict == NOISY:
        return (
            "Whether it costs time is too noisy to judge from these steps: profile more steady "
            "steps (diag record --profile new-shapes,steady:8) on a quiet host to tell. If "
            f"compiled turns out slower, {restore}."
        )
    word = "faster than" if verdict.verdict == FASTER else "as fast as"
    return (
        f"Keeping it is fine: the compiled region is {word} eager here. Check that the "
        "replacement's numerics are acceptable and say so in a comment; to run the kernel "
        f"under compile anyway, {restore}."
    )


def _new_kernels(comparison: RegionComparison) -> list[KernelStat]:
    """Kernels the compiled region ran and the reference did not (copies aside), longest first:
    where the missing kernel's work went when none is named after its ops."""
    before = {k.name for k in comparison.reference}
    new = [
        k
        for k in comparison.compiled
        if k.name not in before
        and k.kind != "copy"
        and k.total_s > 0
        and not _METADATA_OP.search(k.name)
    ]
    return sorted(new, key=lambda k: -k.total_s)


#: CPU ops that move no data (a symbolic size read, a view): never where an op's work went.
_METADATA_OP = re.compile(
    r"::(?:sym_\w+|empty\w*|view\w*|as_strided\w*|_reshape_alias|detach\w*|alias|"
    r"expand|unsqueeze|squeeze|permute|transpose|t|resolve_\w+|lift_fresh\w*)$"
)


def _unmatched_line(comparison: RegionComparison, reference: str, unit: str) -> str:
    new = _new_kernels(comparison)
    if not new:
        return (
            f"no {unit} of the compiled region matches its ops, and the compiled region ran no "
            f"{unit} that {reference} did not: the work moved into {unit}s both sides ran"
        )
    names = [k.name for k in new[:3]]
    more = f" and {len(new) - 3} more" if len(new) > 3 else ""
    return (
        _side_line(
            f"no {unit} of the compiled region matches its ops: the work moved into the "
            + ("fused " if comparison.device == "gpu" else "")
            + f"{unit}s {reference} did not run",
            comparison.compiled,
            names,
            unit,
        )
        + f"{more} per step"
    )


def _unmatched_title(comparison: RegionComparison, unit: str) -> str:
    new = _new_kernels(comparison)
    if not new:
        return f" (no {unit} replaced it: its work moved into {unit}s both sides ran)"
    return f" (no compiled {unit} matches its ops; new: {short_name(new[0].name)})"


def _missing(trace: Trace, comparison: RegionComparison) -> Finding:
    reference = _reference_label(trace)
    plain = _plain_files(trace)
    unit = "kernel" if comparison.device == "gpu" else "op"
    names = ", ".join(short_name(n) for n in comparison.missing)
    this = plain[0] if plain else "compiled"
    evidence = [
        _side_line(reference, comparison.reference, comparison.missing, unit) + " per step",
        f"{this}: none of these ran in the " + ("same region" if plain else "compiled region"),
    ]
    if comparison.replacements:
        evidence.append(
            _side_line(
                "in their place, compiled ran", comparison.compiled, comparison.replacements, unit
            )
            + " per step"
        )
    else:
        evidence.append(_unmatched_line(comparison, reference, unit))
    evidence.append(_times(comparison, reference))
    verdict = cost(comparison)
    evidence.append(_cost_line(verdict, reference))
    return Finding(
        id=f"{ANALYZER}:{comparison.region}:{'+'.join(comparison.missing)}",
        analyzer=ANALYZER,
        severity=severity(verdict),
        title=(
            f"{names} runs in {plain[1]} but not in {plain[0]} in {comparison.region}"
            if plain
            else f"{names} runs in eager but not under torch.compile in {comparison.region}"
        )
        + (
            f" (replaced by {short_name(comparison.replacements[0])})"
            if comparison.replacements
            else _unmatched_title(comparison, unit)
        ),
        evidence=evidence,
        fix=(
            f"The two traces run different kernels in {comparison.region}: if "
            f"{short_name(comparison.missing[0])} is the one you expect, find the branch or "
            f"dispatch that skips it in the program that wrote {plain[0]} (a torch.compile "
            "fallback, another library version or build, another GPU)."
            if plain
            else _missing_fix(verdict, short_name(comparison.missing[0]))
        ),
        location=_location(trace, comparison.region),
        data={
            "region": comparison.region,
            "device": comparison.device,
            "missing": comparison.missing,
            "replacements": comparison.replacements,
            "reference_s": round(comparison.reference_s, 9),
            "compiled_s": round(comparison.compiled_s, 9),
            "steps": comparison.steps,
            "cost": verdict.verdict,
            "cost_band": round(verdict.band, 4),
        },
    )


def _swapped(trace: Trace, comparison: RegionComparison) -> Finding:
    before, after = comparison.swapped_attention or ("", "")
    reference = _reference_label(trace)
    verdict = cost(comparison)
    pin = (
        "pin the backend you measured (torch.nn.attention.sdpa_kernel([...]) around the call, or "
        "call the attention library directly as a custom op) so eager and compiled run the same "
        "kernel"
    )
    if verdict.verdict == SLOWER:
        fix = f"The compiled region is slower than {reference} here: {pin}."
    elif verdict.verdict == NOISY:
        fix = (
            "Whether it costs time is too noisy to judge from these steps: profile more steady "
            f"steps on a quiet host to tell. If compiled turns out slower, {pin}."
        )
    else:
        fix = (
            f"Keeping it is fine: the compiled region is "
            f"{'faster than' if verdict.verdict == FASTER else 'as fast as'} {reference} here; "
            f"to run one backend on both sides anyway, {pin}."
        )
    return Finding(
        id=f"{ANALYZER}:{comparison.region}:attention",
        analyzer=ANALYZER,
        severity=severity(verdict),
        title=f"attention runs {before} in eager but {after} under torch.compile in "
        f"{comparison.region}",
        evidence=[
            f"{reference} attention kernels: "
            + ", ".join(k.name for k in comparison.reference if k.kind == "library")[:300],
            "compiled attention kernels: "
            + ", ".join(k.name for k in comparison.compiled if k.kind == "library")[:300],
            _times(comparison, reference),
            _cost_line(verdict, reference),
        ],
        fix=fix,
        location=_location(trace, comparison.region),
        data={
            "region": comparison.region,
            "reference": before,
            "compiled": after,
            "cost": verdict.verdict,
            "cost_band": round(verdict.band, 4),
        },
    )
