"""step0-spike on real recordings (CPU aot_eager; the H200 recording in tests/data/h200) and on
small hand-written trace directories.

The hand-written traces cover what a CPU recording cannot produce: step memory (only recorded
when the program uses CUDA, so allocator growth cannot happen on CPU), a profiled step 0 without
a compile (profiling changes the recorded run, and its start-up cost on CPU is too small and
noisy to cross the threshold reliably), and exact step times for the threshold's edges.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from diag.analyzers import get_analyzer
from diag.analyzers.step0_spike import FACTOR, FLOOR_S, analyze
from diag.findings.model import Finding
from diag.fixtures.ground_truth import expectation
from diag.trace.load import load_trace
from diag.trace.run import Trace

from .support import write_trace as _write_trace

RecordFixture = Callable[..., Trace]
H200 = Path(__file__).resolve().parent.parent / "data" / "h200"
MS = 1_000_000  # ns


def _request(
    rid: str,
    start_ms: int,
    times_ms: list[float],
    phase: str = "live",
    profiled: tuple[int, ...] = (),
    reserved: list[int] | None = None,
    reserved_start: int | None = None,
    gpu_ms: list[float] | None = None,
    cpu_ms: list[float] | None = None,
) -> list[dict[str, Any]]:
    """Events of one request whose steps take `times_ms` (wall), back to back; `cpu_ms` is the
    process's CPU time in each step (as much as the wall time when left out: a quiet host)."""
    t = start_ms * MS
    events: list[dict[str, Any]] = [
        {"t": t, "ev": "request_start", "request_id": rid, "phase": phase, "shape": [2, 8, 8]}
    ]
    for i, ms in enumerate(times_ms):
        where = {"request_id": rid, "step": i, "phase": phase}
        start = {"t": t + 1, "ev": "step_start", **where, "shape": [2, 8, 8]}
        start["profiled"] = i in profiled
        if i == 0 and reserved_start is not None:
            start["memory"] = {"allocated": 1, "reserved": reserved_start, "max_allocated": 1}
        events.append(start)
        t += int(ms * MS) + 2
        end: dict[str, Any] = {"t": t, "ev": "step_end", **where, "wall_s": ms / 1000}
        end["profiled"] = i in profiled
        end["cpu_s"] = (cpu_ms[i] if cpu_ms is not None else ms) / 1000
        if reserved is not None:
            end["memory"] = {"allocated": 1, "reserved": reserved[i], "max_allocated": 1}
        events.append(end)
        if gpu_ms is not None:
            gpu = {"t": t + 1, "ev": "step_gpu", "request_id": rid, "step": i}
            events.append({**gpu, "gpu_s": gpu_ms[i] / 1000})
    events.append({"t": t + 2, "ev": "request_end", "request_id": rid, "phase": phase})
    return events


def _only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, [f.title for f in findings]
    return findings[0]


def test_registered() -> None:
    assert get_analyzer("step0-spike") is analyze


def test_unwarmed_shape_r1_step0_is_the_compile(record_fixture: RecordFixture) -> None:
    """r1's step 0 recompiles (~1 s on an idle CPU against ~12 ms steps): flagged, attributed."""
    trace = record_fixture("unwarmed-shape")
    truth = expectation("unwarmed-shape", "wan").live_recompiles[0]
    # On a loaded host r0's step 0 can be slow with no cause in the trace: that is an INFO
    # "too noisy to judge" finding (test_clean_run_has_no_warning), not this one.
    finding = _only([f for f in analyze(trace) if not f.data.get("too_noisy")])
    assert finding.id == f"step0-spike:{truth.request_id}"
    assert finding.severity == "warning"
    assert finding.data["cause"] == "compile"
    assert finding.data["frames"] == [truth.frame]
    live = [c for c in trace.runs["compiled"].compiles if c.live]
    assert finding.data["compile_ids"] == [c.compile_id for c in live]
    assert finding.data["compile_s"] >= 0.5 * finding.data["excess_s"]
    text = "\n".join(finding.evidence)
    assert f"failing guard: tensor-size on {truth.source} (expected 4, actual 6)" in text
    assert f"live-compile:{truth.frame}:{truth.request_id}" in text
    assert live[0].frame is not None and "fixtures/models/wan.py:" in live[0].frame.location
    assert finding.location == live[0].frame.location


def test_clean_run_has_no_warning(record_fixture: RecordFixture) -> None:
    """A clean run stays quiet however loaded the host: a slow step 0 with no cause in the
    trace is at most INFO "too noisy to judge" (it failed here at load 4 before)."""
    findings = analyze(record_fixture())
    # A full collection of Python's garbage collector that lands in a live step 0 is the
    # program's own pause, measured (gc_pause events), and named as such: no false alarm.
    loud = [
        f
        for f in findings
        if f.severity != "info"
        and not (f.analyzer == "step0-spike" and f.data.get("cause") == "gc")
    ]
    # The evidence in the message: a rare spike under load (2 in ~20 loaded runs, CPU-bound,
    # no compile) is not understood yet; its lines say what it was.
    assert [f.title for f in loud] == [], [f.evidence for f in loud]
    infos = [f for f in findings if f.severity == "info"]
    assert all(f.data.get("too_noisy") for f in infos), [f.title for f in infos]


def test_h200_recording_uses_gpu_time_and_skips_short_baselines() -> None:
    """r1 step 0 (4.8 s, a compile, profiled) against 87 ms; r0 has only 1 unprofiled other step
    (steps 0, 2 and 3 were profiled): its profiled steps join the baseline, and its step 0 is no
    spike against them. Being profiled is no cause of its own: the compile is."""
    findings = analyze(load_trace(H200 / "record-wan-offload-unwarmed"))
    finding = _only(findings)
    assert finding.id == "step0-spike:r1"
    assert finding.data["metric"] == "gpu"
    assert finding.data["causes"] == ["compile"]
    assert 0.08 < finding.data["median_s"] < 0.09
    assert "window r1-s0-new-shape" in "\n".join(finding.evidence)


def test_profiled_step0_is_not_blamed_on_the_profiler(tmp_path: Path) -> None:
    """A profiled step 0 whose profile cannot be compared (no steady profiled step, no window
    file: written by hand) has no cause read off it: unknown, never "the profiler starting"."""
    events = [
        {"t": 5 * MS, "ev": "profile_window_start", "window": "r0-s0-new-shape"},
        *_request("r0", 10, [400, 100, 110, 90], profiled=(0,)),
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.data["cause"] == "unknown"
    assert finding.data["median_s"] == 0.1
    assert "profiler" not in finding.title
    assert "window r0-s0-new-shape" in "\n".join(finding.evidence)
    assert finding.severity == "warning"
    assert finding.claims[0]["cause"] == {"kind": "unknown", "decided": False}


def test_allocator_growth_is_measured_inside_the_step(tmp_path: Path) -> None:
    """After r0 (1 GiB reserved) an empty_cache() gave it back; r1's step 0 grew the reserve
    from 0 to 2 GiB inside the step. Measured against the step's own start (the previous
    step's end says nothing after an empty_cache), shown, but not named the cause: without a
    profile its cost is not known (hand-written: CPU recordings have no CUDA allocator)."""
    gib = 1 << 30
    events = [
        *_request("r0", 0, [100, 100, 100], reserved=[gib, gib, gib]),
        {"t": 500 * MS, "ev": "empty_cache", "duration_s": 0.001, "phase": "live"},
        *_request(
            "r1", 1000, [300, 100, 100], reserved=[2 * gib, 2 * gib, 2 * gib], reserved_start=0
        ),
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.id == "step0-spike:r1"
    assert finding.data["cause"] == "unknown"
    text = "\n".join(finding.evidence)
    assert "the allocator's reserve grew 2.00 GiB inside step 0" in text
    assert "torch.cuda.empty_cache() ran 1 time(s) after r0's last step" in text


def test_model_offload_reload_read_off_the_profile() -> None:
    """H200, diffusers WanPipeline with enable_model_cpu_offload(): every request's step 0 copies
    the 1.09 GiB transformer back to the GPU. r2 was profiled whole: its step 0's profile against
    its steady steps shows the host-to-device copies (torch's own record: 1,166,652,544 bytes of
    Memcpy HtoD in step 0, none in steps 1-5)."""
    findings = analyze(load_trace(H200 / "offload-model-profiled"))
    by_id = {f.id: f for f in findings}
    for rid in ("r2", "r3"):
        finding = by_id[f"step0-spike:{rid}"]
        assert finding.data["cause"] == "offload-reload", finding.evidence
        text = "\n".join(finding.evidence)
        assert "host-to-device copies: 1.09 GiB" in text
        assert "profiler" not in finding.title
        assert "enable_group_offload" in finding.fix
        assert finding.claims[0]["cause"] == {"kind": "offload-reload", "decided": True}


def test_model_offload_reload_read_off_the_events() -> None:
    """The same program unprofiled: the reserve grew 1.21 GiB inside step 0 (after the previous
    request's empty_cache()), and the pipeline's model offload holds 1.09 GiB of weights."""
    findings = analyze(load_trace(H200 / "offload-model-unprofiled"))
    assert {f.id for f in findings} == {"step0-spike:r2", "step0-spike:r3"}
    for finding in findings:
        assert finding.data["cause"] == "offload-reload"
        text = "\n".join(finding.evidence)
        assert "the allocator's reserve grew 1.21 GiB inside step 0" in text
        assert "empty_cache() ran 2 time(s)" in text
        assert "enable_model_cpu_offload()" in text


def test_unknown_cause_and_threshold_edges(tmp_path: Path) -> None:
    """Just over 2x and 50 ms: flagged (cause unknown); 2x but under 50 ms more: not flagged;
    a steady step as slow as step 0: not flagged; a warmup request's slow step 0 is never
    checked; a profiled steady step is not in the baseline."""
    assert (FACTOR, FLOOR_S) == (2.0, 0.050)
    events = [
        *_request("warmup0", 0, [5000, 100, 100], phase="warmup"),
        *_request("r0", 10_000, [201, 100, 90, 110]),
        *_request("r1", 20_000, [19, 9, 9, 9]),
        *_request("r2", 30_000, [250, 100, 100, 900], profiled=(3,)),
        *_request("r3", 40_000, [300, 100, 100, 300]),
    ]
    findings = analyze(_write_trace(tmp_path, events))
    assert [f.id for f in findings] == ["step0-spike:r0", "step0-spike:r2"]
    assert all(f.data["cause"] == "unknown" for f in findings)
    assert findings[1].data["baseline_steps"] == [1, 2]


def test_gpu_time_when_every_step_has_it(tmp_path: Path) -> None:
    """With CUDA event times the comparison uses them (here wall time alone shows no spike)."""
    events = _request("r0", 0, [100, 100, 100], gpu_ms=[300, 100, 100])
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.data["metric"] == "gpu"
    assert finding.data["step0_s"] == 0.3


def test_compile_too_short_to_explain(tmp_path: Path) -> None:
    """A recompile-limit hit compiles nothing (9 ms): a 500 ms step 0 is then not the compile.

    Seen in a loaded CPU recording of the recompile-limit plant (r1 step 0: 554 ms against
    13 ms steps, of which the limited compile took 8.8 ms); written by hand here because the
    pause itself does not reproduce.
    """
    frame = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
    where = {"phase": "live", "request_id": "r0", "step": 0}
    limited = {"t": 10 * MS + 5, "ev": "compile_end", "compile_id": "0/8", "epoch": 0, **where}
    limited.update(frame=frame, result="recompile_limit", duration_s=0.009)
    events = [*_request("r0", 10, [500, 10, 12, 11]), limited]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.data["cause"] == "unknown"
    assert finding.data["compile_ids"] == ["0/8"]
    assert finding.location is None
    assert "cause unknown (compiles in the step took only 9.0 ms)" in finding.title
    assert "(recompile-limit:block_forward)" in "\n".join(finding.evidence)


def test_unknown_cause_needs_the_process_on_the_cpu(tmp_path: Path) -> None:
    """The same 250 ms step 0 twice: when the process ran on the CPU for it (a GC pause, lazy
    initialisation) it is a warning; when it ran for 12 ms of it (descheduled: another process
    had the CPU, as on a loaded CI host) it is INFO, too noisy to judge, with the numbers."""
    events = [
        *_request("r0", 0, [250, 100, 100, 100]),
        *_request("r1", 10_000, [250, 100, 100, 100], cpu_ms=[112, 100, 100, 100]),
    ]
    worked, descheduled = analyze(_write_trace(tmp_path, events))
    assert (worked.id, worked.severity, worked.data["too_noisy"]) == (
        "step0-spike:r0",
        "warning",
        False,
    )
    assert worked.data["cpu_share"] == 1.0
    assert descheduled.id == "step0-spike:r1"
    assert (descheduled.severity, descheduled.data["too_noisy"]) == ("info", True)
    assert "too noisy to judge" in descheduled.title
    text = "\n".join(descheduled.evidence)
    assert "ran on the CPU for only 12 ms of step 0's extra 150 ms wall time (8%" in text
    assert descheduled.fix.startswith("Nothing to fix yet")


def test_unknown_cause_within_the_hosts_noise(tmp_path: Path) -> None:
    """A steady step of another request strayed 400 ms (the host's noise, measured on steps
    that pay no first-call cost): r1's unexplained 150 ms step 0 cannot be told from it."""
    events = [
        *_request("r0", 0, [100, 100, 500, 100, 100]),
        *_request("r1", 10_000, [250, 100, 100, 100]),
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert (finding.id, finding.severity) == ("step0-spike:r1", "info")
    assert "a steady step of this process (r0 step 2) strayed 400 ms" in "\n".join(finding.evidence)


def test_no_cpu_time_in_the_trace_is_too_noisy(tmp_path: Path) -> None:
    """Traces without cpu_s (older recordings, imported ones): an unexplained spike is INFO."""
    events = _request("r0", 0, [250, 100, 100, 100])
    for event in events:
        event.pop("cpu_s", None)
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.severity == "info" and finding.data["cpu_share"] is None
    assert "no CPU time per step" in "\n".join(finding.evidence)


def test_noise_band_of_the_request(tmp_path: Path) -> None:
    """Steady steps spread widely (median 110 ms, MAD 30 ms, so a spread of ±44 ms): a step 0
    of 240 ms, 2.2x their median, 130 ms more and slower than each, is still within 3 spreads
    of it: no spike. 20 ms more and it is one."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    events = _request("r0", 0, [240, 120, 60, 150, 90, 200, 100])
    assert analyze(_write_trace(tmp_path / "a", events)) == []
    events = _request("r0", 0, [260, 120, 60, 150, 90, 200, 100])
    assert [f.id for f in analyze(_write_trace(tmp_path / "b", events))] == ["step0-spike:r0"]


def test_profiled_steps_join_a_short_baseline(tmp_path: Path) -> None:
    """The default windows profile step 0 and steps 2-3 of a 4-step request: with one
    unprofiled step left, the profiled ones join the baseline (they can only raise it) and the
    live compile's spike is found."""
    frame = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
    where = {"phase": "live", "request_id": "r0", "step": 0}
    compile_end = {"t": 10 * MS + 5, "ev": "compile_end", "compile_id": "0/1", "epoch": 0}
    compile_end.update(where, frame=frame, result="ok", duration_s=0.8)
    events = [*_request("r0", 10, [900, 100, 120, 110], profiled=(0, 2, 3)), compile_end]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.data["cause"] == "compile"
    assert finding.data["baseline_steps"] == [1, 2, 3]
    assert finding.data["profiled_in_baseline"] == [2, 3]
    assert "profiled steps 2, 3 joined it" in finding.evidence[0]


def test_a_request_too_short_to_judge_says_so(tmp_path: Path) -> None:
    """A live request of 2 steps has one other step: no verdict, and an INFO that says so."""
    events = [
        *_request("r0", 0, [100, 100, 100]),
        *_request("r3", 10_000, [900, 100]),
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.id == "step0-spike:unjudged"
    assert finding.severity == "info"
    assert finding.title == (
        "step 0 of request r3 could not be judged: 1 other step(s) (1 unprofiled), 2 needed"
    )
    assert finding.data["requests"] == ["r3"]


def test_a_loaded_host_makes_an_unknown_cause_too_noisy(tmp_path: Path) -> None:
    """The same spike as r0 in test_unknown_cause_needs_the_process_on_the_cpu (the process on
    the CPU for all of it), on a host with 2.5 runnable tasks per CPU: INFO. On a busy CPU the
    program's spinning threads burn CPU while they wait, so CPU time alone cannot clear it."""
    events = _request("r0", 0, [250, 100, 100, 100])
    for event in events:
        if event["ev"] == "step_end":
            event["host_load"] = 2.5 if event["step"] == 0 else 0.5
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert (finding.severity, finding.data["too_noisy"]) == ("info", True)
    assert "the host was loaded (2.50 runnable tasks per CPU" in "\n".join(finding.evidence)


def test_h200_autotuning_at_the_first_call_is_named() -> None:
    """magi-compile-sizes (H200, inductor): r1's step 0 runs new compiled graphs whose first
    calls autotune their Triton kernels; the seconds are torch's own (its
    compilation_metrics_runtime records, as collectors/compile_timing.py wrote them)."""
    trace = load_trace(H200 / "magi-compile-sizes")
    assert trace.compiled is not None
    logged = sum(
        float(e.data.get("runtime_autotune_s") or 0.0)
        for e in trace.compiled.of("compile_timing")
        if (e.data.get("request_id"), e.data.get("step")) == ("r1", 0)
    )
    (finding,) = [f for f in analyze(trace) if f.id == "step0-spike:r1"]
    assert logged > 0.5
    assert abs(finding.data["runtime_autotune_s"] - logged) < 1e-6
    assert "autotuning 771 ms of it in the step" in finding.title
    assert "autotuning 771 ms at the first call, after the compile" in "\n".join(finding.evidence)


def test_autotuning_and_cuda_graph_capture_apart_from_compiling(tmp_path: Path) -> None:
    """A max-autotune compile in step 0 (GPU only: no CPU run autotunes or captures graphs):
    of its 3 s, 2 s were autotuning inside the compile; 0.5 s of CUDA-graph capture followed
    at the first call."""
    frame = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
    where = {"phase": "live", "request_id": "r0", "step": 0}
    compiled = {"t": 10 * MS + 5, "ev": "compile_end", "compile_id": "0/0", "epoch": 0, **where}
    compiled.update(frame=frame, result="ok", duration_s=3.0)
    timing = {"ev": "compile_timing", "compile_id": "0/0", "epoch": 0, **where}
    events = [
        *_request("r0", 10, [3800, 10, 12, 11]),
        compiled,
        {**timing, "t": 10 * MS + 6, "runtime": False, "total_s": 3.0, "autotune_s": 2.0},
        {**timing, "t": 10 * MS + 7, "runtime": True, "cudagraphify_s": 0.5},
    ]
    finding = _only(analyze(_write_trace(tmp_path, events)))
    assert finding.data["cause"] == "compile"
    assert finding.data["autotune_s"] == 2.0 and finding.data["cudagraphify_s"] == 0.5
    assert "(autotuning 2.00 s, CUDA-graph capture 500 ms of it in the step)" in finding.title
    text = "\n".join(finding.evidence)
    assert "autotuning 2.00 s while compiling (inside the compile time: 1.00 s of it" in text
    assert "CUDA-graph capture 500 ms at the first call" in text
