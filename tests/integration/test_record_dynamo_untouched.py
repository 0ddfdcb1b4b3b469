"""diag does not change how Dynamo compiles a program: it attaches when the program first imports
Dynamo, never by importing it at start-up.

A program that wraps a torch function after `import torch` (LightX2V's CPU start-up replaces
`torch.empty`) compiles differently when `torch._dynamo` was imported before the wrap: Dynamo
then guards on the wrapper's code, and inductor's AOTAutograd cache goes from "bypass" to
"miss, saved" (FACTS). The program prints Dynamo's counters and every cache entry's guards;
plain and recorded runs must print the same.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from .support import PYTHON, diag_record, events, of

PROGRAM = """
import json, re, sys
import torch
{early}
_empty = torch.empty


def empty(*args, **kwargs):
    return _empty(*args, **kwargs)


torch.empty = empty


@torch.compile(backend="eager")
def f(x):
    buf = torch.empty(x.shape)
    return buf.copy_(x) * 2 + 1


for n in (4, 6, 8):
    f(torch.ones(n))
from torch._dynamo.utils import counters
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

entries = _debug_get_cache_entry_list(f._torchdynamo_orig_callable.__code__)
# Object ids and the source comments (which name this file) left out.
guards = [re.sub(r"\\d{{6,}}|  # .*", "", str(e.guard_manager)) for e in entries]
found = {{k: dict(v) for k, v in counters.items() if v}}
print(json.dumps({{"counters": found, "guards": guards}}))
"""


def _run(tmp_path: Path, name: str, early: str = "", record: bool = False) -> dict[str, object]:
    script = tmp_path / f"{name}.py"
    script.write_text(PROGRAM.format(early=early))
    if record:
        proc = diag_record(tmp_path / f"{name}-trace", PYTHON, str(script))
    else:
        proc = subprocess.run(
            [PYTHON, str(script)], capture_output=True, text=True, timeout=240, check=False
        )
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1]
    result: dict[str, object] = json.loads(line)
    return result


def test_guards_and_counters_same_with_and_without_diag(tmp_path: Path) -> None:
    plain = _run(tmp_path, "plain")
    recorded = _run(tmp_path, "recorded", record=True)
    assert recorded == plain
    # The comparison can fail: importing Dynamo before the wrap changes the guards.
    early = _run(tmp_path, "early", early="import torch._dynamo")
    assert early["guards"] != plain["guards"]
    # And the recording saw the compiles, attached when the program imported Dynamo.
    compiles = of("compile_end", events(tmp_path / "recorded-trace"))
    assert [c["compile_id"] for c in compiles] == ["0/0", "0/1"]


def test_reset_keeps_collectors_attached(tmp_path: Path) -> None:
    """torch._dynamo.reset() clears Dynamo's callbacks: diag registers again, and compiles after
    the reset are recorded in a new epoch."""
    script = tmp_path / "reset.py"
    script.write_text(
        "import torch\n"
        "f = torch.compile(lambda x: x * 2, backend='eager')\n"
        "f(torch.ones(2))\n"
        "torch._dynamo.reset()\n"
        "g = torch.compile(lambda x: x + 1, backend='eager')\n"
        "g(torch.ones(2))\n"
    )
    proc = diag_record(tmp_path / "trace", PYTHON, str(script))
    assert proc.returncode == 0, proc.stderr
    evs = events(tmp_path / "trace")
    assert [(c["epoch"], c["compile_id"]) for c in of("compile_end", evs)] == [
        (0, "0/0"),
        (1, "0/0"),
    ]
    assert [e["epoch"] for e in of("dynamo_reset", evs)] == [1]
    assert not of("collector_error", evs), [e["error"] for e in of("collector_error", evs)]
    assert re.search(r"1 compile|2 compile", proc.stderr)
