"""Where a compile's time went and what its caches did, from torch's `compilation_metrics`.

One reading for the recorder (collectors/compile_timing.py) and for imported TORCH_TRACE logs.
The phases nest as torch measures them, they do not add up: the whole frame compile holds
Dynamo's tracing and the backend; the backend holds AOTAutograd, which holds Inductor, which
holds code generation; Triton compiles and autotuning happen inside Inductor (or, for the
runtime parts, at the first call: `compilation_metrics_runtime`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diag.trace.run import RunData

#: (breakdown key, metrics key, divisor to seconds)
_PHASES = (
    ("total_s", "entire_frame_compile_time_s", 1.0),
    ("backend_s", "backend_compile_time_s", 1.0),
    ("aot_s", "aot_autograd_cumulative_compile_time_us", 1e6),
    ("inductor_s", "inductor_cumulative_compile_time_us", 1e6),
    ("codegen_s", "inductor_code_gen_cumulative_compile_time_us", 1e6),
    ("triton_s", "triton_compile_time_us", 1e6),
    ("autotune_s", "compile_time_autotune_time_us", 1e6),
    ("runtime_autotune_s", "runtime_triton_autotune_time_us", 1e6),
    ("cudagraphify_s", "runtime_cudagraphify_time_us", 1e6),
    ("saved_s", "remote_cache_time_saved_s", 1.0),
)
#: (breakdown key, hit count key, miss count key)
_CACHES = (
    ("fx_graph", "inductor_fx_local_cache_hit_count", "inductor_fx_local_cache_miss_count"),
    (
        "fx_graph_remote",
        "inductor_fx_remote_cache_hit_count",
        "inductor_fx_remote_cache_miss_count",
    ),
    ("aot_autograd", "aotautograd_local_cache_hit_count", "aotautograd_local_cache_miss_count"),
    (
        "aot_autograd_remote",
        "aotautograd_remote_cache_hit_count",
        "aotautograd_remote_cache_miss_count",
    ),
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def breakdown(metrics: dict[str, Any]) -> dict[str, Any]:
    """The phases (seconds), cache hits and misses and the CUDA-graph skip reason that a
    `compilation_metrics` record carries; keys without a value are left out."""
    result: dict[str, Any] = {}
    for key, source, scale in _PHASES:
        value = _number(metrics.get(source))
        if value is not None:
            result[key] = round(value / scale, 6)
    total, backend = result.get("total_s"), result.get("backend_s")
    if total is not None and backend is not None:
        result["dynamo_s"] = round(max(0.0, total - backend), 6)
    caches: dict[str, dict[str, int]] = {}
    for key, hit_key, miss_key in _CACHES:
        hit, miss = _count(metrics.get(hit_key)), _count(metrics.get(miss_key))
        if hit or miss:
            caches[key] = {"hit": hit or 0, "miss": miss or 0}
    if caches:
        result["caches"] = caches
    reason = metrics.get("cudagraph_skip_reason")
    if isinstance(reason, str) and reason:
        result["cudagraph_skip_reason"] = reason[:2000]
    return result


def compile_timings(run: RunData) -> dict[tuple[int, int, str], dict[str, Any]]:
    """(pid, epoch, compile id) -> the `compile_timing` figures of one compile, its
    compile-time record and its runtime one (work at the first call) added up: seconds by
    phase (`total_s`...) and cache counts as `<cache>_hit` / `<cache>_miss`."""
    merged: dict[tuple[int, int, str], dict[str, Any]] = {}
    for event in run.of("compile_timing"):
        key = (event.pid, int(event.data.get("epoch") or 0), str(event.data.get("compile_id")))
        target = merged.setdefault(key, {})
        for name, value in event.data.items():
            if name.endswith("_s") and _number(value) is not None:
                target[name] = round(target.get(name, 0.0) + float(value), 6)
        caches = event.data.get("caches")
        for cache, counts in caches.items() if isinstance(caches, dict) else ():
            if isinstance(counts, dict):
                for what in ("hit", "miss"):
                    name = f"{cache}_{what}"
                    target[name] = target.get(name, 0) + (_count(counts.get(what)) or 0)
    return merged
