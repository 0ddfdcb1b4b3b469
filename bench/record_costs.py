"""diag's cost per recorded step, itemised: each mechanism's count x its unit cost, beside the
measured total (issue 34, item 3).

The reference service runs compiled under `diag record --max-size none` (`--device`, `--size`,
`--backend` as in bench/record_step_cost.py). After its warmup it serves one shape's requests
in groups of three, in random order within each group, exactly as
bench/record_overhead_interleaved.py does (its `serve_groups`): recorded, paused
(`Session.pause()`) and bare (paused, diag's wrappers taken off the step path). Those give the
measured totals: per group, the recorded request's median step minus the paused one's, and the
paused one's minus the bare one's; medians over groups, bootstrap 95% intervals.

Then, in the same process, with the session's own collector objects:

- count: how often each mechanism ran in the measured groups' recorded requests, read off the
  trace (events.jsonl from where the measured groups began: step, request, cache, gc, window,
  guard-check events) and the collectors' own counters (the call-shape sampler's call counts,
  the cache collector's step count, `gc.get_stats()`); nothing is added to the record path;
- unit: each mechanism timed in place, recorded and paused, two ways (perf_counter_ns, net of
  an empty call timed the same way): warm, the median over `--repeats` of the mean of
  `--number` calls in a row (diag's code and data stay in the CPU's caches: a lower bound); and
  in context, the median over `--samples` calls, each timed right after a real compiled block
  call (the program's own work between two of diag's calls evicts them, as in a step).
  Per-call wrappers are timed around a no-op with a real call's arguments (captured from one
  block call), made by the same collector methods that wrapped the compiled blocks (`mark`,
  `watch`); per-step and per-request hooks by the adapter's own `hook_model`/`hook_runner` on
  stand-ins of the model and runner; the step tracker, event writer, cache collector, gc
  callback and guard checks are the session's own.

The table: mechanism, count, unit (recorded, paused), count x unit, and per recorded step, each
warm and in context; the sums beside the measured totals, so what is accounted for shows. A
mechanism's paused unit is what it still costs while paused (a wrapper's call-through).
Recorded minus paused is predicted by the sum of (recorded - paused) units of what runs in a
typical step (not between steps, nor a window's one-step spike: the totals are medians of
steps); paused minus bare by the paused units of what bare takes off (everything but the gc
callback and the cache snapshot). A last check times the compiled-call hooks together on the
real block: the block called through diag's wrappers and bare, alternating.

    python bench/record_costs.py                                   # CPU, small, aot_eager
    python bench/record_costs.py --device cuda --size large --backend inductor
    python bench/record_costs.py --profile default                 # with profile windows

Not itemised (see docs/BENCHMARKS.md): what runs per compile, not per step (the structured-trace
listeners of compiles.py, shapes.py and trace_boundary.py: the records they get during the
measured groups are counted, and none is expected; compile timing; the cudagraph collector's
recording callbacks and log handler, per recording or warning); magi's sampled guard check
beyond its core (magi_compiler is not installed here: `check_verbose` on the block's entry is
timed); the profiler's own per-op cost inside a window (torch's, not a diag call).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_overhead_interleaved import (  # noqa: E402 - a sibling script, not a package
    BARE,
    OFF,
    ON,
    REQUEST_ID,
    DiagLayers,
    bootstrap_median,
    serve_groups,
)

#: The request id the unit measurements' own steps carry (kept apart from the served ones).
PROBE_ID = "record-costs-probe"


# -- timing ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class Timer:
    """Per-call time of a callable, two ways (microseconds, net of an empty call):

    - warm: the median over `repeats` of the mean of `number` calls in a row (caches and branch
      predictors hold diag's code and data: a lower bound);
    - in context: the median over `samples` of one call timed right after `context()` (a real
      compiled block call, diag's code and data evicted as they are in the program's step)."""

    repeats: int
    number: int
    samples: int
    context: Callable[[], Any]
    empty_warm: float = 0.0
    empty_context: float = 0.0

    def calibrate(self) -> None:
        self.empty_warm = self.warm(lambda: None)
        self.empty_context = self.in_context(lambda: None)

    def warm(self, fn: Callable[[], Any], repeats: int | None = None) -> float:
        number = self.number
        samples = []
        for _ in range(repeats or self.repeats):
            start = time.perf_counter_ns()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter_ns() - start) / number)
        return statistics.median(samples) / 1e3 - self.empty_warm

    def in_context(self, *fns: Callable[[], Any]) -> float:
        """One sample: context, then the first fn timed, context, the next timed, ...; the sum
        of each fn's median (step_start and step_end each follow the program's own work)."""
        context = self.context
        times: list[list[int]] = [[] for _ in fns]
        clock = time.perf_counter_ns
        for _ in range(self.samples):
            for fn, out in zip(fns, times, strict=True):
                context()
                start = clock()
                fn()
                out.append(clock() - start)
        return sum(statistics.median(t) for t in times) / 1e3 - len(fns) * self.empty_context

    def both(self, fn: Callable[[], Any]) -> dict[str, float]:
        return {"warm": self.warm(fn), "context": self.in_context(fn)}


def paired(session: Any, timer: Timer, fn: Callable[[], Any]) -> dict[str, float]:
    """`fn`'s units recorded, then paused (what it still costs with the session paused)."""
    unit = timer.both(fn)
    session.pause()
    try:
        unit.update({f"{k}_paused": v for k, v in timer.both(fn).items()})
    finally:
        session.resume()
    return unit


def minus(unit: dict[str, float], base: dict[str, float]) -> dict[str, float]:
    return {k: v - base[k.removesuffix("_paused")] for k, v in unit.items()}


# -- the child: serve, count, time ---------------------------------------------------------------


def child(args: argparse.Namespace) -> int:
    import torch

    from diag.fixtures.config import FixtureConfig, Request
    from diag.fixtures.runner import FixtureRunner

    if args.threads:
        torch.set_num_threads(args.threads)
    module = sys.modules.get("diag.collectors.session")
    session = module.current_session() if module is not None else None
    if session is None or module is None:
        print("not recording: run under diag record", file=sys.stderr)
        return 2
    config = FixtureConfig(compile=True, device=args.device, size=args.size, backend=args.backend)
    runner = FixtureRunner(config)
    request = Request(REQUEST_ID, config.warmup_shapes[0], args.steps)
    rng = random.Random(args.seed)
    with torch.no_grad():
        runner.init_modules()  # the fixture's warmup: every compile happens here
        runner.phase = "live"
        layers = DiagLayers(runner, os.path.dirname(module.__file__ or "") + os.sep)
        serve_groups(runner, request, session, layers, rng, args.settle, 0, time.monotonic(),
                     1e9, None)  # fmt: skip
        before = Counters.read(session)
        records = _RecordCounter.attach()
        started = time.monotonic()
        rows = serve_groups(runner, request, session, layers, rng, 0, args.pairs, started,
                            args.budget_s, None)  # fmt: skip
        seconds = time.monotonic() - started
        records.detach()
        after = Counters.read(session)
        counts = count(session, before, after, records.count, len(rows))
        call = capture_block_call(runner, session, layers)
        bare_block = call.bare

        def context() -> None:
            bare_block(*call.args, **call.kwargs)

        timer = Timer(args.repeats, args.number, args.samples, context)
        units = measure(session, runner, request.shape, call, timer, args)
        units["chain"] = chain_in_place(session, call, args.samples, rng)
    Path(args.out).write_text(
        json.dumps(
            {
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "python": sys.version.split()[0],
                "threads": torch.get_num_threads(),
                "shape": str(request.shape),
                "rows": rows,
                "seconds": seconds,
                "counts": counts,
                "units": units,
                "trace_functions": [repr(sys.gettrace()), repr(sys.getprofile())],
            }
        )
    )
    return 0


@dataclasses.dataclass
class Counters:
    """The collectors' own counters and the trace's length at one moment (between requests)."""

    offset: int
    compiled_calls: int
    cache_steps: int
    compiles: int
    gc_collections: list[int]
    windows: int

    @classmethod
    def read(cls, session: Any) -> Counters:
        from diag.trace.format import EVENTS_FILE

        shapes = session.shapes
        return cls(
            offset=(session.proc_dir / EVENTS_FILE).stat().st_size,
            compiled_calls=sum(c.calls for c in shapes.calls) if shapes is not None else 0,
            cache_steps=session.cache._steps if session.cache is not None else 0,
            compiles=session.compiles.compiles if session.compiles is not None else 0,
            gc_collections=[g["collections"] for g in gc.get_stats()],
            windows=session.profiler.windows if session.profiler is not None else 0,
        )


class _RecordCounter(logging.Handler):
    """Counts the records torch's structured trace hands diag's listeners while the measured
    groups run (compiles.py, shapes.py, trace_boundary.py): none is expected after warmup. The
    bench's own handler; it costs a call only where a record is made anyway."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    @classmethod
    def attach(cls) -> _RecordCounter:
        from diag.collectors.structured import TRACE_LOGGER

        handler = cls()
        logging.getLogger(TRACE_LOGGER).addHandler(handler)
        return handler

    def detach(self) -> None:
        from diag.collectors.structured import TRACE_LOGGER

        logging.getLogger(TRACE_LOGGER).removeHandler(self)


def trace_events(session: Any, start: int, end: int) -> list[dict[str, Any]]:
    """The events written between two offsets of events.jsonl (record runs with --max-size
    none, so no step is in a rotated segment)."""
    from diag.trace.format import EVENTS_FILE

    with open(session.proc_dir / EVENTS_FILE, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def count(
    session: Any, before: Counters, after: Counters, records: int, requests: int
) -> dict[str, Any]:
    """How often each mechanism ran in the measured groups' recorded requests."""
    from diag.collectors.adapters import compiled_calls
    from diag.collectors.cache import RECHECK_STEPS

    events = trace_events(session, before.offset, after.offset)
    by_name: dict[str, int] = {}
    for event in events:
        by_name[event["ev"]] = by_name.get(event["ev"], 0) + 1
    served = [e for e in events if e.get("request_id") == REQUEST_ID]
    step_ends = [e for e in served if e["ev"] == "step_end"]
    collections = sum(after.gc_collections) - sum(before.gc_collections)
    compiles = after.compiles - before.compiles
    # A step end snapshots the cache entries after a compile or reset, and every 32nd step
    # (CacheCollector.step_due): the collector's own step count says how many times.
    snapshots = after.cache_steps // RECHECK_STEPS - before.cache_steps // RECHECK_STEPS + compiles
    fallback = compiled_calls._FALLBACK
    limit = [e for e in events if e["ev"] == "limit_calls"]
    return {
        "requests_served": requests,
        "step_start": sum(e["ev"] == "step_start" for e in served),
        "step_end": len(step_ends),
        "steps_profiled": sum(bool(e.get("profiled")) for e in step_ends),
        "request_start": sum(e["ev"] == "request_start" for e in served),
        "compiled_calls": after.compiled_calls - before.compiled_calls,
        "cache_snapshots": snapshots,
        "cache_events": by_name.get("cache_entries", 0),
        "compiles": compiles,
        # Collections run in every state's requests; the recorded ones' share is a third.
        "gc_collections_all_states": collections,
        "gc_collections": collections / 3,
        "gc_by_generation": [
            a - b for a, b in zip(after.gc_collections, before.gc_collections, strict=True)
        ],
        "gc_pause": by_name.get("gc_pause", 0),
        "window_export_s": [e.get("export_s") for e in events if e["ev"] == "profile_window_end"],
        "windows": after.windows - before.windows,
        "limit_checks": sum(int(e.get("eager", 0)) + int(e.get("compiled", 0)) for e in limit),
        "magi_guard_check": by_name.get("magi_guard_check", 0),
        "hygiene_calls": by_name.get("empty_cache", 0) + by_name.get("gc_collect", 0),
        "step_gpu": by_name.get("step_gpu", 0),
        "structured_records": records,
        "collector_errors": by_name.get("collector_error", 0),
        "fallback_silent": bool(fallback is None or fallback.inferred.silent),
        "profile_spec": session.profile_spec,
        "adapter": session.adapter,
        "regions_installed": bool(session.profiler is not None and session.profiler.spec.enabled),
        "events": by_name,
    }


@dataclasses.dataclass
class BlockCall:
    """One real block call: its arguments, the block's function, and the block's callable
    with diag's wrappers (as the program calls it) and without (what torch.compile returned)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    function: Any
    wrapped: Any
    bare: Any


def capture_block_call(runner: Any, session: Any, layers: DiagLayers) -> BlockCall:
    """The arguments of a real block call (the first, in one paused request)."""
    from diag.fixtures.config import Request

    dispatcher = runner.model.dispatcher
    entries = dict(dispatcher.entries)
    seen: dict[str, Any] = {}

    def capturing(key: Any, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen.setdefault("call", (key, args, kwargs))
            return fn(*args, **kwargs)

        return call

    dispatcher.entries = {k: capturing(k, v) for k, v in entries.items()}
    session.pause()
    try:
        runner.run_pipeline(Request(PROBE_ID, runner.config.warmup_shapes[0], 1))
    finally:
        dispatcher.entries = entries
        session.resume()
    key, args, kwargs = seen["call"]
    return BlockCall(
        args,
        kwargs,
        runner.model.arch.block_fn,
        layers.wrapped_entries[key],
        layers.bare_entries[key],
    )


def noop(*args: Any, **kwargs: Any) -> None:
    """Stands in for a compiled block inside diag's per-call wrappers."""
    return None


class _Model:
    """Stands in for the fixture's model under the adapter's `model.infer` hook."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def infer(self, inputs: Any) -> None:
        return None


class _Runner:
    """Stands in for the fixture's runner under the adapter's `run_pipeline` hook."""

    model = None
    config = None

    def warmup(self) -> None:
        return None

    def run_pipeline(self, request: Any) -> None:
        return None


class _Scheduler:
    def __init__(self, latents: Any) -> None:
        self.latents = latents
        self.step_index = 1  # never 0: step 0 reads the allocator (a request's cost, not a step's)


def measure(
    session: Any,
    runner: Any,
    served: Any,
    call: BlockCall,
    timer: Timer,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Each mechanism's unit cost (us), in place, with the session's own collectors."""
    from diag.collectors import hygiene
    from diag.collectors.adapters import compiled_calls, lightx2v
    from diag.collectors.cache import RECHECK_STEPS
    from diag.fixtures.config import Request

    steps = session.steps
    units: dict[str, Any] = {}
    windows_before = session.profiler.windows if session.profiler is not None else 0
    timer.calibrate()
    units["empty"] = {"warm": timer.empty_warm, "context": timer.empty_context}

    # The event writer: one event of a step_end's size (its own name, so no reader counts it).
    sample = {
        "t": time.monotonic_ns(),
        "request_id": PROBE_ID,
        "step": 3,
        "phase": "live",
        "wall_s": 0.0123,
        "cpu_s": 0.0119,
        "host_load": 0.61,
        "profiled": False,
        "thread": "MainThread",
    }
    units["event"] = timer.both(lambda: session.writer.emit("bench_probe", **sample))

    # The cache-entry snapshot a step end takes after a compile, or every 32nd step.
    cache = session.cache
    if cache is not None:
        units["cache"] = timer.both(
            lambda: cache.snapshot("step_end", False, request_id=PROBE_ID, step=0)
        )

    def net_of_snapshots(warm: float, steps_before: int) -> float:
        """A warm step-end unit without the cache snapshots its step ends ran (they have their
        own row; the in-context median leaves those 1 in 32 out by itself)."""
        if cache is None:
            return warm
        ran = cache._steps // RECHECK_STEPS - steps_before // RECHECK_STEPS
        return warm - ran * units["cache"]["warm"] / (timer.repeats * timer.number)

    shape = [int(v) for v in (served.frames, served.height, served.width)]

    def open_probe() -> None:
        """A request of the served shape (a new shape would open a new-shape window)."""
        steps.request_start(PROBE_ID, shape)

    # Step boundaries: the tracker's step_start and step_end (in context each after the
    # program's work, as in a step), and the adapter's model.infer hook around them.
    open_probe()
    before = cache._steps if cache is not None else 0
    tracker = timer.warm(lambda: (steps.step_start(), steps.step_end()))
    units["tracker"] = {
        "warm": net_of_snapshots(tracker, before),
        "context": timer.in_context(steps.step_start, steps.step_end),
    }
    model = _Model(_Scheduler(runner.model.scheduler.latents))
    lightx2v.hook_model(session, model)
    inputs = runner.inputs
    before = cache._steps if cache is not None else 0
    hook = paired(session, timer, lambda: model.infer(inputs))
    hook["warm"] = net_of_snapshots(hook["warm"], before)
    # In context the hook's step_start and step_end are apart (the step's work between them):
    # the tracker's pair in context plus the hook's own work (warm, it is a few attribute reads).
    hook["context"] = units["tracker"]["context"] + hook["warm"] - units["tracker"]["warm"]
    units["step"] = hook
    steps.request_end()

    # Request boundaries: the adapter's run_pipeline hook (request_start + request_end).
    stand_in = _Runner()
    lightx2v.hook_runner(session, stand_in, "diag.fixtures")
    probe = Request(PROBE_ID, runner.config.warmup_shapes[0], args.steps)
    units["request"] = paired(session, timer, lambda: stand_in.run_pipeline(probe))

    # The per-call wrappers, each made by the collector method that wrapped the blocks, around
    # a no-op, with a real block call's arguments; net of calling the no-op itself.
    function, call_args, call_kwargs = call.function, call.args, call.kwargs
    base = timer.both(lambda: noop(*call_args, **call_kwargs))
    base.update({f"{k}_paused": v for k, v in list(base.items())})

    def wrapper_unit(wrapped: Any) -> dict[str, float]:
        return minus(paired(session, timer, lambda: wrapped(*call_args, **call_kwargs)), base)

    fallback = compiled_calls._FALLBACK
    if fallback is not None:
        units["compiled_call"] = wrapper_unit(fallback.mark(function, noop))
    shapes = session.shapes
    if shapes is not None:
        sampled = shapes.watch(function, noop, {})
        shapes.calls.pop()  # the probe's call counts are no block's (the exit event)
        units["shapes"] = wrapper_unit(sampled)
    windows = session.profiler
    if windows is not None:
        region = windows.mark(function, noop)
        units["region"] = wrapper_unit(region)
        in_window = region_in_window(session, timer, region, call_args, call_kwargs, open_probe)
        units["region_window"] = {"warm": in_window - base["warm"]}

    # The CUDA event a compiled call that may end a step records (call_ended), in an open step:
    # what it adds to the call_ended(False) every outermost call makes (in the wrapper's row).
    open_probe()
    steps.step_start()
    lane = steps.lane()
    if lane.gpu_start is not None:
        units["call_event"] = minus(
            timer.both(lambda: steps.call_ended(True)), timer.both(lambda: steps.call_ended(False))
        )
        units["cuda_event"] = timer.both(steps._cuda_event)
        units["memory"] = timer.both(steps._memory)
    lane.call_event, lane.call_event_at = None, None
    steps.step_end()
    steps.request_end()

    # The gc.callbacks entry: one collection's start and stop (a young one, not written), and
    # a full one (its position kept for the event written at the next step end).
    pauses = session.gc_pauses
    if pauses is not None:
        young = {"generation": 0, "collected": 0, "uncollectable": 0}
        full = {"generation": 2, "collected": 0, "uncollectable": 0}

        def collection(info: dict[str, Any]) -> Callable[[], None]:
            def run() -> None:
                pauses.callback("start", info)
                pauses.callback("stop", info)

            return run

        units["gc"] = paired(session, timer, collection(young))
        # A kept pause waits for the next step end (MAX_PENDING at most, later ones dropped):
        # the measurement keeps fewer, then drops them unwritten.
        kept = Timer(3, 200, min(timer.samples, 200), timer.context)
        kept.empty_warm, kept.empty_context = timer.empty_warm, timer.empty_context
        units["gc_pause"] = {"warm": kept.warm(collection(full))}
        pauses.pending.clear()
        units["gc_pause"]["context"] = kept.in_context(collection(full))
        pauses.pending.clear()

    # Guard checks: one call checked against every entry of the block's code, as limit_calls
    # does after a recompile-limit hit; and check_verbose on the newest entry (magi's check).
    limit = shapes.limit_calls if shapes is not None else None
    code = function.__code__
    if limit is not None:
        units["limit_check"] = timer.both(
            lambda: limit._served_by(code, function, None, call_args, call_kwargs)
        )
        from diag.collectors.torch_api import cache_entries

        f_locals = limit._locals(function, None, call_args, call_kwargs)
        entries = cache_entries(code)
        if entries and f_locals is not None:
            manager = entries[0].guard_manager
            units["magi_check"] = timer.both(lambda: manager.check_verbose(f_locals))
        units["guard_entries"] = len(entries)

    # torch.cuda.empty_cache / gc.collect: diag's wrapper (hygiene.py) around a no-op.
    owner: Any = type("Owner", (), {"probe": staticmethod(noop)})
    hygiene._wrap(session, owner, "probe", "bench_probe")
    units["hygiene"] = minus(timer.both(owner.probe), timer.both(noop))

    # diag.api's step(): a program's own step markers (the fixture's adapter reports its steps,
    # so none ran): the context manager, its tracker look-up and the guarded step_start/end.
    import diag.api as api

    def api_step() -> None:
        with api.step():
            pass

    open_probe()
    before = cache._steps if cache is not None else 0
    marker = paired(session, timer, api_step)
    marker["warm"] = net_of_snapshots(marker["warm"], before)
    units["api_step"] = marker
    steps.request_end()

    units["window_opened"] = (
        session.profiler is not None and session.profiler.windows != windows_before
    )
    return units


def region_in_window(
    session: Any,
    timer: Timer,
    region: Any,
    call_args: tuple[Any, ...],
    kwargs: dict[str, Any],
    open_probe: Callable[[], None],
) -> float:
    """A region marker inside a profile window, warm: the wrapper with this thread owning a
    window and a profiler running (the bench's own, of the activities diag's window takes)."""
    torch = session.torch
    windows = session.profiler
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_initialized():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    steps = session.steps
    open_probe()
    steps.step_start()
    profiler = torch.profiler.profile(activities=activities)
    profiler.start()
    windows._owner = threading.get_ident()
    try:
        return timer.warm(lambda: region(*call_args, **kwargs), repeats=max(timer.repeats // 3, 3))
    finally:
        windows._owner = None
        profiler.stop()
        steps.step_end()
        steps.request_end()


def chain_in_place(
    session: Any, call: BlockCall, samples: int, rng: random.Random
) -> dict[str, float]:
    """The compiled-call hooks together, on the real block: the block called through diag's
    wrappers and bare, alternating in random order; the median of the paired differences
    (us), recorded and paused. A check on the per-call rows, which time each wrapper alone."""
    found: dict[str, float] = {}
    for state in ("", "_paused"):
        if state:
            session.pause()
        diffs = []
        clock = time.perf_counter_ns
        for _ in range(samples):
            took = {}
            for name in rng.sample(["wrapped", "bare"], 2):
                fn = call.wrapped if name == "wrapped" else call.bare
                start = clock()
                fn(*call.args, **call.kwargs)
                took[name] = clock() - start
            diffs.append(took["wrapped"] - took["bare"])
        if state:
            session.resume()
        found[f"context{state}"] = statistics.median(diffs) / 1e3
    return found


# -- the parent: the table -----------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    label: str
    count: float | None  # None: not recorded anywhere
    unit: dict[str, float] | None  # us: warm, context, warm_paused, context_paused
    bare_removes: bool = True  # bare (DiagLayers) takes it off the step path
    #: In a typical step's time (the measured totals are medians of steps): not between steps,
    #: nor a one-step spike.
    in_median: bool = True
    sub: bool = False  # a part of the row above: shown, not added
    note: str = ""

    def get(self, key: str) -> float | None:
        if self.unit is None:
            return None
        if key.endswith("_paused"):  # not run while paused: costs nothing then
            return self.unit.get(key, 0.0 if key.removesuffix("_paused") in self.unit else None)
        return self.unit.get(key)


def build_rows(counts: dict[str, Any], units: dict[str, Any]) -> list[Row]:
    calls = counts["compiled_calls"]
    step_ends = counts["step_end"]
    regions = counts["regions_installed"]
    per_step_calls = calls / step_ends if step_ends else 0.0
    cuda = "cuda_event" in units
    exports = [e for e in counts["window_export_s"] if e is not None]
    rows = [
        Row("step boundary: adapter's model.infer hook", step_ends, units["step"]),
        Row("  of which step_start + step_end", step_ends, units["tracker"], sub=True),
        Row("  of which events written (2 a step)", 2 * step_ends, units["event"], sub=True),
    ]
    if cuda:
        rows += [
            Row("  of which CUDA events (2 a step)", 2 * step_ends, units["cuda_event"], sub=True),
            Row("  of which allocator stats (1 a step)", step_ends, units["memory"], sub=True),
        ]
    rows.append(
        Row(
            "request boundary: run_pipeline hook",
            counts["request_start"],
            units["request"],
            in_median=False,
            note="before the first step, after the last",
        )
    )
    if cuda:
        rows.append(
            Row(
                "allocator stats at a request's step 0",
                counts["request_start"],
                units["memory"],
                note="in step_start",
            )
        )
    rows += [
        Row(
            "cache-entry snapshot at a step end",
            counts["cache_snapshots"],
            units.get("cache"),
            bare_removes=False,
            note="after a compile, or every 32nd step",
        ),
        Row("compiled-call wrapper (enter/leave)", calls, units.get("compiled_call")),
        Row("call-shape sampler + limit test", calls, units.get("shapes")),
        Row(
            "region marker, no window open",
            calls if regions else 0,
            units.get("region"),
            note="" if regions else "not installed (--profile none)",
        ),
        Row(
            "region marker inside a window",
            counts["steps_profiled"] * per_step_calls if regions else 0,
            units.get("region_window"),
            note="calls of profiled steps; warm only",
        ),
        Row(
            "CUDA event at a call that may end a step",
            0 if counts["fallback_silent"] else None,
            units.get("call_event"),
            note=("the adapter knows the steps" if counts["fallback_silent"] else "not recorded")
            + ("" if cuda else "; no CUDA here"),
        ),
        Row(
            "gc callback, one collection",
            counts["gc_collections"],
            units.get("gc"),
            bare_removes=False,
            note="a third of all states' collections",
        ),
        Row(
            "gc pause kept (full or long collection)",
            counts["gc_pause"],
            units.get("gc_pause"),
            bare_removes=False,
            note="+ one event at the next step end",
        ),
        Row(
            "guard check of a call (limit_calls)",
            counts["limit_checks"],
            units.get("limit_check"),
            note=f"{units.get('guard_entries', '?')} entries; after a recompile-limit hit",
        ),
        Row(
            "magi guard check (its check_verbose)",
            counts["magi_guard_check"],
            units.get("magi_check"),
            note="the rest of magi's sample not isolated",
        ),
        Row(
            "diag.api step() (a program's own markers)",
            0 if counts["adapter"] != "diag.api" else step_ends,
            units.get("api_step"),
            note="" if counts["adapter"] == "diag.api" else f"steps by {counts['adapter']}",
        ),
        Row(
            "empty_cache / gc.collect wrapper",
            counts["hygiene_calls"],
            units.get("hygiene"),
            note="per program call",
        ),
        Row(
            "profile window stop + JSON write",
            len(exports),
            {"warm": statistics.median(exports) * 1e6} if exports else None,
            bare_removes=False,
            in_median=False,
            note="a one-step spike; unit: profile_window_end.export_s",
        ),
    ]
    return rows


COLUMNS = ("warm", "context")


def table(data: dict[str, Any]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """The printed table and its sums per recorded step (us), warm and in context."""
    counts, units = data["counts"], data["units"]
    steps = counts["step_end"] or 1
    rows = build_rows(counts, units)
    lines = [
        f"{'':<42} {'':>7} {'':>5} {'unit us, recorded':>17} {'paused':>13} "
        f"{'n x unit ms':>15} {'us per step':>15}",
        f"{'mechanism':<42} {'count':>7} {'/step':>5} {'warm':>8} {'context':>8} "
        f"{'warm':>6} {'ctx':>6} {'warm':>7} {'ctx':>7} {'warm':>7} {'ctx':>7}  note",
    ]
    sums = {c: {"on": 0.0, "in_steps": 0.0, "paused": 0.0, "bare_removes": 0.0} for c in COLUMNS}
    for row in rows:
        n = row.count
        cells = [
            f"{row.label:<42} {_num(n, 0):>7} {_num(n / steps if n is not None else None, 2):>5}"
        ]
        cells.append(f"{_num(row.get('warm'), 2):>8} {_num(row.get('context'), 2):>8}")
        cells.append(
            f"{_num(row.get('warm_paused'), 2):>6} {_num(row.get('context_paused'), 2):>6}"
        )
        totals = [
            n * u if n is not None and (u := row.get(c)) is not None else None for c in COLUMNS
        ]
        cells.append(" ".join(f"{_num(t / 1e3 if t is not None else None, 2):>7}" for t in totals))
        cells.append(
            " ".join(f"{_num(t / steps if t is not None else None, 2):>7}" for t in totals)
        )
        lines.append(" ".join(cells) + f"  {row.note}")
        if row.sub or n is None:
            continue
        for c, total in zip(COLUMNS, totals, strict=True):
            if total is None:  # no in-context unit (a window's marker): the warm one stands in
                total = n * (row.get("warm") or 0.0)
            sums[c]["on"] += total / steps
            if not row.in_median:
                continue
            sums[c]["in_steps"] += total / steps
            paused = n * (row.get(f"{c}_paused") or row.get("warm_paused") or 0.0) / steps
            sums[c]["paused"] += paused
            if row.bare_removes:
                sums[c]["bare_removes"] += paused
    return lines, sums


def _num(value: float | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def group_differences(rows: list[dict[str, Any]], num: str, den: str) -> list[float]:
    """Per group: the `num` request's median step minus the `den` one's, in us."""
    by_group: dict[int, dict[str, float]] = {}
    for r in rows:
        by_group.setdefault(r["pair"], {})[r["state"]] = statistics.median(r["steps"])
    return [(g[num] - g[den]) * 1e6 for g in by_group.values() if num in g and den in g]


def report(data: dict[str, Any], args: argparse.Namespace, load: tuple[float, float]) -> None:
    counts, units = data["counts"], data["units"]
    rows = data["rows"]
    groups = len({r["pair"] for r in rows})
    print(
        f"record costs, itemised: {args.device}, {args.size}, {args.backend}, profile "
        f"{args.profile}, {data['threads']} torch thread(s), {args.steps} steps/request, shape "
        f"{data['shape']}; torch {data['torch']} (CUDA {data['cuda']}), Python {data['python']}"
    )
    print(f"  command: python bench/record_costs.py {' '.join(command_args(args))}")
    print(
        f"  the child ran under diag record --profile {args.profile} --max-size none; {groups} "
        f"groups (recorded, paused, bare) in {data['seconds']:.0f} s after {args.settle} "
        f"settling; load average {load[0]:.2f} at start, {load[1]:.2f} at end "
        f"({os.cpu_count()} CPUs)"
    )
    print(
        f"  counts: the {counts['request_start']} recorded requests of the measured groups, "
        f"{counts['step_end']} steps ({counts['step_start']} step_start + {counts['step_end']} "
        f"step_end events), {counts['compiled_calls']} compiled calls; gc collections "
        f"{counts['gc_collections_all_states']} in all states (by generation "
        f"{counts['gc_by_generation']}); compiles {counts['compiles']}; structured-trace "
        f"records {counts['structured_records']}; collector errors {counts['collector_errors']}; "
        f"trace/profile functions {', '.join(data['trace_functions'])}"
    )
    print(
        f"  unit, warm: median over {args.repeats} repeats of the mean of {args.number} calls in "
        f"a row; in context: median over {args.samples} calls, each timed right after a real "
        f"block call; perf_counter_ns, net of an empty call ({units['empty']['warm']:.3f} us "
        f"warm, {units['empty']['context']:.3f} us in context); paused: with the session paused"
    )
    if units.get("window_opened"):
        print("  WARNING: a profile window opened during the unit measurements")
    lines, sums = table(data)
    print()
    for line in lines:
        print("  " + line)
    print()
    for c in COLUMNS:
        print(
            f"  sum ({c}): {sums[c]['on']:.1f} us per recorded step, {sums[c]['in_steps']:.1f} "
            f"in a typical step; predicted recorded - paused "
            f"{sums[c]['in_steps'] - sums[c]['paused']:.1f}, paused - bare "
            f"{sums[c]['bare_removes']:.1f}"
        )
    rng = random.Random(args.seed)
    for label, num, den in (("recorded - paused", ON, OFF), ("paused - bare", OFF, BARE)):
        diffs = group_differences(rows, num, den)
        if len(diffs) < 2:
            continue
        lo, hi = bootstrap_median(diffs, rng)
        measured = statistics.median(diffs)
        key = "in_steps" if num == ON else "bare_removes"
        shares = ", ".join(
            f"{(sums[c][key] - (sums[c]['paused'] if num == ON else 0.0)) / measured:.0%} {c}"
            for c in COLUMNS
        )
        print(
            f"  measured {label} (median of per-group differences of median steps): "
            f"{measured:.1f} us/step (95% CI {lo:.1f} .. {hi:.1f}), {len(diffs)} groups; "
            f"accounted for: {shares}"
        )
    chain = units["chain"]
    itemised = {
        c: sum((units.get(k) or {}).get(c, 0.0) for k in ("compiled_call", "shapes"))
        + ((units.get("region") or {}).get(c, 0.0) if counts["regions_installed"] else 0.0)
        for c in ("warm", "context", "warm_paused", "context_paused")
    }
    print(
        f"  check, compiled-call hooks together on the real block (wrapped - bare, paired, "
        f"{args.samples} samples): {chain['context']:.2f} us recorded, "
        f"{chain['context_paused']:.2f} us paused; the rows above add up to "
        f"{itemised['warm']:.2f} warm / {itemised['context']:.2f} in context recorded, "
        f"{itemised['warm_paused']:.2f} / {itemised['context_paused']:.2f} paused"
    )
    medians = {
        state: statistics.median(statistics.median(r["steps"]) for r in rows if r["state"] == state)
        for state in (ON, OFF, BARE)
    }
    print(
        f"  median request step: recorded {medians[ON] * 1e3:.3f} ms, paused "
        f"{medians[OFF] * 1e3:.3f} ms, bare {medians[BARE] * 1e3:.3f} ms"
    )


def command_args(args: argparse.Namespace) -> list[str]:
    """The options the child is run with (and the printed command line)."""
    return [
        "--device", args.device, "--size", args.size, "--backend", args.backend,
        "--profile", args.profile, "--steps", str(args.steps), "--pairs", str(args.pairs),
        "--settle", str(args.settle), "--budget-s", f"{args.budget_s:g}",
        "--repeats", str(args.repeats), "--number", str(args.number),
        "--samples", str(args.samples), "--seed", str(args.seed),
        *(["--threads", str(args.threads)] if args.threads else []),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--profile", default="none", help="diag record --profile (default none)")
    parser.add_argument("--steps", type=int, default=10, help="steps per request (default 10)")
    parser.add_argument("--pairs", type=int, default=200, help="measured groups at most")
    parser.add_argument("--settle", type=int, default=3, help="groups served first, not counted")
    parser.add_argument(
        "--budget-s", type=float, default=90.0, help="seconds of measured groups at most"
    )
    parser.add_argument("--repeats", type=int, default=30, help="unit timings: repeats")
    parser.add_argument("--number", type=int, default=300, help="unit timings: calls a repeat")
    parser.add_argument(
        "--samples",
        type=int,
        default=300,
        help="in-context unit timings: calls, each after a real block call (default 300)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: 1 on CPU, as the interleaved bench)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", help="also write the child's figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.threads is None and args.device == "cpu":
        args.threads = 1
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="diag-costs-") as tmp:
        out = Path(tmp) / "costs.json"
        command = [
            sys.executable, "-m", "diag", "record", "--profile", args.profile,
            "--max-size", "none", "-o", str(Path(tmp) / "trace"), "--",
            sys.executable, os.path.abspath(__file__), "--child", "--out", str(out),
            *command_args(args),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            print("the recorded child failed", file=sys.stderr)
            return 1
        data = json.loads(out.read_text())
    if args.json:
        Path(args.json).write_text(json.dumps(data))
    report(data, args, (load_before, os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
