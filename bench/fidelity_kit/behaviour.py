"""Does the program behave the same under `diag record`? The oracle's record of a plain run
against its record of the recorded run: compile ids per position, why each recompiled, what
failed, the recompile-limit hits, which calls ran compiled, cache entries at every step end,
Dynamo's counters (aot_autograd's cache counters included), each request's output digest, and
how the process ended. Any difference is a defect of diag (the brief: nothing diag does may
change what Dynamo compiles or what the program computes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .records import ProcessRecord

_OBJECT_ID = re.compile(r"(___check_(?:type|obj)_id\([^,]+,\s*)\d+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
#: Counters whose values follow time or the host, not what was compiled.
_VOLATILE_COUNTERS: set[tuple[str, str]] = set()


@dataclass
class Difference:
    program: str
    role: str
    what: str
    plain: str
    recorded: str


def compare(
    program: str,
    plain: list[ProcessRecord],
    recorded: list[ProcessRecord],
    plain_exit: int | None,
    recorded_exit: int | None,
) -> list[Difference]:
    found: list[Difference] = []
    if plain_exit != recorded_exit:
        found.append(Difference(program, "-", "exit code", str(plain_exit), str(recorded_exit)))
    by_role = {p.role: p for p in recorded}
    for mine in plain:
        theirs = by_role.pop(mine.role, None)
        if theirs is None:
            found.append(Difference(program, mine.role, "process", "ran", "missing"))
            continue
        for what, left, right in _facets(mine, theirs):
            if left != right:
                shown_left, shown_right = _diff(left, right)
                found.append(Difference(program, mine.role, what, shown_left, shown_right))
    found.extend(Difference(program, role, "process", "missing", "ran") for role in by_role)
    return found


def _facets(a: ProcessRecord, b: ProcessRecord) -> list[tuple[str, Any, Any]]:
    return [
        ("compiles", _compiles(a), _compiles(b)),
        ("recompile reasons", _reasons(a), _reasons(b)),
        ("failed compiles", _failures(a), _failures(b)),
        ("recompile-limit hits", _limits(a), _limits(b)),
        ("calls compiled/eager", _calls(a), _calls(b)),
        ("cache entries", _entries(a), _entries(b)),
        ("counters", _counters(a), _counters(b)),
        ("outputs", a.outputs, b.outputs),
        ("crash", _crash(a), _crash(b)),
        ("requests", _requests(a), _requests(b)),
    ]


def _compiles(p: ProcessRecord) -> list[tuple[Any, ...]]:
    return [
        (c.compile_id, c.code, c.phase, c.request, c.step, tuple(c.entries_before))
        for c in p.compiles.values()
    ]


def _reasons(p: ProcessRecord) -> dict[str, list[str]]:
    return {
        c.compile_id: [_masked(r.split("\nUser stack")[0]) for r in c.reasons]
        for c in p.compiles.values()
    }


def _masked(reason: str) -> str:
    """A reason without the object ids and addresses in it (`___check_type_id(self, 9470...)`,
    `id=0x7f...`): they differ between any two processes."""
    return _ADDRESS.sub("<addr>", _OBJECT_ID.sub(r"\1<id>", reason))


def _failures(p: ProcessRecord) -> dict[str, Any]:
    found = {c.compile_id: c.fail_type for c in p.compiles.values() if c.fail_type}
    found.update({k: v.get("fail_type") for k, v in p.failed_metrics.items()})
    return found


def _limits(p: ProcessRecord) -> list[tuple[Any, ...]]:
    return [(h.get("code"), h.get("request"), h.get("step")) for h in p.limits]


def _calls(p: ProcessRecord) -> list[tuple[Any, ...]]:
    return [
        (
            c.get("code"),
            c.get("request"),
            c.get("step"),
            c.get("calls"),
            c.get("eager"),
            c.get("compiled_new"),
            tuple(sorted((c.get("matched") or {}).items())),
        )
        for c in p.calls
    ]


def _entries(p: ProcessRecord) -> list[tuple[Any, ...]]:
    return [
        (
            e.get("where"),
            e.get("request"),
            e.get("step"),
            tuple(sorted((k, tuple(v)) for k, v in (e.get("entries") or {}).items())),
        )
        for e in p.entries
    ]


def _counters(p: ProcessRecord) -> dict[str, dict[str, int]]:
    return {
        group: {k: v for k, v in values.items() if (group, k) not in _VOLATILE_COUNTERS}
        for group, values in p.counters.items()
    }


def _crash(p: ProcessRecord) -> Any:
    return (p.crash or {}).get("type")


def _requests(p: ProcessRecord) -> list[tuple[Any, ...]]:
    return [(r.request_id, r.phase, tuple(sorted(r.steps))) for r in p.requests]


def _diff(left: Any, right: Any) -> tuple[str, str]:
    """Only what differs: the differing keys of two dicts, or the first differing items of two
    lists (with their index)."""
    if isinstance(left, dict) and isinstance(right, dict):
        keys = sorted(k for k in set(left) | set(right) if left.get(k) != right.get(k))
        return (
            _text({k: left.get(k) for k in keys[:6]}),
            _text({k: right.get(k) for k in keys[:6]}),
        )
    if isinstance(left, list) and isinstance(right, list):
        index = next(
            (i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b),
            min(len(left), len(right)),
        )
        return (
            f"[{index}:] {_text(left[index : index + 3])} of {len(left)}",
            f"[{index}:] {_text(right[index : index + 3])} of {len(right)}",
        )
    return _text(left), _text(right)


def _text(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 500 else text[:497] + "..."
