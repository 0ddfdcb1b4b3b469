"""Why a frame recompiled: the one place that reads a recompile's cause off its evidence.

Dynamo checks a call against every cache entry of the frame and recompiles only when all of
them fail; torch records one failure per entry, newest first. The newest entry's failure is
often not why *this* call recompiled: when the entries were compiled for different tensor
layouts (layer 0's input a transposed view, layer 1's contiguous), the newest entry may fail on
a stride while the entry compiled for this call's layout failed on something else, a global or
an attribute. That other failure is the cause: fixing it lets that entry serve the call.

Which entry could have served the call is read off the entries' guard trees (the `tensors` of
`guard_sources` events): an entry expecting other sizes, strides or dtypes than the new entry,
which was compiled for this very call, could not serve it whatever else it checked. An entry
whose own failure is a tensor property could not either. Nor could an entry whose failure
names another module: blocks compiled one by one share one code object, so at each block's call
the entries compiled for the other blocks fail on the module itself (a submodule it has that
this one lacks, a submodule or `self` of another type). Those entries are context;
the cause comes from the entries compiled for the call's own module, and when there are none,
the call brought a module no entry was compiled for. When one entry is left, its failure
is the cause; when every entry failed on the same source, that source is; otherwise the
evidence does not decide, and the cause says so with every entry's failure.

Analyzers, `check`, the TUI and the report read `recompile_cause` and never pick a guard of
their own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from diag.evidence.cause_model import (
    MODULE_ENTRY as MODULE_ENTRY,
)
from diag.evidence.cause_model import (
    NEAREST_GLOBAL_STATE as NEAREST_GLOBAL_STATE,
)
from diag.evidence.cause_model import (
    NEW_MODULE as NEW_MODULE,
)
from diag.evidence.cause_model import (
    NEW_TENSOR as NEW_TENSOR,
)
from diag.evidence.cause_model import (
    NEW_VALUE as NEW_VALUE,
)
from diag.evidence.cause_model import (
    ONLY_ENTRY as ONLY_ENTRY,
)
from diag.evidence.cause_model import (
    SAME_SOURCE as SAME_SOURCE,
)
from diag.evidence.cause_model import (
    SAME_STEP as SAME_STEP,
)
from diag.evidence.cause_model import (
    TENSOR_COMPATIBLE as TENSOR_COMPATIBLE,
)
from diag.evidence.cause_model import (
    TENSOR_KINDS as TENSOR_KINDS,
)
from diag.evidence.cause_model import (
    UNDECIDED as UNDECIDED,
)
from diag.evidence.cause_model import (
    EntryFailure as EntryFailure,
)
from diag.evidence.cause_model import (
    EntryTable as EntryTable,
)
from diag.evidence.cause_model import (
    RecompileCause as RecompileCause,
)
from diag.evidence.cause_model import (
    TensorTable as TensorTable,
)
from diag.evidence.request_names import request_name
from diag.trace.guards import guard_check
from diag.trace.numerals import parse_int
from diag.trace.run import Compile, Guard, RunData


def recompile_cause(run: RunData, item: Compile) -> RecompileCause | None:
    """The cause of `item`'s recompile, or None when it was a first compile (no guards)."""
    if not item.guards:
        return None
    found: RecompileCause | None = run._causes.get(id(item))
    if found is None:
        tables = _tensor_tables(run)
        found = _decide(item, tables)
        found = replace(found, change=program_change(run, item, found, tables))
        run._causes[id(item)] = found
    return found


def program_change(
    run: RunData,
    item: Compile,
    cause: RecompileCause,
    tables: dict[tuple[int, int, str], EntryTable],
) -> str | None:
    """The cause in the program's terms, read off torch's record of the failing guard and the
    entries' guard trees (diag.evidence.change reads the guard kinds); None when nothing more than
    the
    guard itself is known."""
    from diag.evidence.change import describe_change

    entry = (
        tables.get((item.pid, item.epoch, str(cause.entry))) if cause.entry is not None else None
    )
    call = tables.get((item.pid, item.epoch, item.compile_id))
    return describe_change(run, item, cause, entry, call)


#: torch's guard-failure kind when a call's guards failed at run time and passed when torch
#: checked them again to report why (diag.trace.guard_vocabulary: "torch could not say which
#: guard failed"): the call fit an entry, and something changed between the two checks.
UNEXPECTED = "unexpected"


def unexplained_guard(guard: Guard | None) -> bool:
    """torch's `Unexpected recompilation`: a failure that names no guard."""
    return guard is not None and guard_check(guard.raw) == UNEXPECTED


def unexplained_by_torch(cause: RecompileCause | None) -> bool:
    """The recompile's cause is torch's `Unexpected recompilation`: no failing guard named."""
    return cause is not None and unexplained_guard(cause.guard)


def concurrent_compiles(run: RunData, item: Compile) -> list[Compile]:
    """The compiles another thread of the same process ran while `item`'s step was under way,
    before `item` began: the call that recompiled checked its guards in that span. A compile
    changes state that the guards of calls in other threads read, and such a call's guards can
    fail and then pass again when torch checks them for the reason (its `Unexpected
    recompilation`). Seen in a pipeline served from two threads: a request at a new width
    compiled while the other request ran, whose call then waited for that compile (Dynamo
    compiles one frame at a time) and recompiled 8 ms after it ended (tests/data/threads)."""
    if item.start_t is None or item.thread is None:
        return []
    since = _step_start(run, item) or item.start_t
    return [
        other
        for other in run.compiles
        if other is not item
        and other.pid == item.pid
        and other.epoch == item.epoch
        and other.thread is not None
        and other.thread != item.thread
        and other.start_t is not None
        and other.start_t <= item.start_t
        and other.t >= since
    ]


def unexplained_line(run: RunData, item: Compile) -> str | None:
    """For a recompile torch could not explain, what its text means in the run's terms and the
    compile another thread ran during the call's step; None for any other compile. One wording
    for live-compile's evidence and `check`'s."""
    if not unexplained_by_torch(recompile_cause(run, item)):
        return None
    text = (
        "torch checked the call's guards again to say why, and they passed: the call fit an "
        "entry, and something changed between the two checks"
    )
    beside = concurrent_compiles(run, item)
    if not beside:
        return text + " (no other thread was compiling then)"
    other = beside[0]
    place = _compile_place(run, other)
    thread = "" if f"thread {other.thread}" in place else f", thread {other.thread}"
    return (
        f"{text}; during this call's step, another thread was compiling: {other.compile_id} "
        f"({place}{thread})"
    )


def _compile_place(run: RunData, item: Compile) -> str:
    where = f"step {item.step}" if item.step is not None else "outside a step"
    if item.request_id is None:
        return where
    return f"{item.phase} request {request_name(run, item.pid, item.request_id)} {where}"


def _step_start(run: RunData, item: Compile) -> int | None:
    if item.request_id is None or item.step is None:
        return None
    for request in run.requests:
        if request.pid == item.pid and request.request_id == item.request_id:
            return next((s.start_t for s in request.steps if s.index == item.step), None)
    return None


def cause_guard(run: RunData, item: Compile) -> Guard | None:
    """The guard that explains `item` (None: a first compile, or a cause not decided)."""
    cause = recompile_cause(run, item)
    return cause.guard if cause is not None else None


def _tensor_tables(run: RunData) -> dict[tuple[int, int, str], EntryTable]:
    """(pid, epoch, compile id) -> what the entry was compiled for; built once a run."""
    if run._tensor_tables is not None:
        return run._tensor_tables
    tables: dict[tuple[int, int, str], EntryTable] = {}
    for event in run.of("guard_sources"):
        tensors = event.data.get("tensors")
        values = event.data.get("values")
        epoch = event.data.get("epoch")
        table = EntryTable(
            tensors if isinstance(tensors, dict) else {},
            {str(k): str(v) for k, v in values.items()} if isinstance(values, dict) else {},
        )
        if table.tensors or table.values:
            key = (
                event.pid,
                epoch if isinstance(epoch, int) else 0,
                str(event.data.get("compile_id")),
            )
            tables[key] = table
    for item in run.compiles:
        key = (item.pid, item.epoch, item.compile_id)
        if key in tables:
            tables[key] = replace(
                tables[key], step=item.step, phase=item.phase, request_id=item.request_id
            )
    run._tensor_tables = tables
    return tables


def _decide(item: Compile, tables: dict[tuple[int, int, str], EntryTable]) -> RecompileCause:
    by_entry: dict[str | None, Guard] = {}
    for guard in item.guards:  # one failure per entry; verbose logs may give several
        by_entry.setdefault(guard.compile_id, guard)
    call = tables.get((item.pid, item.epoch, item.compile_id))
    facts = _call_facts(item.guards)
    failures = [
        _entry_failure(entry, guard, tables.get((item.pid, item.epoch, str(entry))), call, facts)
        for entry, guard in by_entry.items()
    ]
    failures = _unproven_when_tables_cannot_tell(failures, item, tables)
    own = [f for f in failures if not f.other_module]
    if not own:
        # Every entry was compiled for another module: what the call brought is its module.
        first = failures[0]
        return RecompileCause(first.guard, first.entry, True, NEW_MODULE, failures)
    cause = _choose(own, item, tables)
    if len(own) == len(failures):
        return cause
    why = MODULE_ENTRY if cause.why == ONLY_ENTRY else cause.why
    return replace(cause, why=why, failures=failures)


def _choose(
    failures: list[EntryFailure],
    item: Compile,
    tables: dict[tuple[int, int, str], EntryTable],
) -> RecompileCause:
    """The cause among the entries compiled for the call's own module."""
    if len(failures) == 1:
        only = failures[0]
        return RecompileCause(only.guard, only.entry, True, ONLY_ENTRY, failures)
    possible = [f for f in failures if f.tensors_match is not False]
    sources = {(f.guard.kind, f.guard.source) for f in failures}
    if len(possible) == 1:
        chosen = possible[0]
        # Decided only when the others are proven unable to serve the call and the chosen one
        # is known to fit it (its guard tree matches the call's); else it is the likeliest.
        decided = chosen.tensors_match is True or len(sources) == 1
        return RecompileCause(
            chosen.guard,
            chosen.entry,
            decided,
            TENSOR_COMPATIBLE if decided else UNDECIDED,
            failures,
        )
    if len(sources) == 1:
        first = failures[0]
        return RecompileCause(first.guard, first.entry, True, SAME_SOURCE, failures)
    fitting = [f for f in failures if f.tensors_fit and f.guard.kind not in TENSOR_KINDS]
    if not possible and fitting:
        # Entries compiled for the call's own tensors were kept out by Python values only: the
        # call brought a value no entry was compiled for. Their failing guard names it (the
        # source most of them fail on; decided when they all fail on one).
        chosen, agree = _new_value(fitting, item, tables) or _most_common(fitting)
        return RecompileCause(chosen.guard, chosen.entry, agree, NEW_VALUE, failures)
    if not possible:
        # Every entry was compiled for other tensors: the call brought a new size, stride or
        # dtype. Name torch's own tensor failure when an entry reported one (what the call
        # brought), else the failure most entries share (the newest among equals).
        tensor = next((f for f in failures if f.guard.kind in TENSOR_KINDS), None)
        if tensor is not None:
            return RecompileCause(tensor.guard, tensor.entry, True, NEW_TENSOR, failures)
        chosen, _ = _most_common(failures)
        return RecompileCause(chosen.guard, chosen.entry, True, NEW_TENSOR, failures)
    same = {(f.guard.kind, f.guard.source) for f in possible}
    if len(same) == 1:
        # The entries not ruled out all failed on one source; others failed on a tensor. Decided
        # only when those entries are known to fit the call's tensors: else the tensor failure
        # may be the call's real novelty (a new shape no entry was compiled for).
        chosen = possible[0]
        decided = all(f.tensors_match is True for f in possible) or not any(
            f.guard.kind in TENSOR_KINDS for f in failures
        )
        return RecompileCause(chosen.guard, chosen.entry, decided, SAME_SOURCE, failures)
    same_step = _same_step(possible, item, tables)
    if same_step is not None:
        return RecompileCause(same_step.guard, same_step.entry, True, SAME_STEP, failures)
    nearest = _nearest_global_state(possible)
    if nearest is not None:
        decided = nearest.tensors_match is True
        why = NEAREST_GLOBAL_STATE if decided else UNDECIDED
        return RecompileCause(nearest.guard, nearest.entry, decided, why, failures)
    return RecompileCause(None, None, False, UNDECIDED, failures)


def _nearest_global_state(possible: list[EntryFailure]) -> EntryFailure | None:
    """torch's GLOBAL_STATE failure lists the fields that differ from the entry (`grad_mode
    autocast(cpu)_enabled`). When every entry that could serve failed there, the entry whose
    fields are a subset of every other's is the one nearest the call: warmup under no_grad, one
    request under torch.autocast, and the no_grad entry fails on autocast alone while the
    grad-mode entries fail on both. Its fields are what the call changed."""
    if any(f.guard.kind != "global-state" or not f.guard.source for f in possible):
        return None
    fields = [frozenset(str(f.guard.source).split()) for f in possible]
    smallest = min(fields, key=len)
    if fields.count(smallest) != 1 or not all(smallest <= other for other in fields):
        return None
    return possible[fields.index(smallest)]


def _same_step(
    possible: list[EntryFailure],
    item: Compile,
    tables: dict[tuple[int, int, str], EntryTable],
) -> EntryFailure | None:
    """Several entries fit the call but for their one failing guard (a step counter on the module
    and a per-request setting each keep one out): the entry compiled at the call's own step is
    the one the loop meant to reuse, and its failure is what changed since (`self.num_steps`),
    while the others fail on what changes every step (`self.cnt`)."""
    if item.step is None:
        return None
    fitting = [f for f in possible if f.tensors_match is True]
    if len(fitting) < 2:
        return None
    at_step = [
        f
        for f in fitting
        if (table := tables.get((item.pid, item.epoch, str(f.entry)))) is not None
        and table.step == item.step
    ]
    return at_step[0] if len(at_step) == 1 else None


def _unproven_when_tables_cannot_tell(
    failures: list[EntryFailure],
    item: Compile,
    tables: dict[tuple[int, int, str], EntryTable],
) -> list[EntryFailure]:
    """An entry whose recorded tensors equal those of an entry that failed on a tensor property
    (a duck-sizing relation, say, that the recorded sizes and strides do not hold) is not
    proven to fit the call: the record cannot tell the two apart."""

    def tensors(entry: str | None) -> Any:
        table = tables.get((item.pid, item.epoch, str(entry)))
        return table.tensors if table is not None and table.tensors else None

    failed_on_tensors = [
        tensors(f.entry) for f in failures if f.guard.kind in TENSOR_KINDS and tensors(f.entry)
    ]
    if not failed_on_tensors:
        return failures
    return [
        replace(f, tensors_match=None, tensors_fit=False)
        if f.tensors_match is True and tensors(f.entry) in failed_on_tensors
        else f
        for f in failures
    ]


def _new_value(
    fitting: list[EntryFailure],
    item: Compile,
    tables: dict[tuple[int, int, str], EntryTable],
) -> tuple[EntryFailure, bool] | None:
    """The value every fitting entry was compiled with another value of than the call has (its
    guard trees say so): the call's novelty, decided. None when no single source is new to all."""
    from diag.trace.guards import tree_key

    call = tables.get((item.pid, item.epoch, item.compile_id))
    if call is None or not call.values:
        return None
    common: set[str] | None = None
    for failure in fitting:
        table = tables.get((item.pid, item.epoch, str(failure.entry)))
        if table is None:
            return None
        differ = {k for k, v in table.values.items() if k in call.values and call.values[k] != v}
        common = differ if common is None else common & differ
    if not common:
        return None
    for failure in fitting:
        if failure.guard.source and tree_key(failure.guard.source) in common:
            return failure, len(common) == 1
    return None


def _most_common(failures: list[EntryFailure]) -> tuple[EntryFailure, bool]:
    """The failure on the (kind, source) most entries share (the newest among equals), and
    whether every entry shares it."""
    counts: dict[tuple[str, str | None], int] = {}
    for failure in failures:
        key = (failure.guard.kind, failure.guard.source)
        counts[key] = counts.get(key, 0) + 1
    best = max(counts.values())
    chosen = next(f for f in failures if counts[(f.guard.kind, f.guard.source)] == best)
    return chosen, len(counts) == 1


#: (tensor source, "size" or "stride", index) -> the call's value, from torch's own messages.
Facts = dict[tuple[str, str, int], int]

_AT_INDEX = re.compile(r"(size|stride) mismatch at index (\d+)")


def _call_facts(guards: list[Guard]) -> Facts:
    """What torch's failure messages say of the call itself: `tensor 'freqs_w' size mismatch at
    index 0. expected 4, actual 6` -> the call's freqs_w has size 6 at index 0."""
    facts: Facts = {}
    for guard in guards:
        if guard.kind not in ("tensor-size", "tensor-stride") or guard.source is None:
            continue
        match = _AT_INDEX.search(guard.raw)
        actual = parse_int(guard.actual, signed=True)
        index = parse_int(match.group(2)) if match else None
        if match is None or actual is None or index is None:
            continue
        facts[(guard.source, match.group(1), index)] = actual
    return facts


def _entry_failure(
    entry: str | None,
    guard: Guard,
    table: EntryTable | None,
    call: EntryTable | None,
    facts: Facts | None = None,
) -> EntryFailure:
    module = other_module(guard)
    if module is not None:
        return EntryFailure(entry, guard, False, module, other_module=True)
    if guard.kind in TENSOR_KINDS:
        return EntryFailure(entry, guard, False, guard_text_short(guard))
    if table is None:
        return EntryFailure(entry, guard, None)
    # What torch's messages say of the call decides first: a static size this entry was
    # compiled for that the call does not have.
    against = fact_mismatch(table.tensors, facts or {})
    if against is not None:
        return EntryFailure(entry, guard, False, against)
    if call is None:
        return EntryFailure(entry, guard, None)
    tensors = tensor_mismatch(table.tensors, call.tensors)
    if tensors is not None:
        return EntryFailure(entry, guard, False, tensors)
    values = value_mismatch(table.values, call.values, guard.source)
    if values is not None:
        fit = bool(table.tensors and call.tensors) and not _unknown_dims(
            table.tensors, call.tensors
        )
        return EntryFailure(entry, guard, False, values, tensors_fit=fit)
    if not (table.tensors and call.tensors) or _unknown_dims(table.tensors, call.tensors):
        # Nothing compared, or a dim this entry fixed that the call's entry left dynamic:
        # the call's value there is not known, so neither is whether this entry fits it.
        return EntryFailure(entry, guard, None)
    return EntryFailure(entry, guard, True)


# `KeyError on self._modules['attn']._modules['to_add_out']` (torch 2.11 and 2.13 alike): the
# entry reads a submodule, parameter or buffer that the call's module does not have.
_MISSING = re.compile(
    r"^KeyError on (?P<owner>.+)\._(?P<dict>modules|parameters|buffers)\[(?P<key>.+)\]$"
)
# `___check_type_id(self._modules['norm1_context'], 94...), type=<class '...AdaLayerNormZero'>`:
# the type of `self` or of one of its submodules (torch 2.11 and 2.13).
_TYPE_OF = re.compile(r"^___check_type_id\((?P<src>.+?), -?\d+\)(?:, type=(?P<type><.+>))?")
_SUBMODULE = re.compile(r"\._modules\[(?P<q>['\"])[^'\"]*(?P=q)\]$")
_WHAT = {"modules": "submodule", "parameters": "parameter", "buffers": "buffer"}


def other_module(guard: Guard) -> str | None:
    """How the entry that failed on `guard` was compiled for another module than the call's
    (None: the guard does not say). A missing submodule, parameter or buffer, or `self` or a
    submodule of another type, identifies the module itself: that entry could never serve a
    call on this one, whatever else it checks."""
    from diag.trace.guards import condition_text, tree_key

    text = condition_text(guard.raw)
    missing = _MISSING.match(text)
    if missing is not None:
        return (
            f"compiled for a module whose {missing.group('owner')} has the "
            f"{_WHAT[missing.group('dict')]} {missing.group('key')} (the call's has not)"
        )
    type_of = _TYPE_OF.match(text)
    if type_of is None:
        return None
    source = tree_key(type_of.group("src"))
    if source != "self" and _SUBMODULE.search(source) is None:
        return None
    expected = type_of.group("type") or "its type id differs"
    if source == "self":
        return f"compiled for a `self` of another type ({expected})"
    return f"compiled for a module whose {source} is of another type ({expected})"


def fact_mismatch(entry: TensorTable, facts: Facts) -> str | None:
    for (source, key, index), actual in facts.items():
        spec = entry.get(source)
        values = spec.get(key) if isinstance(spec, Mapping) else None
        if isinstance(values, list) and index < len(values):
            mine = values[index]
            if isinstance(mine, int) and mine != actual:
                return (
                    f"compiled for {key} {_dims(values)} of {source} ({key} {mine} at index "
                    f"{index}; the call has {actual})"
                )
    return None


def _unknown_dims(entry: TensorTable, call: TensorTable) -> bool:
    for source, spec in entry.items():
        other = call.get(source)
        if not isinstance(other, Mapping) or not isinstance(spec, Mapping):
            continue
        for key in ("size", "stride"):
            mine, theirs = spec.get(key), other.get(key)
            if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
                if any(isinstance(a, int) and b is None for a, b in zip(mine, theirs, strict=True)):
                    return True
    return False


def value_mismatch(
    entry: Mapping[str, str], call: Mapping[str, str], failing: str | None
) -> str | None:
    """A Python value this entry was compiled for that the call does not have (the call's are
    the new entry's), other than the one the entry failed on (whose difference is the failure
    itself, not a reason the entry could never serve)."""
    from diag.trace.guards import tree_key

    failing_key = tree_key(failing) if failing else None
    for source, value in entry.items():
        other = call.get(source)
        if other is not None and other != value and source != failing_key:
            return f"compiled for {source} == {value}, the call has {other}"
    return None


def tensor_mismatch(entry: TensorTable, call: TensorTable) -> str | None:
    """How `entry`'s tensors differ from the call's (None: no difference seen). Dims either side
    left dynamic (None) are not compared: a dynamic entry accepts any value there."""
    for source, spec in entry.items():
        other = call.get(source)
        if not isinstance(other, Mapping) or not isinstance(spec, Mapping):
            continue
        for key in ("dtype", "device"):
            if spec.get(key) != other.get(key):
                return (
                    f"compiled for {key} {spec.get(key)} of {source}, the call has {other.get(key)}"
                )
        for key in ("size", "stride"):
            mine, theirs = spec.get(key), other.get(key)
            if not isinstance(mine, list) or not isinstance(theirs, list):
                continue
            if len(mine) != len(theirs):
                return (
                    f"compiled for {len(mine)} dimensions of {source}, the call has {len(theirs)}"
                )
            for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
                if isinstance(a, int) and isinstance(b, int) and a != b:
                    return (
                        f"compiled for {key} {_dims(mine)} of {source} "
                        f"({key} {a} at index {index}; the call has {b})"
                    )
    return None


def guard_text_short(guard: Guard) -> str:
    from diag.trace.guards import condition_text

    return condition_text(guard.raw) or f"{guard.kind} on {guard.source}"


def _dims(values: list[Any]) -> str:
    return "[" + ", ".join("?" if v is None else str(v) for v in values) + "]"


# --- how the cause reads -----------------------------------------------------------------------

_SHOWN_OTHERS = 3


def guard_condition(guard: Guard) -> str:
    """A guard's condition as reports quote it (first line, at most 200 characters)."""
    from diag.trace.guards import condition_text

    lines = condition_text(guard.raw).splitlines()
    text = lines[0] if lines else ""
    if not text:
        text = f"{guard.source} == {guard.expected}" if guard.source else guard.kind
    return text[:200]


def cause_short(cause: RecompileCause | None) -> str:
    """The cause for a title: the failing guard's condition, or `cause undecided: A or B`."""
    if cause is None:
        return ""
    if cause.why == NEW_MODULE and cause.guard is not None:
        return (
            f"a new {_module_word(cause.guard)}, no cache entry was compiled for it: "
            f"{guard_condition(cause.guard)}"
        )
    if cause.guard is not None and cause.change:
        return ("" if cause.decided else "likeliest: ") + cause.change
    if cause.guard is not None:
        return ("" if cause.decided else "likeliest ") + guard_condition(cause.guard)
    shown = [guard_condition(g) for g in cause.candidates[:_SHOWN_OTHERS]]
    return "cause undecided: " + " or ".join(shown)


def cause_line(cause: RecompileCause) -> str:
    """The cause for an evidence line: the guard, how its entry was chosen, and why each other
    entry could not have served the call."""
    if cause.guard is None:
        failures = "; ".join(
            f"{f.entry or '?'} {guard_condition(f.guard)}" for f in cause.failures[:_SHOWN_OTHERS]
        )
        return (
            "cause undecided: the entries failed on different guards and the evidence does not "
            f"tell which one was compiled for this call ({failures})"
        )
    guard = cause.guard
    condition = guard_condition(guard)
    line = (
        f"failing guard: {condition}"
        if guard.kind == "unknown" and guard.source is None
        else f"failing guard: {guard.describe(condition)}"
    )
    foreign = [f for f in cause.failures if f.other_module]
    if cause.why == NEW_MODULE:
        listed = "; ".join(f"{f.entry or '?'} {f.mismatch}" for f in foreign[:_SHOWN_OTHERS])
        more = f" and {len(foreign) - _SHOWN_OTHERS} more" if len(foreign) > _SHOWN_OTHERS else ""
        return (
            f"{line} (no cache entry was compiled for this call's {_module_word(guard)}: "
            f"{listed}{more})"
        )
    if cause.why == ONLY_ENTRY:
        line += " (the frame's only cache entry)"
    elif cause.why == MODULE_ENTRY:
        line += f" (entry {cause.entry}, the only one compiled for this call's module)"
    elif cause.why == TENSOR_COMPATIBLE:
        line += f" (entry {cause.entry}, the one compiled for this call's tensors)"
    elif cause.why == SAME_STEP:
        line += (
            f" (entry {cause.entry}, compiled at this call's step: each other entry that fits "
            "the call's tensors fails on one other guard, a value that changes step to step)"
        )
    elif (
        cause.why == SAME_SOURCE
        and len({(f.guard.kind, f.guard.source) for f in cause.failures}) == 1
    ):
        line += f" (every entry failed on `{guard.source or guard.kind}`)"
    elif cause.why == SAME_SOURCE:
        ruled_out = sum(1 for f in cause.failures if f.tensors_match is False)
        line += (
            f" (every entry not ruled out failed on `{guard.source or guard.kind}`; {ruled_out} "
            f"other{'s' if ruled_out != 1 else ''} could not serve the call"
            + (
                ""
                if cause.decided
                else ", and whether the rest fit the call's tensors is not known: likeliest, not "
                "decided"
            )
            + ")"
        )
    elif cause.why == NEW_TENSOR:
        line += " (no entry was compiled for these tensors)"
    elif cause.why == NEW_VALUE:
        fitting = sum(1 for f in cause.failures if f.tensors_fit)
        line += (
            f" (no entry was compiled for this value: {fitting} entr"
            f"{'y' if fitting == 1 else 'ies'} compiled for the call's tensors hold other values"
            + ("" if cause.decided else "; they fail on different values, this one is likeliest")
            + ")"
        )
    else:
        line += (
            f" (entry {cause.entry}: likeliest, the only entry the evidence does not rule out; "
            "whether its tensors fit the call is not known: not recorded, or dims the call's "
            "entry left dynamic)"
        )
    if cause.change:
        line = f"{cause.change}; {line}"
    others = [f for f in cause.others if f.mismatch or f.guard.kind in TENSOR_KINDS]
    if others and cause.why in (TENSOR_COMPATIBLE, UNDECIDED, MODULE_ENTRY, SAME_STEP):
        listed = "; ".join(
            f"{f.entry or '?'} {f.mismatch or guard_condition(f.guard)}"
            for f in others[:_SHOWN_OTHERS]
        )
        more = f" and {len(others) - _SHOWN_OTHERS} more" if len(others) > _SHOWN_OTHERS else ""
        why_not = (
            "were compiled for other modules"
            if all(f.other_module for f in others)
            else "were compiled for other tensors"
            if all(not f.tensors_fit and not f.other_module for f in others)
            else "could not serve it"
        )
        return f"{line}; the other entries {why_not}: {listed}{more}"
    own = len(cause.failures) - len(foreign)
    if own > 1 and cause.why == NEW_TENSOR:
        line += f"; {own - 1} other entries rejected it on tensor properties too"
    if foreign:
        line += (
            f"; {len(foreign)} other entr{'y was' if len(foreign) == 1 else 'ies were'} compiled "
            f"for other modules ({foreign[0].entry or '?'} {foreign[0].mismatch})"
        )
    return line


def _module_word(guard: Guard) -> str:
    """What the call brought that no entry was compiled for: a module (a submodule, parameter or
    buffer names it), else `self`, which need not be a module."""
    condition = guard_condition(guard)
    return "module" if re.search(r"\._(?:modules|parameters|buffers)\[", condition) else "`self`"


def recompile_claim(run: RunData, item: Compile, frame: str) -> dict[str, Any]:
    """A compile as a claim (docs/FINDINGS.md): `recompile` with its cause, or `compile`."""
    from diag.evidence.claims import claim

    cause = recompile_cause(run, item)
    extra: dict[str, Any] = (
        {"cause": cause.claim()} if cause is not None else {"result": item.result}
    )
    return claim(
        "recompile" if cause is not None else "compile",
        run,
        item.pid,
        frame=item.frame,
        label=frame,
        phase=item.phase,
        request=item.request_id,
        step=item.step,
        compile_id=item.compile_id,
        **extra,
    )
