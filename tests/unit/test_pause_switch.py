"""`Session.pause()` / `resume()`: while paused, diag does no per-step or per-call work, and the
program computes exactly what it computes unrecorded (bench/record_overhead_interleaved.py
measures diag's cost by this switch).

Real programs under real `diag record`: the reference service (aot_eager, its LightX2V-style
adapter) and a hand-written loop over a `torch.compile`d function (the compiled-calls adapter,
with profiler windows and region markers on). Each runs once recorded and once with no diag;
their outputs and Dynamo's frame counters are compared.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from diag.collectors.session import Session
from diag.collectors.steps import StepTracker
from diag.evidence.status import assess
from diag.trace.lines import iter_events
from diag.trace.load import load_trace

FIXTURE_PROGRAM = textwrap.dedent("""
    import json, sys, torch
    from diag.fixtures.config import FixtureConfig, Request
    from diag.fixtures.runner import FixtureRunner

    module = sys.modules.get("diag.collectors.session")
    session = module.current_session() if module is not None else None
    runner = FixtureRunner(FixtureConfig(compile=True, backend="aot_eager"))
    shape = runner.config.warmup_shapes[0]
    digests = []
    with torch.no_grad():
        runner.init_modules()
        runner.phase = "live"
        for request_id, paused in (("on1", False), ("off1", True), ("off2", True), ("on2", False)):
            if session is not None:
                (session.pause if paused else session.resume)()
            runner.run_pipeline(Request(request_id, shape, 3))
            digests.append(runner.results[-1].latents_sha256)
    frames = dict(torch._dynamo.utils.counters["frames"])
    print(json.dumps({"digests": digests, "frames": frames}))
""")

LOOP_PROGRAM = textwrap.dedent("""
    import json, sys, torch

    def denoise(x, t):
        return torch.sin(x) * t + x.cos()

    module = sys.modules.get("diag.collectors.session")
    session = module.current_session() if module is not None else None
    step = torch.compile(denoise, backend="aot_eager")
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    outputs = []
    with torch.no_grad():
        for i in range(12):
            if session is not None:
                (session.pause if 4 <= i < 9 else session.resume)()
            x = step(x, 0.5)
            outputs.append(x.sum().item())
    frames = dict(torch._dynamo.utils.counters["frames"])
    print(json.dumps({"digests": [x.numpy().tobytes().hex()], "sums": outputs, "frames": frames}))
""")


def _run(program: str, tmp_path: Path, recorded: bool, profile: str) -> tuple[Any, Path]:
    script = tmp_path / "program.py"
    script.write_text(program)
    trace = tmp_path / ("trace" if recorded else "none")
    command = [sys.executable, str(script)]
    if recorded:
        command = [sys.executable, "-m", "diag", "record", "--profile", profile, "-o", str(trace)]
        command += ["--", sys.executable, str(script)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), trace


def _events(trace: Path) -> list[dict[str, Any]]:
    (events,) = trace.glob("runs/compiled/*/events.jsonl")
    return list(iter_events(events))


def test_paused_requests_of_the_reference_service_leave_no_step_and_change_nothing(
    tmp_path: Path,
) -> None:
    recorded, trace = _run(FIXTURE_PROGRAM, tmp_path, recorded=True, profile="default")
    plain, _ = _run(FIXTURE_PROGRAM, tmp_path, recorded=False, profile="none")
    assert recorded["digests"] == plain["digests"]  # bit for bit, paused or not
    assert recorded["frames"] == plain["frames"]  # the same compiles: no guard the switch added
    evs = _events(trace)
    names = [e["ev"] for e in evs]
    assert "collector_error" not in names
    live = [e["request_id"] for e in evs if e["ev"] == "request_start" and e["phase"] == "live"]
    assert live == ["on1", "on2"]
    stepped = {e["request_id"] for e in evs if e["ev"] in ("step_start", "step_end")}
    assert not stepped & {"off1", "off2"}
    assert [(e["request_id"], e["step"]) for e in evs if e["ev"] == "step_end"][-6:] == [
        ("on1", 0),
        ("on1", 1),
        ("on1", 2),
        ("on2", 0),
        ("on2", 1),
        ("on2", 2),
    ]
    switches = [e["paused"] for e in evs if e["ev"] == "collectors_paused"]
    assert switches == [True, False]
    # Nothing was compiled after the first switch: every compile precedes it.
    first_switch = names.index("collectors_paused")
    assert "compile_start" not in names[first_switch:]
    # No cache-entry snapshot and no profiler window inside the paused span.
    paused_span = names[first_switch : names.index("collectors_paused", first_switch + 1)]
    assert {"cache_entries", "profile_window_start", "step_gpu"}.isdisjoint(paused_span)


def test_a_paused_hand_written_loop_is_neither_stepped_nor_sampled(tmp_path: Path) -> None:
    recorded, trace = _run(LOOP_PROGRAM, tmp_path, recorded=True, profile="all")
    plain, _ = _run(LOOP_PROGRAM, tmp_path, recorded=False, profile="none")
    assert recorded["digests"] == plain["digests"]
    assert recorded["sums"] == plain["sums"]
    assert recorded["frames"] == plain["frames"]
    evs = _events(trace)
    assert not [e for e in evs if e["ev"] == "collector_error"]
    assert [e["name"] for e in evs if e["ev"] == "adapter"] == ["compiled-calls (inferred)"]
    # 12 calls, 5 of them paused: 7 steps, 7 sampled calls.
    assert len([e for e in evs if e["ev"] == "step_end"]) == 7
    (shapes,) = [e for e in evs if e["ev"] == "call_shapes"]
    assert shapes["calls"] == 7
    assert [e["paused"] for e in evs if e["ev"] == "collectors_paused"] == [True, False]
    # What was not recorded is said: the paused span is a notice, so no all-clear.
    visibility = assess(load_trace(trace))
    [paused] = [n for n in visibility.notices if n.kind == "collectors-paused"]
    assert paused.message.startswith("per-step collection was paused 1 time(s) in run compiled")
    assert not visibility.all_clear_possible


def test_pause_closes_the_open_request_and_the_tracker_then_writes_nothing(
    tmp_path: Path,
) -> None:
    session = Session(tmp_path, "compiled")
    session.steps = StepTracker(session)
    steps = session.steps
    steps.request_start("a", [2, 8, 8], 4)
    steps.step_start(0)
    session.pause()
    assert steps.request_id is None and steps.step_index is None
    assert steps.request_start("b") == "b"
    steps.step_start(0)
    steps.step_end()
    steps.request_end()
    session.resume()
    steps.step_start(0)
    steps.step_end()
    steps.close()
    session.writer.close()
    evs = [
        (e["ev"], e.get("request_id"), e.get("paused"))
        for e in iter_events(session.proc_dir / "events.jsonl")
        if e["ev"] != "process_start"
    ]
    assert evs == [
        ("request_start", "a", None),
        ("step_start", "a", None),
        ("step_end", "a", None),
        ("request_end", "a", None),
        ("collectors_paused", None, True),
        ("collectors_paused", None, False),
        ("request_start", "r2", None),
        ("step_start", "r2", None),
        ("step_end", "r2", None),
        ("request_end", "r2", None),
    ]


def test_the_interleaved_bench_runs_pairs_and_finds_identical_latents() -> None:
    """bench/record_overhead_interleaved.py end to end, 4 pairs (its figures are timings, so
    only their presence is checked here; the figures themselves go in docs/BENCHMARKS.md)."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "record_overhead_interleaved.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--pairs", "4", "--settle", "1", "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = proc.stdout.strip().splitlines()[-1]
    assert result.startswith("RESULT recorded/paused ")
    assert "(+-" in result and "4 pairs" in result
    assert "latents identical" in result
