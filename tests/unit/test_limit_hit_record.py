"""How the compile collector records a compile the recompile limit refused, from the structured
records torch writes for it (payloads as torch 2.13 and 2.6 log them).

Torch refuses the compile before it logs dynamo_start, so the settings are read at the refusal:
a limit lowered by `config.patch` around serving is the one the refusal used. Torch 2.6 fills
`is_forward` only after the limit check, so its refusal arrives as `bwd_compilation_metrics`
(no co_name; the frame id names the frame). The real runs: tests/integration/
test_patched_limit.py (2.13) and bench/compat.py's `limit` program (2.6).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch._dynamo.config

from diag.collectors.compiles import CompileCollector
from diag.collectors.session import Session
from diag.trace.lines import iter_events

FRAME = {"co_name": "forward", "co_filename": "/srv/serve.py", "co_firstlineno": 39}


def _record(
    tmp_path: Path, *metadata: dict[str, Any], limits: tuple[int, ...] = ()
) -> list[dict[str, Any]]:
    """Feed the collector torch's records; `limits[i]`, when given, patches recompile_limit
    while record i is handled (as a program's `config.patch` would be in effect)."""
    session = Session(tmp_path, "compiled")
    collector = CompileCollector(session)
    for i, item in enumerate(metadata):
        if i < len(limits):
            with torch._dynamo.config.patch(recompile_limit=limits[i]):
                collector.on_structured(item, None)  # type: ignore[arg-type]
        else:
            collector.on_structured(item, None)  # type: ignore[arg-type]
    session.writer.close()
    return list(iter_events(session.proc_dir / "events.jsonl"))


def _start(compile_id: str) -> dict[str, Any]:
    frame, attempt = compile_id.split("/")
    return {"dynamo_start": {"stack": []}, "frame_id": int(frame), "frame_compile_id": int(attempt)}


def _ok(compile_id: str) -> dict[str, Any]:
    return {"compilation_metrics": {"compile_id": compile_id, **FRAME, "fail_type": None}}


def test_settings_are_read_at_a_refused_compile(tmp_path: Path) -> None:
    refused = {
        "compile_id": "0/1",
        **FRAME,
        "fail_type": "Unsupported",
        "fail_reason": "Dynamo recompile limit exceeded",
    }
    events = _record(
        tmp_path, _start("0/0"), _ok("0/0"), {"compilation_metrics": refused}, limits=(8, 8, 2)
    )
    settings = [e["settings"]["recompile_limit"] for e in events if e["ev"] == "compile_settings"]
    assert settings == [8, 2]
    (end,) = [e for e in events if e["ev"] == "compile_end" and e["compile_id"] == "0/1"]
    assert end["result"] == "recompile_limit"


def test_torch_2_6_refusal_under_the_backward_name(tmp_path: Path) -> None:
    refused = {
        "compile_id": "0/2",
        "co_name": None,
        "fail_type": "RecompileLimitExceeded",
        "fail_reason": "cache_size_limit reached",
    }
    backward = {"compile_id": "0/0", "co_name": None, "fail_type": None, "fail_reason": None}
    events = _record(
        tmp_path,
        _start("0/0"),
        _ok("0/0"),
        {"bwd_compilation_metrics": backward},  # a real backward compile: not a frame's
        {"bwd_compilation_metrics": refused},
    )
    ends = [e for e in events if e["ev"] == "compile_end"]
    assert [(e["compile_id"], e["result"]) for e in ends] == [
        ("0/0", "ok"),
        ("0/2", "recompile_limit"),
    ]
    (hit,) = [e for e in events if e["ev"] == "recompile_limit"]
    assert hit["frame"] == {"name": "forward", "file": "/srv/serve.py", "line": 39}
