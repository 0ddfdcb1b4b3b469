"""A probe that recorded test programs import to print what Dynamo compiled, in process.

`compile_state()` gives the compile counters (`torch._dynamo.utils.counters`) and, per compiled
code object, its cache entries and each entry's guards (the guard tree Dynamo prints, with object
ids and source comments dropped, which differ from process to process). A program run plainly
and under `diag record` must give the same state: diag changes no graph and no guard.
"""

from __future__ import annotations

import re
from typing import Any

_VOLATILE = re.compile(r"0x[0-9a-f]+|\d{6,}")
_STRING_SET = re.compile(r"\{'[^'{}]*'(?:, '[^'{}]*')*\}")


def _normal(line: str) -> str:
    """A guard line without what varies between processes: object ids, the order of a set of
    strings (hash randomisation), the source comment."""
    line = _VOLATILE.sub("N", line.split("  #")[0].rstrip())
    return _STRING_SET.sub(lambda m: "{" + ", ".join(sorted(m[0][1:-1].split(", "))) + "}", line)


def compile_state() -> dict[str, Any]:
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.convert_frame import input_codes
    from torch._dynamo.utils import counters

    codes = []
    for ref in list(input_codes.seen):
        code = ref() if callable(ref) else ref
        if code is None:
            continue
        entries = _debug_get_cache_entry_list(code)
        if not entries:
            continue
        guards = [
            [_normal(line) for line in str(entry.guard_manager).splitlines()] for entry in entries
        ]
        codes.append(
            {
                "code": f"{code.co_name}:{code.co_firstlineno}",
                "entries": len(entries),
                "guards": guards,
            }
        )
    codes.sort(key=lambda c: str(c["code"]))
    kept = ("stats", "frames", "recompiles", "graph_break")
    return {"counters": {k: dict(v) for k, v in counters.items() if k in kept}, "codes": codes}
