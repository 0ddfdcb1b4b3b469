"""diag.status on hand-written trace directories: the cases a local CPU run cannot produce (a
trace recorded on another host, a status this diag does not know, a baseline that crashed
after its compiled run completed), and the renderings' promise never to give an all-clear
while something was not seen. The recordings themselves are in
tests/integration/test_record_status.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diag.findings import Finding, findings_to_json, findings_to_text
from diag.status import assess
from diag.trace.run import load_trace

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
    assert lines[-1].startswith("not seen: the recording is incomplete; no warmup was identified")
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
