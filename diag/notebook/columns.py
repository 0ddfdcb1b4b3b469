"""The columns of every frame the notebook API returns: name, pandas dtype and meaning.

One table decides each frame's columns, their order and their types, so an empty frame has the
same typed columns as a full one, and docs/API.md lists exactly these (a test checks it). Units
are in the names: `_s` seconds, `_us` microseconds, `_bytes` bytes, `_t` diag's event clock
(CLOCK_MONOTONIC ns, docs/FORMAT.md); `start` is a UTC timestamp (NaT when the process wrote no
clock anchor).
"""

from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    name: str
    dtype: str  # a pandas dtype name; "datetime" is nanoseconds since the epoch, UTC
    meaning: str


TEXT = "string"
INT = "Int64"  # nullable: a missing value is <NA>, not a float NaN
FLOAT = "float64"
FLAG = "boolean"
TIME = "datetime"
ANY = "object"

#: Where a row comes from, first in every frame of the event files.
_WHO = (
    Column("run", TEXT, "compiled (the command as given), eager (the baseline) or against"),
    Column("process", TEXT, "the process folder: pid<PID> or rank<R>-pid<PID>"),
    Column("pid", INT, "process id"),
    Column("rank", INT, "torchrun rank; <NA> outside torchrun"),
)
_WHERE = (
    Column("phase", TEXT, "warmup or live"),
    Column("request", TEXT, "request id; <NA> outside a request"),
    Column("step", INT, "step index in the request; <NA> outside a step"),
)

STEPS = (
    *_WHO,
    Column("phase", TEXT, "warmup or live"),
    Column("request", TEXT, "request id"),
    Column("step", INT, "step index in the request, from 0"),
    Column("shape", TEXT, "the step's input shape as the adapter reported it (2x8x12)"),
    Column("start", TIME, "when the step began (UTC)"),
    Column("start_t", INT, "when the step began, event clock (ns)"),
    Column("end_t", INT, "when it ended, event clock (ns); <NA> if it never ended"),
    Column("wall_s", FLOAT, "host wall time of the step"),
    Column("cpu_s", FLOAT, "the process's CPU time in the step, all threads"),
    Column("gpu_s", FLOAT, "GPU time between CUDA events around the step"),
    Column("host_load", FLOAT, "runnable tasks per CPU when the step ended (above 1: loaded)"),
    Column("compiled", FLAG, "Dynamo compiled something during the step"),
    Column("compiles", INT, "compile attempts during the step (recompile-limit refusals too)"),
    Column("compile_s", FLOAT, "seconds of those compiles"),
    Column("profiled", FLAG, "the step ran under torch.profiler"),
    Column("window", TEXT, "the profiler window that holds it (r0-s2-steady); <NA> if none"),
    Column("allocated_bytes", INT, "CUDA memory allocated at the step's end"),
    Column("reserved_bytes", INT, "CUDA memory reserved by the caching allocator"),
    Column("max_allocated_bytes", INT, "peak CUDA memory allocated so far"),
)

REQUESTS = (
    *_WHO,
    Column("phase", TEXT, "warmup or live"),
    Column("request", TEXT, "request id"),
    Column("label", TEXT, "the program's own name for it (LightX2V's task id); <NA> if none"),
    Column("thread", TEXT, "the name of the thread that served it; <NA> in older traces"),
    Column("shape", TEXT, "the request's input shape (2x8x12)"),
    Column("steps", INT, "steps recorded in the request"),
    Column("start", TIME, "when the request began (UTC)"),
    Column("start_t", INT, "when it began, event clock (ns)"),
    Column("end_t", INT, "when it ended, event clock (ns); <NA> if it never ended"),
    Column("duration_s", FLOAT, "from its start to its end"),
    Column("step_wall_s", FLOAT, "sum of its steps' wall time"),
    Column("first_step_s", FLOAT, "wall time of its step 0"),
    Column("compiles", INT, "compile attempts during the request"),
    Column("compile_s", FLOAT, "seconds of those compiles"),
)

#: Seconds by phase, as torch nests them (diag/trace/compile_metrics.py): they do not add up.
COMPILE_PHASES = (
    "total_s",
    "dynamo_s",
    "backend_s",
    "aot_s",
    "inductor_s",
    "codegen_s",
    "triton_s",
    "autotune_s",
    "runtime_autotune_s",
    "cudagraphify_s",
    "saved_s",
)
COMPILE_CACHES = ("fx_graph", "fx_graph_remote", "aot_autograd", "aot_autograd_remote")

COMPILES = (
    *_WHO,
    Column("compile_id", TEXT, "Dynamo's frame/attempt id (0/3)"),
    Column("epoch", INT, "torch._dynamo.reset() count before it (compile ids restart)"),
    Column("frame", TEXT, "the compiled function's name"),
    Column("location", TEXT, "the compiled function's file:line"),
    *_WHERE,
    Column("start", TIME, "when the compile began (UTC)"),
    Column("start_t", INT, "when it began, event clock (ns)"),
    Column("end_t", INT, "when it ended, event clock (ns)"),
    Column("duration_s", FLOAT, "the compile's wall time as Dynamo measured it"),
    Column("result", TEXT, "ok, failed or recompile_limit"),
    Column("recompile", FLAG, "a recompile: cached entries existed and all failed"),
    Column("failed_guards", INT, "failing guards recorded for it (guard_failures rows)"),
    Column("cache_size", INT, "entries the frame held before this compile"),
    Column("fail_type", TEXT, "a failed compile's exception type"),
    Column("fail_reason", TEXT, "a failed compile's reason, torch's whole text"),
    *(
        Column(name, FLOAT, "seconds in this phase (torch's compilation_metrics)")
        for name in COMPILE_PHASES
    ),
    *(
        Column(f"{cache}_{what}", INT, f"{cache.replace('_', ' ')} cache {what}es")
        for cache in COMPILE_CACHES
        for what in ("hit", "miss")
    ),
)

GUARD_FAILURES = (
    *_WHO,
    Column("compile_id", TEXT, "the recompile this failure triggered"),
    Column("epoch", INT, "torch._dynamo.reset() count"),
    Column("frame", TEXT, "the compiled function's name"),
    Column("entry", TEXT, "compile id of the cached entry whose guard failed"),
    Column(
        "cause",
        FLAG,
        "this entry's failure is diag's cause of the recompile (the entry that could have "
        'served the call, docs/FINDINGS.md "How causes are decided"); False on every row of '
        "a recompile whose cause is undecided",
    ),
    Column("kind", TEXT, "guard kind (docs/FORMAT.md: tensor-size, python-value, ...)"),
    Column("source", TEXT, "what the guard checks (block.state.config, x)"),
    Column("expected", TEXT, "the value the entry was compiled for, when the text says"),
    Column("actual", TEXT, "the value of this call, when the text says"),
    Column("text", TEXT, "the guard's condition as reports quote it"),
    Column("line", TEXT, "the user's file:line that reads the source; <NA> when not known"),
    Column("raw", TEXT, "torch's text of the failure, whole"),
    *_WHERE,
    Column("start_t", INT, "when the recompile's compile began, event clock (ns)"),
)

CACHE_ENTRIES = (
    *_WHO,
    Column("frame", TEXT, "the compiled code object's function name"),
    Column("location", TEXT, "its file:line"),
    Column("entries", INT, "Dynamo cache entries the code object held"),
    Column("at_exit", FLAG, "the count at interpreter exit (else at a step's end)"),
    Column("request", TEXT, "the request of the step that changed the count"),
    Column("step", INT, "that step"),
    Column("t", INT, "when it was counted, event clock (ns)"),
)

WINDOWS = (
    *_WHO,
    Column("window", TEXT, "the window's name (r1-s0-new-shape)"),
    Column("file", TEXT, "its Kineto file, relative to the process folder"),
    Column("steps", INT, "profiled steps inside it"),
    Column("start_t", INT, "profiler start, event clock (ns)"),
    Column("end_t", INT, "trace written, event clock (ns)"),
)

KERNELS = (
    *_WHO,
    Column("window", TEXT, "the profiler window"),
    Column("request", TEXT, "the step that launched it: request"),
    Column("step", INT, "and step index"),
    Column("kind", TEXT, "kernel, memcpy or memset"),
    Column("name", TEXT, "the kernel's name"),
    Column("category", TEXT, "custom, library, inductor, aten or copy (diag.evidence.regions)"),
    Column("region", TEXT, "the compiled region around its launch (diag.region marker); <NA>"),
    Column("call", INT, "which call of the region in the step (the #n of the marker)"),
    Column("op", TEXT, "the innermost CPU op open at the launch"),
    Column("device", INT, "GPU index"),
    Column("stream", INT, "CUDA stream"),
    Column("ts_us", FLOAT, "start on the Kineto trace's own clock (µs)"),
    Column("dur_us", FLOAT, "duration (µs)"),
    Column("bytes", INT, "bytes copied or set (copies and memsets)"),
    Column("direction", TEXT, "HtoD, DtoH, DtoD or PtoP for copies"),
)

CPU_OPS = (
    *_WHO,
    Column("window", TEXT, "the profiler window"),
    Column("request", TEXT, "the step it ran in: request"),
    Column("step", INT, "and step index"),
    Column("kind", TEXT, "cpu_op (CPU-only traces have no kernels: their ops stand in)"),
    Column("name", TEXT, "the op's name (aten::mm, a custom op)"),
    Column("category", TEXT, "custom, aten or framework (diag.evidence.regions.op_kind)"),
    Column("region", TEXT, "the compiled region around it; <NA> outside one"),
    Column("thread", INT, "the thread id it ran on"),
    Column("ts_us", FLOAT, "start on the Kineto trace's own clock (µs)"),
    Column("dur_us", FLOAT, "duration (µs)"),
)

KERNEL_SUMMARY = (
    Column("run", TEXT, "compiled, eager or against"),
    Column("window", TEXT, "the profiler window"),
    Column("region", TEXT, "the compiled region (diag.region marker); <NA> outside one"),
    Column("name", TEXT, "kernel (or, on a CPU-only trace, CPU op) name"),
    Column(
        "category", TEXT, "custom, library, inductor, aten, copy (CPU ops: custom, aten, framework)"
    ),
    Column("stream", INT, "CUDA stream; <NA> for CPU ops"),
    Column("count", INT, "launches (or calls) in the window's profiled steps"),
    Column("total_s", FLOAT, "their summed duration"),
    Column("mean_us", FLOAT, "mean duration of one"),
    Column("steps", INT, "profiled steps of the window they were counted over"),
)

OFFLOAD = (
    *_WHO,
    Column("request", TEXT, "request id"),
    Column("step", INT, "step index"),
    Column("span_s", FLOAT, "from the step's start to the end of the GPU work it launched"),
    Column("kernel_s", FLOAT, "GPU time computing (union of kernel intervals)"),
    Column("copy_s", FLOAT, "GPU time copying, summed over directions (each a union)"),
    Column("copy_bytes", INT, "bytes copied"),
    *(
        Column(f"{direction.lower()}_{what}", kind, f"{direction} copies: {text}")
        for direction in ("HtoD", "DtoH", "DtoD", "PtoP")
        for what, kind, text in (("s", FLOAT, "time (union)"), ("bytes", INT, "bytes"))
    ),
    Column("sync_s", FLOAT, "CPU time blocked in stream/device/event syncs"),
    Column("idle_s", FLOAT, "GPU idle inside the step's GPU window"),
    Column(
        "bound",
        FLAG,
        "offload-bound as diag.evidence.offload judges it (the offload-bound finding)",
    ),
    Column("max_gain_s", FLOAT, "the most a faster compute could save: copies bound the rest"),
)

FINDINGS = (
    Column("id", TEXT, "stable finding id (docs/FINDINGS.md)"),
    Column("analyzer", TEXT, "the analyzer's name"),
    Column("severity", TEXT, "error, warning or info"),
    Column("title", TEXT, "one line a person can act on"),
    Column("location", TEXT, "file:line in the user's code; <NA> if none"),
    Column("run", TEXT, "the run it is about"),
    Column("fix", TEXT, "the change to make; empty for an info finding"),
    Column("group", TEXT, "the headline finding it echoes (one root cause); <NA>"),
    Column("related", INT, "findings that echo this one (a headline's count)"),
    Column("evidence", ANY, "list of evidence lines"),
    Column("data", ANY, "the finding's data dict, as in diag analyze --json"),
)
