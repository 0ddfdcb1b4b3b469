"""The warmup that would have kept every live compile of some recordings out of traffic.

A pure function of the loaded traces (`plan_warmup`), read through what diag already decides:
which compiles were live and what they cost (the Run model), why each recompiled
(`diag.evidence.causes.recompile_cause`, so the plan reads better as causes do), which request-shape
dimension warmup never served (analyzers/live_compiles.py's coverage), and which finding explains
a compile no warmup can prevent. The rules follow Dynamo under `dynamic=None` (docs/WARMUP.md):

- a request-shape dimension that takes several values live needs two warmup values: the first
  compile specialises every size, the second (a recompile) makes the sizes that changed dynamic
  (automatic dynamic). One pair of requests generalises every such dimension at once, when the
  second request changes them all, to values that differ from each other (duck sizing would give
  equal sizes one symbol);
- Dynamo specialises sizes 0 and 1: a dimension that is 0 or 1 live needs a request of its own;
- what no size covers (another dtype, dispatch keys, grad mode, CFG's batch going 2 -> 1, a
  module or branch warmup never reached) needs a request like the live one that brought it;
- a Python value that changes per step or per request, an undecided cause and a recompile-limit
  hit are not warmup's to fix: they are listed with the finding that explains them;
- a MagiCompiler target compiles once with its declared dims dynamic (diag/warmup/magi.py): it
  needs the first request only, and a `compile_sizes` entry magi compiled live needs a request
  of that live shape.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from diag.evidence.causes import RecompileCause, cause_short, recompile_cause
from diag.evidence.frames import label as frame_label
from diag.evidence.settings import Setting, limit_while, settings_at
from diag.trace.run import Compile, Event, Request, RunData, Trace
from diag.warmup.magi import (
    MagiTarget,
    bypass_notes,
    magi_targets,
    runtime_compiles,
    target_of,
)

Shape = tuple[int, ...]

# The coverage rule and the request-shape readings are live-compile's: one place decides them
# (analyzers/ is installed as diag.analyzers through package-dir, hence importlib).
_live = importlib.import_module("diag.analyzers.live_compiles")


def _request_shape(request: Request) -> Shape | None:
    shape: Shape | None = _live._request_shape(request)
    return shape


def _warm_shapes(run: RunData, pid: int) -> list[Shape]:
    shapes: list[Shape] = _live._warm_shapes(run, pid)
    return shapes


def _names(run: RunData, pid: int, shape: Shape) -> tuple[str, ...] | None:
    names: tuple[str, ...] | None = _live._names(run, pid, shape)
    return names


def _warmup_known(run: RunData, pid: int) -> bool:
    known: bool = importlib.import_module("diag.analyzers.recompiles").warmup_known(run, pid)
    return known


def _uncovered(shape: Shape, warm: list[Shape]) -> list[int]:
    """The dims of `shape` whose value warmup never served (live-compile's coverage)."""
    cov = _live._coverage(shape, warm)
    return [*cov.static_gaps, *cov.varied_gaps]


SPECIALISE = "specialise"
GENERALISE = "generalise"
VARIANT = "variant"

_SIZE_KINDS = ("tensor-size", "tensor-stride")
#: Python values the frame guards on: live traffic changes them, warmup shapes cannot.
_VALUE_KINDS = ("python-value", "container-length", "container-keys", "object-identity", "type")
_NOT_COMPILED = ("recompile_limit", "failed")
#: Findings that explain a compile no warmup can prevent, in the order they are preferred.
EXPLAINERS = ("guard-churn", "recompile-limit", "recompiles", "live-compile")


@dataclass
class PlannedRequest:
    """One warmup request of the plan, in the recorded request shape's terms."""

    shape: list[int]
    role: str  # specialise, generalise, variant
    why: str
    like: str | None = None  # the live request it repeats (variants), `r3 in TRACE`
    cost_s: float | None = None
    cost_from: str = "not measured"
    covers: list[str] = field(default_factory=list)  # live compiles it moves into warmup
    #: What a variant stands for (`01:timestep:2:1`): live compiles that need it join it.
    variant_key: str | None = None
    #: The scalar call arguments to send with it (a diffusers call's `guidance_scale`): the
    #: usual live request's for the dimension requests, the live request's it repeats for a
    #: variant. None when the recordings hold none.
    params: dict[str, Any] | None = None


@dataclass
class LiveCompile:
    """One compile a live request paid, and what the plan does about it."""

    trace: str
    compile_id: str
    frame: str
    request: str
    step: int | None
    shape: list[int] | None
    duration_s: float | None
    cause: str
    covered_by: int | None = None  # index into the plan's requests
    cannot: str | None = None  # why no warmup can prevent it
    finding: str | None = None  # the finding that explains it
    #: The scalar call arguments of the live request that paid it (Request.params).
    params: dict[str, Any] | None = None


@dataclass
class FramePlan:
    frame: str
    live: list[LiveCompile]
    requests: list[int]  # plan indices this frame needs
    warmup_compile_s: float
    #: A MagiCompiler target: what it declares and why it needs no second size.
    magi: str | None = None


@dataclass
class WarmupPlan:
    dims: list[str]
    varied: list[str]  # dimensions that varied live: two warmup values each
    requests: list[PlannedRequest]
    frames: list[FramePlan]
    live_shapes: list[list[int]]
    recorded_warmup: list[list[int]]
    #: The live requests of the first recording in order, `{"shape": [...], "steps": N}`: what
    #: `--verify` serves again.
    served: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The LightX2V runner recorded (its `lightx2v_runner` event): which warmup entry it reads,
    #: its resolutions and the VAE's stride, so that `--as lightx2v` and `--verify` use its own.
    runner: dict[str, Any] | None = None

    @property
    def live_compiles(self) -> list[LiveCompile]:
        return [item for frame in self.frames for item in frame.live]

    @property
    def unpreventable(self) -> list[LiveCompile]:
        return [item for item in self.live_compiles if item.cannot is not None]

    def as_dict(self) -> dict[str, Any]:
        return {
            "dims": self.dims,
            "varied": self.varied,
            "requests": [asdict(r) for r in self.requests],
            "frames": [asdict(f) for f in self.frames],
            "live_shapes": self.live_shapes,
            "recorded_warmup": self.recorded_warmup,
            "served": self.served,
            "runner": self.runner,
            "cost_s": round(sum(r.cost_s or 0.0 for r in self.requests), 6),
            "unpreventable": [asdict(c) for c in self.unpreventable],
            "notes": self.notes,
        }


@dataclass
class _Seen:
    """One run's live compile with what the plan needs of it."""

    run: RunData
    trace: str
    item: Compile
    shape: Shape | None
    record: LiveCompile
    key: str = ""  # the variant it needs, or "dims"
    #: Whether the process had a warmup: without one every first compile and every size
    #: recompile is what the dimension requests move out of traffic.
    warmed: bool = True
    #: The recompile limit the program lowered, when it refused this compile.
    limit: Setting | None = None


def plan_warmup(
    traces: list[Trace], explain: dict[str, dict[str, str]] | None = None
) -> WarmupPlan:
    """The smallest ordered warmup covering every live compile of `traces`.

    `explain`: trace path -> compile id -> the id of the finding that explains it (the CLI
    builds it from the analyzers; None leaves `finding` empty)."""
    explain = explain or {}
    live_shapes: list[Shape] = []
    warm_shapes: list[Shape] = []
    names: tuple[str, ...] | None = None
    seen: list[_Seen] = []
    warm_compiles: list[tuple[RunData, Compile]] = []
    notes: list[str] = []
    served: list[dict[str, Any]] = []
    namings: set[tuple[str, ...] | None] = set()
    first_pid: int | None = None
    magi: dict[str, MagiTarget] = {}  # frame label -> the magi target it is
    runner: dict[str, Any] | None = None
    runtime: list[tuple[RunData, str, Event]] = []
    for trace in traces:
        where = str(trace.path)
        for run in trace.subject_runs:
            targets = magi_targets(run)
            runtime += [(run, where, e) for e in runtime_compiles(run)]
            notes += [n for n in bypass_notes(run) if n not in notes]
            if runner is None:
                runner = next((dict(e.data) for e in run.of("lightx2v_runner")), None)
            for request in run.requests:
                shape = _request_shape(request)
                if shape is None:
                    continue
                if request.phase == "live":
                    namings.add(_names(run, request.pid, shape))
                    live_shapes.append(shape)
                    # One process's requests: ranks serve the same ones.
                    first_pid = first_pid if first_pid is not None else request.pid
                    if trace is traces[0] and request.pid == first_pid:
                        served.append(
                            {
                                "shape": list(shape),
                                "steps": request.step_count,
                                **({"params": request.params} if request.params else {}),
                            }
                        )
                    names = names or _names(run, request.pid, shape)
            for pid in {p.pid for p in run.processes}:
                for warm in _warm_shapes(run, pid):
                    if warm not in warm_shapes:
                        warm_shapes.append(warm)
            by_id = {(r.pid, r.request_id): r for r in run.requests}
            for item in run.compiles:
                target = target_of(targets, item.frame)
                if target is not None:
                    magi.setdefault(frame_label(run, item.frame), target)
                if item.phase == "warmup" and item.result not in _NOT_COMPILED:
                    warm_compiles.append((run, item))
                if not (item.live and item.request_id is not None):
                    continue
                owner = by_id.get((item.pid, item.request_id))
                shape = _request_shape(owner) if owner is not None else None
                entry = _classify(run, where, item, shape, explain.get(where, {}))
                entry.record.params = owner.params if owner is not None else None
                seen.append(entry)
    programs = {_program(trace) for trace in traces}
    if len(namings) > 1 or len(programs) > 1:
        notes.append(
            "the recordings look like different programs ("
            + "; ".join(sorted(p or "?" for p in programs))
            + "): a warmup plan is one program's, plan each apart"
        )
    ranks = Counter(len(s) for s in live_shapes)
    rank = ranks.most_common(1)[0][0] if ranks else 0
    if len(ranks) > 1:
        notes.append(
            f"live request shapes had {len(ranks)} different numbers of dimensions; the plan "
            f"covers the {rank}-dimensional ones (the others are listed as variants)"
        )
    shapes = [s for s in live_shapes if len(s) == rank]
    dims = list(names) if names and len(names) == rank else [f"dim {i}" for i in range(rank)]
    requests, varied = _dimension_requests(shapes, rank, dims, notes)
    _cost_dimension_requests(requests, warm_compiles, seen)
    if _magi_only(seen, warm_compiles, magi) and requests:
        requests[0].why = (
            "its first call compiles each MagiCompiler target once, with the declared dims "
            "dynamic"
            + (" (the shape live traffic sent most)" if "sent most" in requests[0].why else "")
        )
        if len(requests) > 1 and requests[1].role == GENERALISE:
            del requests[1]
        notes.append(
            "every compiled frame is a MagiCompiler target: its declared dims are dynamic from "
            "its one compile, so no request is needed to generalise a size"
        )
    _static_sizes_apart(seen, requests, notes)
    for entry in seen:
        _place(entry, requests, warm_shapes, varied)
    fast_path = [
        _place_runtime(run, where, event, n, requests, magi)
        for n, (run, where, event) in enumerate(runtime)
    ]
    _params(requests, served, seen)
    dimensional = [i for i, r in enumerate(requests) if r.role in (SPECIALISE, GENERALISE)]
    frames = _frames([s.record for s in seen] + fast_path, warm_compiles, dimensional, magi)
    notes.extend(_limit_notes(frames, seen, warm_compiles))
    return WarmupPlan(
        dims=dims,
        varied=[dims[i] for i in varied],
        requests=requests,
        frames=frames,
        live_shapes=[list(s) for s in dict.fromkeys(live_shapes)],
        recorded_warmup=[list(s) for s in warm_shapes],
        served=served,
        notes=notes,
        runner=runner,
    )


def explanations(findings: list[Any]) -> dict[str, str]:
    """compile id -> the id of the finding that explains it (the analyzers' own words), from
    findings already computed (diag.findings.model.Finding, with `data["compile_ids"]`)."""
    ids: dict[str, str] = {}
    for name in EXPLAINERS:
        for finding in findings:
            compile_ids = finding.data.get("compile_ids") if finding.data else None
            if finding.analyzer == name and isinstance(compile_ids, list):
                for compile_id in compile_ids:
                    ids.setdefault(str(compile_id), finding.id)
    return ids


def _program(trace: Trace) -> str | None:
    """What ran, without its arguments' values: `python -m diag.fixtures`, `python loop.py`."""
    command = trace.manifest.get("command")
    if not isinstance(command, list) or not command:
        return None
    words = [str(w) for w in command]
    name = words[0].rsplit("/", 1)[-1]
    if len(words) > 2 and words[1] == "-m":
        return f"{name} -m {words[2]}"
    return f"{name} {words[1].rsplit('/', 1)[-1]}" if len(words) > 1 else name


# --- which compile needs what -------------------------------------------------------------------


def _classify(
    run: RunData, where: str, item: Compile, shape: Shape | None, explain: dict[str, str]
) -> _Seen:
    frame = frame_label(run, item.frame)
    cause = recompile_cause(run, item)
    record = LiveCompile(
        trace=where,
        compile_id=item.compile_id,
        frame=frame,
        request=item.request_id or "?",
        step=item.step,
        shape=list(shape) if shape else None,
        duration_s=item.duration_s,
        cause=cause_short(cause) if cause is not None else "first compile of the frame",
        finding=explain.get(item.compile_id),
    )
    entry = _Seen(run, where, item, shape, record, warmed=_warmup_known(run, item.pid))
    if item.result == "recompile_limit":
        return _limit_hit(entry, cause, frame)
    if item.result == "failed":
        record.cannot = "the compile failed: see compile-failure"
        return entry
    entry.key, record.cannot = _need(run, item, cause, frame)
    return entry


def _limit_hit(entry: _Seen, cause: RecompileCause | None, frame: str) -> _Seen:
    """A call the recompile limit refused. Under a limit the program lowered, the entry it
    needed still gets its plan request (`key`), for once the limit allows it; warmup alone
    cannot prevent it, since warmup's compiles count against the same limit."""
    record, item = entry.record, entry.item
    needed = cause_short(cause) if cause is not None else ""
    record.cause = "hit the recompile limit: calls that match none of its entries run eagerly" + (
        f" (this one needed an entry: {needed})" if needed else ""
    )
    limit = settings_at(entry.run, item.pid, item.t).get("recompile_limit")
    if limit is None or not _lowered(limit):
        record.cannot = (
            "the frame reached its recompile limit ("
            + (limit.phrase() if limit is not None else "the program's setting, 8 unless changed")
            + "): warmup adds entries, it cannot remove the recompiles that fill the cache"
        )
        return entry
    key, per_value = _need(entry.run, item, cause, frame)
    if key == "dims" and _static_sizes(entry.run, item):
        per_value = (
            "the frame keeps sizes static (torch.compile(dynamic=False) or automatic dynamic "
            "off): each new size compiles again whatever warmup served"
        )
    if per_value is not None:
        record.cannot = f"{per_value} ({limit.phrase()}: a higher limit only postpones the hit)"
        return entry
    # Lowered only around serving (`config.patch`): warmup compiled under a higher limit, so an
    # entry warmup compiles then serves the call later without a compile (as recompile-limit's
    # fix says: warm it up before the limit is lowered).
    warm_limit = limit_while(
        entry.run,
        [
            c
            for c in entry.run.compiles
            if c.pid == item.pid and c.frame == item.frame and c.phase == "warmup" and c.t < item.t
        ],
    )
    if warm_limit is not None and int(warm_limit.value) > int(limit.value):
        entry.key = key
        record.cause += (
            f"; warmup compiled under a limit of {warm_limit.value}, serving under "
            f"{limit.value}: warm this call up before the limit is lowered"
        )
        return entry
    entry.key, entry.limit = key, limit
    record.cannot = (
        f"{limit.phrase()}: {frame} held {limit.value} entries and this call needed one more; "
        "warmup's compiles count against the same limit, so no warmup keeps it compiled. "
        f"Raise the limit to at least {limit.value + 1} (or drop the setting)"
    )
    return entry


def _static_sizes_apart(
    seen: list[_Seen], requests: list[PlannedRequest], notes: list[str]
) -> None:
    """Under torch.compile(dynamic=False) or automatic dynamic off a second size makes nothing
    dynamic: each live size a frame recompiled for is a request of its own (a variant of that
    shape), and the generalising request goes when no other frame needs it."""
    static = [e for e in seen if e.key == "dims" and _static_sizes(e.run, e.item)]
    if not static:
        return
    for entry in static:
        if entry.shape is None:
            entry.key = ""
            entry.record.cannot = (
                "the live request's shape was not recorded: no request can be planned"
            )
        else:
            entry.key = "static:" + "x".join(str(v) for v in entry.shape)
    if any(e.key == "dims" for e in seen):
        return
    if len(requests) > 1 and requests[1].role == GENERALISE:
        del requests[1]
    notes.append(
        "the frames that recompiled for a size keep sizes static (torch.compile(dynamic=False) "
        "or torch._dynamo.config.automatic_dynamic_shapes = False): a second size makes nothing "
        "dynamic, so no request generalises one; each live size is a request of its own, and "
        "the recompile limit must hold that many entries"
    )


def _static_sizes(run: RunData, item: Compile) -> bool:
    """Whether the program keeps this frame's sizes static: every new size is a new entry."""
    options = importlib.import_module("diag.analyzers.recompiles").compile_options
    automatic = settings_at(run, item.pid, item.t).get("automatic_dynamic_shapes")
    return options(run, item.pid, item.frame).get("dynamic") is False or (
        automatic is not None and automatic.value is False
    )


def _lowered(limit: Setting) -> bool:
    value, default = limit.value, limit.default
    return isinstance(value, int) and isinstance(default, int) and value < default


def _need(
    run: RunData, item: Compile, cause: RecompileCause | None, frame: str
) -> tuple[str, str | None]:
    """What a recompile needs of the plan: the variant key it joins (`dims`, `01:...`,
    `first:...`), or why no warmup can prevent it."""
    if cause is None:
        return f"first:{frame}", None
    guard = cause.guard
    if guard is None:
        return "", (
            "the evidence does not decide which guard failed, so no warmup can be planned for "
            "it (see the finding's evidence for each entry's failure)"
        )
    if cause.new_module:
        return f"module:{frame}:{guard.source}", None
    if guard.kind in _SIZE_KINDS:
        if {guard.expected, guard.actual} & {"0", "1"}:
            return f"01:{guard.source}:{guard.expected}:{guard.actual}", None
        return "dims", None
    if guard.kind in _VALUE_KINDS:
        same_request = [
            c
            for c in run.compiles
            if c.pid == item.pid
            and c.frame == item.frame
            and c.request_id == item.request_id
            and c.live
            and (other := recompile_cause(run, c)) is not None
            and other.guard is not None
            and other.guard.source == guard.source
        ]
        steps = {c.step for c in same_request}
        return "", (
            f"the frame guards on a Python value ({guard.source or guard.kind}) that changes "
            + ("every step" if len(steps) > 1 else "from request to request")
            + ": each new value compiles again whatever warmup served; the fix is in the "
            "program (resolve the value outside the compiled frame or pass it as a tensor)"
        )
    # dtype, device, requires_grad, dispatch keys, grad mode, unknown: a variant of its own.
    return f"variant:{guard.kind}:{guard.source}:{guard.expected}:{guard.actual}", None


def _same_but(planned: list[int], shape: Shape, varied: list[int]) -> bool:
    """`planned` and `shape` differ only in dims the plan makes dynamic: one entry serves both
    (the dimension requests run first, so the variant compiles with those dims dynamic)."""
    return len(planned) == len(shape) and all(
        a == b or i in varied for i, (a, b) in enumerate(zip(planned, shape, strict=True))
    )


def _place(
    entry: _Seen, requests: list[PlannedRequest], warm: list[Shape], varied: list[int]
) -> None:
    """Point a live compile at the plan request that covers it, adding a variant if needed."""
    record = entry.record
    if not entry.key:  # no warmup request can cover it
        return
    # A refused compile cost nothing to speak of: its request's cost is not measured here.
    measured = entry.limit is None
    ref = f"{record.compile_id} ({record.frame}, {record.request} in {record.trace})"
    shape = entry.shape
    if not entry.warmed and requests and entry.key.startswith("first:"):
        # No warmup at all: the first request of the plan is what compiles every frame first.
        _cover(requests[0], record, ref, 0, add_cost=False)
        return
    if not entry.warmed and entry.key == "dims" and shape is not None:
        # No warmup: the frame's first compile moves to request 1 and its size recompile to
        # the request that changes the size, the generalising one.
        index = 1 if len(requests) > 1 and requests[1].role == GENERALISE else 0
        _cover(requests[index], record, ref, index, add_cost=False)
        return
    if entry.key == "dims":
        same_rank = shape is not None and bool(requests) and len(shape) == len(requests[0].shape)
        gaps = _uncovered(shape, warm) if shape is not None and same_rank else []
        if shape is not None and gaps:
            # A request-shape dimension warmup never served: the dimension requests cover it.
            index = next(
                (i for i, r in enumerate(requests) if r.shape == list(shape)),
                1 if len(requests) > 1 and requests[1].role == GENERALISE else 0,
            )
            _cover(requests[index], record, ref, index, add_cost=False)
            return
        # Warmup served this request shape and still a size guard failed: the tensor's size
        # does not follow the request shape (a batch, a pass). Repeat the request itself.
        entry.key = f"shape:{record.cause}"
    if entry.key.startswith("static:") and shape is not None:
        # Sizes static: a request of this very shape covers it, whatever its role.
        same = [i for i, r in enumerate(requests) if r.shape == list(shape)]
        if same:
            _cover(requests[same[0]], record, ref, same[0], add_cost=measured)
            return
    for index, planned in enumerate(requests):
        joins = planned.variant_key == entry.key or (
            entry.key.startswith(("01:", "shape:"))
            and planned.role == VARIANT
            and planned.variant_key is not None
            and planned.variant_key.startswith("dim01:")
            and shape is not None
            and _same_but(planned.shape, shape, varied)
        )
        if planned.role == VARIANT and joins:
            _cover(planned, record, ref, index, add_cost=measured)
            return
    why = {
        "first": f"{record.frame} first compiled live: no warmup request reached it",
        "module": f"{record.frame} met a module or branch warmup never ran: {record.cause}",
        "01": "a size of 0 or 1 (Dynamo specialises them, no dynamic dimension covers it): "
        + record.cause,
        "shape": f"a size no request-shape dimension explains: {record.cause}",
        "variant": f"a variant no dynamic dimension covers: {record.cause}",
        "static": f"{record.frame} keeps sizes static: this size is an entry of its own "
        f"({record.cause})",
    }[entry.key.split(":", 1)[0]]
    planned = PlannedRequest(
        shape=list(shape) if shape else (list(requests[0].shape) if requests else []),
        role=VARIANT,
        why=why,
        like=f"{record.request} in {record.trace}",
        cost_from="the live compile(s) it moves into warmup",
        variant_key=entry.key,
    )
    requests.append(planned)
    _cover(planned, record, ref, len(requests) - 1, add_cost=measured)


def _params(
    requests: list[PlannedRequest], served: list[dict[str, Any]], seen: list[_Seen]
) -> None:
    """The call arguments each request is sent with, where the recordings hold them: the usual
    live request's (the most sent) for the dimension requests and the 0/1 ones, the live
    request's a variant repeats for a variant (CFG off: `guidance_scale=1.0`)."""
    sent = [item["params"] for item in served if item.get("params")]
    if not sent and not any(entry.record.params for entry in seen):
        return
    counts = Counter(tuple(sorted(p.items())) for p in sent)
    usual = dict(counts.most_common(1)[0][0]) if counts else {}
    for planned in requests:
        liked = next(
            (
                entry.record.params
                for entry in seen
                if entry.record.covered_by is not None
                and requests[entry.record.covered_by] is planned
                and planned.role == VARIANT
                and planned.variant_key is not None
                and not planned.variant_key.startswith("dim01:")
            ),
            None,
        )
        planned.params = dict(liked) if liked is not None else dict(usual)
        if liked is not None and liked != usual:
            changed = ", ".join(f"{k}={v!r}" for k, v in liked.items() if usual.get(k) != v)
            dropped = ", ".join(f"{k} unset" for k in usual if k not in liked)
            said = "; ".join(x for x in (changed, dropped) if x)
            if said and planned.like:
                planned.like += f" ({said})"


def _cover(
    planned: PlannedRequest, record: LiveCompile, ref: str, index: int, add_cost: bool
) -> None:
    record.covered_by = index
    planned.covers.append(ref)
    if add_cost and record.duration_s is not None:
        planned.cost_s = round((planned.cost_s or 0.0) + record.duration_s, 6)
        planned.cost_from = "the live compile(s) it moves into warmup"


# --- the two requests every varying dimension needs ---------------------------------------------


def _dimension_requests(
    shapes: list[Shape], rank: int, dims: list[str], notes: list[str]
) -> tuple[list[PlannedRequest], list[int]]:
    if not shapes:
        notes.append("no live request with a shape was recorded: nothing to plan by shape")
        return [], []
    counts = Counter(shapes)
    values = [Counter(s[i] for s in shapes) for i in range(rank)]
    big = [s for s in counts if all(v > 1 or len(values[i]) == 1 for i, v in enumerate(s))]
    first = max(big or list(counts), key=lambda s: counts[s])
    varied = [i for i in range(rank) if len([v for v in values[i] if v > 1]) > 1]
    requests = [
        PlannedRequest(
            shape=list(first),
            role=SPECIALISE,
            why="the first compile of every frame: sizes are static (specialised) in it"
            + (
                " (the shape live traffic sent most)"
                if len(counts) > 1 and counts[first] > min(counts.values())
                else ""
            ),
        )
    ]
    if varied:
        second = _second(first, counts, values, varied)
        names = ", ".join(dims[i] for i in varied)
        requests.append(
            PlannedRequest(
                shape=list(second),
                role=GENERALISE,
                why=f"changes {names} from the first request: the recompile makes "
                f"{'it' if len(varied) == 1 else 'them'} dynamic (automatic dynamic), so every "
                "later value >= 2 runs without a compile"
                + (
                    ""
                    if second in counts
                    else " (each value was sent live; this combination not)"
                    if all(second[i] in values[i] for i in varied)
                    else " (not sent live: no live shape changes every varied dim and the "
                    "token count, which a block sees as frames x height x width, at once)"
                ),
            )
        )
    for i in range(rank):
        for small in sorted(v for v in values[i] if v in (0, 1) and len(values[i]) > 1):
            shape = list(first)
            shape[i] = small
            requests.append(
                PlannedRequest(
                    shape=shape,
                    role=VARIANT,
                    why=f"{dims[i]} {small} was sent live: Dynamo specialises sizes 0 and 1, so "
                    "no dynamic dimension covers it",
                    variant_key=f"dim01:{i}:{small}",
                )
            )
    return requests, varied


def _second(
    first: Shape, counts: Counter[Shape], values: list[Counter[int]], varied: list[int]
) -> Shape:
    """The generalising request: it changes every varied dim from `first`, to values >= 2 that
    differ from each other, and changes the product of the dims too. A block of a DiT sees the
    flattened sequence (frames x height x width / patch): LightX2V's Wan block warmed at 8x12
    and then 12x8 latents saw 48 tokens twice, compiled once, and recompiled live for 8x8
    (torch's record in tests/data/lightx2v/served.tar.gz). The most sent live shape that fits;
    else one of values traffic sent; else, for the fewest dims, twice the first request's value
    (a multiple keeps the sizes the model needs: patches, VAE strides)."""

    def fits(shape: Shape) -> bool:
        picked = [shape[i] for i in varied]
        return (
            all(shape[i] != first[i] and shape[i] > 1 for i in varied)
            and len(set(picked)) == len(picked)
            and all(shape[i] == first[i] for i in range(len(first)) if i not in varied)
            and math.prod(shape) != math.prod(first)
        )

    found = [s for s in counts if fits(s)]
    if found:
        return max(found, key=lambda s: counts[s])
    options = {
        i: [v for v, _ in values[i].most_common() if v != first[i] and v > 1] for i in varied
    }
    made: list[tuple[int, int, Shape]] = []  # (values not sent, product, shape)
    for picks in itertools.product(*(options[i] + [2 * first[i]] for i in varied)):
        shape = list(first)
        for i, value in zip(varied, picks, strict=True):
            shape[i] = value
        if fits(tuple(shape)):
            unsent = sum(value not in values[i] for i, value in zip(varied, picks, strict=True))
            made.append((unsent, math.prod(shape), tuple(shape)))
    if made:
        return min(made)[2]
    shape = list(first)
    for i in varied:
        shape[i] = options[i][0] if options[i] else 2 * first[i]
    return tuple(shape)


def _cost_dimension_requests(
    requests: list[PlannedRequest], warm: list[tuple[RunData, Compile]], seen: list[_Seen]
) -> None:
    """Each dimension request's cost: the compiles of its kind measured in the recordings (a
    frame's first compiles, one process's: a frame compiled per module instance, as magi's
    targets, compiles first once per instance; a recompile on a size guard, one per frame)."""
    firsts: dict[str, float] = {}
    first_in: dict[str, tuple[int, int]] = {}  # frame -> the process its first compiles are of
    count = 0
    resized: dict[str, float] = {}
    every = [*warm, *((s.run, s.item) for s in seen if s.item.result not in _NOT_COMPILED)]
    for run, item in every:
        frame = frame_label(run, item.frame)
        if item.duration_s is None:
            continue
        cause = recompile_cause(run, item)
        if cause is None:
            process = first_in.setdefault(frame, (id(run), item.pid))
            if process == (id(run), item.pid):
                firsts[frame] = firsts.get(frame, 0.0) + item.duration_s
                count += 1
        elif cause.guard is not None and cause.guard.kind in _SIZE_KINDS:
            resized.setdefault(frame, item.duration_s)
    for planned in requests:
        if planned.role == SPECIALISE and firsts:
            planned.cost_s = round(sum(firsts.values()), 6)
            planned.cost_from = (
                f"the first compile of {len(firsts)} frame(s) as recorded"
                if count == len(firsts)
                else f"{count} first compiles of {len(firsts)} frame(s) as recorded"
            )
        elif planned.role == GENERALISE and resized:
            planned.cost_s = sum(resized.values())
            planned.cost_from = (
                f"a recompile on a size guard of {len(resized)} frame(s) as recorded"
            )


def _limit_notes(
    frames: list[FramePlan], seen: list[_Seen], warm: list[tuple[RunData, Compile]]
) -> list[str]:
    """Frames whose plan compiles more entries than the recompile limit the program lowered:
    the requests past the limit would run eagerly in warmup and again live."""
    limits: dict[str, Setting] = {}
    for run, item in [*warm, *((s.run, s.item) for s in seen)]:
        limit = settings_at(run, item.pid, item.t).get("recompile_limit")
        if limit is not None and _lowered(limit):
            limits[frame_label(run, item.frame)] = limit
    notes = []
    for frame in frames:
        limit = limits.get(frame.frame)
        if limit is None or len(frame.requests) <= limit.value:
            continue
        needs = ", ".join(str(i + 1) for i in frame.requests)
        notes.append(
            f"{frame.frame}: this plan compiles it about {len(frame.requests)} times (requests "
            f"{needs}), but {limit.phrase()}: past {limit.value} entries the frame stops "
            "compiling, in warmup as live. Raise the limit to at least "
            f"{len(frame.requests)} for this plan to hold"
        )
    return notes


def _frames(
    live: list[LiveCompile],
    warm: list[tuple[RunData, Compile]],
    dimensional: list[int],
    magi: dict[str, MagiTarget],
) -> list[FramePlan]:
    """Every compiled frame: its live compiles, the requests it needs (the dimension requests,
    which every frame that runs per request needs, and the variants its live compiles need; a
    magi target, the first request only)."""
    by_frame: dict[str, list[LiveCompile]] = {}
    warm_s: dict[str, float] = {}
    for run, item in warm:
        frame = frame_label(run, item.frame)
        warm_s[frame] = warm_s.get(frame, 0.0) + (item.duration_s or 0.0)
        by_frame.setdefault(frame, [])
    for record in live:
        by_frame.setdefault(record.frame, []).append(record)
    return [
        FramePlan(
            frame=frame,
            live=items,
            requests=sorted(
                {i.covered_by for i in items if i.covered_by is not None}
                | set(dimensional[:1] if frame in magi else dimensional)
            ),
            warmup_compile_s=round(warm_s.get(frame, 0.0), 6),
            magi=magi[frame].phrase() if frame in magi else None,
        )
        for frame, items in by_frame.items()
    ]


# --- MagiCompiler targets (diag/warmup/magi.py) -------------------------------------------------


def _magi_only(
    seen: list[_Seen], warm: list[tuple[RunData, Compile]], magi: dict[str, MagiTarget]
) -> bool:
    """Every compiled frame is a magi target and no live compile needs a size generalised (an
    undeclared dim recompiling under magi's TORCH_COMPILE mode would)."""
    frames = {frame_label(run, item.frame) for run, item in warm}
    frames |= {entry.record.frame for entry in seen}
    return (
        bool(frames)
        and frames <= set(magi)
        and not any(entry.key in ("dims",) or entry.key.startswith("shape:") for entry in seen)
    )


def _place_runtime(
    run: RunData,
    where: str,
    event: Event,
    number: int,
    requests: list[PlannedRequest],
    magi: dict[str, MagiTarget],
) -> LiveCompile:
    """A compile_sizes entry magi compiled on its fast path in a live request: a request of that
    request's shape moves it into warmup."""
    _, request_id, step = event.position
    owner = next(
        (r for r in run.requests if r.pid == event.pid and r.request_id == request_id), None
    )
    shape = _request_shape(owner) if owner is not None else None
    target = next((t for label, t in magi.items() if t.name == event.data.get("name")), None)
    frame = next(
        (label for label, t in magi.items() if t is target), str(event.data.get("name") or "?")
    )
    count = event.data.get("backend_compilations")
    duration = event.data.get("duration_s")
    sizes = (
        f" (compile_sizes {list(target.compile_sizes)})" if target and target.compile_sizes else ""
    )
    record = LiveCompile(
        trace=where,
        compile_id=f"magi-fast-path-{number + 1}",
        frame=frame,
        request=request_id or "?",
        step=step,
        shape=list(shape) if shape else None,
        duration_s=float(duration) if isinstance(duration, (int, float)) else None,
        cause=f"magi compiled {count if isinstance(count, int) else 'some'} subgraph(s) on its "
        f"fast path: a size it compiles at first use{sizes}",
    )
    if shape is None:
        record.cannot = "the live request's shape was not recorded: no request can be planned"
        return record
    key = f"size:{'x'.join(map(str, shape))}"
    ref = f"{record.compile_id} ({record.frame}, {record.request} in {record.trace})"
    for index, planned in enumerate(requests):
        if planned.variant_key == key:
            _cover(planned, record, ref, index, add_cost=True)
            return record
    planned = PlannedRequest(
        shape=list(shape),
        role=VARIANT,
        why="magi compiles this size on its fast path at its first use (a compile_sizes "
        "entry): warming it moves that compile out of traffic",
        like=f"{record.request} in {record.trace}",
        cost_from="the live compile(s) it moves into warmup",
        variant_key=key,
    )
    requests.append(planned)
    _cover(planned, record, ref, len(requests) - 1, add_cost=True)
    return record
