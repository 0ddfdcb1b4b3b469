"""The shape of a recompile's cause: which entry's failing guard explains it, and how it was chosen.

Kept apart from the rules that decide it (diag.evidence.causes) so that what reads a cause
(diag.evidence.change, analyzers, check) needs only this shape, never the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.trace.run import Guard

#: Guard kinds that are properties of a tensor argument: an entry failing on one was compiled
#: for another tensor than the call's, and could not have served it.
TENSOR_KINDS = frozenset(
    {
        "tensor-size",
        "tensor-stride",
        "tensor-dtype",
        "tensor-device",
        "tensor-requires-grad",
        "tensor-other",
    }
)

#: How the cause's entry was chosen (docs/FINDINGS.md, claims).
ONLY_ENTRY = "only-entry"  # the frame had one entry: its failure is the cause
TENSOR_COMPATIBLE = "tensor-compatible"  # the one entry compiled for the call's tensors
SAME_SOURCE = "all-entries-same-source"  # every entry failed on the same source
NEW_TENSOR = "new-tensor"  # every entry failed on a tensor property: the call's tensors are new
#: No entry could serve, but some were compiled for the call's very tensors and differ from it
#: only in Python values: what the call brought that is new is a value, not a tensor.
NEW_VALUE = "new-value"
UNDECIDED = "undecided"
#: Several entries fit the call but for one guard each; the one compiled at the call's own step
#: (the entry the loop reuses at that step) names the cause.
SAME_STEP = "same-step-entry"
#: Every entry that could serve failed on global state (grad mode, autocast, ...); one differs
#: from the call in fewer of its fields than every other (a subset): those fields are the change.
NEAREST_GLOBAL_STATE = "nearest-global-state"
#: Every entry was compiled for another module (or another `self`): the call's module is new to
#: the frame's cache.
NEW_MODULE = "new-module"
#: The one entry compiled for the call's module; the others were compiled for other modules.
MODULE_ENTRY = "only-entry-for-module"


@dataclass(frozen=True)
class EntryFailure:
    """One cache entry's failure at a recompile, and whether it could have served the call."""

    entry: str | None  # the entry's compile id
    guard: Guard
    #: False: the entry was compiled for other tensors (its failure or its guard tree says so);
    #: True: its guard tree matches the call's tensors; None: not known.
    tensors_match: bool | None
    #: Why it could not serve, in words (`compiled for stride [3072, 1, 128] of hidden_states`).
    mismatch: str | None = None
    #: Its guard tree holds the call's tensors (none differs): only Python values kept it out.
    tensors_fit: bool = False
    #: Its failure names another module or `self` (diag.evidence.causes.other_module): it was
    #: compiled
    #: for another object than the call's and is context, never the cause.
    other_module: bool = False


@dataclass(frozen=True)
class RecompileCause:
    """The failing guard that explains one recompile, and how sure diag is of it."""

    #: The guard whose failure made the call recompile; None when the evidence does not decide.
    guard: Guard | None
    entry: str | None
    decided: bool
    why: str
    failures: list[EntryFailure] = field(default_factory=list)
    #: What changed in the program, in its terms (diag.evidence.causes.program_change): `the entry
    #: compiled for step 1 failed on self.num_steps: it went from 6 to 10`; None: not read.
    change: str | None = None

    @property
    def candidates(self) -> list[Guard]:
        """The failures that could be the cause: the undecided case lists them all."""
        if self.guard is not None:
            return [self.guard]
        possible = [f.guard for f in self.failures if f.tensors_match is not False]
        return possible or [f.guard for f in self.failures]

    @property
    def others(self) -> list[EntryFailure]:
        """The other entries' failures: context, not cause."""
        return [f for f in self.failures if f.guard is not self.guard]

    @property
    def kind(self) -> str | None:
        return self.guard.kind if self.guard is not None else None

    @property
    def new_module(self) -> bool:
        """Every entry was compiled for another module: the call's module is new to the cache."""
        return self.why == NEW_MODULE

    @property
    def is_tensor(self) -> bool:
        return self.guard is not None and self.guard.kind in TENSOR_KINDS

    def claim(self) -> dict[str, Any]:
        """The cause as a claim (docs/FINDINGS.md): with the guard's entry in torch's vocabulary
        (diag/trace/guard_vocabulary.py) and whether a fix for that kind was seen to work
        (`fix_verified`: the guard-kind harness applied it and the recompile went away)."""
        from diag.trace.guards import guard_entry

        guard = self.guard
        entry = guard_entry(guard.raw) if guard is not None else None
        return {
            "entry": self.entry,
            "guard_kind": guard.kind if guard is not None else None,
            "guard_check": entry.name if entry is not None else None,
            "fix_verified": bool(entry.verified_fixes) if entry is not None else False,
            "source": guard.source if guard is not None else None,
            "decided": self.decided,
            "why": self.why,
        }


TensorTable = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class EntryTable:
    """What one cache entry was compiled for, from its guard tree: its tensors and the Python
    values it guards by equality or identity."""

    tensors: TensorTable
    values: Mapping[str, str]
    #: Where the entry was compiled: its step (within its request), phase and request.
    step: int | None = None
    phase: str | None = None
    request_id: str | None = None
