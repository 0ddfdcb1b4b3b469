"""Wording that must agree across analyzers and outputs (issue 17): 8 cache entries of a limit
of 8 is "at the recompile limit" in guard-churn as in cache-bloat; a shape's dimensions are named
only when the adapter says what they are; an info finding that needs no action prints no
`fix:` line; a shape served by two ranks is listed once."""

from __future__ import annotations

import json
from pathlib import Path

from diag.analyzers.guard_churn import _limit_text
from diag.analyzers.live_compiles import analyze as live_compiles
from diag.findings.model import Finding
from diag.findings.text import findings_to_text
from diag.trace.load import load_trace
from tests.h200data import h200_trace


def test_limit_text_agrees_with_cache_bloat() -> None:
    assert _limit_text("f", 3) == (
        "f stayed under torch's default recompile limit in this run (3 cache entries at exit; "
        "the limit is 8)"
    )
    assert _limit_text("f", 8).startswith("f is at the recompile limit: 8 cache entries at exit")
    assert "raised torch._dynamo.config.recompile_limit" in _limit_text("f", 12)
    assert "did not reach" not in " ".join(_limit_text("f", n) for n in (None, 1, 7, 8, 9))


def test_empty_fix_prints_no_fix_line() -> None:
    quiet = Finding(
        id="x:info", analyzer="x", severity="info", title="Warmup covered", evidence=[], fix=""
    )
    loud = Finding(id="x:w", analyzer="x", severity="warning", title="t", evidence=[], fix="Do.")
    text = findings_to_text([quiet, loud])
    assert text.count("fix:") == 1 and "fix: Do." in text


def _write(tmp: Path, adapter: str, shapes: list[tuple[str, str, list[int]]]) -> Path:
    """A one-process trace: the adapter's name, then (request id, phase, shape) requests, and
    one live recompile of `block` on its input's dim 1 in the last request. Hand-written: the
    case is an adapter reporting a [batch, seq] shape, which names no height or width."""
    frame = {"name": "block", "file": "/srv/model.py", "line": 3}
    events: list[dict[str, object]] = [
        {"t": 1, "ev": "process_start", "pid": 7, "ppid": 1, "argv": ["serve"]},
        {"t": 2, "ev": "adapter", "name": adapter},
    ]
    t = 3
    for rid, phase, shape in shapes:
        where = {"phase": phase, "request_id": rid, "step": 0}
        events += [
            {"t": t, "ev": "request_start", "request_id": rid, "phase": phase, "shape": shape},
            {"t": t + 1, "ev": "step_start", **where, "shape": shape, "profiled": False},
        ]
        if rid == shapes[-1][0]:
            guard = {
                "compile_id": "0/0",
                "kind": "tensor-size",
                "source": "x",
                "expected": str(shapes[0][2][1]),
                "actual": str(shape[1]),
                "raw": f"0/0: tensor 'x' size mismatch at index 1. expected "
                f"{shapes[0][2][1]}, actual {shape[1]}",
            }
            events += [
                {"t": t + 2, "ev": "recompile", "compile_id": "0/1", "epoch": 0}
                | {"guards": [guard], **where},
                {"t": t + 3, "ev": "compile_end", "compile_id": "0/1", "epoch": 0}
                | {"frame": frame, "result": "ok", "duration_s": 1.0, **where},
            ]
        events += [
            {"t": t + 4, "ev": "step_end", **where, "wall_s": 1.1, "profiled": False},
            {"t": t + 5, "ev": "request_end", "request_id": rid, "phase": phase},
        ]
        t += 10
    manifest = {"format": "diag-trace", "version": 1, "runs": [{"label": "compiled"}]}
    (tmp / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = tmp / "runs" / "compiled" / "pid7"
    proc.mkdir(parents=True)
    (proc / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return tmp


SHAPES = [("w0", "warmup", [2, 16]), ("w1", "warmup", [4, 16]), ("r0", "live", [2, 32])]


def test_batch_seq_dims_are_positional(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "compiled-calls (inferred)", SHAPES))
    [error] = [f for f in live_compiles(trace) if f.severity == "error"]
    text = "\n".join(error.evidence)
    assert error.data["uncovered"] == ["dim 1"]
    assert "dim 1 32 was never warmed" in text and "dim 0 varied" in text
    assert "height" not in text and "width" not in text


def test_named_dims_when_the_adapter_says(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "diffusers", SHAPES))
    [error] = [f for f in live_compiles(trace) if f.severity == "error"]
    assert error.data["uncovered"] == ["width"]
    assert "height varied" in "\n".join(error.evidence)


def test_coverage_lists_a_shape_once_across_ranks(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-ranks-nccl", tmp_path))
    [coverage] = [f for f in live_compiles(trace) if f.id == "live-compile:warmup-coverage"]
    assert coverage.title == "Warmup covered every live shape (2)"
    assert coverage.evidence[0] == (
        "live traffic used 2 shape(s): 4x48x96 (r0; on rank0 and rank1) and "
        "4x64x96 (r1; on rank0 and rank1)"
    )
    assert coverage.evidence[1] == "warmup served 4x48x96 (warmup0) and 4x64x96 (warmup1)"
    assert coverage.fix == ""  # every live shape warmed: nothing to do
    [cold] = [f for f in live_compiles(trace) if f.id == "live-compile:warmup-compiles"]
    assert cold.fix == ""
