"""Eager against compiled, per compiled region: which kernels each side ran, and for how long.

Dynamo drops annotations inside a compiled frame, so diag marks the compiled call from outside
(`diag.region:<fn>#<n>`, the n-th call in the step) in both runs; the same step of the same
request then lines up region by region. What counts as divergence: a hand-written or third-party
kernel (or custom op) that eager ran and compiled code no longer runs, and an attention kernel of
another library backend. Inductor fusing plain ATen work into `triton_*` kernels is the point of
compiling and is not flagged. CPU-only traces have no kernels: the same comparison runs on the
CPU ops inside each region.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from diag.trace.profiles import REGION_PREFIX, StepProfile, step_profiles
from diag.trace.run import RunData, Trace

_INDUCTOR = re.compile(r"^(triton_|cpp_fused|cpp_|Torch-Compiled|## Call CompiledFxGraph)")
_LIBRARY = re.compile(
    r"nvjet|gemm|cublas|cutlass|cudnn|xmma|sm\d+_|flash|fmha|sdpa|attention|Cijk_|ck_|rocblas"
    r"|hipblas|magma|cufft|nccl|splitK|reduce_kernel|splitKreduce",
    re.IGNORECASE,
)
_ATEN = re.compile(
    r"at::native|at::cuda|elementwise_kernel|vectorized_|unrolled_|^aten::|^void at::"
)
# CPU-side names that are the compile machinery, not work.
_FRAMEWORK = re.compile(
    r"^(TorchDynamo|Torch-Compiled Region|## |CompiledFunction|cudaLaunch|cuLaunch|diag\.)"
)
# Attention backends, by the kernel names each one launches.
_ATTENTION = (
    ("flash-attn", re.compile(r"flash_fwd|flash::|pytorch_flash|flash_attn", re.IGNORECASE)),
    ("cudnn-sdpa", re.compile(r"cudnn.*sdpa|sdpa.*cudnn|fort_native_sdpa", re.IGNORECASE)),
    ("mem-efficient", re.compile(r"fmha_cutlass|efficient_attention|mem_eff", re.IGNORECASE)),
    ("flashinfer", re.compile(r"flashinfer", re.IGNORECASE)),
    ("sage-attention", re.compile(r"sage", re.IGNORECASE)),
    ("triton-flex", re.compile(r"triton_tem_fused.*flex|flex_attention", re.IGNORECASE)),
)


@dataclass(frozen=True)
class KernelStat:
    name: str
    kind: str  # custom, library, inductor, aten, copy
    count: int  # per aligned step
    total_s: float  # per aligned step


@dataclass(frozen=True)
class RegionComparison:
    region: str
    device: str  # gpu or cpu
    reference: list[KernelStat]
    compiled: list[KernelStat]
    reference_s: float
    compiled_s: float
    missing: list[str]
    replacements: list[str]
    steps: int
    swapped_attention: tuple[str, str] | None = None  # (reference backend, compiled backend)
    #: The region's seconds in each aligned step, per side: what a robust verdict of its cost
    #: is taken from (diag.evidence.stats), where reference_s and compiled_s are means.
    reference_steps_s: tuple[float, ...] = ()
    compiled_steps_s: tuple[float, ...] = ()
    # Aligned steps during which the compiled run compiled: their time includes the compile.
    compiling_steps: int = 0

    @property
    def divergent(self) -> bool:
        return bool(self.missing) or self.swapped_attention is not None


def kernel_kind(name: str) -> str:
    """custom (hand-written or third-party), library, inductor, aten or copy."""
    if name.startswith(("Memcpy", "Memset", "memcpy", "memset")):
        return "copy"
    if _INDUCTOR.search(name):
        return "inductor"
    if _ATEN.search(name):
        return "aten"
    if _LIBRARY.search(name):
        return "library"
    return "custom"


def op_kind(name: str) -> str:
    """Kinds for CPU ops: custom ops live outside the aten/prim namespaces."""
    if _FRAMEWORK.search(name):
        return "framework"
    namespace = name.split("::", 1)[0] if "::" in name else ""
    if namespace in ("aten", "prim", "profiler", "c10d", "inductor"):
        return "aten"
    return "custom" if namespace else "framework"


def attention_backend(names: Iterable[str]) -> str | None:
    found = {backend for name in names for backend, pattern in _ATTENTION if pattern.search(name)}
    return ",".join(sorted(found)) if found else None


#: The one region of traces recorded without diag's markers (a plain profiler trace).
WHOLE_STEP = "whole step"


def _region_name(region: str) -> str:
    return region.rsplit("#", 1)[0]


def _records(profile: StepProfile, device: str) -> list[Any]:
    return profile.kernels if device == "gpu" else profile.cpu_ops


def _tally(
    profiles: list[StepProfile], device: str, whole: bool
) -> tuple[dict[str, Counter[str]], dict[tuple[str, str], float]]:
    """Per region: name -> count, and (region, name) -> total µs, summed over the steps."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for profile in profiles:
        for record in _records(profile, device):
            region = WHOLE_STEP if whole else _region_name(record.region)
            if region:
                counts[region][record.name] += 1
                totals[(region, record.name)] += record.dur
    return counts, totals


def _region_time(profiles: list[StepProfile], device: str, whole: bool) -> dict[str, float]:
    """Seconds per region over the steps: kernel time on GPU, the marked call's time on CPU."""
    totals: dict[str, float] = defaultdict(float)
    for profile in profiles:
        if device == "gpu":
            for kernel in profile.kernels:
                region = WHOLE_STEP if whole else _region_name(kernel.region)
                if region:
                    totals[region] += kernel.dur / 1e6
        elif whole:
            totals[WHOLE_STEP] += max(0.0, profile.end_ts - profile.start_ts) / 1e6
        else:
            for annotation in profile.annotations:
                if annotation.name.startswith(REGION_PREFIX):
                    name = _region_name(annotation.name[len(REGION_PREFIX) :])
                    totals[name] += annotation.dur / 1e6
    return totals


def _stats(
    counts: Counter[str], times: dict[tuple[str, str], float], region: str, steps: int, device: str
) -> list[KernelStat]:
    kind = kernel_kind if device == "gpu" else op_kind
    stats = [
        KernelStat(name, kind(name), round(n / steps), times[(region, name)] / 1e6 / steps)
        for name, n in counts.items()
    ]
    return sorted((s for s in stats if s.kind != "framework"), key=lambda s: (-s.total_s, s.name))


# What a fused kernel is named after, for the ops a hand-written kernel usually implements:
# inductor names kernels after the ATen ops they fuse (`..._mean_mul_pow_rsqrt_...` is an RMSNorm).
_MEANS = {
    "rms": {"rsqrt", "pow", "mean"},
    "rmsnorm": {"rsqrt", "pow", "mean"},
    "norm": {"rsqrt", "mean", "var"},
    "layernorm": {"native", "layer", "var", "mean"},
    "softmax": {"amax", "exp", "sum", "softmax"},
    "gelu": {"gelu", "erf", "tanh"},
    "silu": {"silu", "sigmoid"},
    "swiglu": {"silu", "sigmoid", "mul"},
    "rope": {"cos", "sin"},
    "rotary": {"cos", "sin"},
    "attention": {"attention", "bmm", "softmax"},
}


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z]+", name.lower()) if len(t) > 2}


def _meaning(name: str) -> set[str]:
    tokens = _tokens(name)
    return tokens | {m for t in tokens for m in _MEANS.get(t, ())}


def _replacements(missing: list[KernelStat], new: list[KernelStat]) -> list[str]:
    """New compiled kernels that most plausibly took the missing ones' place: those named after
    the ops the missing kernel implements (most shared tokens first), longest-running first."""
    chosen: list[str] = []
    for gone in missing:
        meaning = _meaning(gone.name)
        scored = [(len(meaning & _tokens(k.name)), k) for k in new]
        best = max((score for score, _ in scored), default=0)
        if best == 0:
            continue
        for _, kernel in sorted(
            ((sc, k) for sc, k in scored if sc == best), key=lambda item: -item[1].total_s
        ):
            if kernel.name not in chosen:
                chosen.append(kernel.name)
    return chosen


def compiling_steps(run: RunData) -> set[tuple[int, str, int]]:
    """(pid, request, step) of every step during which the run compiled something."""
    return {
        (c.pid, c.request_id, c.step)
        for c in run.compiles
        if c.request_id is not None and c.step is not None and c.result != "recompile_limit"
    }


def _steady(profiles: list[StepProfile], run: RunData) -> list[StepProfile]:
    """The profiles of steps that compiled nothing: a step that compiled holds the compile's
    host time and its autotuning kernels, which are not the region's own cost."""
    compiling = compiling_steps(run)
    return [p for p in profiles if (p.pid, p.request_id, p.step) not in compiling]


def aligned_profiles(
    compiled: RunData, reference: RunData
) -> tuple[list[StepProfile], list[StepProfile]]:
    """The profiled steps both runs have (same rank, request and step), like with like: steps
    during which either run compiled are left out while steady ones remain; all live profiled
    steps of each side when they share none."""
    ours, theirs = step_profiles(compiled), step_profiles(reference)
    steady_ours, steady_theirs = _steady(ours, compiled), _steady(theirs, reference)
    if steady_ours and steady_theirs:
        ours, theirs = steady_ours, steady_theirs
    common = {p.key for p in ours} & {p.key for p in theirs}
    if common:
        return [p for p in ours if p.key in common], [p for p in theirs if p.key in common]
    return ours, theirs


def compare_regions(trace: Trace) -> list[RegionComparison]:
    """Region-by-region comparison of the compiled run against the reference run."""
    compiled, reference = trace.compiled, trace.reference
    if compiled is None or reference is None:
        return []
    ours, theirs = aligned_profiles(compiled, reference)
    if not ours or not theirs:
        return []
    gpu = any(p.kernels for p in ours) and any(p.kernels for p in theirs)
    device = "gpu" if gpu else "cpu"
    # Without diag's region markers on either side, the whole step is the one region.
    whole = not any(r.region for p in ours + theirs for r in _records(p, device))
    ours_counts, ours_times = _tally(ours, device, whole)
    theirs_counts, theirs_times = _tally(theirs, device, whole)
    ours_region_s = _region_time(ours, device, whole)
    theirs_region_s = _region_time(theirs, device, whole)
    compiling = compiling_steps(compiled)
    compile_steps = sum(1 for p in ours if (p.pid, p.request_id, p.step) in compiling)
    result = []
    for region in sorted(set(ours_counts) | set(theirs_counts)):
        if region not in ours_counts or region not in theirs_counts:
            continue  # a region only one side reached: nothing to line up
        ref = _stats(theirs_counts[region], theirs_times, region, len(theirs), device)
        com = _stats(ours_counts[region], ours_times, region, len(ours), device)
        compiled_names = {k.name for k in com}
        reference_names = {k.name for k in ref}
        gone = [k for k in ref if k.kind == "custom" and k.name not in compiled_names]
        new = [k for k in com if k.name not in reference_names and k.kind != "copy"]
        swapped = None
        if device == "gpu":
            before = attention_backend(reference_names)
            after = attention_backend(compiled_names)
            if before and after and before != after:
                swapped = (before, after)
        result.append(
            RegionComparison(
                region=region,
                device=device,
                reference=ref,
                compiled=com,
                reference_s=theirs_region_s.get(region, 0.0) / len(theirs),
                compiled_s=ours_region_s.get(region, 0.0) / len(ours),
                missing=[k.name for k in gone],
                replacements=_replacements(gone, new),
                steps=len(ours),
                swapped_attention=swapped,
                compiling_steps=compile_steps,
                reference_steps_s=tuple(
                    _region_time([p], device, whole).get(region, 0.0) for p in theirs
                ),
                compiled_steps_s=tuple(
                    _region_time([p], device, whole).get(region, 0.0) for p in ours
                ),
            )
        )
    return result
