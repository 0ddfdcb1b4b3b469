"""diag.evidence.status on hand-written trace directories: the cases a local CPU run cannot produce
(a
trace recorded on another host, a status this diag does not know, a baseline that crashed
after its compiled run completed), and the renderings' promise never to give an all-clear
while something was not seen. The recordings themselves are in
tests/integration/test_record_status.py."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from diag.evidence.status import assess
from diag.findings.model import Finding, findings_to_json
from diag.findings.text import findings_to_text
from diag.trace.load import load_trace
from diag.trace.processes import process_start_ticks

PROCESS = {"t": 1, "ev": "process_start", "pid": 7, "ppid": 1, "argv": ["serve"]}
END = {"t": 99, "ev": "process_end", "gpu": None}


def _request(rid: str, phase: str, t: int) -> list[dict[str, Any]]:
    return [
        {"t": t, "ev": "request_start", "request_id": rid, "phase": phase, "shape": [4]},
        {"t": t + 1, "ev": "step_start", "request_id": rid, "step": 0, "phase": phase},
        {"t": t + 2, "ev": "step_end", "request_id": rid, "step": 0, "phase": phase},
        {"t": t + 3, "ev": "request_end", "request_id": rid, "phase": phase},
    ]


WARMED = [PROCESS, *_request("w0", "warmup", 10), *_request("r1", "live", 20), END]


def _trace(
    folder: Path,
    events: list[dict[str, Any]] | None = None,
    status: str = "complete",
    runs: list[dict[str, Any]] | None = None,
    **manifest: Any,
) -> Path:
    data = {
        "format": "diag-trace",
        "version": 1,
        "status": status,
        "host": {"hostname": "elsewhere.example"},
        "runs": runs or [{"label": "compiled", "status": status, "exit_code": 0, "signal": None}],
        **manifest,
    }
    (folder / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    run = folder / "runs" / "compiled"
    run.mkdir(parents=True)
    if events is not None:
        (run / "pid7").mkdir()
        text = "".join(json.dumps(e) + "\n" for e in events)
        (run / "pid7" / "events.jsonl").write_text(text, encoding="utf-8")
    return folder


def test_a_complete_warmed_recording_has_no_notice(tmp_path: Path) -> None:
    visibility = assess(load_trace(_trace(tmp_path, WARMED)))
    assert visibility.status.detail == "complete (exit code 0)"
    assert visibility.notices == [] and visibility.all_clear_possible
    assert "nothing compiled after warmup" in findings_to_text([], visibility)


def test_running_on_another_host_cannot_be_judged_alive(tmp_path: Path) -> None:
    runs = [{"label": "compiled", "status": "running"}]
    trace = load_trace(_trace(tmp_path, WARMED[:-1], "running", runs, launcher_pid=1))
    visibility = assess(trace)
    assert visibility.status.detail.startswith("running, as far as the manifest says: recorded")
    assert "elsewhere.example" in visibility.status.detail
    assert visibility.notices[0].kind == "recording-incomplete"


def test_an_unknown_status_is_named_not_trusted(tmp_path: Path) -> None:
    visibility = assess(load_trace(_trace(tmp_path, WARMED, "paused")))
    assert not visibility.status.complete
    assert "does not know how the recording ended" in visibility.status.detail


def test_the_baseline_that_crashed_is_the_run_named(tmp_path: Path) -> None:
    runs = [
        {"label": "compiled", "status": "complete", "exit_code": 0, "signal": None},
        {"label": "eager", "status": "crashed", "exit_code": 1, "signal": None},
    ]
    visibility = assess(load_trace(_trace(tmp_path, WARMED, "crashed", runs)))
    assert visibility.status.detail == "crashed: run eager exited with code 1"
    assert visibility.status.exit_code == 1


def test_requests_without_warmup_say_how_to_mark_it(tmp_path: Path) -> None:
    events = [PROCESS, *_request("r1", "live", 10), *_request("r2", "live", 20), END]
    visibility = assess(load_trace(_trace(tmp_path, events)))
    (notice,) = visibility.notices
    assert notice.kind == "no-warmup"
    assert "all 2 request(s) count as live" in notice.message
    assert "--warmup-requests N" in notice.how and 'diag.phase("warmup")' in notice.how


def test_a_process_cut_short_in_a_complete_run(tmp_path: Path) -> None:
    visibility = assess(load_trace(_trace(tmp_path, WARMED[:-1])))
    assert [n.kind for n in visibility.notices] == ["process-cut-short"]


def test_text_and_json_with_findings_keep_the_notices_first(tmp_path: Path) -> None:
    events = [PROCESS, *_request("r1", "live", 10), END]
    visibility = assess(load_trace(_trace(tmp_path, events, "killed", signal="SIGTERM")))
    finding = Finding("x:1", "live-compile", "error", "f compiled live", ["e"], "warm it")
    text = findings_to_text([finding], visibility)
    lines = text.splitlines()
    assert lines[0].startswith("recording: killed")
    assert lines[1].startswith("NOTICE  the recording is incomplete")
    assert lines[-2].startswith("not seen: the recording is incomplete; no warmup was identified")
    assert lines[-1] == "1 finding(s): 1 error, 0 warning, 0 info"  # the summary line last
    document = json.loads(findings_to_json([finding], "t", None, visibility))
    assert list(document)[:5] == ["format", "version", "trace", "status", "notices"]
    assert [n["kind"] for n in document["notices"]] == ["recording-incomplete", "no-warmup"]
    assert document["warnings"] == []


def test_an_imported_torch_trace_says_no_steps_and_how(tmp_path: Path) -> None:
    from diag.trace.run import RunData, Trace

    trace = Trace(
        tmp_path,
        {"format": "diag-trace", "status": None, "torch_trace": {}},
        {"compiled": RunData("compiled", tmp_path, None)},
    )
    visibility = assess(trace)
    assert visibility.status.status == "imported"
    (notice,) = visibility.notices
    assert notice.kind == "no-steps" and notice.how.startswith("record it with diag record")
    assert "nothing compiled after warmup" not in findings_to_text([], visibility)


def test_warmup_is_judged_per_process(tmp_path: Path) -> None:
    """Two ranks: rank 0 warms up, rank 1 does not (its --warmup-requests count is its own)."""
    folder = _trace(tmp_path, WARMED)
    rank1 = folder / "runs" / "compiled" / "rank1-pid8"
    rank1.mkdir()
    events = [{**PROCESS, "pid": 8}, *_request("r1", "live", 10), *_request("r2", "live", 20), END]
    (rank1 / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (notice,) = assess(load_trace(folder)).notices
    assert notice.kind == "no-warmup"
    assert "(process(es) 8 of 2): all 2 request(s) count as live" in notice.message


# --- a recording still running, a stopped one, a bounded one ----------------------------------


def _running_here(tmp_path: Path, **manifest: Any) -> str:
    """The status detail of a `running` trace recorded on this host."""
    runs = [{"label": "compiled", "status": "running"}]
    tmp_path.mkdir()
    gone = {**PROCESS, "pid": 2**22 + 9}  # above any pid_max: no such process
    trace = _trace(tmp_path, [gone, *WARMED[1:-1]], "running", runs, **manifest)
    data = json.loads((trace / "manifest.json").read_text())
    data["host"] = {"hostname": socket.gethostname(), **manifest.pop("host", {})}
    (trace / "manifest.json").write_text(json.dumps(data))
    return assess(load_trace(trace)).status.detail


def test_still_running_only_while_the_launchers_pid_and_start_time_match(tmp_path: Path) -> None:
    """This test process stands in for the launcher: alive, with a known start time."""
    me, ticks = os.getpid(), process_start_ticks(os.getpid())
    assert ticks is not None
    here = _running_here(tmp_path / "a", launcher_pid=me, launcher_start_ticks=ticks)
    assert here.startswith(f"still running: diag record (pid {me})")
    # The same pid, another start time: a later process got the launcher's pid.
    reused = _running_here(tmp_path / "b", launcher_pid=me, launcher_start_ticks=ticks + 1)
    assert reused.startswith("never finished: the manifest was left `running`")
    # Without a start time (an older trace) the pid alone decides, as before.
    old = _running_here(tmp_path / "c", launcher_pid=me)
    assert old.startswith(f"still running: diag record (pid {me})")
    # Another boot: nothing of that recording can be alive.
    rebooted = _running_here(
        tmp_path / "d", launcher_pid=me, launcher_start_ticks=ticks, host={"boot_id": "x"}
    )
    assert "the host has restarted since" in rebooted


def test_a_recorded_process_counts_as_alive_only_with_its_start_time(tmp_path: Path) -> None:
    me, ticks = os.getpid(), process_start_ticks(os.getpid())
    assert ticks is not None
    for name, start, alive in (("a", ticks, True), ("b", ticks + 1, False), ("c", None, True)):
        folder = tmp_path / name
        folder.mkdir()
        events = [{**PROCESS, "pid": me, "start_ticks": start}, *_request("r1", "live", 10)]
        runs = [{"label": "compiled", "status": "running"}]
        trace = _trace(folder, events, "running", runs, launcher_pid=2**22 + 7)
        data = json.loads((trace / "manifest.json").read_text())
        data["host"] = {"hostname": socket.gethostname()}
        (trace / "manifest.json").write_text(json.dumps(data))
        detail = assess(load_trace(trace)).status.detail
        assert detail.startswith("still running: recorded process(es)") is alive, (name, detail)


def test_a_recording_that_stopped_says_where_and_why(tmp_path: Path) -> None:
    stop = {
        "t": 2_000_000_001,
        "ev": "recording_stopped",
        "reason": "disk full",
        "error": "ENOSPC: No space left on device",
        "file": "events.jsonl",
        "phase": "live",
        "request_id": "r1",
        "step": 0,
    }
    start = {**PROCESS, "wall_ns": 1_700_000_000_000_000_000}
    events = [start, *_request("w0", "warmup", 10), *_request("r1", "live", 20)[:2], stop]
    runs = [
        {
            "label": "compiled",
            "status": "complete",
            "exit_code": 0,
            "signal": None,
            "truncated": {"reason": "disk full", "processes": [7]},
        }
    ]
    visibility = assess(load_trace(_trace(tmp_path, events, runs=runs)))
    status = visibility.status
    assert status.complete and status.truncated == "disk full" and status.exit_code == 0
    assert status.detail == (
        "complete (exit code 0); the recording stopped early (disk full): later events are missing"
    )
    (notice,) = visibility.notices  # not also "cut short": it stopped recording, was not killed
    assert notice.kind == "recording-truncated"
    assert notice.message == (
        "the recording of run compiled stopped in process 7, 2.0 s after it started "
        "(2023-11-14 22:13:22 UTC), in live request r1, step 0: disk full (ENOSPC: No space left "
        "on device, writing events.jsonl); later events are missing, so findings cover only "
        "what happened before (the program ran on unchanged)"
    )
    assert not visibility.all_clear_possible
    assert "the recording stopped early" in findings_to_text([], visibility)


def test_steps_rotated_away_are_counted_with_their_requests(tmp_path: Path) -> None:
    dropped = {"t": 90, "ev": "steps_dropped", "segment": "steps-1.jsonl", "steps": 250}
    dropped.update(first_t=19, last_t=25)
    events = [*WARMED[:-1], dropped, *_request("r2", "live", 30), END]
    (notice,) = assess(load_trace(_trace(tmp_path, events))).notices
    assert notice.kind == "steps-rotated"
    assert notice.message.startswith("250 older step(s) of 1 request(s) of run compiled were")
    assert "--max-size none" in notice.how
