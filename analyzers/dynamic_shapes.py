"""dynamic-shapes: dims made symbolic that never changed, and dims baked in that do change.

Why: `dynamic=True` (or `mark_dynamic` on the wrong dim) makes every input dim symbolic, fixed
ones included: the hidden size, the batch, and, through duck sizing, the dims of weights that
share their value (LightX2V keeps weights as plain tensors, not `nn.Parameter`, so they are
ordinary inputs). Kernels then lose their static sizes and steady state barely improves. The
opposite mistake bakes a dim that varies into the graph (read from `self.xxx`, `int()`,
`.item()`, a Python scalar), so each new value recompiles.

Evidence: the symbols each compile created and the specialisations it made (Dynamo's
`create_symbol` and `symbolic_shape_specialization`, written by collectors/shapes.py), against
the shapes the compiled callable was really called with (sampled outside the compiled code).
Without sampled calls (a TORCH_TRACE import) nothing is claimed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from diag.evidence.shapes import Sampled, as_compiled, magi_calls, sampled_dims, size_source
from diag.findings.model import Finding
from diag.trace.run import Event, Frame, RunData, Trace

from .common import id_suffix, process_lines

ANALYZER = "dynamic-shapes"
#: A dim of a tensor held as an attribute of an argument (`L['block'].modulation.size()[2]`):
#: a weight kept as a plain tensor, which calls do not pass and diag does not sample.
_ATTRIBUTE_SOURCE = re.compile(r"^L\['[^']+'\](?:\.[A-Za-z]\w*)+\.size\(\)\[\d+\]$")
_SHOWN = 6


@dataclass(frozen=True)
class _Symbol:
    symbol: str
    source: str
    value: str
    compile_id: str
    user_location: str | None


def analyze(trace: Trace) -> list[Finding]:
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run))
    return findings


def _frame(data: object) -> Frame | None:
    return Frame.from_event(data)


def _frames_by_compile(run: RunData) -> dict[tuple[int, int, str], Frame]:
    return {(c.pid, c.epoch, c.compile_id): c.frame for c in run.compiles if c.frame is not None}


def _declared(run: RunData) -> dict[Frame, set[tuple[str, int]]]:
    """Dims a magi_compile target declares dynamic (`dynamic_arg_dims`): the program's own
    decision, which a recording that never varied them does not refute."""
    declared: dict[Frame, set[tuple[str, int]]] = defaultdict(set)
    for kind in ("magi_compile", "magi_state"):
        for event in run.of(kind):
            frame = _frame(event.data.get("target"))
            dims = event.data.get("dynamic_arg_dims")
            if frame is None or not isinstance(dims, dict):
                continue
            for name, value in dims.items():
                for dim in value if isinstance(value, list) else [value]:
                    if isinstance(dim, int):
                        declared[as_compiled(frame)].add((str(name), dim))
    return declared


def _calls(run: RunData) -> dict[tuple[int, Frame], int]:
    counts: dict[tuple[int, Frame], int] = defaultdict(int)
    for event in run.of("call_shapes"):
        frame = _frame(event.data.get("frame"))
        calls = event.data.get("calls")
        if frame is not None and isinstance(calls, int):
            counts[(event.pid, frame)] += calls
    for pid, frame, _, call in magi_calls(run):
        counts[(pid, frame)] = max(counts[(pid, frame)], call)
    return counts


def _values(values: set[int]) -> str:
    ordered = sorted(values)
    shown = ", ".join(str(v) for v in ordered[:_SHOWN])
    return shown + (f" and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else "")


def _analyze_run(run: RunData) -> list[Finding]:
    frames = _frames_by_compile(run)
    observed = sampled_dims(run)
    calls = _calls(run)
    symbols: dict[tuple[int, Frame], list[_Symbol]] = defaultdict(list)
    for event in run.of("shape_symbol"):
        frame = frames.get(_compilesize_source(event))
        if frame is not None:
            symbols[(event.pid, frame)].append(
                _Symbol(
                    str(event.data.get("symbol")),
                    str(event.data.get("source")),
                    str(event.data.get("value")),
                    str(event.data.get("compile_id")),
                    event.data.get("user_location"),
                )
            )
    declared = _declared(run)
    findings = [
        finding
        for (pid, frame), items in symbols.items()
        if (
            finding := _over_dynamic(
                run,
                pid,
                frame,
                [i for i in items if size_source(i.source) not in declared.get(frame, set())],
                observed,
                calls,
                magi=frame in declared,
            )
        )
        is not None
    ]
    findings.extend(_specialised(run, frames, observed))
    return findings


def _compilesize_source(event: Event) -> tuple[int, int, str]:
    epoch = event.data.get("epoch")
    return (event.pid, epoch if isinstance(epoch, int) else 0, str(event.data.get("compile_id")))


def _over_dynamic(
    run: RunData,
    pid: int,
    frame: Frame,
    items: list[_Symbol],
    observed: Sampled,
    calls: dict[tuple[int, Frame], int],
    magi: bool = False,
) -> Finding | None:
    """`magi`: the frame is a magi_compile target, which takes its dynamic dims from
    `dynamic_arg_dims` alone (no `dynamic=` to pass)."""
    dims = observed.get((pid, frame))
    if not dims:
        return None  # no sampled calls: whether a dim varies is not known
    fixed: list[tuple[_Symbol, int]] = []
    varied: list[tuple[str, set[int]]] = []
    # Each recompile creates its symbols anew: one line per source, from its first compile.
    first = {item.source: item for item in reversed(items)}
    for item in sorted(first.values(), key=items.index):
        key = size_source(item.source)
        values = dims.get(key) if key is not None else None
        if not values:
            continue
        if len(values) == 1:
            fixed.append((item, next(iter(values))))
        else:
            varied.append((item.source, values))
    if not fixed:
        return None
    n_calls = calls.get((pid, frame), 0)
    # Context, not a verdict: symbolic dims that never changed cost what the compiled code
    # loses to symbolic shapes, which the trace does not measure.
    severity = "info"
    names = ", ".join(f"{s.source} = {v}" for s, v in fixed[:_SHOWN])
    more = f" and {len(fixed) - _SHOWN} more" if len(fixed) > _SHOWN else ""
    title = (
        f"{frame.name} compiled {len(fixed)} dim(s) as symbolic that never changed in "
        f"{n_calls} call(s): {names}{more}"
    )
    evidence = [
        f"symbol {s.symbol} for {s.source} (value {v}) created at compile {s.compile_id}"
        + (f", first used at {s.user_location}" if s.user_location else "")
        + f"; every sampled call had {v}"
        for s, v in fixed[:_SHOWN]
    ]
    evidence.extend(f"{source} did vary: {_values(values)}" for source, values in varied[:3])
    attributes = _attribute_dims(items)
    if attributes:
        evidence.append(
            "tensors held as attributes (plain tensors, not nn.Parameter) made symbolic too, "
            "each with one value in every compile: "
            + ", ".join(f"{source} = {value}" for source, value in attributes[:_SHOWN])
        )
    if not varied:
        evidence.append(
            "no dim of this frame varied in this recording: diag cannot tell which dims need "
            "to be dynamic; record traffic with the shapes you serve"
        )
    evidence.append(
        "dims equal to a symbolic one share its symbol (duck sizing): weights held as plain "
        "tensors whose dims match these values are symbolic with them"
    )
    evidence.append(
        "diag cannot measure the cost from one recording: compare steady step times with the "
        "fix (record both, then diag check --baseline)"
    )
    evidence.extend(process_lines(run, pid))
    varying = ", ".join(source for source, _ in varied[:3])
    fix = (
        "declare in magi_compile's dynamic_arg_dims only the dims that vary (magi takes no "
        "dynamic= argument); a dim it derives symbolic from a declared one follows that one"
        if magi
        else "compile with dynamic=None (the default: a dim becomes dynamic only once it changes)"
        + (
            f" and, to skip the one recompile, torch._dynamo.mark_dynamic on {varying}"
            if varying
            else ""
        )
        + "; or keep dynamic=True and torch._dynamo.mark_static(tensor, dim) on the fixed ones"
    )
    return Finding(
        id=f"{ANALYZER}:over-dynamic:{frame.name}@{frame.file}:{frame.line}{id_suffix(run, pid)}",
        analyzer=ANALYZER,
        severity=severity,
        title=title,
        evidence=evidence,
        fix=fix,
        location=frame.location if frame.file else None,
        run=run.label,
        data={
            "kind": "over-dynamic",
            "frame": frame.name,
            "fixed": [{"symbol": s.symbol, "source": s.source, "value": v} for s, v in fixed],
            "varied": [{"source": src, "values": sorted(vals)} for src, vals in varied],
            "attributes": [{"source": src, "value": value} for src, value in attributes],
            "calls": n_calls,
        },
    )


def _attribute_dims(items: list[_Symbol]) -> list[tuple[str, str]]:
    """Dims of attribute tensors that every compile made symbolic with the same value."""
    values: dict[str, set[str]] = {}
    for item in items:
        if _ATTRIBUTE_SOURCE.match(item.source):
            values.setdefault(item.source, set()).add(item.value)
    return [(source, next(iter(seen))) for source, seen in values.items() if len(seen) == 1]


def _specialised(
    run: RunData,
    frames: dict[tuple[int, int, str], Frame],
    observed: Sampled,
) -> list[Finding]:
    """A symbol baked into a constant although calls show that dim taking other values."""
    findings: list[Finding] = []
    reported: set[tuple[int, Frame, str]] = set()
    for event in run.of("shape_specialization"):
        frame = frames.get(_compilesize_source(event))
        if frame is None:
            continue
        dims = observed.get((event.pid, frame)) or {}
        sources = [s for s in event.data.get("sources") or [] if isinstance(s, str)]
        for source in sources:
            key = size_source(source)
            values = dims.get(key) if key is not None else None
            if not values or len(values) < 2 or (event.pid, frame, source) in reported:
                continue
            reported.add((event.pid, frame, source))
            value = str(event.data.get("value"))
            where = event.data.get("user_location")
            findings.append(
                Finding(
                    id=f"{ANALYZER}:specialized:{frame.name}@{frame.file}:{frame.line}:{source}"
                    + id_suffix(run, event.pid),
                    analyzer=ANALYZER,
                    # A baked-in dim that varies recompiles per value: a warning when traffic
                    # paid for it, context when warmup did.
                    severity="warning"
                    if any(c.live and c.pid == event.pid and c.frame == frame for c in run.compiles)
                    else "info",
                    title=(
                        f"{frame.name}: {source} varies between calls ({_values(values)}) but "
                        f"compile {event.data.get('compile_id')} baked it in as {value}"
                        + (f" at {where}" if where else "")
                    ),
                    evidence=[
                        f"Dynamo specialised symbol {event.data.get('symbol')} to {value} "
                        f"(reason: {event.data.get('reason')})"
                        + (f", at {where}" if where else ""),
                        f"sampled calls passed {source} = {_values(values)}: each new value "
                        "needs its own compile",
                        *process_lines(run, event.pid),
                    ],
                    fix=(
                        "let the dim reach the graph as a tensor dimension: don't read it "
                        "from self.xxx, a Python int, int() or .item() at the line above"
                    ),
                    location=where or (frame.location if frame.file else None),
                    run=run.label,
                    data={
                        "kind": "specialized",
                        "frame": frame.name,
                        "source": source,
                        "value": value,
                        "values": sorted(values),
                    },
                )
            )
    return findings
