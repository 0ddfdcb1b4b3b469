"""What each event of events.jsonl may hold: one msgspec Struct per event kind (docs/FORMAT.md),
with the type and range of every field a reader uses.

The reader (diag.trace.lines) decodes each line into its kind's Struct once; a line whose known
fields have the wrong type or an impossible value (a string step, `1e999` seconds, a dict where
a pid goes, a 5000-digit int, a negative size) is corrupt, skipped and counted, so analyzers
and views can trust every field they read. Fields a kind does not list are ignored (a newer
diag may add them: docs/FORMAT.md, "Compatibility"), and a missing field takes its default,
as older traces lack some. Event kinds not listed here are kept with only `t` checked.

Ranges are generous (what a real recording could hold), never tight enough to refuse one:
times are nanoseconds of CLOCK_MONOTONIC or the epoch, below 2**63; durations are finite,
non-negative seconds below 10**9 (about 31 years); counts and bytes below 2**62.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from diag.trace.format import MAX_RANK, MAX_WORLD_SIZE

Nanos = Annotated[int, Meta(ge=0, le=2**63 - 1)]
Count = Annotated[int, Meta(ge=0, le=2**62)]
Bytes = Count
Pid = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Rank = Annotated[int, Meta(ge=0, le=MAX_RANK)]
WorldSize = Annotated[int, Meta(ge=1, le=MAX_WORLD_SIZE)]
#: A step index or a Dynamo epoch.
Index = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Line = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Seconds = Annotated[float, Meta(ge=0.0, le=1e9)]
#: Runnable tasks per CPU.
Load = Annotated[float, Meta(ge=0.0, le=1e6)]
#: One dimension of a tensor or request shape.
Dim = Annotated[int, Meta(ge=0, le=2**62)]
Shape = Annotated[list[Dim], Meta(max_length=64)]
#: A step's shape: the same values, as a tuple, so that the reader codes a day of steps' shapes
#: with one dict lookup each (diag.trace.step_builder).
StepShape = Annotated[tuple[Dim, ...], Meta(max_length=64)]
Scalar = str | int | float | bool | None
#: A change in a counter.
Delta = Annotated[int, Meta(ge=-(2**62), le=2**62)]


class FrameRef(Struct, gc=False):
    """A code location: `name`, `file`, `line` (a compiled frame, a crash frame, a target)."""

    name: str | None = None
    file: str | None = None
    line: Line | None = None


class EventBase(Struct, kw_only=True, gc=False, tag_field="ev", omit_defaults=True):
    """Every event: `t` (nanoseconds, CLOCK_MONOTONIC) and `ev`, its kind: the tag that picks
    the Struct (each kind below names its own)."""

    t: Nanos = 0


class Positioned(EventBase):
    """Events that happen during a step carry where: phase, request, step."""

    phase: str | None = None
    request_id: str | None = None
    step: Index | None = None
    #: The name of the thread it happened in (a request is the thread's that served it).
    thread: str | None = None


class ProcessStart(EventBase, tag="process_start"):
    pid: Pid = 0
    ppid: Pid | None = None
    rank: Rank | None = None
    world_size: WorldSize | None = None
    argv: list[str] = msgspec.field(default_factory=list)
    wall_ns: Nanos | None = None
    start_ticks: Count | None = None
    label: str | None = None
    stance: str | None = None
    versions: dict[str, Scalar] = msgspec.field(default_factory=dict)


class ProcessEnd(EventBase, tag="process_end"):
    gpu: str | None = None
    step_end_work_s: float | None = None
    step_end_work_max_s: float | None = None
    steps_ended: int | None = None


class Adapter(EventBase, tag="adapter"):
    name: str | None = None
    inferred: bool | None = None


class PhaseChange(EventBase, tag="phase"):
    phase: str | None = None


class RequestStart(Positioned, tag="request_start"):
    shape: Shape | None = None
    steps: Count | None = None
    #: The program's own name for the request (LightX2V's task id).
    label: str | None = None
    #: The scalar arguments the call site passed besides the shape (diffusers: guidance_scale).
    params: Annotated[dict[str, int | float | bool], Meta(max_length=32)] | None = None


class RequestEnd(Positioned, tag="request_end"):
    pass


class Memory(Struct, gc=False):
    """The caching allocator's figures at a step's end, or at step 0's start (other keys a
    newer diag adds are ignored)."""

    allocated: Bytes | None = None
    reserved: Bytes | None = None
    max_allocated: Bytes | None = None


class StepStart(Positioned, tag="step_start"):
    shape: StepShape | None = None
    profiled: bool = False
    #: Step 0 of a request only, when CUDA was in use.
    memory: Memory | None = None


class StepEnd(Positioned, tag="step_end"):
    wall_s: Seconds | None = None
    cpu_s: Seconds | None = None
    host_load: Load | None = None
    profiled: bool = False
    memory: Memory | None = None


class StepGpu(Positioned, tag="step_gpu"):
    gpu_s: Seconds | None = None


class CompileStart(Positioned, tag="compile_start"):
    compile_id: str | None = None
    epoch: Index | None = None


class CompileEnd(Positioned, tag="compile_end"):
    compile_id: str | None = None
    epoch: Index | None = None
    frame: FrameRef | None = None
    result: str | None = None
    duration_s: Seconds | None = None
    start_t: Nanos | None = None
    fail_type: str | None = None
    fail_reason: str | None = None
    fail_user_frame: str | None = None
    suppress_errors: bool | None = None
    cache_size: Count | None = None
    graph_op_count: Count | None = None
    guard_count: Count | None = None
    restart_reasons: list[str] | None = None


class Guard(Struct, gc=False):
    """One failing guard of a recompile, as diag.trace.guards parsed it (the raw text always
    kept).

    Also the Run model's guard (diag.trace.run re-exports it): recompile events decode straight
    into guards, since a trace with 10 000 recompiles holds tens of thousands of them."""

    kind: str = "unknown"
    source: str | None = None
    expected: str | None = None
    actual: str | None = None
    user_location: str | None = None
    raw: str = ""
    compile_id: str | None = None

    def __post_init__(self) -> None:
        self.kind = self.kind or "unknown"
        # Dynamo's module aliases (`G['__import_a_dot_b']`) read as the module path (`a.b`) in
        # every title, fix and id; `raw` keeps torch's text.
        if self.source is not None and "__import_" in self.source:
            from diag.trace.guards import readable_source

            self.source = readable_source(self.source)

    def describe(self, condition: str, located: str = " at ") -> str:
        """`kind on source: condition (expected E, actual A) at file:line`, as reports quote a
        guard; `condition` is the text to show (e.g. diag.trace.guards.condition_text(raw))."""
        line = f"{self.kind} on {self.source or '?'}: {condition}"
        if self.expected is not None and "expected" not in condition:
            line += f" (expected {self.expected}"
            line += f", actual {self.actual})" if self.actual is not None else ")"
        if self.user_location:
            line += f"{located}{self.user_location}"
        return line


class Recompile(Positioned, tag="recompile"):
    compile_id: str | None = None
    epoch: Index | None = None
    guards: list[Guard] = msgspec.field(default_factory=list)


class GuardSources(EventBase, tag="guard_sources"):
    compile_id: str | None = None
    epoch: Index | None = None
    sources: dict[str, str] | None = None


class GraphBreak(Positioned, tag="graph_break"):
    compile_id: str | None = None
    epoch: Index | None = None
    user_location: str | None = None
    reason: str | None = None
    raw: str | None = None


class ShapeSymbol(Positioned, tag="shape_symbol"):
    compile_id: str | None = None
    epoch: Index | None = None
    symbol: str | None = None
    value: str | None = None
    range: str | None = None
    source: str | None = None
    user_location: str | None = None


class ShapeSpecialization(Positioned, tag="shape_specialization"):
    compile_id: str | None = None
    epoch: Index | None = None
    symbol: str | None = None
    sources: list[str] | None = None
    value: str | None = None
    reason: str | None = None
    user_location: str | None = None


class Signature(Struct, gc=False):
    count: Count = 0
    args: dict[str, Shape | None] = msgspec.field(default_factory=dict)


class CallShapes(EventBase, tag="call_shapes"):
    frame: FrameRef | None = None
    calls: Count | None = None
    sampled: Count | None = None
    overflow: bool | None = None
    signatures: list[Signature] | None = None


class CacheCounts(Struct, gc=False):
    hit: Count = 0
    miss: Count = 0


class CompileTiming(Positioned, tag="compile_timing"):
    compile_id: str | None = None
    epoch: Index | None = None
    runtime: bool | None = None
    total_s: Seconds | None = None
    dynamo_s: Seconds | None = None
    backend_s: Seconds | None = None
    aot_s: Seconds | None = None
    inductor_s: Seconds | None = None
    codegen_s: Seconds | None = None
    triton_s: Seconds | None = None
    autotune_s: Seconds | None = None
    runtime_autotune_s: Seconds | None = None
    cudagraphify_s: Seconds | None = None
    saved_s: Seconds | None = None
    caches: dict[str, CacheCounts] | None = None
    cudagraph_skip_reason: str | None = None


class CudagraphRecord(Positioned, tag="cudagraph_record"):
    compile_id: str | None = None
    start_t: Nanos | None = None
    duration_s: Seconds | None = None
    reserved_before: Bytes | None = None
    reserved_after: Bytes | None = None


class CudagraphMessage(Positioned):
    compile_id: str | None = None
    message: str | None = None


class CudagraphSkip(CudagraphMessage, tag="cudagraph_skip"):
    pass


class CudagraphLog(CudagraphMessage, tag="cudagraph_log"):
    pass


class TracedFunction(Struct, gc=False):
    name: str | None = None
    file: str | None = None
    line: Line | None = None
    module: str | None = None
    boundary: str | None = None
    count: Count | None = None


class TracedCode(Positioned, tag="traced_code"):
    compile_id: str | None = None
    attempt: Count | None = None
    epoch: Index | None = None
    at: str | None = None
    codes: list[TracedFunction] | None = None
    chain: list[TracedFunction] | None = None


class RecompileLimit(Positioned, tag="recompile_limit"):
    compile_id: str | None = None
    epoch: Index | None = None
    frame: FrameRef | None = None
    reason: str | None = None


class Stance(Positioned, tag="stance"):
    """`torch.compiler.set_stance` changed the process's compile stance."""

    stance: str | None = None
    prior: str | None = None


class RecompileRefused(Positioned, tag="recompile_refused"):
    """A call needed a recompile that the stance (fail_on_recompile) refused with an error."""

    stance: str | None = None
    frame: FrameRef | None = None
    guards: list[str] = msgspec.field(default_factory=list)


class EagerFallback(Positioned, tag="eager_fallback"):
    frame: FrameRef | None = None


class DynamoReset(EventBase, tag="dynamo_reset"):
    epoch: Index | None = None


class CodeEntries(Struct, gc=False):
    name: str | None = None
    file: str | None = None
    line: Line | None = None
    entries: Count = 0


class CacheEntries(Positioned, tag="cache_entries"):
    when: str | None = None
    full: bool | None = None
    codes: list[CodeEntries] | None = None


class ProfileWindowStart(EventBase, tag="profile_window_start"):
    window: str | None = None


class ProfileWindowEnd(EventBase, tag="profile_window_end"):
    window: str | None = None
    file: str | None = None
    steps: Count | None = None
    export_s: Seconds | None = None


class Timed(Positioned):
    """A call the program made, and how long it took."""

    duration_s: Seconds | None = None


class EmptyCache(Timed, tag="empty_cache"):
    pass


class GcCollect(Timed, tag="gc_collect"):
    pass


class GcPause(Timed, tag="gc_pause"):
    """A collection Python's garbage collector ran on its own (collectors/gc_pauses.py)."""

    generation: Count | None = None
    collected: Count | None = None


class Cause(Struct, gc=False):
    type: str | None = None
    message: str | None = None


class Crash(Positioned, tag="crash"):
    type: str | None = None
    message: str | None = None
    thread: str | None = None
    user_frame: FrameRef | None = None
    user_stack: list[FrameRef] | None = None
    frames: list[FrameRef] | None = None
    inside: list[str] | None = None
    cause: Cause | None = None
    compiling: list[str] | None = None
    seen_by: str | None = None


class MagiCompile(EventBase, tag="magi_compile"):
    module: str | None = None
    note: str | None = None
    target: FrameRef | None = None
    dynamic_arg_dims: Any = None


class MagiState(Positioned, tag="magi_state"):
    target: FrameRef | None = None
    name: str | None = None
    model_idx: Count | None = None
    model_tag: str | None = None
    method: str | None = None
    dynamic_arg_dims: Any = None
    config: dict[str, Any] | None = None


class MagiCompileStart(Positioned, tag="magi_compile_start"):
    target: FrameRef | None = None
    name: str | None = None
    model_idx: Count | None = None
    inputs: dict[str, Any] | None = None


class DumpedFile(Struct, gc=False):
    path: str | None = None
    bytes: Bytes | None = None


class DepyfDump(Struct, gc=False):
    dir: str | None = None
    files: list[DumpedFile] | None = None
    file_count: Count | None = None
    subgraphs: Count | None = None


class MagiCompileEnd(Positioned, tag="magi_compile_end"):
    target: FrameRef | None = None
    name: str | None = None
    model_idx: Count | None = None
    start_t: Nanos | None = None
    duration_s: Seconds | None = None
    result: str | None = None
    counters: dict[str, Delta] | None = None
    cache: str | None = None
    guards: list[str] | None = None
    guard_count: Count | None = None
    depyf_dump: DepyfDump | None = None
    magi_cache_dir: str | None = None
    error_type: str | None = None
    error: str | None = None


class MagiFailure(Struct, gc=False):
    guard: str | None = None
    seen: str | None = None
    baked: str | None = None
    where: str | None = None
    code: str | None = None


class MagiGuardCheck(Positioned, tag="magi_guard_check"):
    target: FrameRef | None = None
    name: str | None = None
    call: Count | None = None
    ok: bool | None = None
    new_signature: bool | None = None
    inputs: dict[str, Any] | None = None
    reason: str | None = None
    failures: list[MagiFailure] | None = None
    check_s: Seconds | None = None


class MagiRuntimeCompile(Positioned, tag="magi_runtime_compile"):
    target: FrameRef | None = None
    name: str | None = None
    backend_compilations: Count | None = None
    duration_s: Seconds | None = None


class Lightx2vConfig(EventBase, tag="lightx2v_config"):
    use_compile: Scalar = None
    use_magi_compile: Scalar = None
    cpu_offload: Scalar = None
    offload_granularity: Scalar = None


class Lightx2vRunner(EventBase, tag="lightx2v_runner"):
    runner: str | None = None
    warmup_owner: str | None = None
    model_cls: str | None = None
    task: str | None = None
    warmup_attr: str | None = None
    warmup_resolutions: list[Annotated[list[Dim], Meta(max_length=8)]] | None = None
    vae_stride: Annotated[list[Dim], Meta(max_length=8)] | None = None
    patch_size: Annotated[list[Dim], Meta(max_length=8)] | None = None
    applied: bool | None = None


class Autotune(Positioned, tag="autotune"):
    kernel: str | None = None
    duration_s: Seconds | None = None


class CollectorError(EventBase, tag="collector_error"):
    where: str | None = None
    error: str | None = None
    traceback: str | None = None


class CollectorsPaused(EventBase, tag="collectors_paused"):
    paused: bool | None = None


#: Event kind -> its schema. A kind not listed (a newer diag's) is kept as EventBase.
SCHEMAS: dict[str, type[EventBase]] = {
    "process_start": ProcessStart,
    "process_end": ProcessEnd,
    "adapter": Adapter,
    "phase": PhaseChange,
    "request_start": RequestStart,
    "request_end": RequestEnd,
    "step_start": StepStart,
    "step_end": StepEnd,
    "step_gpu": StepGpu,
    "compile_start": CompileStart,
    "compile_end": CompileEnd,
    "crash": Crash,
    "recompile": Recompile,
    "guard_sources": GuardSources,
    "graph_break": GraphBreak,
    "shape_symbol": ShapeSymbol,
    "shape_specialization": ShapeSpecialization,
    "call_shapes": CallShapes,
    "compile_timing": CompileTiming,
    "cudagraph_record": CudagraphRecord,
    "cudagraph_skip": CudagraphSkip,
    "cudagraph_log": CudagraphLog,
    "traced_code": TracedCode,
    "recompile_limit": RecompileLimit,
    "eager_fallback": EagerFallback,
    "stance": Stance,
    "recompile_refused": RecompileRefused,
    "dynamo_reset": DynamoReset,
    "cache_entries": CacheEntries,
    "profile_window_start": ProfileWindowStart,
    "profile_window_end": ProfileWindowEnd,
    "empty_cache": EmptyCache,
    "gc_collect": GcCollect,
    "gc_pause": GcPause,
    "magi_compile": MagiCompile,
    "magi_state": MagiState,
    "magi_compile_start": MagiCompileStart,
    "magi_compile_end": MagiCompileEnd,
    "magi_guard_check": MagiGuardCheck,
    "magi_runtime_compile": MagiRuntimeCompile,
    "lightx2v_config": Lightx2vConfig,
    "lightx2v_runner": Lightx2vRunner,
    "autotune": Autotune,
    "collector_error": CollectorError,
    "collectors_paused": CollectorsPaused,
}


# --- manifest.json ------------------------------------------------------------------------------


class ManifestRun(Struct, gc=False):
    label: str | None = None
    stance: str | None = None
    started: str | None = None
    ended: str | None = None
    status: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    duration_s: float | None = None
    error: str | None = None


class Manifest(Struct, gc=False):
    """manifest.json's fields as readers use them (docs/FORMAT.md); `format` and `version` are
    checked first, by diag.trace.load.read_manifest, so that a foreign file is named as such."""

    format: str
    version: int
    diag_version: str | None = None
    status: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    started: str | None = None
    ended: str | None = None
    host: dict[str, Scalar] | None = None
    launcher_pid: Pid | None = None
    options: dict[str, Any] | None = None
    versions: dict[str, Scalar] | None = None
    runs: list[ManifestRun] = msgspec.field(default_factory=list)
