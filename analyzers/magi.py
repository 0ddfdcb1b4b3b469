"""magi-compile: what MagiCompiler (`magi_compile`, LightX2V's `use_magi_compile`) did, and the
failures that fit how it works.

Why: magi compiles each target once with its declared `dynamic_arg_dims` marked dynamic, then
runs the captured bytecode directly on every later call, never checking Dynamo's guards again.
So it does not recompile (a clean run needs no warning), but two things go wrong in ways plain
torch.compile does not show: a declared dim the code specialises kills the first compile
(ConstraintViolationError), and a later call whose inputs fail the captured guards silently
runs code specialised for other values. The collector (collectors/magi.py) records each compile
and evaluates the captured guards on sampled calls; this analyzer turns that into:

- `specialized-dim` (error): the declared dim, the value it was pinned to, the user line, the fix;
  another failed magi compile is `compile-failed` (error). compile-failure defers to these.
- `guard-bypass` (error): a guard that failed on a later call, the value seen, the value baked in.
- `boundary` (warning, with a reference run): a declared boundary op (`splitting_ops`,
  `magi_register_custom_op(is_subgraph_boundary=True)`) that eager ran inside a magi region and
  magi did not, or ran with other kernels.
- `step0` (info): step 0 of a request at a new shape, attributed (compile, autotuning, allocator
  growth, cudagraph capture, a `compile_sizes` entry) or said unknown.
- `summary` (info): compiles, cold vs cached, warmup vs live, the split, guard checks made.
- `unseen` (warning): magi is in use but diag saw none of its compiles (the hook did not take).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from diag.evidence.spikes import DESCRIPTIONS, EXPLAINED_SHARE, first_use_cause, reserve_growth
from diag.findings.model import Finding
from diag.trace.run import Compile, Event, Frame, Request, RunData, Step, Trace

from .common import format_seconds, id_suffix

ANALYZER = "magi-compile"

_MARKED = re.compile(
    r"You marked (?P<dim>\S+) as dynamic but your code specialized it to be a constant "
    r"\((?P<value>[^)]*)\)"
)
_FRAME = re.compile(
    r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)\n(?P<code>[^\n]*)'
)
_DIM_SOURCE = re.compile(r"L\[['\"](?P<arg>\w+)['\"]\]\.size\(\)\[(?P<dim>\d+)\]")
#: A step 0 this much slower than the request's steady median is worth explaining.
_SPIKE_RATIO = 1.5


@dataclass(frozen=True)
class _Compile:
    """One magi compile (the magi_compile_end event and what its state said)."""

    event: Event
    state: Event | None

    @property
    def name(self) -> str:
        return str(self.event.data.get("name") or "?")

    @property
    def ok(self) -> bool:
        return self.event.data.get("result") == "ok"

    @property
    def duration_s(self) -> float:
        value = self.event.data.get("duration_s")
        return float(value) if isinstance(value, (int, float)) else 0.0


def analyze(trace: Trace) -> list[Finding]:
    cwd = trace.manifest.get("cwd")
    root = cwd if isinstance(cwd, str) else None
    findings: list[Finding] = []
    for run in trace.subject_runs:
        if not run.of("magi_compile") and not run.of("magi_state"):
            findings.extend(_magi_never_imported(run))
            continue
        compiles = _compiles(run)
        findings.extend(_failures(run, compiles, root))
        findings.extend(_guard_bypass(run, root))
        findings.extend(_boundary(trace, run, compiles))
        findings.extend(_unsplit(run, compiles))
        findings.extend(_step0(run, compiles))
        summary = _summary(run, compiles, root)
        if summary is not None:
            findings.append(summary)
    return findings


def magi_owned_failure(run: RunData, item: Compile) -> bool:
    """Whether a failed Dynamo compile is a magi target's first compile that failed (reported by
    this analyzer; compile-failure skips it so one cause has one headline)."""
    for event in run.of("magi_compile_end"):
        if event.pid != item.pid or event.data.get("result") == "ok":
            continue
        start = event.data.get("start_t")
        if isinstance(start, int) and start <= item.t <= event.t:
            return True
    return False


# -- helpers ------------------------------------------------------------------------------------


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _target_location(event: Event, cwd: str | None) -> str | None:
    target = event.data.get("target")
    if isinstance(target, dict) and isinstance(target.get("file"), str):
        return f"{_relative(target['file'], cwd)}:{target.get('line')}"
    return None


def _compiles(run: RunData) -> list[_Compile]:
    states: dict[tuple[int, object], Event] = {}
    for event in run.of("magi_state"):
        states[(event.pid, event.data.get("model_idx"))] = event
    return [
        _Compile(event, states.get((event.pid, event.data.get("model_idx"))))
        for event in run.of("magi_compile_end")
    ]


def _where(event: Event) -> str:
    phase, request, step = event.position
    if request is None:
        return f"{phase} (outside any request)"
    return f"{phase} request {request}" + (f" step {step}" if step is not None else "")


def _dims(state: Event | None) -> str:
    dims = state.data.get("dynamic_arg_dims") if state is not None else None
    if not isinstance(dims, dict) or not dims:
        return "none recorded"
    return ", ".join(f"{k}: {v}" for k, v in dims.items())


def _config(state: Event | None) -> dict[str, object]:
    config = state.data.get("config") if state is not None else None
    return config if isinstance(config, dict) else {}


def _user_stack(text: str, cwd: str | None) -> list[tuple[str, str]]:
    """Every frame of torch's "User stack", outermost first (location, code line)."""
    if "User stack" not in text:
        return []
    stack = text.split("User stack", 1)[-1]
    return [
        (f"{_relative(m.group('file'), cwd)}:{m.group('line')}", m.group("code").strip()[:160])
        for m in _FRAME.finditer(stack)
    ]


def _user_frame(text: str, cwd: str | None) -> tuple[str, str] | None:
    """The innermost frame of torch's "User stack" (location, code line)."""
    stack = text.split("User stack", 1)[-1] if "User stack" in text else text
    frames = list(_FRAME.finditer(stack))
    if not frames:
        return None
    last = frames[-1]
    return f"{_relative(last.group('file'), cwd)}:{last.group('line')}", last.group("code").strip()


# -- 1. failed compiles -------------------------------------------------------------------------


def _failures(run: RunData, compiles: list[_Compile], cwd: str | None) -> list[Finding]:
    findings = []
    seen: set[tuple[str, str]] = set()
    for item in compiles:
        if item.ok:
            continue
        error = str(item.event.data.get("error") or "")
        error_type = str(item.event.data.get("error_type") or "unknown error")
        key = (item.name, error_type)
        if key in seen:
            continue
        seen.add(key)
        same = [
            c
            for c in compiles
            if not c.ok and (c.name, str(c.event.data.get("error_type") or "unknown error")) == key
        ]
        if "ConstraintViolation" in error_type:
            findings.append(_specialized(run, item, same, error, cwd))
        else:
            findings.append(_failed(run, item, same, error_type, error, cwd))
    return findings


def _dynamo_ids(run: RunData, item: _Compile) -> list[str]:
    start = item.event.data.get("start_t")
    if not isinstance(start, int):
        return []
    return [
        c.compile_id
        for c in run.compiles
        if c.pid == item.event.pid and c.result == "failed" and start <= c.t <= item.event.t
    ]


def _crashed(run: RunData, item: _Compile) -> str | None:
    for crash in run.of("crash"):
        if crash.pid == item.event.pid and crash.t >= item.event.t:
            return str(crash.data.get("type") or "an exception")
    return None


def _violations(error: str, cwd: str | None) -> list[tuple[str, str, str]]:
    """torch's violations in its order, each with its own user stack: (dim, value, the text from
    its `You marked` line to the next one). The first is the declared dim the code specialised;
    the ones after it are often its consequences (a size tied to it by an op)."""
    starts = list(_MARKED.finditer(error))
    return [
        (m.group("dim"), m.group("value"), error[m.start() : nxt.start() if nxt else len(error)])
        for m, nxt in zip(starts, [*starts[1:], None], strict=True)
    ]


#: `state.tokens`, `self.tokens`: an attribute read on the line (a call like `x.view(` and a
#: tensor's own `x.shape` are not where a constant comes from).
_ATTR_READ = re.compile(r"\b(?P<read>[A-Za-z_]\w*\.(?P<attr>[A-Za-z_]\w*))\b(?!\s*\()")
_TENSOR_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "T", "mT", "data"})


def _attribute_read(code: str) -> str | None:
    return next(
        (
            m.group("read")
            for m in _ATTR_READ.finditer(code)
            if m.group("attr") not in _TENSOR_ATTRS
        ),
        None,
    )


def _specialized(
    run: RunData, item: _Compile, same: list[_Compile], error: str, cwd: str | None
) -> Finding:
    marks = [(m.group("dim"), m.group("value")) for m in _MARKED.finditer(error)]
    violations = _violations(error, cwd)
    # The location is the first violation's own user line (the declared dim torch lists first);
    # later violations' lines are consequences, listed as such.
    first_text = violations[0][2] if violations else error
    frame = _user_frame(first_text, cwd) if "User stack" in first_text else None
    if frame is None:
        frame = _user_frame(error, cwd)
    dims = ", ".join(f"{d} (pinned to {v})" for d, v in marks) or "a declared dim"
    declared = _dims(item.state)
    args = sorted({m.group("arg") for d, _ in marks for m in [_DIM_SOURCE.search(d)] if m})
    if len(violations) > 1:
        dims = f"{violations[0][0]} (pinned to {violations[0][1]})"
    evidence = [
        f"magi's first compile of {item.name} failed at {_where(item.event)} after "
        f"{format_seconds(item.duration_s)}: ConstraintViolationError",
        f"declared dynamic_arg_dims: {declared}; magi marks these with torch._dynamo.mark_dynamic",
        f"specialised: {dims}",
    ]
    if frame is not None:
        evidence.append(f"torch reports the specialisation at {frame[0]}: {frame[1]}")
    for dim, value, text in violations[1:]:
        then = _user_frame(text, cwd) if "User stack" in text else None
        evidence.append(
            f"consequence: {dim} (pinned to {value}) too"
            + (f", at {then[0]}: {then[1]}" if then else "")
            + f" (torch lists it after {violations[0][0]}: a size tied to it)"
        )
    chain = _user_stack(first_text if "User stack" in first_text else error, cwd)
    if len(chain) > 1:
        # torch names the op where the constant met the dim; the value may have entered at any
        # frame above it (a size read from self.xxx and passed down): the whole path is shown.
        evidence.append(
            "the constant reaches that op through (outermost first): "
            + " -> ".join(f"{where} `{code}`" for where, code in chain)
        )
    evidence.append("torch's message: " + error.strip().splitlines()[0][:300])
    if len(same) > 1:
        evidence.append(f"{len(same)} magi targets failed the same way")
    ids = _dynamo_ids(run, item)
    if ids:
        evidence.append(f"Dynamo compile {', '.join(ids[:4])} (the same failure, not repeated)")
    crashed = _crashed(run, item)
    if crashed:
        evidence.append(f"the program died of it (uncaught {crashed})")
    if len(violations) > 1:
        found = _DIM_SOURCE.search(violations[0][0])
        args = [found.group("arg")] if found else args
    which = ", ".join(args) or "the argument"
    attribute = _attribute_read(frame[1]) if frame is not None else None
    source = (
        f"instead of reading it from {attribute}"
        if attribute is not None
        else "instead of a Python int (an attribute, a scalar or a tuple)"
    )
    return Finding(
        id=f"{ANALYZER}:specialized-dim:{item.name}{id_suffix(run, item.event.pid)}",
        analyzer=ANALYZER,
        severity="error",
        title=f"magi_compile of {item.name}: the declared dynamic dim {dims} is specialised by "
        "the code, so the first compile fails",
        evidence=evidence,
        fix=f"Let the size arrive as a dimension of {which} itself (x.shape[1] inside the "
        f"compiled code) {source}"
        + (f" at {frame[0]}" if frame else "")
        + "; if that dim really never varies, remove it from dynamic_arg_dims.",
        location=frame[0] if frame else _target_location(item.event, cwd),
        run=run.label,
        data={"target": item.name, "dims": marks, "declared": declared, "dynamo_compiles": ids},
    )


def _failed(
    run: RunData, item: _Compile, same: list[_Compile], error_type: str, error: str, cwd: str | None
) -> Finding:
    frame = _user_frame(error, cwd)
    evidence = [
        f"magi's first compile of {item.name} failed at {_where(item.event)} after "
        f"{format_seconds(item.duration_s)}: {error_type}",
        "reason: " + (error.strip()[:1500] or "none recorded"),
        f"compile mode {_config(item.state).get('compile_mode')}, backend "
        f"{_config(item.state).get('backend')}, dynamic_arg_dims {_dims(item.state)}",
    ]
    if len(same) > 1:
        evidence.append(f"{len(same)} magi targets failed the same way")
    crashed = _crashed(run, item)
    if crashed:
        evidence.append(f"the program died of it (uncaught {crashed})")
    return Finding(
        id=f"{ANALYZER}:compile-failed:{item.name}{id_suffix(run, item.event.pid)}",
        analyzer=ANALYZER,
        severity="error",
        title=f"magi_compile of {item.name} failed: {error_type.rsplit('.', 1)[-1]}",
        evidence=evidence,
        fix="Read the reason above; MAGI_LOGGING_LEVEL=INFO prints magi's own steps, and "
        "MAGI_COMPILE_BACKEND=eager tells a tracing problem from an Inductor one.",
        location=frame[0] if frame else _target_location(item.event, cwd),
        run=run.label,
        data={"target": item.name, "error_type": error_type},
    )


# -- 2. guard bypass ----------------------------------------------------------------------------


def _guard_bypass(run: RunData, cwd: str | None) -> list[Finding]:
    failed: dict[tuple[str, str], list[tuple[Event, dict[str, object]]]] = defaultdict(list)
    checks = run.of("magi_guard_check")
    for event in checks:
        if event.data.get("ok"):
            continue
        failures = event.data.get("failures")
        for failure in failures if isinstance(failures, list) else []:
            if isinstance(failure, dict):
                key = (str(event.data.get("name") or "?"), str(failure.get("guard") or "?"))
                failed[key].append((event, failure))
    findings = []
    for (name, guard), items in failed.items():
        first, failure = items[0]
        seen = failure.get("seen")
        baked = failure.get("baked")
        where = failure.get("where")
        code = failure.get("code")
        of_target = [e for e in checks if e.data.get("name") == name]
        bad_calls = {(e.pid, e.t) for e, _ in items}
        evidence = [
            f"guard captured at {name}'s compile: {guard}",
            f"value seen: {seen if seen is not None else 'not resolved'}; value baked in: "
            f"{baked if baked is not None else 'not resolved'}",
            f"first failing call: call {first.data.get('call')} of the target, at {_where(first)}",
            f"{len(bad_calls)} of {len(of_target)} sampled call(s) of {name} failed this guard; "
            "magi's fast path ran the compiled code anyway (it never checks guards)",
        ]
        if where:
            evidence.append(f"guarded line: {where}" + (f": {code}" if code else ""))
        inputs = first.data.get("inputs")
        if isinstance(inputs, dict) and inputs:
            evidence.append(
                "inputs of that call: " + ", ".join(f"{k}={v}" for k, v in list(inputs.items())[:8])
            )
        location = str(where).split(" in ")[0] if where else _target_location(first, cwd)
        findings.append(
            Finding(
                id=f"{ANALYZER}:guard-bypass:{name}:{guard[:120]}{id_suffix(run, first.pid)}",
                analyzer=ANALYZER,
                severity="error",
                title=f"magi ran {name} with a guard that no longer holds: {guard} "
                f"(seen {seen}, compiled for {baked})",
                evidence=evidence,
                fix="magi compiled this code for the value it saw first and never re-checks: "
                "pass the value as a tensor (or a declared dynamic dim) instead of Python state, "
                "move the branch on it out of the compiled target, or compile one target per "
                "value (a separate magi_compile for each variant). compile_mode TORCH_COMPILE "
                "keeps Dynamo's guards (and recompiles) if the value must vary.",
                location=location,
                run=run.label,
                data={
                    "target": name,
                    "guard": guard,
                    "seen": seen,
                    "baked": baked,
                    "failed_checks": len(bad_calls),
                    "checks": len(of_target),
                },
            )
        )
    return findings


# -- 3. boundary ops: a split that never happened, and against a reference run ------------------


def _unsplit(run: RunData, compiles: list[_Compile]) -> list[Finding]:
    """Boundary ops declared, yet magi's split found none of them in the graph: magi's own
    counters say how many pieces were boundary ops (pieces seen less pieces compiled), so a
    compile that split at none fused every declared boundary op's work into the Inductor
    graph (an op Dynamo saw as plain ATen ops, or one never registered). No reference run is
    needed to see it."""
    findings = []
    seen: set[str] = set()
    for item in compiles:
        counters = item.event.data.get("counters")
        ops = _ops(_config(item.state))
        if not item.ok or not ops or not isinstance(counters, dict) or item.name in seen:
            continue
        pieces = counters.get("num_piecewise_graphs_seen")
        compiled = counters.get("num_piecewise_capturable_graphs_seen")
        if not isinstance(pieces, int) or not isinstance(compiled, int) or pieces < 1:
            continue  # loaded from magi's cache: no split ran in this process
        if pieces - compiled > 0:
            continue
        seen.add(item.name)
        findings.append(
            Finding(
                id=f"{ANALYZER}:unsplit:{item.name}{id_suffix(run, item.event.pid)}",
                analyzer=ANALYZER,
                severity="warning",
                title=f"magi split {item.name}'s graph at none of its boundary ops "
                f"({', '.join(ops)}): their work is fused into the compiled graph",
                evidence=[
                    f"declared boundary ops (splitting_ops): {', '.join(ops)}",
                    f"magi's counters for the compile at {_where(item.event)}: {pieces} piece(s), "
                    f"{compiled} compiled by the backend: {pieces - compiled} boundary op(s) "
                    "found in the graph",
                    "a boundary op keeps its own kernel between compiled pieces (attention's "
                    "flash or cuDNN kernel, a custom op); none was in the graph Dynamo traced, "
                    "so what it wraps ran as traced ATen ops inside the compiled piece",
                ],
                fix="Call the op through its registered custom op inside the compiled code "
                "(magi_register_custom_op(..., is_subgraph_boundary=True) or a torch.library "
                "custom op listed in splitting_ops), not through a Python path that Dynamo "
                "traces into (a fallback taken under torch.compiler.is_compiling()).",
                location=_target_location(item.event, None),
                run=run.label,
                data={"target": item.name, "ops": ops, "pieces": pieces, "compiled": compiled},
            )
        )
    return findings


def _boundary(trace: Trace, run: RunData, compiles: list[_Compile]) -> list[Finding]:
    reference = trace.reference
    if run is not trace.compiled or reference is None:
        return []
    ops = sorted({op for c in compiles for op in _ops(_config(c.state))})
    targets = sorted({c.name for c in compiles if c.ok})
    if not ops or not targets:
        return []
    from diag.evidence.regions import aligned_profiles

    ours, theirs = aligned_profiles(run, reference)
    if not ours or not theirs:
        return []
    findings = []
    for region in targets:
        for op in ops:
            mine = _op_use(ours, region, op)
            base = _op_use(theirs, region, op)
            if base is None or not base.calls:
                continue  # eager never ran this op here: nothing to hold magi to
            finding = _boundary_finding(run, region, op, mine, base)
            if finding is not None:
                findings.append(_with_region_kernels(trace, finding, region))
    return findings


def _with_region_kernels(trace: Trace, finding: Finding, region: str) -> Finding:
    """Add what ran in the region under magi and not in eager (what took the op's place)."""
    from dataclasses import replace

    from diag.evidence.regions import compare_regions

    for comparison in compare_regions(trace):
        if comparison.region != region:
            continue
        eager = {k.name for k in comparison.reference}
        new = [k for k in comparison.compiled if k.name not in eager and k.kind != "copy"]
        if new:
            shown = ", ".join(f"{k.name} ({format_seconds(k.total_s)})" for k in new[:4])
            line = f"in the region, magi ran what eager did not (per step): {shown}"
            return replace(finding, evidence=[*finding.evidence, line])
    return finding


@dataclass(frozen=True)
class _OpUse:
    """How a boundary op ran inside one compiled region, over the profiled steps."""

    region_calls: int  # calls of the region wholly inside a profiled step
    calls: int  # calls of the op inside those
    kernels: Counter[str]  # kernels (CPU-only traces: child ops) launched inside the op
    device: str

    @property
    def per_region_call(self) -> float:
        return self.calls / self.region_calls if self.region_calls else 0.0


def _ops(config: dict[str, object]) -> list[str]:
    ops = config.get("splitting_ops")
    return [str(op) for op in ops] if isinstance(ops, list) else []


def _op_use(profiles: list[Any], region: str, op: str) -> _OpUse | None:
    """Calls of `op` inside the calls of `region` that lie wholly inside their step (a region
    cut by the step's edge would miss ops), and what ran inside them. Kernels count when their
    launch falls inside the op's CPU interval; a CPU-only trace has none, so the op's child ops
    stand in."""
    from diag.trace.profiles import REGION_PREFIX

    region_calls = calls = 0
    kernels: Counter[str] = Counter()
    device = "cpu"
    seen = False
    for profile in profiles:
        ops = getattr(profile, "cpu_ops", [])
        seen = seen or bool(ops)
        start, end = getattr(profile, "start_ts", 0.0), getattr(profile, "end_ts", 0.0)
        whole = {
            a.name[len(REGION_PREFIX) :]
            for a in getattr(profile, "annotations", [])
            if a.name.startswith(REGION_PREFIX)
            and a.name[len(REGION_PREFIX) :].rsplit("#", 1)[0] == region
            and start <= a.ts
            and a.ts + a.dur <= end
        }
        region_calls += len(whole)
        spans = [(o.ts, o.ts + o.dur) for o in ops if o.name == op and o.region in whole]
        calls += len(spans)
        launched = getattr(profile, "kernels", [])
        if launched:
            device = "gpu"
            kernels.update(k.name for k in launched if any(a <= k.launch_ts <= b for a, b in spans))
        else:
            kernels.update(
                c.name
                for c in ops
                if c.name != op and any(a <= c.ts and c.ts + c.dur <= b for a, b in spans)
            )
    return _OpUse(region_calls, calls, kernels, device) if seen else None


def _boundary_finding(
    run: RunData, region: str, op: str, mine: _OpUse | None, base: _OpUse
) -> Finding | None:
    ours = mine if mine is not None else _OpUse(0, 0, Counter(), base.device)
    if not ours.region_calls:
        return None  # no whole call of the region was profiled under magi: nothing to compare
    gone = sorted(set(base.kernels) - set(ours.kernels))
    new = sorted(set(ours.kernels) - set(base.kernels))
    fewer = ours.per_region_call < base.per_region_call
    if not fewer and not gone:
        return None
    unit = "kernels" if base.device == "gpu" else "ops"
    evidence = [
        f"eager ran {op} {base.per_region_call:g} time(s) per call of {region}, magi "
        f"{ours.per_region_call:g} time(s) ({base.region_calls} and {ours.region_calls} whole "
        "region calls in the aligned profiled steps)",
        f"eager's {unit} inside the op: " + (", ".join(sorted(base.kernels)[:6]) or "none"),
        f"magi's {unit} inside the op: " + (", ".join(sorted(ours.kernels)[:6]) or "none"),
    ]
    if gone:
        evidence.append(f"{unit} eager ran in it that magi did not: " + ", ".join(gone[:6]))
    if fewer:
        evidence.append(
            "magi cuts its graph only where the op is in the traced graph: the missing calls ran "
            "as whatever Dynamo traced instead (Inductor compiled that work itself)"
        )
    if new:
        evidence.append(f"{unit} only magi ran in it: " + ", ".join(new[:6]))
    return Finding(
        id=f"{ANALYZER}:boundary:{region}:{op}{id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="warning",
        title=f"The boundary op {op} did not run unchanged under magi in {region}",
        evidence=evidence,
        fix=f"Make the code call {op} under compile too (a branch on "
        "torch.compiler.is_compiling() or a library fallback traced another path): magi only "
        "splits at ops that are in the graph. Register every boundary-worthy op with "
        "magi_register_custom_op(..., is_subgraph_boundary=True) or list it in splitting_ops.",
        location=None,
        run=run.label,
        data={
            "region": region,
            "op": op,
            "eager_calls_per_region_call": base.per_region_call,
            "magi_calls_per_region_call": ours.per_region_call,
            "missing": gone,
        },
    )


# -- 4. step 0 at a new shape -------------------------------------------------------------------


def _step0(run: RunData, compiles: list[_Compile]) -> list[Finding]:
    """Step 0 of a live request at a shape new to its process, when magi has something of its
    own to say about it (its compiles, fast-path compiles, a graph captured per shape, a
    compile_sizes entry). What else made the step slow is read where step0-spike reads it
    (diag.evidence.spikes), so both findings name the same cause; with nothing magi-specific,
    step0-spike speaks alone."""
    findings = []
    shapes_seen: set[tuple[int, tuple[int, ...]]] = set()
    config = _config(compiles[0].state) if compiles else {}
    by_pid = sorted(run.steps, key=lambda s: s.start_t)
    for request in sorted(run.requests, key=lambda r: r.start_t):
        shape = tuple(request.shape or ())
        key = (request.pid, shape)
        first_time = key not in shapes_seen
        shapes_seen.add(key)
        steps = [s for s in request.steps if s.wall_s is not None]
        if not first_time or len(steps) < 2 or not shape or request.phase != "live":
            continue  # warmup's step 0 is what warmup is for
        step0 = steps[0]
        steady = statistics.median(float(s.wall_s or 0.0) for s in steps[1:])
        if steady <= 0 or float(step0.wall_s or 0.0) < _SPIKE_RATIO * steady:
            continue
        extra = float(step0.wall_s or 0.0) - steady
        causes, lines = _step0_causes(run, step0, steps[1], config, extra)
        if not lines:
            continue  # nothing magi-specific: step0-spike speaks for generic causes
        context = _step0_context(run, request, step0, growth=bool(causes))
        if not causes:
            previous = _previous(by_pid, step0)
            found, notes = first_use_cause(run, request, step0, previous, extra)
            if found is not None and found.decided:
                causes.append(DESCRIPTIONS[found.kind])
            context.extend(notes)
            if found is not None:
                context.extend(found.evidence)
        finding_shape = "x".join(str(n) for n in shape)
        evidence = [
            f"step 0 of {request.phase} request {request.request_id} at the new shape "
            f"{finding_shape}: {format_seconds(float(step0.wall_s or 0.0))} against a steady "
            f"{format_seconds(steady)} (median of steps 1..{len(steps) - 1})",
            *lines,
            *context,
        ]
        compiled_live = any("fast path" in c or "magi compile" in c for c in causes)
        findings.append(
            Finding(
                id=f"{ANALYZER}:step0:{request.request_id}{id_suffix(run, request.pid)}",
                analyzer=ANALYZER,
                # A compile in live traffic is cold start a user pays; the rest is first-use cost.
                severity="warning" if compiled_live else "info",
                title=f"Step 0 at the new shape {finding_shape} under magi took "
                f"{format_seconds(extra)} more than steady: "
                + (", ".join(causes) if causes else "cause unknown"),
                evidence=evidence,
                fix="Warm every shape live traffic will see (a warmup request per resolution) so "
                "that this first-use cost happens before serving"
                + (
                    "; or pre-compile it with compile_sizes"
                    if "fast path" in " ".join(causes)
                    else ""
                )
                + ".",
                location=None,
                run=run.label,
                data={
                    "request_id": request.request_id,
                    "shape": list(shape),
                    "step0_s": step0.wall_s,
                    "steady_s": steady,
                    "causes": causes,
                },
            )
        )
    return findings


def _previous(steps: list[Step], step0: Step) -> Step | None:
    """The step of the same process that started last before step0."""
    before = [s for s in steps if s.pid == step0.pid and s.start_t < step0.start_t]
    return before[-1] if before else None


def _step0_causes(
    run: RunData,
    step0: Step,
    step1: Step,
    config: dict[str, object],
    extra: float,
) -> tuple[list[str], list[str]]:
    """The magi-specific evidence of a slow step 0, and the causes it names: only those whose
    measured seconds account for at least half of the extra time (diag.evidence.spikes' rule); a
    cost
    without seconds (a capture per shape) is evidence, not a named cause."""
    end = step0.end_t or step1.start_t
    causes: list[str] = []
    lines: list[str] = []
    first = [
        e for e in run.of("magi_compile_end") if e.pid == step0.pid and step0.start_t <= e.t <= end
    ]
    if first:
        seconds = sum(float(e.data.get("duration_s") or 0.0) for e in first)
        if seconds >= EXPLAINED_SHARE * extra:
            causes.append(f"{len(first)} magi compile(s) ({format_seconds(seconds)})")
        lines.append(
            f"magi compiled {len(first)} target(s) in step 0 ({format_seconds(seconds)}): their "
            "first call at this shape"
        )
    runtime = [
        e
        for e in run.of("magi_runtime_compile")
        if e.pid == step0.pid and step0.start_t <= e.t <= end
    ]
    if runtime:
        seconds = sum(float(e.data.get("duration_s") or 0.0) for e in runtime)
        if seconds >= EXPLAINED_SHARE * extra:
            causes.append(f"{len(runtime)} compile(s) on magi's fast path")
        lines.append(
            f"{len(runtime)} fast-path call(s) compiled subgraphs ({format_seconds(seconds)} in "
            "those calls): a compile_sizes entry or a shape magi compiles at first use"
        )
    mode = config.get("cudagraph_mode")
    if mode not in (None, "NONE"):
        lines.append(
            f"cudagraph_mode {mode}: magi captures a graph per new shape at first use (its time "
            "is not recorded: not named as the cause)"
        )
    sizes = config.get("compile_sizes")
    if isinstance(sizes, list) and sizes:
        lines.append(f"compile_sizes {sizes}: a listed size compiles at its first use")
    return causes, lines


def _step0_context(run: RunData, request: Request, step0: Step, growth: bool) -> list[str]:
    """What else step 0 held that is not magi's own: torch.compile compiles (a helper between
    magi's blocks), Inductor's autotuning at a kernel's first launch, and (`growth`) the
    allocator's growth, which diag.evidence.spikes words itself when it reads the cause."""
    end = step0.end_t or step0.start_t
    lines: list[str] = []
    magi_code = {
        (frame.file, frame.line)
        for kind in ("magi_compile", "magi_state", "magi_compile_end")
        for event in run.of(kind)
        if (frame := Frame.from_event(event.data.get("target"))) is not None
    }
    compiled = [  # Dynamo's compiles of magi's own targets are magi's compiles, above
        c
        for c in run.compiles
        if c.pid == step0.pid
        and c.request_id == request.request_id
        and c.step == step0.index
        and (c.frame is None or (c.frame.file, c.frame.line) not in magi_code)
    ]
    if compiled:
        seconds = sum(c.duration_s or 0.0 for c in compiled)
        names = sorted({c.frame.name for c in compiled if c.frame is not None})
        lines.append(
            f"torch.compile compiled {len(compiled)} time(s) in step 0 ({', '.join(names)}, "
            f"{format_seconds(seconds)}): live-compile has them"
        )
    autotunes = [
        e for e in run.of("autotune") if e.pid == step0.pid and step0.start_t <= e.t <= end
    ]
    if autotunes:
        seconds = sum(float(e.data.get("duration_s") or 0.0) for e in autotunes)
        lines.append(
            f"Inductor autotuned {len(autotunes)} kernel(s) at first launch "
            f"({format_seconds(seconds)})"
        )
    grown = reserve_growth(step0) if growth else None  # inside the step, not since the last
    if grown is not None and grown > 0:
        lines.append(f"the allocator's reserve grew {grown / 2**20:.0f} MiB inside step 0")
    return lines


# -- 5. summary ---------------------------------------------------------------------------------


def _summary(run: RunData, compiles: list[_Compile], cwd: str | None) -> Finding | None:
    states = run.of("magi_state")
    declared = [e for e in run.of("magi_compile") if isinstance(e.data.get("target"), dict)]
    hooked = states or compiles
    if not hooked:
        return _unseen(run, declared, cwd)
    ok = [c for c in compiles if c.ok]
    if not ok and compiles:
        return None  # every compile failed: the failure findings say all there is
    config = _config(states[0]) if states else {}
    if not compiles:
        return _not_magi_compiled(run, states, config, cwd)
    by_name = Counter(c.name for c in ok)
    total = sum(c.duration_s for c in ok)
    cold = [c for c in ok if _cache(c) == "cold"]
    hit = [c for c in ok if _cache(c) == "hit"]
    partial = [c for c in ok if _cache(c) == "partial"]
    live = [c for c in ok if c.event.position[0] == "live" and c.event.position[1] is not None]
    warm = [c for c in ok if c not in live]
    evidence = [
        f"compile mode {config.get('compile_mode')}, backend {config.get('backend')}, "
        f"cache_root_dir {config.get('cache_root_dir')}",
        f"{len(ok)} compile(s) of {len(by_name)} target(s) "
        f"({', '.join(f'{n} ×{k}' for n, k in by_name.items())}), {format_seconds(total)} in all: "
        f"{len(cold)} compiled by the backend (magi's cache missed), {len(hit)} loaded from "
        f"magi's cache, {len(partial)} partly loaded",
        f"declared dynamic_arg_dims: {_dims(states[0]) if states else 'none recorded'}",
    ]
    kinds = [("compiled", cold), ("loaded from magi's cache", hit), ("partly loaded", partial)]
    evidence.append(
        "seconds per compile: "
        + "; ".join(
            f"{label} {format_seconds(sum(c.duration_s for c in items) / len(items))} "
            f"on average (×{len(items)})"
            for label, items in kinds
            if items
        )
    )
    if warm and not live:
        evidence.append(
            f"all compiles ran before live traffic: warmup moved {format_seconds(total)} of "
            "cold start out of the live requests"
        )
    elif live:
        evidence.append(
            f"{len(live)} compile(s) ran in live requests "
            f"({format_seconds(sum(c.duration_s for c in live))})"
        )
    ops = config.get("splitting_ops") or []
    boundary = ", ".join(map(str, ops)) if isinstance(ops, list) and ops else "none declared"
    if ok:
        evidence.append(
            f"piecewise split of the first compile: {_split(ok[0])}; boundary ops: {boundary}"
        )
    evidence.append(
        f"cudagraph_mode {config.get('cudagraph_mode')}, offload {_offload(config)}, "
        f"compile_sizes {config.get('compile_sizes') or '[] (one dynamic compile)'}"
    )
    lightx2v = _lightx2v(run)
    if lightx2v:
        evidence.append(
            "LightX2V runner config: " + ", ".join(f"{k}={v}" for k, v in lightx2v.items())
        )
    checks = run.of("magi_guard_check")
    failed = [e for e in checks if not e.data.get("ok")]
    if checks:
        signatures = sum(1 for e in checks if e.data.get("new_signature"))
        evidence.append(
            f"guards captured at compile time checked on {len(checks)} sampled fast-path call(s) "
            f"({signatures} at a new input signature, the rest at request starts): "
            f"{len(failed)} failed"
        )
    elif ok:
        evidence.append(
            "no fast-path call was checked against the captured guards (no guard manager was "
            "captured, or no call followed the compile): guard bypass could not be ruled out"
        )
    errors = [e for e in run.collector_errors if str(e.get("where", "")).startswith("magi")]
    evidence.extend(
        f"diag's magi collector failed in {e.get('where')} ({e.get('error')}): what it records "
        "from there on is incomplete"
        for e in errors[:3]
    )
    dump = ok[0].event.data.get("depyf_dump") if ok else None
    if isinstance(dump, dict):
        evidence.append(f"magi_depyf dump: {dump.get('dir')} ({dump.get('file_count')} files)")
    return Finding(
        id=f"{ANALYZER}:summary{id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="info",
        title=f"magi compiled {len(by_name)} target(s) {len(ok)} time(s) "
        f"({format_seconds(total)}, {len(hit)} from magi's cache)"
        + (" before live traffic" if warm and not live else ""),
        evidence=evidence,
        fix="Nothing to fix. To move the cold start out of process start-up, keep cache_root_dir "
        "on persistent storage (magi and Inductor reuse it across runs).",
        location=_target_location(ok[0].event, cwd) if ok else None,
        run=run.label,
        data={
            "compiles": len(ok),
            "targets": sorted(by_name),
            "seconds": total,
            "cold": len(cold),
            "cached": len(hit),
            "guard_checks": len(checks),
        },
    )


def _not_magi_compiled(
    run: RunData, states: list[Event], config: dict[str, object], cwd: str | None
) -> Finding:
    """Targets were called but magi compiled none itself: compile_mode TORCH_COMPILE (plain
    torch.compile underneath, whose compiles the other analyzers report) or no compile yet."""
    mode = config.get("compile_mode")
    names = sorted({str(e.data.get("name")) for e in states})
    dynamo = [c for c in run.compiles if c.frame is not None and c.frame.name in names]
    evidence = [
        f"{len(states)} magi target(s) called ({', '.join(names)}), compile mode {mode}, "
        f"backend {config.get('backend')}",
        f"declared dynamic_arg_dims: {_dims(states[0])}",
    ]
    if mode == "TORCH_COMPILE":
        evidence.append(
            "in this mode magi hands each target to torch.compile(dynamic=True, fullgraph=True) "
            f"and keeps Dynamo's guards: {len(dynamo)} Dynamo compile(s) of these targets, "
            "reported with their guards by the compile analyzers"
        )
        title = f"magi runs in TORCH_COMPILE mode: {len(dynamo)} Dynamo compile(s), guards kept"
    else:
        title = f"magi targets were called ({mode}) but magi compiled none of them"
        evidence.append("no magi compile was recorded in this run")
    return Finding(
        id=f"{ANALYZER}:summary{id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="info",
        title=title,
        evidence=evidence,
        fix="Nothing to fix.",
        location=_target_location(states[0], cwd),
        run=run.label,
        data={"compiles": 0, "targets": names, "mode": mode, "dynamo_compiles": len(dynamo)},
    )


def _cache(item: _Compile) -> str:
    """cold (every subgraph compiled), hit (every one loaded from magi's cache), partial, or
    the collector's own word when its counters are missing."""
    counters = item.event.data.get("counters")
    if not isinstance(counters, dict) or not counters:
        return str(item.event.data.get("cache") or "unknown")
    backend = int(counters.get("num_backend_compilations") or 0)
    compiled = int(counters.get("num_inductor_compiles") or 0) + int(
        counters.get("num_eager_compiles") or 0
    )
    loaded = max(0, backend - compiled)
    if compiled and not loaded:
        return "cold"
    if loaded and not compiled:
        return "hit"
    return "partial" if loaded and compiled else "unknown"


def _split(item: _Compile) -> str:
    dump = item.event.data.get("depyf_dump")
    if isinstance(dump, dict) and isinstance(dump.get("subgraphs"), int) and dump["subgraphs"]:
        return f"{dump['subgraphs']} subgraph(s) (magi_depyf dump)"
    counters = item.event.data.get("counters")
    if isinstance(counters, dict) and counters.get("num_piecewise_graphs_seen"):
        return (
            f"{counters.get('num_piecewise_graphs_seen')} subgraph(s) seen, "
            f"{counters.get('num_piecewise_capturable_graphs_seen')} compiled (magi's counters; "
            "a restarted analysis counts twice)"
        )
    return "not recorded"


_LIGHTX2V_KEYS = ("use_compile", "use_magi_compile", "cpu_offload", "offload_granularity")


def _lightx2v(run: RunData) -> dict[str, object]:
    """The compile keys of LightX2V's runner config (the lightx2v adapter's event), if any."""
    keys: dict[str, object] = {}
    for event in run.of("lightx2v_config"):
        keys.update({k: v for k, v in event.data.items() if k in _LIGHTX2V_KEYS})
    return keys


def _magi_never_imported(run: RunData) -> list[Finding]:
    config = _lightx2v(run)
    if not config.get("use_magi_compile"):
        return []
    return [
        Finding(
            id=f"{ANALYZER}:not-imported{id_suffix(run, None)}",
            analyzer=ANALYZER,
            severity="info",
            title="LightX2V's use_magi_compile is on, but magi_compiler was never imported",
            evidence=[
                f"runner config: {', '.join(f'{k}={v}' for k, v in config.items())}",
                "no magi_compile was seen in this run: magi compiled nothing, and what did "
                "compile is in Dynamo's events (the other findings)",
            ],
            fix="If magi was meant to compile the blocks, check that magi_compiler is installed "
            "where LightX2V runs (it needs Python 3.12 and CUDA).",
            location=None,
            run=run.label,
            data=config,
        )
    ]


def _offload(config: dict[str, object]) -> str:
    offload = config.get("offload_config")
    if isinstance(offload, dict):
        return "on" if offload.get("model_cpu_offload") else "off"
    return "unknown"


def _unseen(run: RunData, declared: list[Event], cwd: str | None) -> Finding | None:
    errors = [e for e in run.collector_errors if str(e.get("where", "")).startswith("magi")]
    if not declared and not errors:
        return None
    names = ", ".join(dict.fromkeys(str(e.data["target"].get("name")) for e in declared))
    evidence = [
        "the program imports magi_compiler" + (f" and decorates {names}" if names else ""),
        "diag saw no call of a magi-compiled target: either none was called, or diag's hook on "
        "magi_compiler._api._run_orchestration did not take (another magi version)",
    ]
    evidence.extend(f"collector error in {e.get('where')}: {e.get('error')}" for e in errors[:3])
    return Finding(
        id=f"{ANALYZER}:unseen{id_suffix(run, None)}",
        analyzer=ANALYZER,
        severity="warning" if errors else "info",
        title="magi_compile is in use but diag saw none of its compiles",
        evidence=evidence,
        fix="If targets were called, diag cannot vouch for them: record once with compile_mode "
        "TORCH_COMPILE (MAGI_COMPILE_COMPILE_MODE=TORCH_COMPILE), whose compiles and recompiles "
        "diag sees, or report the magi version.",
        location=_target_location(declared[0], cwd) if declared else None,
        run=run.label,
        data={"targets": names},
    )
