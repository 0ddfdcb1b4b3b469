"""guard-churn: recompiles caused by guards on Python state rather than on tensors.

Why: Dynamo specialises a frame on every Python value it reads (an int attribute, a string
compared with ==, the length of a dict subclass, the identity of an object). When that value
changes from call to call (a step counter, a pass name, a per-request config or skip set), each
new value fails the guards of every cached entry and compiles again: seconds per recompile in
the middle of traffic, and after torch's recompile limit (8 entries by default) the frame runs
eagerly for good, with no further message. Warmup cannot cover such values, because they never
repeat or depend on the request. Shape changes are not churn (see live-compile), and neither is
a single int that changed once and then stopped failing: automatic dynamic made it symbolic.

One finding per (frame, guard source): how often it failed, the values the cached entries
expected, where each recompile happened, whether the frame reached the recompile limit, the
line that reads the value, and the fix for that kind of guard.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import msgspec

from diag.evidence.causes import recompile_cause, recompile_claim
from diag.evidence.frames import label as frame_label
from diag.evidence.libraries import in_torch_shortened
from diag.findings.model import Finding
from diag.trace.guards import condition_text
from diag.trace.run import Compile, Frame, Guard, RunData, Trace

from .common import id_suffix as _id_suffix
from .common import static_shapes, static_undo, static_verb, steps_known, warmup_known

ANALYZER = "guard-churn"

#: torch's default recompile limit (torch._dynamo.config.recompile_limit).
DEFAULT_LIMIT = 8

#: Guard kinds on Python state. Tensor kinds and `unknown` are left to live-compile.
CHURN_KINDS = (
    "python-value",
    "object-identity",
    "type",
    "container-length",
    "container-keys",
    "global-state",
)
_INT = re.compile(r"^-?\d+$")
_DIGITS = re.compile(r"\d+")
_STACK_FILE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_LOCATION = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")
_MAX_WHERE = 12


@dataclass
class _Group:
    """The failing guards of one source in one frame of one process, in compile order."""

    pid: int
    frame: Frame | None
    source: str
    kind: str
    hits: list[tuple[Compile, Guard]] = field(default_factory=list)
    #: Failures on the same source at a compile refused by the recompile limit: not a
    #: recompile of this group, but their expected values are entries the frame held.
    refused: list[Guard] = field(default_factory=list)
    values: list[str] | None = None  # _values(), computed once

    @property
    def compiles(self) -> list[Compile]:
        seen: list[Compile] = []
        for item, _ in self.hits:
            if not seen or seen[-1] is not item:
                seen.append(item)
        return seen


def analyze(trace: Trace) -> list[Finding]:
    cwd = trace.manifest.get("cwd")
    base = cwd if isinstance(cwd, str) else None
    findings: list[Finding] = []
    for run in trace.subject_runs:
        findings.extend(_analyze_run(run, base))
    return findings


def _analyze_run(run: RunData, cwd: str | None) -> list[Finding]:
    limits = _limit_hits(run)
    return [
        _finding(run, group, cwd, limits.get((group.pid, group.frame))) for group in _groups(run)
    ]


def churn_compiles(run: RunData) -> dict[int, str]:
    """id() of each compile a guard-churn finding reports -> its guard source, so that other
    analyzers (recompiles) do not report the same recompile again."""
    found: dict[int, str] = {}
    for group in _groups(run):
        for item, _ in group.hits:
            found.setdefault(id(item), group.source)
    return found


def _groups(run: RunData) -> list[_Group]:
    """The (process, frame, source) groups of Python-state guards this analyzer reports: each
    recompile counts under the guard that caused it (diag.evidence.causes), never under a guard
    another
    entry failed on. A compile refused at the recompile limit compiled nothing: it is
    recompile-limit's. Other entries' failures on the same source are kept as hits: they say
    which values the entries held."""
    groups: dict[tuple[int, Frame | None, str], _Group] = {}
    refused: list[Compile] = []
    for item in run.compiles:
        if item.result == "recompile_limit":
            refused.append(item)
            continue
        cause = recompile_cause(run, item)
        if cause is None or cause.guard is None or cause.guard.kind not in CHURN_KINDS:
            continue
        if cause.new_module:  # a module the cache had no entry for: no Python state churned
            continue
        source = cause.guard.source or _guard_text(cause.guard)
        key = (item.pid, item.frame, source)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(item.pid, item.frame, source, cause.guard.kind)
        for guard in item.guards:
            if guard is cause.guard or (guard.source or _guard_text(guard)) == source:
                group.hits.append((item, guard))
    for item in refused:
        for guard in item.guards:
            found = groups.get((item.pid, item.frame, guard.source or _guard_text(guard)))
            if found is not None:
                found.refused.append(guard)
    return [group for group in groups.values() if not _automatic_dynamic(group)]


def _automatic_dynamic(group: _Group) -> bool:
    """An int that failed with one expected value, only on entries compiled before its first
    recompile: the recompile made it symbolic (automatic dynamic), so it stopped failing."""
    if group.kind != "python-value":
        return False
    values = _values(group)
    if len(values) != 1 or not _INT.match(values[0]):
        return False
    first = _attempt(group.hits[0][0].compile_id)
    return all(
        guard.compile_id is not None and _attempt(guard.compile_id) < first
        for _, guard in group.hits
    )


def _finding(run: RunData, group: _Group, cwd: str | None, limit: Compile | None) -> Finding:
    frame = frame_label(run, group.frame)
    compiles = group.compiles
    live = [c for c in compiles if c.live]
    values = _values(group)
    newest = _newest(group)
    per_call = _varies_within_a_step(run, compiles)
    count = len(compiles)

    unknown = all(_no_steps(run, c) for c in compiles)
    warmup_only = all(c.phase == "warmup" for c in compiles)
    when = (
        "no step information"
        if unknown
        else ("all in warmup" if warmup_only else "none in a live request")
    )
    evidence = [
        f"{count} recompile(s) of {frame} with the {group.kind} guard on `{group.source}` "
        f"failing ({f'{len(live)} live' if live else when})",
        f"values the cached entries expected: {_values_text(group.kind, values)}",
        f"where: {_where_list(run, compiles)}",
    ]
    if per_call:
        evidence.append(
            f"`{group.source}` differs between calls within one step: a recompile in a step "
            "failed on the entry compiled earlier in that same step (one entry per block or "
            "call site), not only between steps or requests"
        )
    if limit is not None:
        entries = run.cache_entries().get(limit.frame) if limit.frame is not None else None
        held = f" with {entries} cache entries" if entries else ""
        evidence.append(
            f"{frame} reached the recompile limit{held} at {_where(run, limit)}: calls that "
            "match none of its entries run eagerly from there (see recompile-limit for which)"
        )
    else:
        entries = run.cache_entries().get(group.frame) if group.frame is not None else None
        evidence.append(_limit_text(frame, entries))
    evidence.append(f"failing guard at the last recompile: {_guard_text(newest)}")
    location, read_line = _location(_with_tree_line(run, newest, group), group, cwd)
    called_from = group.frame.called_from if group.frame is not None else None
    if location is not None and not read_line and called_from:
        # torch's own wrapper frame: point at the user's call into it, not into torch.
        evidence.append(
            f"no user line recorded for this guard; the compiled frame is torch's own "
            f"({location}), entered from {called_from}"
        )
        location = called_from
    elif location is not None:
        evidence.append(
            f"the compiled code reads `{group.source}` at {location}"
            if read_line
            else f"no user line recorded for this guard; the compiled frame is at {location}"
        )

    live_text = (
        f", {len(live)} live"
        if live
        else ("" if unknown else (", warmup only" if warmup_only else f", {when}"))
    )
    title = f"{frame} recompiled {count} time(s) on `{group.source}` ({group.kind}{live_text})"
    if limit is not None:
        title += ": then hit the recompile limit"
    # Warmup only, nothing recompiled live and no limit hit: warmup paid it and live traffic
    # was served by the entries it compiled. Context (a value traffic may still bring), not a
    # verdict about the run.
    entries = run.cache_entries().get(group.frame) if group.frame is not None else None
    full = entries is not None and entries >= DEFAULT_LIMIT  # the next new value runs eagerly
    severity = (
        "error"
        if live or limit is not None
        else ("info" if warmup_only and not full else "warning")
    )
    return Finding(
        id=f"{ANALYZER}:{frame}:{group.source}{_id_suffix(run, group.pid)}",
        analyzer=ANALYZER,
        severity=severity,
        title=title,
        evidence=evidence,
        fix=_fix(
            group,
            per_call,
            _is_global(newest),
            static_shapes(run, group.pid, group.frame, group.compiles[-1].t),
        ),
        location=location,
        run=run.label,
        data={
            "frame": frame,
            # The compiled frame's file:line (location is the line that reads the source).
            "frame_location": (
                f"{_relative(group.frame.file, cwd)}:{group.frame.line}"
                if group.frame is not None and group.frame.file
                else None
            ),
            "source": group.source,
            "kind": group.kind,
            "recompiles": count,
            "live_recompiles": len(live),
            "values": values,
            "compile_ids": [c.compile_id for c in compiles],
            "where": [
                {"phase": c.phase, "request_id": c.request_id, "step": c.step} for c in compiles
            ],
            "requests": _unique([c.request_id for c in compiles if c.request_id is not None]),
            "live_requests": _unique([c.request_id for c in live if c.request_id is not None]),
            "limit_hit": None
            if limit is None
            else {"phase": limit.phase, "request_id": limit.request_id, "step": limit.step},
            "per_call": per_call,
            "user_location": location if read_line else None,
        },
        claims=[recompile_claim(run, c, frame_label(run, c.frame)) for c in compiles],
    )


def _is_global(guard: Guard) -> bool:
    """A module-level variable: Dynamo names it through the frame's globals, `G[...]`."""
    return guard.raw.split(":", 1)[-1].lstrip().startswith("G[")


def _torch_wrapper(frame: Frame | None) -> bool:
    """The compiled frame is wrap_inline's `inner`, which torch.compile shares between callables."""
    if frame is None:
        return False
    return bool(frame.called_from) or (frame.file or "").endswith("_dynamo/external_utils.py")


def _fix(group: _Group, per_call: bool, is_global: bool, static: str | None) -> str:
    """`static`: what the trace shows keeps the frame's sizes and numbers static
    (common.static_shapes), under which a second value makes nothing dynamic."""
    source = group.source
    kind = group.kind
    if is_global:
        return (
            f"`{source}` is a module-level variable read inside the compiled code: Dynamo "
            "guards on its value, so each new value compiles a new entry (one per layout the "
            "frame is called with). Resolve it outside the graph and pass it in (an argument of "
            "the compiled function, or a tensor if it changes every step), or warm every value "
            "live traffic uses."
        )
    if kind == "python-value" and source.isidentifier() and _numeric(group):
        if static is not None:
            # Both tried under automatic_dynamic_shapes = False (tests/integration/
            # test_automatic_dynamic_off.py): one compile as a tensor, none live without it.
            return (
                f"`{source}` is a Python number argument and the frame {static_verb(static)} "
                f"{static}, so every new value is a new entry. Drop {static_undo(static)} "
                "(under the default the second value makes it dynamic), or pass it as a 0-d "
                "tensor."
            )
        return (
            f"`{source}` is a Python number argument the frame specialises on per value: pass "
            "it as a 0-d tensor, or find what keeps it static (a branch on its value, "
            "torch._dynamo.config.specialize_float, mark_static)."
        )
    if kind in ("container-length", "container-keys"):
        return (
            "Read the config once at init (or pass the value as an argument) instead of calling "
            f".get() on it inside the compiled frame: Dynamo guards on {source}'s "
            f"{'length' if kind == 'container-length' else 'keys'}, which changes as it grows."
        )
    if kind == "python-value":
        if per_call and "." in source and all(_INT.match(v) for v in _values(group)):
            return (
                f"Keep {source} out of the compiled frame: torch.compile treats int attributes "
                "of nn.Modules as static, so a per-block index read inside the frame compiles "
                "one entry per block. Look up the per-block data it selects before the compiled "
                "call and pass that in (as a tensor), or set "
                "torch._dynamo.config.allow_unspec_int_on_nn_module = True."
            )
        return (
            f"Pass the value of {source} as an explicit input (a tensor if it changes every "
            "step) or resolve it before the graph, so the compiled frame does not branch on it."
        )
    if kind == "object-identity" and _torch_wrapper(group.frame):
        return (
            f"torch.compile ran these callables through its own wrapper frame (wrap_inline's "
            f"`inner`: a builtin or torch function, code without a source file, or "
            f"config.wrap_top_frame), so every function compiled that way shares one code "
            f"cache and each new {source} is an object-identity recompile. Compile the "
            "function of yours that calls them, or define a Python function of your own "
            "around each before torch.compile so each gets its own frame."
        )
    if kind == "object-identity":
        return (
            f"Pass the object's tensors, not the object ({source}); avoid closures over "
            "per-call objects, which Dynamo guards on by identity."
        )
    if kind == "type":
        return (
            f"Give {source} the same type on every call (e.g. always a tensor, never a float), "
            "or convert it before the compiled call."
        )
    return (
        "Keep global state (grad mode, autocast, default device, torch function modes) the same "
        "for every call of the compiled code: set it once outside, not per request."
    )


def _varies_within_a_step(run: RunData, compiles: list[Compile]) -> bool:
    """The value changed between calls inside one step: a recompile whose cause is the entry
    compiled earlier in that same step (not merely two recompiles in one step: two layers
    with different layouts each need their own entry when a global changes)."""
    compiled_at: dict[tuple[int, str], tuple[str | None, int | None]] = {}
    for item in run.compiles:
        compiled_at[(item.epoch, item.compile_id)] = (item.request_id, item.step)
    for item in compiles:
        if item.request_id is None or item.step is None:
            continue
        cause = recompile_cause(run, item)
        if cause is None or cause.entry is None:
            continue
        if compiled_at.get((item.epoch, cause.entry)) == (item.request_id, item.step):
            return True
    return False


def _numeric(group: _Group) -> bool:
    for value in _values(group):
        try:
            float(value)
        except ValueError:
            return False
    return True


# --- guards and compile ids --------------------------------------------------------------------


def _values(group: _Group) -> list[str]:
    """Distinct expected values, in the order the entries that held them were compiled."""
    if group.values is None:
        group.values = _ordered_values(group)
    return group.values


def _ordered_values(group: _Group) -> list[str]:
    guards = [guard for _, guard in group.hits] + group.refused
    ordered = sorted(guards, key=lambda guard: _attempt(guard.compile_id or ""))
    values: list[str] = []
    for guard in ordered:
        value = guard.expected if guard.expected is not None else _guard_text(guard)
        if value not in values:
            values.append(value)
    return values


def _values_text(kind: str, values: list[str]) -> str:
    shown = values if len(values) <= 6 else [*values[:3], "...", *values[-2:]]
    if kind == "container-length":
        return "len " + " -> ".join(shown)
    text = " then ".join(shown)
    return text + (f" ({len(values)} distinct)" if len(values) > 2 else "")


def _newest(group: _Group) -> Guard:
    """The guard of the newest entry in the latest recompile."""
    last = group.hits[-1][0]
    guards = [guard for item, guard in group.hits if item is last]
    return max(guards, key=lambda guard: _attempt(guard.compile_id or ""))


@functools.lru_cache(maxsize=1 << 16)
def _attempt(compile_id: str) -> tuple[int, ...]:
    """`1/3` -> (1, 3): compile ids order numerically (ids repeat across guards: memoised)."""
    return tuple(int(part) for part in _DIGITS.findall(compile_id))


def _guard_text(guard: Guard) -> str:
    lines = condition_text(guard.raw).splitlines()
    first = lines[0] if lines else ""
    if not first:
        first = f"{guard.source} == {guard.expected}" if guard.source else guard.kind
    return first[:200]


def _limit_hits(run: RunData) -> dict[tuple[int, Frame | None], Compile]:
    """Per (process, frame): the compile that hit the recompile limit, or the limit event made
    into one (older recordings have only the event)."""
    hits: dict[tuple[int, Frame | None], Compile] = {}
    for event in reversed(run.of("recompile_limit")):
        frame = Frame.from_event(event.data.get("frame"))
        if frame is None:
            continue
        phase, request_id, step = event.position
        hits[(event.pid, frame)] = Compile(
            compile_id=str(event.data.get("compile_id")),
            epoch=int(event.data.get("epoch") or 0),
            frame=frame,
            result="recompile_limit",
            duration_s=None,
            t=event.t,
            start_t=None,
            phase=phase,
            request_id=request_id,
            step=step,
            pid=event.pid,
        )
    for item in reversed(run.compiles):
        if item.result == "recompile_limit":
            hits[(item.pid, item.frame)] = item
    return hits


# --- text helpers ------------------------------------------------------------------------------


def reading_line(run: RunData, item: Compile, guard: Guard, cwd: str | None) -> str | None:
    """The user's line that reads a failing guard's source, as this analyzer's findings name it
    (the guard tree's line when the reason names none; relative to `cwd`), or None when only
    the frame is known. The notebook API's guard_failures frame shows the same line."""
    group = _Group(item.pid, item.frame, guard.source or "", guard.kind)
    location, read = _location(_with_tree_line(run, guard, group), group, cwd)
    return location if read else None


def _with_tree_line(run: RunData, guard: Guard, group: _Group) -> Guard:
    """The guard with the user line that reads its source, from the failing entry's guard tree
    (the `guard_sources` event) when the recompile reason names none: a dict's length guard
    (`len(block.state.config) != 6`) carries no line, its sibling guards on the dict do."""
    if guard.user_location or not guard.source:
        return guard
    for event in run.of("guard_sources"):
        if event.pid != group.pid or event.data.get("compile_id") != guard.compile_id:
            continue
        sources = event.data.get("sources")
        where = sources.get(guard.source) if isinstance(sources, dict) else None
        # A line in torch's own code (a wrapper's closure) is no line of the user's.
        if isinstance(where, str) and where and not in_torch_shortened(where):
            return msgspec.structs.replace(guard, user_location=where)
    return guard


def _limit_text(frame: str, entries: int | None) -> str:
    """Where the frame's cache stands against the limit when no compile hit it. torch refuses
    the compile that would add an entry past the limit, so 8 entries of 8 is a full cache (as
    cache-bloat says): no compile was refused yet, and the next new value runs eagerly."""
    if not entries or entries < DEFAULT_LIMIT:
        held = (
            f" ({entries} cache entries at exit; the limit is {DEFAULT_LIMIT})" if entries else ""
        )
        return f"{frame} stayed under torch's default recompile limit in this run{held}"
    if entries == DEFAULT_LIMIT:
        return (
            f"{frame} is at the recompile limit: {entries} cache entries at exit, torch's default "
            f"limit is {DEFAULT_LIMIT}; no compile was refused yet, and the next new value runs "
            "eagerly"
        )
    return (
        f"{frame} holds {entries} cache entries at exit, more than torch's default recompile "
        f"limit ({DEFAULT_LIMIT}), and no compile hit a limit: this run raised "
        "torch._dynamo.config.recompile_limit"
    )


def _no_steps(run: RunData, item: Compile) -> bool:
    """No phase for this compile: a TORCH_TRACE log, or a process no adapter knew."""
    if item.phase == "unknown":
        return True
    return (
        item.request_id is None
        and item.phase == "live"
        and not steps_known(run, item.pid)
        and not warmup_known(run, item.pid)
    )


def _where(run: RunData, item: Compile) -> str:
    if _no_steps(run, item):
        return f"compile {item.compile_id} (no step information)"
    if item.request_id is None:
        return f"{item.phase} (outside a request)"
    step = f" step {item.step}" if item.step is not None else ""
    return f"{item.phase} {item.request_id}{step}"


def _where_list(run: RunData, compiles: list[Compile]) -> str:
    runs: list[tuple[str, int]] = []
    for item in compiles:
        text = _where(run, item)
        if runs and runs[-1][0] == text:
            runs[-1] = (text, runs[-1][1] + 1)
        else:
            runs.append((text, 1))
    parts = [f"{text} (x{n})" if n > 1 else text for text, n in runs]
    if len(parts) > _MAX_WHERE:
        parts = [*parts[: _MAX_WHERE - 1], f"... and {len(parts) - _MAX_WHERE + 1} more"]
    return ", ".join(parts)


def _location(guard: Guard, group: _Group, cwd: str | None) -> tuple[str | None, bool]:
    """The user's line that reads the value (True), else the frame's file:line (False), relative
    to the recording's working directory when under it.

    torch shortens the guard comment's path against its own install folder and drops one
    character too many when they share only "/" (/tmp/app.py:6 -> mp/app.py:6); the guard's
    user stack trace keeps the full path, so it repairs the location.
    """
    if guard.user_location:
        match = _LOCATION.match(guard.user_location)
        if match is None:
            return guard.user_location, True
        short, line = match.group("file"), match.group("line")
        for found in _STACK_FILE.finditer(guard.raw):
            if found.group("line") == line and found.group("file").endswith(short):
                return f"{_relative(found.group('file'), cwd)}:{line}", True
        frame_file = group.frame.file if group.frame is not None else None
        if frame_file and frame_file.endswith(short) and not short.startswith("/"):
            return f"{_relative(frame_file, cwd)}:{line}", True
        return guard.user_location, True
    if group.frame is not None and group.frame.file:
        return f"{_relative(group.frame.file, cwd)}:{group.frame.line}", False
    return None, False


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
