"""What changed in the program, read off a recompile's deciding guard: torch's failure text and
the entries' guard trees, said in the program's terms.

Why: `tensor 'temb' dispatch key set mismatch` is torch's record; "warmup ran under
torch.inference_mode(); serving runs under no_grad" is what the user changes. Each rule below
reads one guard kind and says only what that record shows (diag.evidence.causes decides which
guard).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from diag.trace.guards import tree_key
from diag.trace.run import Compile, RunData

if TYPE_CHECKING:
    from diag.evidence.cause_model import EntryTable, RecompileCause

_DISPATCH = re.compile(
    r"dispatch key set mismatch\. expected DispatchKeySet\((?P<expected>[^)]*)\), "
    r"actual DispatchKeySet\((?P<actual>[^)]*)\)"
)
_SIZE_AT = re.compile(
    r"size mismatch at index (?P<index>\d+)\. expected (?P<e>\d+), actual (?P<a>\d+)"
)
#: Keys every tensor made outside torch.inference_mode() carries and an inference tensor lacks.
_AUTOGRAD = re.compile(r"^(?:ADInplaceOrView|Autograd\w*)$")


def describe_change(
    run: RunData,
    item: Compile,
    cause: RecompileCause,
    entry: EntryTable | None,
    call: EntryTable | None,
) -> str | None:
    """One sentence: what the call brought that the deciding entry was not compiled for."""
    guard = cause.guard
    if guard is None:
        return None
    dispatch = _DISPATCH.search(guard.raw)
    if dispatch is not None:
        return _dispatch_change(item, cause, entry, dispatch)
    size = _SIZE_AT.search(guard.raw)
    if guard.kind == "tensor-size" and size is not None:
        return _size_change(
            guard.source or "?", int(size["index"]), int(size["e"]), int(size["a"]), run, item
        )
    if guard.source and entry is not None and call is not None:
        key = tree_key(guard.source)
        old, new = entry.values.get(key), call.values.get(key)
        if old is not None and new is not None and old != new:
            return _value_change(run, item, cause, entry, guard.source, old, new)
    return None


def is_zero_one(cause: RecompileCause) -> bool:
    """A size guard whose value changed to or from 0 or 1: Dynamo specialises those sizes, so
    neither automatic dynamic nor mark_dynamic covers them (each needs its own entry)."""
    guard = cause.guard
    match = _SIZE_AT.search(guard.raw) if guard is not None else None
    return match is not None and (int(match["e"]) in (0, 1) or int(match["a"]) in (0, 1))


def inference_mode_change(cause: RecompileCause) -> str | None:
    """`warmup-inference` when the entry was compiled for inference tensors and the call brings
    normal ones, `live-inference` the other way round, None otherwise."""
    guard = cause.guard
    match = _DISPATCH.search(guard.raw) if guard is not None else None
    if match is None:
        return None
    expected, actual = _keys(match["expected"]), _keys(match["actual"])
    added = {k for k in actual - expected if _AUTOGRAD.match(k)}
    removed = {k for k in expected - actual if _AUTOGRAD.match(k)}
    if added and not removed:
        return "entry-inference"
    if removed and not added:
        return "call-inference"
    return None


def _keys(text: str) -> set[str]:
    return {k.strip() for k in text.split(",") if k.strip()}


def _where(phase: str | None, request_id: str | None) -> str:
    if phase == "warmup":
        return "warmup"
    if phase == "live":
        return "serving"
    return f"{phase or 'an unknown phase'} {request_id or ''}".strip()


def _dispatch_change(
    item: Compile, cause: RecompileCause, entry: EntryTable | None, match: re.Match[str]
) -> str:
    guard = cause.guard
    assert guard is not None
    expected, actual = _keys(match["expected"]), _keys(match["actual"])
    added, removed = sorted(actual - expected), sorted(expected - actual)
    source = guard.source or "?"
    then = (
        _where(entry.phase, entry.request_id)
        if entry is not None and entry.phase
        else f"entry {cause.entry}"
    )
    now = _where(item.phase, item.request_id)
    mode = inference_mode_change(cause)
    if mode == "entry-inference":
        return (
            f"{then} ran under torch.inference_mode(); {now} runs under no_grad (grad mode is "
            f"off in both: the global-state guard passed): inference tensors carry other "
            f"dispatch keys (`{source}` has {', '.join(added)}, which the entry's lacked)"
        )
    if mode == "call-inference":
        return (
            f"{now} runs under torch.inference_mode(); {then} ran under no_grad (grad mode is "
            f"off in both: the global-state guard passed): inference tensors carry other "
            f"dispatch keys (`{source}` lacks {', '.join(removed)}, which the entry's had)"
        )
    parts = []
    if added:
        parts.append(f"carries {', '.join(added)}, which the entry's lacked")
    if removed:
        parts.append(f"lacks {', '.join(removed)}, which the entry's had")
    return f"`{source}` {' and '.join(parts)}: a tensor of another kind than {then} passed"


def _size_change(
    source: str, index: int, old: int, new: int, run: RunData, item: Compile
) -> str | None:
    text = f"dim {index} of `{source}` went from {old} to {new}"
    zero_one = old in (0, 1) or new in (0, 1)
    # CFG's reading only where the record fits it: a batch of 2 against 1 at dim 0 (a request's
    # cond and uncond passes batched, or not). Any other doubling (4 -> 8 of a plain input) is
    # said in torch's own words: nothing in the record says it was a batch.
    cfg = index == 0 and {old, new} == {1, 2}
    if cfg and old == 2 * new:
        text = (
            f"the batch went from {old} to {new} (`{source}` dim 0): halved, as when a request "
            "runs without CFG's uncond pass (diffusers' pipelines skip it at guidance_scale "
            "<= 1)"
        )
    elif cfg and new == 2 * old:
        text = (
            f"the batch went from {old} to {new} (`{source}` dim 0): doubled, as when a request "
            "runs CFG's uncond pass that the entry's call did not"
        )
    elif not zero_one:
        return None  # torch's own text says it as well
    if zero_one:
        text += "; Dynamo specialises sizes 0 and 1, so this size needs an entry of its own"
    return text


def _value_change(
    run: RunData,
    item: Compile,
    cause: RecompileCause,
    entry: EntryTable,
    source: str,
    old: str,
    new: str,
) -> str | None:
    from diag.evidence.cause_model import ONLY_ENTRY, SAME_STEP

    module_int = source.startswith("self.") and new.lstrip("-").isdigit()
    if not module_int and cause.why != SAME_STEP:
        return None  # torch's own text (`x == 6`) says it as well
    change = f"{source} went from {old} to {new}"
    if cause.why != ONLY_ENTRY and entry.step is not None and entry.step == item.step:
        change = f"{source} ({old} there, {new} in this call)"
        where = (
            f" ({_where(entry.phase, entry.request_id)} {entry.request_id})"
            if entry.request_id
            else ""
        )
        change = f"the entry compiled for step {entry.step}{where} failed on {change}"
    if module_int:
        change += (
            " (an int attribute of an nn.Module: torch.compile treats it as static, one entry "
            "per value)"
        )
    return change


def change_fix(cause: RecompileCause, frame: str, shape_warmed: bool) -> str | None:
    """The fix for a change this module reads, tried on a program that recompiled for it (the
    repro of each rule is in tests/integration/test_causes_program.py); None: no rule."""
    guard = cause.guard
    if guard is None:
        return None
    mode = inference_mode_change(cause)
    if mode == "entry-inference":
        return (
            "Warm up the way live requests run: under torch.no_grad() as serving does (or serve "
            "under torch.inference_mode() as warmup does). Tensors made inside "
            "torch.inference_mode() carry other dispatch keys than tensors made outside it, so "
            "an entry compiled for one never serves the other."
        )
    if mode == "call-inference":
        return (
            "Serve the way warmup ran: drop torch.inference_mode() around live requests (or warm "
            "up under it too). Tensors made inside torch.inference_mode() carry other dispatch "
            "keys than tensors made outside it, so an entry compiled for one never serves the "
            "other."
        )
    if _DISPATCH.search(guard.raw):
        return (
            "No verified fix: pass tensors of the kind warmup passed (made under the same "
            "autograd mode, of the same tensor subclass), or warm up with the kind live traffic "
            "sends."
        )
    size = _SIZE_AT.search(guard.raw)
    if guard.kind == "tensor-size" and size is not None and is_zero_one(cause):
        value = int(size["a"])
        why = (
            " (here the batch halved: a request without CFG's uncond pass, e.g. guidance_scale "
            "<= 1, if live traffic sends those)"
            if int(size["index"]) == 0 and int(size["e"]) == 2 * value
            else ""
        )
        return (
            f"Warm up a call where `{guard.source}` has size {value} at dim {size['index']} "
            f"too{why}: Dynamo specialises sizes 0 and 1, so neither automatic dynamic nor "
            "torch._dynamo.mark_dynamic covers that size; it needs an entry of its own."
        )
    if (
        guard.kind == "python-value"
        and guard.source is not None
        and guard.source.startswith("self.")
        and str(guard.expected or "").lstrip("-").isdigit()
    ):
        return (
            f"{guard.source} is an int attribute of the module whose forward is compiled: "
            "torch.compile treats it as static, one entry per value. Keep that Python state out "
            f"of the compiled frame: compile the module(s) {frame} calls instead of {frame} "
            "itself, so the bookkeeping on it runs eagerly. (torch's hint, "
            "torch._dynamo.config.allow_unspec_int_on_nn_module = True, does not help where the "
            "code branches on the value.)"
        )
    if guard.kind in _VOCABULARY_FAMILIES:
        return vocabulary_fix(guard.raw, guard.source, frame)
    return None


#: Guard families whose fix is the vocabulary's own (docs/GUARDS.md): a tensor's dtype, device,
#: requires_grad or other property, the global state, a value's type. The analyzers word sizes
#: (warmup and automatic dynamic) and Python values (guard-churn) themselves; for these kinds
#: "make the input dynamic" or "pass it as a tensor" cannot remove the recompile.
_VOCABULARY_FAMILIES = frozenset(
    {
        "tensor-dtype",
        "tensor-device",
        "tensor-requires-grad",
        "tensor-other",
        "global-state",
        "type",
    }
)


def vocabulary_fix(raw: str, source: str | None, frame: str) -> str:
    """The fix docs/GUARDS.md gives for this failure's check: the fixes the guard-kind harness
    saw remove the recompile, or "no verified fix" with the options."""
    from diag.trace.guards import guard_entry

    entry = guard_entry(raw)
    what = f" (`{source}`)" if source else ""
    advice = entry.advice()
    return f"{frame} recompiled because {entry.title}{what}: {advice[:1].upper()}{advice[1:]}."
