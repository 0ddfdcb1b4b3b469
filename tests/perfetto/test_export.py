"""`diag export --perfetto`: a valid Trace Event Format file in which steps, compiles, CUDA-graph
recordings and the profiler windows' CPU and GPU events nest as they were recorded.

On the demo's recording (CPU, aot_eager, the live recompile's step profiled) and on committed
H200 recordings (GPU kernels and copies, an inductor live recompile, CUDA graphs)."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

import diag
from tests.conftest import RecordFixture
from tests.h200data import h200_file, h200_trace
from tests.notebook.support import analyze_json, demo_trace, finding

from .tef import Checked, Slice, check, load


def export(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diag", "export", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def exported(trace: Path, out: Path) -> Checked:
    proc = export(trace, "--perfetto", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out} ") and "ui.perfetto.dev" in proc.stdout
    return check(load(out))


def _pid(checked: Checked, name: str) -> int:
    [pid] = [p for p, n in checked.process_names.items() if n.startswith(name)]
    return pid


def _step(checked: Checked, pid: int, name: str) -> Slice:
    [step] = [s for s in checked.on(pid, "steps") if s.name == name]
    return step


@pytest.mark.slow
def test_demo_export_nests_compiles_in_steps_and_windows_on_one_clock(
    record_fixture: RecordFixture, tmp_path: Path
) -> None:
    trace = demo_trace(record_fixture)
    out = tmp_path / "demo.perfetto.json.gz"
    checked = exported(trace.path, out)
    t = diag.open(trace.path)
    compiled = _pid(checked, "compiled")
    eager = _pid(checked, "eager")
    for pid, run in ((compiled, "compiled"), (eager, "eager")):
        steps = t.steps[t.steps["run"] == run]
        names = sorted(f"{r} s{s}" for r, s in zip(steps["request"], steps["step"], strict=True))
        assert sorted(s.name for s in checked.on(pid, "steps")) == names
        requests = checked.on(pid, "requests")
        for step in checked.on(pid, "steps"):
            assert any(step.inside(r) for r in requests if step.name.split()[0] == r.name)
    # Every compile in the step it happened in; the live recompiles with their failing guards.
    compiles = checked.on(compiled, "compiles")
    assert sorted(s.args["compile_id"] for s in compiles) == sorted(
        t.compiles[t.compiles["run"] == "compiled"]["compile_id"]
    )
    live = [c for c in compiles if c.args["phase"] == "live"]
    assert {c.args["request"] for c in live} == {"r0", "r1"}
    for item in compiles:
        assert item.inside(_step(checked, compiled, f"{item.args['request']} s{item.args['step']}"))
    for item in live:
        assert item.name.startswith("recompile ") and item.args["failing_guards"]
        assert item.args["total_s"] > 0  # seconds by phase, from compilation_metrics
    instants = [e for e in checked.instants if e["pid"] == compiled]
    assert sum(e["cat"] == "diag.guard_failure" for e in instants) == len(
        [c for c in compiles if c.args.get("failing_guards")]
    )
    # Each window recorded its own clock anchor when it started (collectors/profiling.py),
    # beside the event clock: the same offset as the process's, give or take clock drift.
    run = trace.compiled
    assert run is not None and run.processes[0].wall_ns is not None
    offset = run.processes[0].wall_ns - run.processes[0].start_t
    starts = run.of("profile_window_start")
    assert len(starts) == 3
    for event in starts:
        assert abs(event.data["wall_ns"] - event.t - offset) < 50_000_000  # 50 ms
    # Each window holds its profiled steps, and the Kineto side of a window (its CPU thread's
    # diag.region markers, on Kineto's own clock) falls inside the steps diag's clock recorded.
    windows = checked.on(compiled, "profiler windows")
    profiled = [s for s in checked.on(compiled, "steps") if s.args.get("profiled")]
    assert len(profiled) == 4  # r0 s0, r0 s2, r0 s3, r1 s0
    for step in profiled:
        assert sum(step.inside(w) for w in windows) == 1
    markers = [s for s in checked.slices if s.pid == compiled and s.name.startswith("diag.region:")]
    assert len(markers) >= 4 * 2  # two compiled-block calls per step at least
    for marker in markers:
        assert any(marker.inside(step) for step in profiled), marker
    # The live recompile's own step: the Kineto CPU events of Dynamo's compile lie in it.
    r1 = _step(checked, compiled, "r1 s0")
    dynamo = [s for s in checked.slices if s.pid == compiled and s.name == "entire_frame_compile"]
    assert dynamo and all(any(d.inside(s) for s in profiled) for d in dynamo)
    assert any(d.inside(r1) for d in dynamo)


def test_h200_export_nests_kernels_in_the_step_that_launched_them(tmp_path: Path) -> None:
    path = h200_trace("record-wan-offload-unwarmed", tmp_path)
    checked = exported(path, tmp_path / "h200.json")
    t = diag.open(path)
    pid = _pid(checked, "compiled")
    [live] = [c for c in checked.on(pid, "compiles") if c.args["phase"] == "live"]
    assert live.args["compile_id"] == "0/2" and live.inside(_step(checked, pid, "r1 s0"))
    gpu = [s for s in checked.slices if s.pid == pid and s.args.get("step")]
    kernels = [s for s in gpu if s.cat == "kineto.kernel"]
    frame = t.kernels()
    frame = frame[(frame["run"] == "compiled") & (frame["kind"] == "kernel")]
    spans = t.offload().set_index(["run", "request", "step"])["span_s"]
    inside = 0
    for (request, index), count in frame.groupby(["request", "step"]).size().items():
        name = f"{request} s{index}"
        mine = [k for k in kernels if k.args.get("step") == name]
        assert len(mine) == count, name
        step = _step(checked, pid, name)
        # Launched in the step (its launch is `queued_us` before it ran), run after the step
        # began; the GPU may finish the step's work after the host side ended, by the end of
        # its span (diag.evidence.offload measures it on Kineto's side).
        for kernel in mine:
            launched = kernel.start - kernel.args["queued_us"]
            assert step.start <= launched <= step.end and step.start <= kernel.start, name
        inside += sum(k.inside(step) for k in mine)
        work = [g for g in gpu if g.args.get("step") == name]
        span_end = step.start + Decimal(str(round(spans[("compiled", request, index)] * 1e6, 3)))
        assert max(step.end, *(g.end for g in work)) == pytest.approx(span_end, abs=0.002)
    # All but the last kernels of a step lie wholly in its host time (the GPU runs behind).
    assert inside >= 0.99 * len(kernels)
    copies = [s for s in checked.slices if s.pid == pid and s.cat == "kineto.memcpy"]
    assert copies and all(c.args.get("bytes") for c in copies)
    tracks = {checked.thread_names[(s.pid, s.tid)] for s in kernels + copies}
    assert all(name.startswith("GPU 0 stream ") for name in tracks) and len(tracks) >= 2


def test_cuda_graph_recordings_lie_in_their_warmup_steps(tmp_path: Path) -> None:
    path = h200_trace("cudagraph-clean", tmp_path)
    recordings = finding(analyze_json(path), "cudagraphs:summary")["data"]["recordings"]
    checked = exported(path, tmp_path / "graphs.json.gz")
    pid = _pid(checked, "compiled")
    graphs = checked.on(pid, "CUDA graphs")
    assert len(graphs) == recordings
    steps = checked.on(pid, "steps")
    assert all(any(g.inside(s) and s.args["phase"] == "warmup" for s in steps) for g in graphs)


def test_a_plain_kineto_file_exports_its_own_events(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    proc = export("--kineto", h200_file("wan-compiled.json.gz"), "--perfetto", out)
    assert proc.returncode == 0, proc.stderr
    checked = check(load(out))
    assert any(s.cat == "kineto.kernel" for s in checked.slices)
    assert any(s.name.startswith("ProfilerStep#") for s in checked.slices)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = export(tmp_path / "missing", "--perfetto", tmp_path / "x.json")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no such trace directory" in proc.stderr and not (tmp_path / "x.json").exists()
    proc = export(h200_file("wan-compiled.json.gz"), "--perfetto", tmp_path)
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def test_one_bad_kineto_window_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """Issue 37: a truncated window made export refuse the whole trace (exit 2) where analyze,
    check and report skip it with one warning; the other windows' kernels are still drawn."""
    path = h200_trace("record-wan-routing", tmp_path)
    window = sorted((path / "runs" / "compiled").glob("*/kineto/*.json.gz"))[0]
    window.write_bytes(window.read_bytes()[:300])
    out = tmp_path / "t.json"
    proc = export(path, "--perfetto", out)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("diag: warning: ") and window.name in line and "skipped" in line
    assert any(s.cat == "kineto.kernel" for s in check(load(out)).slices)
