"""What each CUDA call diag may make at a step boundary costs on the program's thread (issue 34).

diag's step tracker records a CUDA event at each step edge, polls earlier ones, and reads the
allocator's figures at step ends. On an H200 host in default mode the recorded/paused ratio
was 1.02-1.04 where CUDA graphs gave 1.005: a boundary's own calls were never timed apart.
This times each primitive two ways, as bench/record_costs.py times diag's hooks: *warm* (the
median of `--repeats` means of `--number` calls in a row) and *in context* (the median of
`--samples` single calls, each right after a real GPU workload's launch, so caches are cold as
in a step). Every figure is net of an empty call timed the same way. Prints one table, and
JSON with `--json`.

    python bench/cuda_step_primitives.py [--samples 400] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def _warm(fn: Callable[[], Any], number: int, repeats: int) -> float:
    means = []
    for _ in range(repeats):
        started = time.perf_counter_ns()
        for _ in range(number):
            fn()
        means.append((time.perf_counter_ns() - started) / number)
    return statistics.median(means) / 1e3


def _in_context(fn: Callable[[], Any], work: Callable[[], Any], samples: int) -> float:
    times = []
    for _ in range(samples):
        work()
        started = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--number", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_step_primitives: needs a CUDA device")
    device = torch.device("cuda")
    x = torch.randn(2048, 2048, device=device, dtype=torch.bfloat16)
    layers = [torch.randn(2048, 2048, device=device, dtype=torch.bfloat16) for _ in range(8)]

    def work() -> None:
        # A block's worth of launches: the host's caches hold torch's dispatcher, not diag.
        y = x
        for w in layers:
            y = torch.nn.functional.gelu(y @ w)
        torch.cuda.synchronize()

    work()
    done = torch.cuda.Event(enable_timing=True)
    done.record()
    torch.cuda.synchronize()
    pending = torch.cuda.Event(enable_timing=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    torch.cuda.synchronize()
    index = torch.cuda.current_device()
    primitives: dict[str, Callable[[], Any]] = {
        "empty call": lambda: None,
        "torch.cuda.is_initialized()": torch.cuda.is_initialized,
        "torch.cuda.Event(enable_timing=True)": lambda: torch.cuda.Event(enable_timing=True),
        "event.record()": pending.record,
        "Event() + record()": lambda: torch.cuda.Event(enable_timing=True).record(),
        "event.query(), completed": done.query,
        "start.elapsed_time(end)": lambda: start.elapsed_time(end),
        "torch.cuda.memory_stats_as_nested_dict()": torch.cuda.memory_stats_as_nested_dict,
        "torch.cuda.memory_stats()": torch.cuda.memory_stats,
        "torch.cuda.memory_reserved()": torch.cuda.memory_reserved,
        "torch._C._cuda_memoryStats(index)": lambda: torch._C._cuda_memoryStats(index),
        "torch.cuda.mem_get_info()": torch.cuda.mem_get_info,
        "time.monotonic_ns()": time.monotonic_ns,
        "time.process_time_ns()": time.process_time_ns,
        "os.getloadavg()": os.getloadavg,
    }
    empty_warm = _warm(primitives["empty call"], args.number, args.repeats)
    empty_context = _in_context(primitives["empty call"], work, args.samples)
    rows = []
    for name, fn in primitives.items():
        warm = _warm(fn, args.number, args.repeats) - empty_warm
        context = _in_context(fn, work, args.samples) - empty_context
        rows.append(
            {"primitive": name, "warm_us": round(warm, 2), "in_context_us": round(context, 2)}
        )
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cpus {os.cpu_count()}")
    print(f"empty call: warm {empty_warm:.3f} us, in context {empty_context:.3f} us (subtracted)")
    print(f"{'primitive':<45} {'warm us':>9} {'in context us':>14}")
    for row in rows:
        print(f"{row['primitive']:<45} {row['warm_us']:>9.2f} {row['in_context_us']:>14.2f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"torch": torch.__version__, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
