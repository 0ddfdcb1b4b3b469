"""A plain TORCH_TRACE directory (no diag recording) read into the Run model: the real logs in
shared/data (third-party tlparse test logs and torch 2.13 ones), a log torch writes here in a
subprocess, and hand-made damage (truncation, corrupt payloads, stray lines, not-a-log files)."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from diag.errors import DiagError
from diag.findings.model import Finding
from diag.trace.run import Frame, Trace
from diag.trace.torchtrace import load_torch_trace

SHARED_TRACES = Path(__file__).resolve().parents[1] / "data" / "shared" / "torch_trace"


@pytest.fixture(scope="module")
def shared() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared TORCH_TRACE logs not found at {SHARED_TRACES}")
    return SHARED_TRACES


def _load(folder: Path, name: str) -> Trace:
    return load_torch_trace(folder / name)


def _findings(trace: Trace) -> list[Finding]:
    findings: list[Finding] = importlib.import_module("diag.analyzers").run_analyzers(trace)
    return findings


def _by(findings: list[Finding], analyzer: str) -> list[Finding]:
    return [f for f in findings if f.analyzer == analyzer]


# --- the shared real logs ------------------------------------------------------------------------


def test_every_shared_log_loads_and_every_analyzer_runs(shared: Path) -> None:
    logs = sorted(shared.glob("*.log"))
    assert len(logs) >= 6
    for log in logs:
        trace = load_torch_trace(log)
        run = trace.compiled
        assert run is not None and len(run.processes) == 1, log.name
        assert run.compiles, log.name
        assert trace.manifest["format"] == "torch-trace"
        # No steps, no requests: nothing is "live", nothing claims a warmup.
        assert {c.phase for c in run.compiles} == {"unknown"}
        assert not any(c.live for c in run.compiles)
        assert all(e.position == ("unknown", None, None) for e in run.events)
        assert not run.requests
        findings = _findings(trace)
        assert not _by(findings, "live-compile"), log.name
        assert not _by(findings, "step0-spike"), log.name


def test_shape_recompiles(shared: Path) -> None:
    """tlparse's multi-rank test log (rank 1): 15 compiles of one frame, 14 recompile_reasons
    artifacts holding 105 reasons, all size mismatches. Its lines end in CRLF: the md5 of every
    payload must still match."""
    trace = _load(shared, "tlparse_shape_recompiles.log")
    run = trace.compiled
    assert run is not None
    assert [c.compile_id for c in run.compiles] == [f"0/{i}" for i in range(15)]
    assert {c.frame.location for c in run.compiles if c.frame} == {
        "/Users/skarjala/Desktop/tlparse/tests/gen_many_frames.py:6"
    }
    assert sum(1 for c in run.compiles if c.is_recompile) == 14
    guards = [g for c in run.compiles for g in c.guards]
    assert len(guards) == 105
    assert {(g.kind, g.source) for g in guards} == {("tensor-size", "x")}
    # Each recompile lists every cached entry's failure: 0/n holds n reasons.
    assert [len(c.guards) for c in run.compiles] == list(range(15))
    assert run.compiles[0].duration_s == pytest.approx(1.334062)
    assert {c.result for c in run.compiles} == {"ok"}
    assert {c.epoch for c in run.compiles} == {0}
    stats = trace.manifest["torch_trace"]
    assert stats["corrupt_payloads"] == 0 and stats["skipped_lines"] == 0
    assert stats["warnings"] == []
    # Shape recompiles are not Python-state churn.
    assert not _by(_findings(trace), "guard-churn")


def test_python_state_recompiles(shared: Path) -> None:
    trace = _load(shared, "torch213_python_state_recompiles.log")
    run = trace.compiled
    assert run is not None
    assert len(run.compiles) == 6
    assert [c.compile_id for c in run.compiles] == [f"0/{i}" for i in range(6)]
    assert run.compiles[0].frame is not None
    assert run.compiles[0].frame.location == "/work/research/A/toy_dit.py:22"
    sources = {(g.kind, g.source) for c in run.compiles for g in c.guards}
    assert ("python-value", "self.step") in sources
    assert ("python-value", "self.use_cfg") in sources
    assert ("tensor-size", "x") in sources
    # The newest failing guard of 0/4 is the size mismatch, of 0/5 the cfg flag.
    assert run.compiles[4].guards[0].kind == "tensor-size"
    assert run.compiles[5].guards[0].source == "self.use_cfg"
    assert run.processes[0].versions == {"torch": "2.13.0+cpu"}
    assert run.processes[0].pid == 5704
    # The glog clock placed in unix time: 0/5 ended at its metrics' end_time_us.
    ended = run.processes[0].unix_ns(run.compiles[5].t)
    assert ended is not None and abs(ended - 1795991795004940_000) < 50_000_000
    # 0/5: the two newest entries (compiled for step 3) fail on use_cfg, the older ones on
    # step. Every entry's guard tree records use_cfg == False (FALSE_MATCH) and the call's
    # entry 0/5 use_cfg == True: no entry could have served it whatever its step, so the cause
    # is use_cfg, decided. 0/4 brought x at size 32, which no entry was compiled for: its cause
    # is torch's own size failure, not the step most entries failed on.
    from diag.evidence.causes import recompile_cause

    cause = recompile_cause(run, run.compiles[5])
    assert cause is not None and cause.decided and cause.guard is not None
    assert cause.guard.source == "self.use_cfg" and cause.entry == "0/4"
    new_size = recompile_cause(run, run.compiles[4])
    assert new_size is not None and new_size.guard is not None
    assert (new_size.guard.kind, new_size.guard.source) == ("tensor-size", "x")
    churn = {f.data["source"]: f for f in _by(_findings(trace), "guard-churn")}
    assert set(churn) == {"self.step", "self.use_cfg"}
    assert churn["self.step"].data["recompiles"] == 3
    assert churn["self.use_cfg"].data["recompiles"] == 1
    assert churn["self.step"].location == "/work/research/A/toy_dit.py:27"


def test_graph_break_and_recompile_limit(shared: Path) -> None:
    trace = _load(shared, "torch213_graph_break_and_limit.log")
    run = trace.compiled
    assert run is not None
    assert [(c.compile_id, c.result) for c in run.compiles] == [
        ("0/0", "ok"),
        ("1/0", "ok"),
        ("0/1", "ok"),
        ("0/2", "ok"),
        ("0/3", "ok"),
        ("0/4", "recompile_limit"),
    ]
    limited = run.compiles[-1]
    # The limit's metrics carry no code object: the frame comes from frame 0's earlier compiles.
    assert limited.frame is not None and limited.frame.name == "forward"
    assert limited.fail_reason == "Dynamo recompile limit exceeded"
    assert [g.expected for g in limited.guards] == ["3", "2", "1", "0"]
    assert run.compiles[1].frame is not None
    assert run.compiles[1].frame.name == "torch_dynamo_resume_in_forward_at_11"
    breaks = run.of("graph_break")
    assert len(breaks) == 1
    assert breaks[0].data["user_location"] == "/work/research/A/toy_dit_infer.py:11"
    assert breaks[0].data["compile_id"] == "0/0" and breaks[0].data["epoch"] == 0
    assert "print" in breaks[0].data["raw"]
    hits = run.of("recompile_limit")
    assert len(hits) == 1 and hits[0].data["frame"]["name"] == "forward"
    assert hits[0].data["compile_id"] == "0/4"

    findings = _findings(trace)
    limit = _by(findings, "recompile-limit")
    assert len(limit) == 1 and limit[0].severity == "error"
    assert limit[0].data["compiles_before"] == 4
    assert limit[0].location == "/work/research/A/toy_dit_infer.py:8"
    churn = _by(findings, "guard-churn")
    assert [f.data["source"] for f in churn] == ["self.step"]
    assert churn[0].data["limit_hit"] is not None
    graph = _by(findings, "graph-breaks")
    assert len(graph) == 1
    assert graph[0].location == "/work/research/A/toy_dit_infer.py:11"
    assert "print" in " ".join(graph[0].evidence)


def test_old_graph_breaks_come_from_restart_reasons(shared: Path) -> None:
    """Before the dynamo_graph_break_reason artifact, a break shows only as a restart reason of
    the compile, and the resume frame's name gives the line."""
    trace = _load(shared, "tlparse_graph_breaks.log")
    run = trace.compiled
    assert run is not None
    assert [c.frame.name for c in run.compiles if c.frame] == [
        "fn",
        "torch_dynamo_resume_in_fn_at_9551",
        "torch_dynamo_resume_in_fn_at_9553",
    ]
    test_misc = "/data/users/jjwu/a/pytorch/test/dynamo/test_misc.py"
    breaks = run.of("graph_break")
    assert [(e.data["compile_id"], e.data["user_location"]) for e in breaks] == [
        ("0/0", f"{test_misc}:9551"),
        ("1/0", f"{test_misc}:9553"),
    ]
    assert "graph_break" in breaks[0].data["reason"]
    graph = _by(_findings(trace), "graph-breaks")
    assert sorted(f.location or "" for f in graph) == [f"{test_misc}:9551", f"{test_misc}:9553"]


def test_a_corrupt_payload_that_is_not_read_is_stepped_over(shared: Path) -> None:
    """tlparse's corrupted log spoils a chromium_event payload: diag reads none of those (only
    recompile reasons, graph-break reasons and the torch version), so it does not hash it either,
    and nothing it reports depends on it."""
    trace = _load(shared, "tlparse_corrupted_payload.log")
    run = trace.compiled
    assert run is not None
    assert [c.compile_id for c in run.compiles] == ["0/0"]
    assert run.compiles[0].frame is not None and run.compiles[0].frame.name == "forward"
    stats = trace.manifest["torch_trace"]
    assert stats["corrupt_payloads"] == 0 and stats["skipped_lines"] == 0
    assert stats["warnings"] == []


def test_a_corrupt_payload_that_is_read_is_counted_and_said(tmp_path: Path) -> None:
    """Every payload diag reads is checked against its md5: a torch_version payload that fails
    is not used (no version is made up from it), and the warning says so."""
    payload = json.dumps({"pytorch_version": "2.13.0"})
    version = _record({"artifact": {"name": "torch_version", "encoding": "json"}}, payload)
    log = tmp_path / "version.log"
    log.write_text(_compile(0, 0) + version.replace("2.13.0", "9.99.0"))
    trace = load_torch_trace(log)
    stats = trace.manifest["torch_trace"]
    assert stats["corrupt_payloads"] == 1
    assert "torch" not in trace.manifest["versions"]
    assert any("did not match their md5" in line for line in stats["warnings"])
    log.write_text(_compile(0, 0) + version)
    trace = load_torch_trace(log)
    assert trace.manifest["versions"]["torch"] == "2.13.0"
    assert trace.manifest["torch_trace"]["corrupt_payloads"] == 0


def test_old_schema_parses(shared: Path) -> None:
    trace = _load(shared, "tlparse_old_schema.log")
    run = trace.compiled
    assert run is not None
    assert len(run.compiles) == 1
    only = run.compiles[0]
    assert only.frame is not None and only.frame.name == "fn" and only.frame.line == 439
    assert only.duration_s == pytest.approx(8.90376877784729)
    assert trace.manifest["torch_trace"]["warnings"] == []


def test_a_directory_is_one_process_per_log(shared: Path, tmp_path: Path) -> None:
    """Rank from the file name; two logs with the same pid still get two processes; gzip'd logs
    read like plain ones; files that are not logs are skipped with a warning."""
    source = shared / "torch213_graph_break_and_limit.log"
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_rank_0_abc.log").write_bytes(source.read_bytes())
    with gzip.open(folder / "dedicated_log_torch_trace_rank_1_def.log.gz", "wb") as handle:
        handle.write(source.read_bytes())
    (folder / "notes.log").write_text("not a trace\n" * 300)
    (folder / "README.txt").write_text("ignored: not a .log")
    seen: list[tuple[int, int]] = []
    trace = load_torch_trace(folder, progress=lambda done, total: seen.append((done, total)))
    run = trace.compiled
    assert run is not None
    assert sorted(p.rank or 0 for p in run.processes) == [0, 1]
    pids = [p.pid for p in run.processes]
    assert len(set(pids)) == 2 and 13178 in pids
    assert len(run.compiles) == 12 and len(run.of("recompile_limit")) == 2
    assert trace.manifest["torch_trace"]["skipped_files"] == ["notes.log"]
    assert trace.manifest["torch_trace"]["warnings"] == [
        "notes.log: not a TORCH_TRACE log, skipped"
    ]
    total = sum(p.stat().st_size for p in folder.glob("*.log*"))
    assert seen and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    findings = _findings(trace)
    # One limit finding per process, told apart by rank.
    limits = [f.id for f in _by(findings, "recompile-limit")]
    assert sorted(i.rsplit("@", 1)[1] for i in limits) == ["rank0", "rank1"]


def test_a_log_cut_mid_payload_still_loads(shared: Path, tmp_path: Path) -> None:
    """A process killed while writing: the compile it was in never finished; everything before
    is kept. The payload cut is a chromium_event's, which diag does not read (nor hash)."""
    data = (shared / "torch213_python_state_recompiles.log").read_bytes()
    reasons = data.index(b'"name": "recompile_reasons"', data.index(b'"frame_compile_id": 5'))
    start = data.index(b'{"dynamo_start"', reasons)
    cut = data.index(b"\n\t", start) + 50  # inside the first payload of compile 0/5
    log = tmp_path / "cut.log"
    log.write_bytes(data[:cut])
    trace = load_torch_trace(log)
    run = trace.compiled
    assert run is not None
    assert [c.compile_id for c in run.compiles] == [f"0/{i}" for i in range(5)]
    stats = trace.manifest["torch_trace"]
    assert stats["corrupt_payloads"] == 0 and stats["unfinished_compiles"] == 1
    assert not run.processes[0].ended


# --- hand-made logs: format details ------------------------------------------------------------


def _record(
    meta: dict[str, Any],
    payload: str | None = None,
    when: str = "1129 22:40:29.692000",
    pid: int = 4242,
    prefix: str = "",
) -> str:
    """One record exactly as torch's TorchLogsFormatter(trace=True) writes it."""
    if payload is not None:
        meta = {**meta, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    text = f"{prefix}V{when} {pid} torch/_dynamo/convert_frame.py:1] {json.dumps(meta)}\n"
    if payload is not None:
        text += "".join(f"\t{line}\n" for line in payload.split("\n"))
    return text


def _compile(frame: int, attempt: int, name: str = "f", **extra: Any) -> str:
    ids = {"frame_id": frame, "frame_compile_id": attempt, "attempt": 0, **extra}
    metrics = {"co_name": name, "co_filename": "/app/m.py", "co_firstlineno": 3}
    return _record({"dynamo_start": {"stack": []}, **ids}) + _record(
        {"compilation_metrics": {**metrics, "entire_frame_compile_time_s": 0.5}, **ids}
    )


def _reasons(frame: int, attempt: int, *reasons: str) -> str:
    ids = {"frame_id": frame, "frame_compile_id": attempt, "attempt": 0}
    payload = reasons[0] if len(reasons) == 1 else json.dumps(list(reasons), indent=0)
    return _record({"artifact": {"name": "recompile_reasons", "encoding": "json"}, **ids}, payload)


def test_compile_ids_that_repeat_start_a_new_epoch(tmp_path: Path) -> None:
    """torch._dynamo.reset() is not in the log; compile ids restarting at 0/0 are."""
    log = tmp_path / "reset.log"
    log.write_text(
        _compile(0, 0)
        + _reasons(0, 1, "0/0: self.k == 1")
        + _compile(0, 1)
        + _compile(0, 0)  # after reset
        + _reasons(0, 1, "0/0: self.k == 2")
        + _compile(0, 1)
        + _compile(1, 0, compiled_autograd_id=0)
    )
    run = load_torch_trace(log).compiled
    assert run is not None
    assert [(c.epoch, c.compile_id) for c in run.compiles] == [
        (0, "0/0"),
        (0, "0/1"),
        (1, "0/0"),
        (1, "0/1"),
        (1, "!0/1/0"),
    ]
    assert [g.expected for c in run.compiles for g in c.guards] == ["1", "2"]


def test_rank_prefix_and_field_stray_lines_and_clock(tmp_path: Path) -> None:
    log = tmp_path / "dedicated_log_torch_trace_abc.log"
    late = {"frame_id": 1, "frame_compile_id": 0}
    log.write_text(
        "some program output\n"
        + _record({"str": ["/app/m.py", 0]}, prefix="[rank3]:")
        + "\n"  # blank lines are not counted
        + "\torphan payload line\n"
        + _compile(0, 0, rank=3)
        + _record({"dynamo_guards": {}}, payload="[old schema]")
        + _record({"unknown_future_event": {"x": 1}, "rank": 3})
        + "V1129 22:40:29.692000 4242 torch/x.py:1] {not json\n"
        + _record({"dynamo_start": {"stack": []}, **late}, when="1231 23:59:59.000000")
        + _record({"compilation_metrics": {"co_name": "g"}, **late}, when="0101 00:00:01.500000")
    )
    trace = load_torch_trace(log)
    run = trace.compiled
    assert run is not None
    assert run.processes[0].rank == 3 and run.processes[0].pid == 4242
    assert trace.manifest["torch_trace"]["skipped_lines"] == 3
    assert [c.frame.name for c in run.compiles if c.frame] == ["f", "g"]
    # The year rolled over between the start and the end of compile 1/0: 2.5 s, not -1 year.
    assert run.compiles[1].duration_s == pytest.approx(2.5)
    assert run.compiles[0].t < run.compiles[1].t


def test_frame_from_the_dynamo_start_stack(tmp_path: Path) -> None:
    """A limit hit of a frame never compiled before has no code object in its metrics: the
    frame is the last one of the dynamo_start stack outside torch's own files."""
    ids = {"frame_id": 0, "frame_compile_id": 0}
    stack = [
        {"line": 40, "name": "<module>", "filename": 0},
        {"line": 7, "name": "step", "filename": 0},
        {"line": 573, "name": "_fn", "filename": 1},
    ]
    metrics = {"fail_type": "Unsupported", "fail_reason": "cache_size_limit reached"}
    log = tmp_path / "stack.log"
    log.write_text(
        _record({"str": ["/app/serve.py", 0]})
        + _record({"str": ["/venv/lib/torch/_dynamo/eval_frame.py", 1]})
        + _record({"dynamo_start": {"stack": stack}, **ids})
        + _record({"compilation_metrics": metrics, **ids})
    )
    run = load_torch_trace(log).compiled
    assert run is not None
    assert run.compiles[0].result == "recompile_limit"
    assert run.compiles[0].frame == Frame("step", "/app/serve.py", 7)
    assert run.of("recompile_limit")[0].data["frame"] == {
        "name": "step",
        "file": "/app/serve.py",
        "line": 7,
    }


def test_a_corrupt_recompile_reasons_payload_falls_back_to_the_metrics_reason(
    tmp_path: Path,
) -> None:
    good = _reasons(0, 1, "0/0: self.k == 1")
    bad = good.replace("self.k == 1", "self.k == 9")  # md5 no longer matches
    metrics = {"co_name": "f", "recompile_reason": "0/0: self.k == 1"}
    log = tmp_path / "bad.log"
    log.write_text(
        _compile(0, 0)
        + bad
        + _record({"compilation_metrics": metrics, "frame_id": 0, "frame_compile_id": 1})
    )
    trace = load_torch_trace(log)
    run = trace.compiled
    assert run is not None
    assert [(g.source, g.expected) for g in run.compiles[1].guards] == [("self.k", "1")]
    assert trace.manifest["torch_trace"]["corrupt_payloads"] == 1


def test_hostile_values_do_not_raise(tmp_path: Path) -> None:
    """Trace files are untrusted: NaN and Infinity (which json accepts), huge numbers, wrong
    types and deep nesting are ignored field by field."""
    ids = {"frame_id": 0, "frame_compile_id": 0}
    log = tmp_path / "hostile.log"
    log.write_text(
        _record({"dynamo_start": {"stack": [{"filename": [1], "line": "x"}, 7]}, **ids})
        + _record({"artifact": {"name": "torch_version"}}, payload="[" * 100_000)
        + _record({"artifact": {"name": "recompile_reasons"}, **ids}, payload="[" * 100_000)
        + "V1129 22:40:29.692000 1 torch/x.py:1] " + "[" * 100_000 + "\n"
        + "V1129 22:40:29.692000 1 torch/x.py:1] "
        + '{"compilation_metrics": {"co_name": 3, "co_filename": {}, "co_firstlineno": "9", '
        + '"entire_frame_compile_time_s": NaN, "duration_us": Infinity, '
        + '"start_time_us": 1e400, "start_time": -Infinity, "end_time_us": 10e999, '
        + '"fail_type": ["x"], "fail_reason": 5, "restart_reasons": "no", '
        + '"recompile_reason": 1, "compile_id": 12}, "frame_id": 0, "frame_compile_id": 0}\n'
        + "V9999 99:99:99.999999 1 torch/x.py:1] {}\n"
    )  # fmt: skip
    trace = load_torch_trace(log)
    run = trace.compiled
    assert run is not None and len(run.compiles) == 1
    only = run.compiles[0]
    assert only.compile_id == "0/0" and only.result == "failed" and only.frame is not None
    assert only.frame.name == "3" and only.frame.file is None and only.frame.line is None
    assert only.duration_s is not None and only.duration_s >= 0
    assert run.processes[0].wall_ns is None


def test_damaged_copies_of_a_real_log_never_raise_anything_else(
    shared: Path, tmp_path: Path
) -> None:
    """Random byte flips, cut lines and dropped lines: a Trace or a DiagError, nothing else."""
    import random

    original = (shared / "tlparse_graph_breaks.log").read_bytes()
    lines = original.split(b"\n")
    rng = random.Random(7)
    for round_ in range(60):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 40)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        if round_ % 3 == 0:
            kept = [line for line in lines if rng.random() > 0.2]
            damaged = bytearray(b"\n".join(kept))
        if round_ % 5 == 0:
            damaged = damaged[: rng.randrange(len(damaged))]
        if round_ % 7 == 0:
            damaged = bytearray(gzip.compress(bytes(damaged)))
            damaged[rng.randrange(10, len(damaged))] ^= 0xFF
        path = tmp_path / f"damaged{round_}.log"
        path.write_bytes(bytes(damaged))
        try:
            trace = load_torch_trace(path)
        except DiagError as exc:
            assert "\n" not in exc.message
            continue
        assert trace.compiled is not None and trace.compiled.processes


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such TORCH_TRACE log"),
        ("dir", "no TORCH_TRACE logs"),
        (b"", "not a TORCH_TRACE log"),
        (b"hello\nworld\n" * 400, "not a TORCH_TRACE log"),
        (bytes(range(256)) * 4096, "not a TORCH_TRACE log"),
        (b'{"ev": "compile_end"}\n', "not a TORCH_TRACE log"),
        (gzip.compress(b"\tjust\ttabs\n" * 400), "not a TORCH_TRACE log"),
    ],
    ids=["missing", "empty-dir", "empty-file", "text", "binary", "events-jsonl", "gzip-tabs"],
)
def test_unusable_inputs_are_one_line_errors(
    tmp_path: Path, content: bytes | str | None, message: str
) -> None:
    path = tmp_path / "input.log"
    if content == "dir":
        path = tmp_path / "empty"
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(DiagError, match=message) as info:
        load_torch_trace(path)
    assert "\n" not in info.value.message


# --- a log torch writes now --------------------------------------------------------------------

_PROGRAM = textwrap.dedent(
    """
    import json, os
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.mode = 0

        def forward(self, x):
            y = self.lin(x)
            if self.mode == 0:  # a Python int: Dynamo guards on it
                y = y.relu()
            torch._dynamo.graph_break()
            return y * 2

    def work(modes, reset_after):
        block = Block()
        compiled = torch.compile(block, backend="aot_eager")
        x = torch.randn(4, 8)
        for i, mode in enumerate(modes):
            block.mode = mode
            compiled(x)
            if i == reset_after:
                torch._dynamo.reset()
        # Runtime entries (inductor's lazy backward, autotuning at run time) are no compiles.
        return [
            {"compile_id": str(m.compile_id), "co_name": m.co_name, "failed": bool(m.fail_type),
             "reason": getattr(m, "recompile_reason", None)}
            for m in torch._dynamo.utils.get_compilation_metrics()
            if not getattr(m, "is_runtime", False)
        ]

    torch._dynamo.config.recompile_limit = 2
    child = os.fork()  # a second process: a second log file
    if child == 0:
        print(json.dumps({"pid": os.getpid(), "metrics": work([0, 1], -1)}), flush=True)
        os._exit(0)
    metrics = work([0, 1, 2, 2, 0], reset_after=3)
    os.waitpid(child, 0)
    print(json.dumps({"pid": os.getpid(), "metrics": metrics}), flush=True)
    """
)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, list[Any]]]:
    """Two processes' TORCH_TRACE logs of a block that recompiles on `self.mode`, breaks the
    graph, hits a recompile limit of 2 and is reset; with torch's own compile metrics."""
    folder = tmp_path_factory.mktemp("torch_trace")
    env = {**os.environ, "TORCH_TRACE": str(folder / "logs")}
    env.pop("TORCH_LOGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", _PROGRAM],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=folder,
    )
    assert proc.returncode == 0, proc.stderr
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return folder / "logs", {r["pid"]: r["metrics"] for r in reports}


def test_a_log_written_now_matches_torchs_own_count(
    written: tuple[Path, dict[int, list[Any]]],
) -> None:
    logs, torch_metrics = written
    assert len(list(logs.glob("dedicated_log_torch_trace_*.log"))) == 2
    trace = load_torch_trace(logs)
    run = trace.compiled
    assert run is not None
    assert sorted(p.pid for p in run.processes) == sorted(torch_metrics)
    for pid, metrics in torch_metrics.items():
        ours = [c for c in run.compiles if c.pid == pid]
        assert [c.compile_id for c in ours] == [m["compile_id"] for m in metrics]
        assert [c.result != "ok" for c in ours] == [m["failed"] for m in metrics]
        for compile_, metric in zip(ours, metrics, strict=True):
            if metric["co_name"]:
                assert compile_.frame is not None and compile_.frame.name == metric["co_name"]
            # torch keeps the newest failing guard; the artifact has all of them, newest first.
            if metric["reason"]:
                assert compile_.guards and compile_.guards[0].raw == metric["reason"]
            else:
                assert not compile_.guards
    parent = max(torch_metrics, key=lambda pid: len(torch_metrics[pid]))
    compiles = [c for c in run.compiles if c.pid == parent]
    forward = [c.epoch for c in compiles if c.frame and c.frame.name == "forward"]
    assert forward == [0, 0, 0, 1]
    assert trace.manifest["torch_trace"]["warnings"] == []
    assert trace.manifest["versions"]["torch"].startswith("2.")

    findings = _findings(trace)
    limit = _by(findings, "recompile-limit")
    assert len(limit) == 1 and limit[0].data["frame"] == "forward"
    churn = [f for f in _by(findings, "guard-churn") if f.data["source"] == "self.mode"]
    assert any(f.severity == "error" and f.data["limit_hit"] for f in churn)
    graph = _by(findings, "graph-breaks")
    assert len(graph) == 1 and graph[0].data["user_location"].endswith(":15")
    assert graph[0].data["count"] == len(run.of("graph_break"))


def test_analyze_cli_reads_a_torch_trace_directory(
    written: tuple[Path, dict[int, list[Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    from diag.cli import main

    logs, _ = written
    assert main(["analyze", "--torch-trace", str(logs), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {f["analyzer"] for f in document["findings"]} >= {
        "recompile-limit",
        "guard-churn",
        "graph-breaks",
    }
    assert main(["analyze", "--torch-trace", str(logs / "missing")]) == 2
    assert "no such TORCH_TRACE" in capsys.readouterr().err


def test_import_loads_no_torch() -> None:
    """`diag analyze --torch-trace` reads logs of any torch, on a machine without one."""
    code = (
        "import sys, diag.trace.torchtrace\n"
        "print(sorted(m for m in sys.modules if m.startswith('torch')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_builtins_compiled_through_torchs_wrapper(tmp_path: Path) -> None:
    """torch.compile(torch.sin), (torch.cos), (torch.tanh): torch wraps each in wrap_inline's
    shared `inner`, so the second and third compile are object-identity recompiles of one frame
    inside torch; the advice names the wrapper, not "pass the object's tensors"."""
    program = textwrap.dedent(
        """
        import torch
        x = torch.randn(8)
        for fn in (torch.sin, torch.cos, torch.tanh):
            torch.compile(fn, backend="aot_eager")(x)
        """
    )
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "logs")}
    env.pop("TORCH_LOGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    trace = load_torch_trace(tmp_path / "logs")
    run = trace.compiled
    assert run is not None and [c.compile_id for c in run.compiles] == ["0/0", "0/1", "0/2"]
    (churn,) = _by(_findings(trace), "guard-churn")
    assert churn.data["kind"] == "object-identity" and churn.data["source"] == "fn"
    assert "wrap_inline" in churn.fix and "Pass the object's tensors" not in churn.fix
