"""Helpers for the `diag check` tests: run the CLI in process, and write small trace directories
for what a CPU recording cannot produce (slow steps, hostile names, crashed runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diag.cli import main

from ..analyzers.support import write_trace

MS = 1_000_000  # ns
FRAME = {"name": "block_forward", "file": "/srv/app/model.py", "line": 12}
Events = list[dict[str, Any]]


def run_check(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """`diag check ARGS` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(["check", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    return code, out, err


def write_policy(folder: Path, text: str, name: str = "diag.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def request(
    rid: str, start_ms: int, walls: list[float], phase: str = "live", profiled: tuple[int, ...] = ()
) -> Events:
    """A request whose steps take `walls` seconds each; `profiled` steps are marked so."""
    events: Events = [
        {
            "t": start_ms * MS,
            "ev": "request_start",
            "request_id": rid,
            "phase": phase,
            "shape": [2, 8, 8],
        }
    ]
    for i, wall in enumerate(walls):
        t = (start_ms + 100 * (i + 1)) * MS
        where = {"request_id": rid, "step": i, "phase": phase}
        flag = i in profiled
        events.append({"t": t, "ev": "step_start", **where, "profiled": flag})
        events.append(
            {"t": t + 50 * MS, "ev": "step_end", **where, "wall_s": wall, "profiled": flag}
        )
    end = (start_ms + 100 * (len(walls) + 1)) * MS
    events.append({"t": end, "ev": "request_end", "request_id": rid, "phase": phase})
    return events


def compile_event(
    t_ms: int,
    compile_id: str,
    rid: str | None,
    step: int | None,
    phase: str = "live",
    frame: dict[str, Any] | None = None,
    guards: Events | None = None,
    result: str = "ok",
) -> Events:
    """A compile (and its recompile event when it has failing guards) at a position."""
    where = {"phase": phase, "request_id": rid, "step": step}
    events: Events = []
    if guards:
        events.append(
            {
                "t": t_ms * MS,
                "ev": "recompile",
                "compile_id": compile_id,
                "epoch": 0,
                "guards": guards,
                **where,
            }
        )
    events.append(
        {
            "t": t_ms * MS + 5,
            "ev": "compile_end",
            "compile_id": compile_id,
            "epoch": 0,
            "frame": frame or FRAME,
            "result": result,
            "duration_s": 0.5,
            **where,
        }
    )
    return events


def size_guard(compile_id: str, expected: int = 4, actual: int = 6) -> dict[str, Any]:
    return {
        "compile_id": compile_id,
        "kind": "tensor-size",
        "source": "x",
        "expected": str(expected),
        "actual": str(actual),
        "user_location": None,
        "raw": f"{compile_id}: tensor 'x' size mismatch at index 0. expected {expected}, "
        f"actual {actual}",
    }


def served_trace(
    folder: Path, walls: list[float] | None = None, extra: Events | None = None, entries: int = 1
) -> Path:
    """A small service: one warmup request that compiles the frame, then live requests r0 and
    r1 with `walls` step times (4 steps of 10 ms by default), plus `extra` events."""
    folder.mkdir(parents=True, exist_ok=True)
    steps = walls if walls is not None else [0.01] * 4
    events = [
        {"t": 2, "ev": "phase", "phase": "warmup"},
        *request("warmup0", 10, [1.0, 0.01], phase="warmup"),
        *compile_event(115, "0/0", "warmup0", 0, phase="warmup"),
        {"t": 900 * MS, "ev": "phase", "phase": "live"},
        *request("r0", 1000, steps),
        *request("r1", 3000, steps),
        *(extra or []),
        {
            "t": 9000 * MS,
            "ev": "cache_entries",
            "when": "exit",
            "full": True,
            "codes": [{**FRAME, "entries": entries}],
        },
    ]
    write_trace(folder, sorted(events, key=lambda e: int(e["t"])))
    return folder


def set_manifest(folder: Path, **changes: Any) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(changes)
    path.write_text(json.dumps(manifest), encoding="utf-8")
