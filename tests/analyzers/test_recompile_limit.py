"""recompile-limit on real recordings of the reference service (CPU, aot_eager) and on small
hand-written trace directories.

The `recompile-limit` plant recorded with `--profile none` has no `eager_fallback` event (the
region marker that sees it only runs when profiling is on), so a hand-written trace covers the
case with one, as well as a hit in warmup and a hit whose limited compile was not recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diag.analyzers import get_analyzer
from diag.analyzers.recompile_limit import analyze
from diag.findings.model import Finding
from diag.fixtures.config import SIZE_PRESETS
from diag.fixtures.ground_truth import BLOCK_FILE, BLOCK_FRAME, expectation
from diag.fixtures.model import ARCHS
from diag.trace.run import Trace
from tests.fixture_lines import fixture_line

from .support import write_trace as _write_trace

#: Where the Wan block's frame starts (findings locate it there).
WAN_BLOCK_AT = f"{BLOCK_FILE['wan']}:{fixture_line('models/wan.py', 'def wan_block_forward(')}"

RecordFixture = Callable[..., Trace]
FRAME = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
MS = 1_000_000  # ns


def _steps(rid: str, start_ms: int, count: int, phase: str = "live") -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"t": start_ms * MS, "ev": "request_start", "request_id": rid, "phase": phase}
    ]
    for i in range(count):
        t = (start_ms + 10 * i) * MS
        where = {"request_id": rid, "step": i, "phase": phase}
        events.append({"t": t + 1, "ev": "step_start", **where, "profiled": False})
        events.append({"t": t + 9 * MS, "ev": "step_end", **where, "wall_s": 0.009})
    return events


def _only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, [f.title for f in findings]
    return findings[0]


def test_registered() -> None:
    assert get_analyzer("recompile-limit") is analyze


def test_recompile_limit_plant(record_fixture: RecordFixture) -> None:
    truth = expectation("recompile-limit", "wan")
    assert truth.limit_hit is not None
    rid, step = truth.limit_hit
    block = BLOCK_FRAME["wan"]
    finding = _only(analyze(record_fixture("recompile-limit")))
    assert finding.id == f"recompile-limit:{block}"
    assert finding.severity == "error"
    assert (finding.data["phase"], finding.data["request_id"], finding.data["step"]) == (
        "live",
        rid,
        step,
    )
    assert finding.location is not None and finding.location.endswith(WAN_BLOCK_AT)
    # The churning guard: the newest failing guard of the limited compile.
    newest = finding.data["guards"][0]
    recompile = truth.live_recompiles[0]
    assert (newest["kind"], newest["source"]) == (recompile.guard_kind, recompile.source)
    text = "\n".join(finding.evidence)
    assert re.search(recompile.guard, text)
    assert finding.data["cache_entries"] == truth.cache_entries[block] == 8
    assert f"{block} holds 8 cache entries" in text
    assert finding.data["eager_fallback"] is None
    # r1 steps 0-3 ran after the hit (step 0 is the one the hit happened in).
    assert finding.data["live_steps_after"] == 4
    # The counter changes on every call, so no later call passes an entry's guards: every one
    # ran eagerly, as the recorder's guard checks say (the ground truth: one call per block).
    calls = 4 * SIZE_PRESETS["small"].blocks * len(ARCHS["wan"].passes)  # steps x blocks x passes
    assert finding.data["eager_calls"] == calls and finding.data["compiled_calls"] == 0
    assert f"{calls} call(s) ran eagerly (r1 steps 0-3)" in finding.title
    assert "no later call matched an existing entry: every call ran eagerly" in text
    claim = next(c for c in finding.claims if c["kind"] == "eager-calls")
    assert claim["extent"] == "checked" and claim["count"] == calls
    assert f"compiled {finding.data['compiles_before']} time(s) before the hit" in text
    assert finding.data["compiles_before"] == 8
    assert "recompile_limit only hides it" in finding.fix and "block.state.cnt" in finding.fix


def test_no_hit_no_finding(record_fixture: RecordFixture) -> None:
    assert analyze(record_fixture()) == []
    assert analyze(record_fixture("unwarmed-shape")) == []


def test_eager_fallback_event(tmp_path: Path) -> None:
    """With profiling on, the first eager call of the limited frame is recorded: name it."""
    hit = {"phase": "live", "request_id": "r1", "step": 0}
    guard = {
        "compile_id": "0/7",
        "kind": "python-value",
        "source": "self.cnt",
        "expected": "7",
        "actual": None,
        "user_location": "/srv/model.py:20",
        "raw": "0/7: self.cnt == 7  # x = x * self.cnt  # /srv/model.py:20 in block_forward",
    }
    events = [
        *_steps("r0", 0, 2),
        *_steps("r1", 100, 3),
        {"t": 100 * MS + 2, "ev": "recompile", "compile_id": "0/8", "epoch": 0, "guards": [guard]},
        {
            "t": 100 * MS + 3,
            "ev": "compile_end",
            "compile_id": "0/8",
            "epoch": 0,
            "frame": FRAME,
            "result": "recompile_limit",
            "duration_s": 0.004,
            **hit,
        },
        {
            "t": 100 * MS + 4,
            "ev": "recompile_limit",
            "compile_id": "0/8",
            "epoch": 0,
            "frame": FRAME,
            "reason": "Dynamo recompile limit exceeded",
            **hit,
        },
        {"t": 100 * MS + 5, "ev": "eager_fallback", "frame": FRAME, **hit},
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    text = "\n".join(finding.evidence)
    assert finding.data["eager_fallback"] == ("live", "r1", 0)
    # An older recording's marker saw a call, not which calls ran eagerly: never "from then on".
    assert "saw a call of block_forward after the hit at live r1 step 0" in text
    assert "which ones was not recorded" in finding.title
    assert "python-value on self.cnt: self.cnt == 7 (expected 7) at /srv/model.py:20" in text
    assert finding.data["live_steps_after"] == 3
    assert finding.location == "/srv/model.py:12"


def test_hit_in_warmup_without_compile_record(tmp_path: Path) -> None:
    """A hit in warmup (as cache-bloat with 12 blocks) leaves every live step eager."""
    events = [
        *_steps("warmup0", 0, 1, phase="warmup"),
        {
            "t": 2 * MS,
            "ev": "recompile_limit",
            "compile_id": "0/8",
            "epoch": 0,
            "frame": FRAME,
            "reason": "Dynamo recompile limit exceeded",
            "phase": "warmup",
            "request_id": "warmup0",
            "step": 0,
        },
        {
            "t": 3 * MS,
            "ev": "cache_entries",
            "when": "exit",
            "full": True,
            "codes": [{**FRAME, "entries": 8}],
        },
        *_steps("r0", 100, 4),
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    where = "at warmup warmup0 step 0"
    assert finding.title.startswith(f"block_forward hit the recompile limit {where}")
    assert finding.data["live_steps_after"] == 4
    assert finding.data["cache_entries"] == 8
    assert "no failing-guard list was recorded" in "\n".join(finding.evidence)
