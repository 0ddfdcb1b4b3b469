"""The rules on hand-written trace directories: what counts as a compile after warmup, when the
recording itself fails the gate, and malformed trace directories (exit 2, one line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diag.trace import paths
from diag.trace.format import BOOTSTRAP_ERRORS

from .support import (
    compile_event,
    run_check,
    served_trace,
    set_manifest,
    size_guard,
    write_policy,
)

OTHER = {"name": "head_forward", "file": "/srv/app/head.py", "line": 3}


@pytest.fixture
def defaults(tmp_path: Path) -> Path:
    return write_policy(tmp_path, "[check]\n")


def _rules(capsys: pytest.CaptureFixture[str], *args: str | Path) -> dict[str, dict[str, Any]]:
    code, out, err = run_check(capsys, *args, "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["passed"] is (code == 0)
    return {rule["name"]: rule for rule in doc["rules"]}


def test_clean_service_passes(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_check(capsys, served_trace(tmp_path / "t"), "--policy", defaults)
    assert code == 0, out
    assert out.startswith("diag check: PASS (9 rules)\n")
    assert "pass live-compile: 0 compile(s) during live requests (max 0)" in out


def test_first_compiles_count_and_limit_hits_do_not(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [
        # A frame warmup never reached: its first compile lands in live r0 step 1.
        *compile_event(1205, "1/0", "r0", 1, frame=OTHER),
        # A recompile of the warmed frame in r1 step 2.
        *compile_event(3305, "0/1", "r1", 2, guards=[size_guard("0/0")]),
        # A compile that only hit the recompile limit compiled nothing: recompile-limit's job.
        *compile_event(3405, "0/2", "r1", 3, guards=[size_guard("0/1")], result="recompile_limit"),
        # Live phase but outside any request (between requests): not a request's stall.
        *compile_event(2500, "2/0", None, None, frame={**OTHER, "name": "idle"}),
    ]
    trace = served_trace(tmp_path / "t", extra=extra)
    rules = _rules(capsys, trace, "--policy", defaults)
    live = rules["live-compile"]
    assert live["status"] == "fail"
    assert live["summary"] == "2 compile(s) during live requests (max 0)"
    messages = [v["message"] for v in live["violations"]]
    assert messages == [
        "head_forward compiled 1 time(s) during live requests (r0 step 1), 500.0 ms of compile",
        "block_forward recompiled 1 time(s) during live requests (r1 step 2), 500.0 ms of compile",
    ]
    first, recompiled = (v["evidence"] for v in live["violations"])
    assert "first compile of the frame: warmup never reached it" in first[0]
    assert "failing guard: tensor-size on x: tensor 'x' size mismatch" in recompiled[0]
    assert [v["location"] for v in live["violations"]] == [
        "/srv/app/head.py:3",
        "/srv/app/model.py:12",
    ]
    # Two compiles are within a budget of 2.
    budget = write_policy(tmp_path, "[check]\nmax_recompiles_after_warmup = 2\n", "budget.toml")
    live = _rules(capsys, trace, "--policy", budget)["live-compile"]
    assert (live["status"], live["violations"]) == ("pass", [])


def test_locations_are_relative_to_the_repository_check_runs_in(
    tmp_path: Path,
    defaults: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """diag.trace.paths' rule: the program was recorded from a subfolder of the repository (its
    frames are absolute paths under it); check runs from the repository root, as CI does, and
    its locations (the GitHub annotations' files) are relative to that root."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    frame = {**OTHER, "file": str(repo / "serving" / "head.py")}
    trace = served_trace(tmp_path / "t", extra=compile_event(1205, "1/0", "r0", 1, frame=frame))
    set_manifest(trace, cwd=str(repo / "serving"))
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.chdir(repo)
    paths.repository_root.cache_clear()
    live = _rules(capsys, trace, "--policy", defaults)["live-compile"]
    assert [v["location"] for v in live["violations"]] == ["serving/head.py:3"]
    # Outside the repository a path stays absolute: it resolves on the recording machine.
    monkeypatch.chdir(tmp_path)
    paths.repository_root.cache_clear()
    (tmp_path / ".git").mkdir()
    outside = {**OTHER, "file": "/srv/app/head.py"}
    trace = served_trace(tmp_path / "u", extra=compile_event(1205, "1/0", "r0", 1, frame=outside))
    live = _rules(capsys, trace, "--policy", defaults)["live-compile"]
    assert [v["location"] for v in live["violations"]] == ["/srv/app/head.py:3"]
    paths.repository_root.cache_clear()


def test_a_crashed_recording_fails(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = served_trace(tmp_path / "t")
    set_manifest(
        trace,
        status="crashed",
        runs=[{"label": "compiled", "status": "crashed", "exit_code": 3, "signal": None}],
    )
    code, out, _ = run_check(capsys, trace, "--policy", defaults)
    assert code == 1
    assert "FAIL recording: status crashed, 2 live request(s), 8 live step(s)" in out
    assert "x the recording did not complete (status 'crashed')" in out
    assert "- runs: compiled crashed (exit 3)" in out


def test_collector_and_bootstrap_errors_fail(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = {"t": 5, "ev": "collector_error", "where": "cache", "error": "boom", "traceback": ""}
    trace = served_trace(tmp_path / "t", extra=[error])
    (trace / "runs" / "compiled" / BOOTSTRAP_ERRORS).write_text("pid 9: ImportError: x\n")
    recording = _rules(capsys, trace, "--policy", defaults)["recording"]
    messages = [v["message"] for v in recording["violations"]]
    assert messages == [
        "1 collector error(s) in run compiled: the trace may miss compiles",
        "diag's collectors could not start in run compiled: nothing was recorded in the "
        "processes listed",
    ]


def test_no_live_traffic_fails_unless_the_policy_says_otherwise(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ..analyzers.support import write_trace

    folder = tmp_path / "t"
    folder.mkdir()
    write_trace(folder, compile_event(10, "0/0", None, None))
    code, out, _ = run_check(capsys, folder, "--policy", defaults)
    assert code == 1
    assert "x no live request was recorded, so nothing after warmup was checked" in out
    relaxed = write_policy(tmp_path, "[check]\nrequire_live_requests = false\n", "r.toml")
    assert run_check(capsys, folder, "--policy", relaxed)[0] == 0


def _one_line_error(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    code, out, err = run_check(capsys, *args)
    assert (code, out) == (2, ""), err
    assert err.startswith("diag: error: ") and err.count("\n") == 1, err
    return err


def test_malformed_trace_directories_are_exit_2(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = ("--policy", defaults)
    assert "no such trace directory" in _one_line_error(capsys, tmp_path / "missing", *p)
    assert "not a diag trace directory" in _one_line_error(capsys, tmp_path, *p)
    trace = served_trace(tmp_path / "t")
    (trace / "manifest.json").write_text('{"format": "diag-trace", "vers')
    assert "truncated or corrupt" in _one_line_error(capsys, trace, *p)
    (trace / "manifest.json").write_text('{"format": "diag-trace", "version": 99}')
    assert "written by a newer diag" in _one_line_error(capsys, trace, *p)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "manifest.json").write_text('{"format": "diag-trace", "version": 1}')
    assert "holds no runs" in _one_line_error(capsys, empty, *p)


def test_unreadable_event_file_is_exit_2(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = served_trace(tmp_path / "t")
    events = trace / "runs" / "compiled" / "pid7" / "events.jsonl"
    events.unlink()
    events.mkdir()  # an events "file" that cannot be read
    assert "events.jsonl is a directory" in _one_line_error(capsys, trace, "--policy", defaults)


def test_a_value_of_the_wrong_type_is_a_skipped_line_that_fails_the_recording_rule(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the reader validated events, this guard reached guard-churn and raised; now its
    recompile line is skipped (docs/FORMAT.md), named on stderr, and what it held was not
    checked, which the recording rule says."""
    guard = {
        "compile_id": 5,  # not a string: written by something that is not diag
        "kind": "python-value",
        "source": "self.n",
        "expected": "1",
        "raw": "self.n == 1",
    }
    trace = served_trace(tmp_path / "t", extra=compile_event(1205, "0/1", "r0", 1, guards=[guard]))
    code, out, err = run_check(capsys, trace, "--policy", defaults, "--format", "json")
    assert code == 1
    assert err.startswith("diag: warning: runs/compiled/pid7/events.jsonl: 1 corrupt line(s)")
    assert "Expected `str | null`, got `int` - at `$.guards[0].compile_id`" in err
    verdict = json.loads(out)
    recording = next(r for r in verdict["rules"] if r["name"] == "recording")
    assert recording["status"] == "fail"
    assert recording["violations"][0]["key"] == "recording:corrupt-lines:compiled"
    assert verdict["warnings"] == [err.removeprefix("diag: warning: ").strip()]


def test_junit_path_that_cannot_be_written(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = served_trace(tmp_path / "t")
    err = _one_line_error(
        capsys, trace, "--policy", defaults, "--junit", tmp_path / "no" / "dir" / "r.xml"
    )
    assert "r.xml: cannot write the JUnit report" in err


def test_bad_format_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_check(capsys, served_trace(tmp_path / "t"), "--format", "xml")
    assert exc.value.code == 2


def test_frame_without_file_and_compile_without_frame(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [
        *compile_event(1205, "1/0", "r0", 1, frame={"name": "lambda_0"}),
        {
            "t": 1206 * 1_000_000,
            "ev": "compile_end",
            "compile_id": "3/0",
            "epoch": 0,
            "frame": None,
            "result": "ok",
            "duration_s": None,
            "phase": "live",
            "request_id": "r0",
            "step": 2,
        },
    ]
    trace = served_trace(tmp_path / "t", extra=extra)
    live = _rules(capsys, trace, "--policy", defaults)["live-compile"]
    assert [(v["message"], v["location"]) for v in live["violations"]] == [
        ("lambda_0 compiled 1 time(s) during live requests (r0 step 1), 500.0 ms of compile", None),
        (
            "<unknown frame> compiled 1 time(s) during live requests (r0 step 2), "
            "0.0 ms of compile",
            None,
        ),
    ]


def test_one_violation_per_frame_listing_where_it_compiled(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [
        *compile_event(1105, "0/1", "r0", 0, guards=[size_guard("0/0")]),
        *compile_event(1305, "0/2", "r0", 2, guards=[size_guard("0/1", 6, 8)]),
        *compile_event(3105, "0/3", "r1", 0, guards=[size_guard("0/2", 8, 10)]),
    ]
    trace = served_trace(tmp_path / "t", extra=extra)
    live = _rules(capsys, trace, "--policy", defaults)["live-compile"]
    [violation] = live["violations"]
    assert violation["message"] == (
        "block_forward recompiled 3 time(s) during live requests (r0 steps 0 and 2, r1 step 0), "
        "1.50 s of compile"
    )
    assert violation["key"] == "live-compile:block_forward"
    assert [line.split(":", 1)[0] for line in violation["evidence"][:3]] == [
        "live r0 step 0",
        "live r0 step 2",
        "live r1 step 0",
    ]
