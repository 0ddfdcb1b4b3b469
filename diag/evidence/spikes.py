"""Why a live request's step 0 was slow: the one place that reads a spike's cause off evidence.

A first step pays one-off costs, and each leaves its own evidence: a compile (its events and
seconds), a CUDA-graph recording, and, when the step was profiled, the ops whose time grew
against a steady profiled step (cuDNN building an execution plan for a new sequence length,
cuBLAS picking an algorithm for a new GEMM shape, the caching allocator taking memory from the
driver, weights copied back to the GPU by an offload hook, Triton autotuning, NCCL setting up a
communicator). Without a profile, what the events say is still used: the allocator's reserve
grown inside the step (measured from the step's own start, not the previous step's end, which
an `empty_cache()` in between makes meaningless), and a pipeline whose model offload moves its
weights back at every request's first step. Python's garbage collector pausing the
program (a full collection after warmup scans every object warmup made) is measured by the
collector's own callbacks and comes first. A cause is named only when its evidence accounts
for the time; otherwise the cause is "unknown", with what the evidence shows.

step0-spike words the finding; check, the TUI and the report read the same `SpikeCause`.
"""

from __future__ import annotations

import importlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from diag.errors import DiagError
from diag.evidence.stats import Sample, stands_out
from diag.trace.run import Event, Request, RunData, Step

#: Step 0 is a spike at FACTOR x its request's steady median or more ...
FACTOR = 2.0
#: ... and at least FLOOR_S more than it.
FLOOR_S = 0.050


def is_spike(step0: float, baseline: Sample) -> bool:
    """Step 0 against its request's other steps: FACTOR x their median, FLOOR_S more, slower
    than the slowest of them and clear of their spread. step0-spike and the live metrics
    (diag/live/metrics.py) judge by it."""
    return (
        step0 >= FACTOR * baseline.median
        and step0 - baseline.median >= FLOOR_S
        and step0 > baseline.high
        and stands_out(step0, baseline)
    )


#: A cause's evidence must account for at least this share of the excess to be named.
EXPLAINED_SHARE = 0.5
#: Reserve growth inside step 0 that an offloaded model's reload is read from: this share of
#: the offloaded components' parameter bytes.
RELOAD_SHARE = 0.5

#: Op-name patterns of the common first-call costs, in order: the first match names an op.
_OP_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"cudnn", re.IGNORECASE), "cudnn-plan"),
    (re.compile(r"CachingAutotuner|autotune|benchmark_all_configs", re.IGNORECASE), "autotune"),
    (re.compile(r"nccl|c10d::|ProcessGroup", re.IGNORECASE), "nccl-init"),
    (re.compile(r"cublas|aten::(?:mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm)$"), "cublas-plan"),
    (
        re.compile(r"aten::(?:empty|empty_strided|zeros|ones|new_empty|new_zeros|full)$"),
        "allocator",
    ),
)

#: What each kind is, in a sentence (the title's cause).
DESCRIPTIONS = {
    "compile": "compiles in the step",
    "cudagraph-record": "CUDA graphs recorded for a new size",
    "cudnn-plan": "cuDNN built an execution plan for a new input shape",
    "cublas-plan": "cuBLAS chose algorithms for new GEMM shapes",
    "allocator": "the caching allocator took memory from the driver",
    "offload-reload": "the offloaded model's weights were copied back to the GPU",
    "autotune": "Triton autotuning at the first call",
    "nccl-init": "NCCL set up a communicator",
    "gc": "Python's garbage collector paused the program",
    "unknown": "cause unknown",
}


@dataclass
class OpExcess:
    """One op name's extra time in step 0 against the steady reference."""

    name: str
    kind: str | None
    step0_s: float
    steady_s: float

    @property
    def excess_s(self) -> float:
        return self.step0_s - self.steady_s


@dataclass
class SpikeCause:
    kind: str
    decided: bool
    #: Seconds of the excess the named cause accounts for (None: not measured).
    explained_s: float | None = None
    evidence: list[str] = field(default_factory=list)
    ops: list[OpExcess] = field(default_factory=list)
    reference: str | None = None  # the steady profiled steps compared with

    def claim(self) -> dict[str, Any]:
        return {"kind": self.kind, "decided": self.decided}


@dataclass
class ProfileComparison:
    """Step 0's profile against steady profiled steps of the same process, op by op."""

    reference: str
    same_shape: bool
    ops: list[OpExcess]
    h2d_bytes: tuple[int, float]  # step 0's, the reference's per step
    h2d_s: tuple[float, float]


def compare_profile(run: RunData, request: Request, step0: Step) -> ProfileComparison | None:
    """Step 0's profile against the process's steady profiled steps (the same request shape
    first), or None when either is missing."""
    profiles = importlib.import_module("diag.trace.profiles").step_profiles(run)
    mine = next(
        (
            p
            for p in profiles
            if p.pid == step0.pid and p.request_id == step0.request_id and p.step == step0.index
        ),
        None,
    )
    if mine is None:
        return None
    shapes = {(r.pid, r.request_id): r.shape for r in run.requests}
    steady = [p for p in profiles if p.pid == step0.pid and p.step > 0 and p is not mine]
    same = [p for p in steady if shapes.get((p.pid, p.request_id)) == request.shape]
    reference = same or steady
    if not reference:
        return None
    step0_self = _self_times(mine)
    steady_self: dict[str, float] = defaultdict(float)
    for profile in reference:
        for name, seconds in _self_times(profile).items():
            steady_self[name] += seconds / len(reference)
    ops = [
        OpExcess(name, _kind_of(name), seconds, steady_self.get(name, 0.0))
        for name, seconds in step0_self.items()
    ]
    ops.sort(key=lambda op: op.excess_s, reverse=True)
    h2d = _h2d(mine)
    h2d_ref = [_h2d(p) for p in reference]
    label = ", ".join(f"{p.request_id} step {p.step}" for p in reference[:4])
    if len(reference) > 4:
        label += f" and {len(reference) - 4} more"
    return ProfileComparison(
        reference=label,
        same_shape=bool(same),
        ops=ops,
        h2d_bytes=(h2d[0], sum(b for b, _ in h2d_ref) / len(h2d_ref)),
        h2d_s=(h2d[1], sum(s for _, s in h2d_ref) / len(h2d_ref)),
    )


def _self_times(profile: Any) -> dict[str, float]:
    """CPU self time per op name (seconds): an op's duration less its children's, per thread."""
    totals: dict[str, float] = defaultdict(float)
    by_thread: dict[int, list[Any]] = defaultdict(list)
    for op in profile.cpu_ops:
        by_thread[op.tid].append(op)
    for ops in by_thread.values():
        ops.sort(key=lambda op: (op.ts, -op.dur))
        stack: list[tuple[float, str]] = []  # (end, name) of the open ops
        for op in ops:
            while stack and stack[-1][0] <= op.ts:
                stack.pop()
            totals[op.name] += op.dur / 1e6
            if stack:
                totals[stack[-1][1]] -= op.dur / 1e6
            stack.append((op.ts + op.dur, op.name))
    return dict(totals)


def _h2d(profile: Any) -> tuple[int, float]:
    copies = [a for a in profile.activities if a.kind == "memcpy" and a.direction == "HtoD"]
    return sum(a.bytes for a in copies), sum(a.dur for a in copies) / 1e6


def _kind_of(name: str) -> str | None:
    for pattern, kind in _OP_KINDS:
        if pattern.search(name):
            return kind
    return None


def profile_cause(comparison: ProfileComparison, excess_s: float) -> SpikeCause:
    """The cause the profile shows: the kind whose extra time accounts for at least half the
    excess (HtoD copies count as an offload reload), else unknown with the biggest ops."""
    by_kind: dict[str, float] = defaultdict(float)
    for op in comparison.ops:
        if op.kind is not None and op.excess_s > 0:
            by_kind[op.kind] += op.excess_s
    copies_s = comparison.h2d_s[0] - comparison.h2d_s[1]
    if copies_s > 0:
        by_kind["offload-reload"] += copies_s
    where = f"steady profiled step(s) {comparison.reference}" + (
        "" if comparison.same_shape else ", at another shape"
    )
    evidence = [f"step 0's profile against {where}, op by op (CPU self time; copies GPU time):"]
    shown = [op for op in comparison.ops if op.excess_s > 0][:5]
    evidence.extend(
        f"  {op.name}: {_ms(op.step0_s)} in step 0 against {_ms(op.steady_s)} steady "
        f"(+{_ms(op.excess_s)})" + (f" [{op.kind}]" if op.kind else "")
        for op in shown
    )
    if comparison.h2d_bytes[0] > comparison.h2d_bytes[1]:
        evidence.append(
            f"  host-to-device copies: {_bytes(comparison.h2d_bytes[0])} in "
            f"{_ms(comparison.h2d_s[0])} in step 0 against {_bytes(int(comparison.h2d_bytes[1]))} "
            "per steady step [offload-reload]"
        )
    # The verdict first, then the ops it is read off (a text view shows the first lines).
    if by_kind:
        kind, seconds = max(by_kind.items(), key=lambda item: item[1])
        if seconds >= EXPLAINED_SHARE * excess_s:
            verdict = (
                f"{DESCRIPTIONS[kind]}: {_ms(seconds)} of the {_ms(excess_s)} excess "
                f"({seconds / excess_s * 100:.0f}%), from step 0's profile"
            )
            return SpikeCause(
                kind, True, seconds, [verdict, *evidence], shown, comparison.reference
            )
    verdict = (
        f"no known first-call cost accounts for half of the {_ms(excess_s)} excess: the cause is "
        "unknown; the ops below are where step 0 spent more"
    )
    return SpikeCause("unknown", False, None, [verdict, *evidence], shown, comparison.reference)


def event_cause(
    run: RunData, request: Request, step0: Step, previous: Step | None
) -> SpikeCause | None:
    """What the events show without a profile: an offloaded model reloaded, or allocator
    growth inside step 0 (after an empty_cache() when one ran since the previous step)."""
    growth = reserve_growth(step0)
    if growth is None or growth <= 0:
        return None
    since = previous.end_t if previous is not None and previous.end_t is not None else 0
    emptied = [
        e for e in run.of("empty_cache") if e.pid == step0.pid and since <= e.t <= step0.start_t
    ]
    evidence = [
        f"the allocator's reserve grew {_bytes(growth)} inside step 0 (from its start: "
        f"{_bytes(_reserved(step0.memory_start))} -> {_bytes(_reserved(step0.memory))})"
    ]
    if emptied:
        where = previous.request_id if previous is not None else "before the request"
        evidence.append(
            f"torch.cuda.empty_cache() ran {len(emptied)} time(s) after {where}'s last step: the "
            "memory the previous request held went back to the driver"
        )
    offload = _offload(run, step0.pid)
    if offload is not None:
        names, size = offload
        if growth >= RELOAD_SHARE * size:
            evidence.append(
                f"the pipeline uses enable_model_cpu_offload(): {', '.join(names)} "
                f"({_bytes(size)} of weights) move to the GPU at the request's first use and back "
                "after its last step, and the reserve grew by about that much in step 0"
            )
            return SpikeCause("offload-reload", True, None, evidence)
    evidence.append(
        "the time the allocator's growth cost is not measured without a profile (cudaMalloc "
        "of large blocks is fast; a spike of tens of ms needs more): the cause is unknown"
    )
    return SpikeCause("unknown", False, None, evidence)


def first_use_cause(
    run: RunData, request: Request, step0: Step, previous: Step | None, excess_s: float
) -> tuple[SpikeCause | None, list[str]]:
    """A slow step 0's first-use cost with no compile to explain it: read off step 0's
    profile (op by op against steady profiled steps) when it was profiled, else off the
    events (allocator growth inside the step, an offloaded model's reload). Returns the cause
    (None: no evidence at all) and what kept the profile from deciding. step0-spike and the
    magi analyzer both read a spike's cause here."""
    found: SpikeCause | None = gc_cause(run, step0, excess_s)
    notes: list[str] = []
    if found is not None and found.decided:
        return found, notes
    if found is not None:
        notes.extend(found.evidence)  # measured, too short to explain it: context
        found = None
    if step0.profiled:
        comparison = _readable_comparison(run, request, step0)
        if comparison is not None:
            found = profile_cause(comparison, excess_s)
        else:
            notes.append(
                "its profile could not be compared: no steady profiled step of this process "
                "(or its window could not be read)"
            )
    if found is None or found.kind == "unknown":
        from_events = event_cause(run, request, step0, previous)
        if from_events is not None and (found is None or from_events.decided):
            found = from_events
    return found, notes


def gc_cause(run: RunData, step0: Step, excess_s: float) -> SpikeCause | None:
    """Python's garbage collector, when it paused the program inside step 0 (gc_pause events,
    collectors/gc_pauses.py): decided when the pauses account for the share of the excess a
    cause needs; None when it did not run there."""
    end = step0.end_t if step0.end_t is not None else step0.start_t
    pauses = [e for e in run.of("gc_pause") if e.pid == step0.pid and step0.start_t <= e.t <= end]
    if not pauses:
        return None
    seconds = sum(float(e.data.get("duration_s") or 0.0) for e in pauses)
    full = [e for e in pauses if e.data.get("generation") == 2]
    line = (
        f"{DESCRIPTIONS['gc']} {len(pauses)} time(s) in step 0 for {_ms(seconds)}"
        + (f" ({len(full)} full collection(s), generation 2)" if full else "")
        + f", of the {_ms(excess_s)} excess"
    )
    if seconds >= EXPLAINED_SHARE * excess_s:
        return SpikeCause("gc", True, seconds, [line])
    return SpikeCause("gc", False, seconds, [f"{line}: too little to explain it"])


def _readable_comparison(run: RunData, request: Request, step0: Step) -> ProfileComparison | None:
    """Step 0's profile compared with steady ones; None when the windows cannot be read (a
    missing or damaged Kineto file: the reader's warnings say which)."""
    try:
        return compare_profile(run, request, step0)
    except (OSError, ValueError, DiagError):
        return None


def reserve_growth(step: Step) -> int | None:
    """Bytes the allocator's reserve grew inside the step (None: not recorded)."""
    before, after = _reserved(step.memory_start), _reserved(step.memory)
    if before is None or after is None:
        return None
    return after - before


def _reserved(memory: dict[str, int] | None) -> int | None:
    value = memory.get("reserved") if isinstance(memory, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _offload(run: RunData, pid: int) -> tuple[list[str], int] | None:
    """The components a pipeline with model CPU offload moves per request, and their bytes."""
    found: Event | None = next(
        (e for e in run.of("pipeline_offload") if e.pid == pid and e.data.get("model") is True),
        None,
    )
    if found is None:
        return None
    sizes = found.data.get("param_bytes")
    if not isinstance(sizes, dict):
        return None
    parts = {
        str(k): v
        for k, v in sizes.items()
        if isinstance(v, int) and not isinstance(v, bool) and v > 0
    }
    if not parts:
        return None
    biggest = sorted(parts, key=lambda k: -parts[k])
    return biggest[:3], sum(parts.values())


FIXES = {
    "cudnn-plan": (
        "cuDNN builds and caches an execution plan per new input shape (here the attention's "
        "sequence length): warm up every sequence length live traffic uses, or for many "
        "lengths route SDPA to a backend without per-shape plans "
        "(torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION]))."
    ),
    "cublas-plan": (
        "cuBLAS(Lt) chooses algorithms per new GEMM shape on first use: warm up each shape live "
        "traffic uses."
    ),
    "allocator": (
        "Let warmup grow the allocator: warm up at the largest live shape, and don't call "
        "torch.cuda.empty_cache() between requests (see warmup-hygiene)."
    ),
    "offload-reload": (
        "enable_model_cpu_offload() copies the model back to the GPU at every request's first "
        "step: if the GPU has room, keep the pipeline on it (pipe.to('cuda')); else overlap the "
        "copies with compute (enable_group_offload(..., use_stream=True)) or accept the cost."
    ),
    "autotune": (
        "Autotuning runs at a compiled graph's first call: warm up every shape, and keep "
        "Inductor's cache between processes (TORCHINDUCTOR_CACHE_DIR on persistent storage)."
    ),
    "nccl-init": (
        "NCCL sets up communicators lazily at the first collective: run one collective of each "
        "kind (and group) during warmup."
    ),
    "gc": (
        "A full collection scans every object warmup left (compiled graphs, guards, caches): "
        "after warmup call gc.collect() and then gc.freeze(), which moves those objects out of "
        "the collector's view, so later collections scan only what the requests make."
    ),
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _bytes(value: int | float | None) -> str:
    if value is None:
        return "?"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} GiB"
