"""diag's own pauses (diag/evidence/own_pauses.py) off a real recording with a profiler window: the
figures are the profile_window_end events', the pause is shown beside the notices without
blocking an all-clear, and the steps that may hold it are left out of bench figures."""

from __future__ import annotations

from typing import Any

from diag.benchmark.trial import load_trial
from diag.benchmark.validity import window_steps
from diag.evidence.own_pauses import paid_steps, window_pauses
from diag.evidence.status import DIAG_PAUSED, assess, status_lines


def _trace(record_fixture: Any) -> Any:
    # Shared with the kernel-routing, report and TUI tests: one steady window.
    return record_fixture("routing", baseline=True, profile="steady:1")


def test_pauses_are_the_window_events(record_fixture: Any) -> None:
    trace = _trace(record_fixture)
    run = trace.compiled
    ends = run.of("profile_window_end")
    pauses = window_pauses(run)
    assert ends and len(pauses) == len(ends)
    assert sorted(p.export_s for p in pauses) == sorted(e.data["export_s"] for e in ends)
    steps = {(s.pid, s.request_id, s.index): s for s in run.steps}
    for pause in pauses:
        assert pause.after is not None and pause.after in pause.paid_by
        after = steps[pause.after]
        assert after.profiled  # the window's last step: the stop follows its end
        assert after.end_t is not None and after.end_t <= pause.began <= pause.t
        for key in pause.paid_by:
            assert key[1] == after.request_id  # never a step of another request


def test_pause_is_shown_but_no_notice(record_fixture: Any) -> None:
    trace = _trace(record_fixture)
    visibility = assess(trace)
    assert [n.kind for n in visibility.paused] == [DIAG_PAUSED]
    assert DIAG_PAUSED not in {n.kind for n in visibility.notices}
    total = sum(p.export_s for p in window_pauses(trace.compiled))
    line = next(x for x in status_lines(visibility) if "paused the program" in x)
    assert line.startswith("INFO") and f"{total:.3f} s in all" in line
    assert visibility.as_dict()["diag_paused"][0]["kind"] == DIAG_PAUSED


def test_bench_leaves_paid_steps_out(record_fixture: Any) -> None:
    trace = _trace(record_fixture)
    paid = paid_steps(trace.compiled)
    trial = load_trial("compiled", 1, trace.path)
    live = trial.steps
    marked = {(s.request_id, s.index) for s in live if s.diag_pause_s}
    assert marked == {(r, i) for (_, r, i) in paid if any(s.request_id == r for s in live)}
    unprofiled_paid = [s for s in live if s.diag_pause_s and not s.profiled]
    assert unprofiled_paid  # the step after the window's last one, in its request
    counted = window_steps(trial, 0)
    assert counted and not any(s.diag_pause_s for s in counted)


def test_step_end_work_is_recorded_and_summarised(record_fixture: Any) -> None:
    """diag's own work at step ends (collectors/steps.py) reaches process_end and the summary
    `diag record` prints: one figure per process, counted over the steps it ended."""
    from diag.record.summary import summarize_run
    from diag.trace.lines import iter_events

    trace = _trace(record_fixture)
    (path,) = (trace.path / "runs" / "compiled").glob("*/events.jsonl")
    written = list(iter_events(path))
    (end,) = [e for e in written if e["ev"] == "process_end"]
    steps = sum(1 for e in written if e["ev"] == "step_end")
    assert end["steps_ended"] == steps > 0
    total, longest = end["step_end_work_s"], end["step_end_work_max_s"]
    assert 0 < longest <= total
    lines = summarize_run(trace.path / "runs" / "compiled").lines()
    (line,) = [x for x in lines if "diag's work at step ends" in x]
    assert f"over {steps} step(s)" in line and "between steps" in line
