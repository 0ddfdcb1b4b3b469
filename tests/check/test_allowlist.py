"""Allowlist entries on real recordings (guard-churn, cache-bloat) and hand-written traces: an
entry accepts a violation only when everything it sets matches, the reason shows in the verdict,
and entries that accepted nothing are reported as stale."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from diag.fixtures.ground_truth import BLOCK_FRAME, expectation
from diag.trace.run import Trace

from .support import compile_event, run_check, served_trace, size_guard, write_policy

RecordFixture = Callable[..., Trace]
CHURN = expectation("guard-churn", "wan").live_recompiles[0]


def _allow(tmp_path: Path, *entries: str) -> Path:
    body = "".join(f"[[check.allow]]\n{entry}\n" for entry in entries)
    return write_policy(tmp_path, "[check]\n" + body, "allow.toml")


def test_guard_churn_allowed_by_guard_and_phase(
    record_fixture: RecordFixture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = record_fixture("guard-churn")
    policy = _allow(
        tmp_path,
        f"guard = '{CHURN.source.replace('.', '[.]')}'\nphase = 'live'\n"
        "reason = 'config grows per request until #42 lands'",
    )
    code, out, _ = run_check(capsys, trace.path, "--policy", policy)
    assert code == 0, out
    assert "pass live-compile: 0 compile(s) during live requests (max 0); 2 allowed" in out
    assert "pass guard-churn: no finding at severity error; 1 allowed" in out
    assert "allowed by the policy:" in out
    assert (
        f"  - [live-compile] {CHURN.frame} compile 0/2 at live r0 step 0 "
        "(allow #1: config grows per request until #42 lands)"
    ) in out
    assert "matched nothing" not in out


@pytest.mark.parametrize(
    "entry",
    [
        "guard = 'tensor-dtype'",  # another guard
        "frame = 'qwen_*'",  # another frame
        f"guard = '{CHURN.source}'\nphase = 'warmup'",  # the churn happened live
    ],
)
def test_entries_that_do_not_match_allow_nothing(
    entry: str, record_fixture: RecordFixture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = record_fixture("guard-churn")
    policy = _allow(tmp_path, entry + "\nreason = 'r'")
    code, out, _ = run_check(capsys, trace.path, "--policy", policy, "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert {r["name"] for r in doc["rules"] if r["status"] == "fail"} == {
        "live-compile",
        "guard-churn",
    }
    assert all(r["allowed"] == [] for r in doc["rules"])
    assert doc["unused_allow"] == [doc["unused_allow"][0]] and "allow #1" in doc["unused_allow"][0]


def test_frame_glob_alone_allows_every_rule_about_that_frame(
    record_fixture: RecordFixture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = record_fixture("guard-churn")
    policy = _allow(tmp_path, "frame = 'wan_*'\nreason = 'legacy model, tracked in #7'")
    assert run_check(capsys, trace.path, "--policy", policy)[0] == 0


def test_cache_bloat_allowed_in_warmup_only(
    record_fixture: RecordFixture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = record_fixture("cache-bloat")
    block = BLOCK_FRAME["wan"]
    policy = _allow(tmp_path, f"frame = '{block}'\nphase = 'warmup'\nreason = 'one per block'")
    code, out, _ = run_check(capsys, trace.path, "--policy", policy)
    assert code == 0, out
    assert f"[cache-entries] {block} holds 8 cache entries (max 7) (allow #1: one per block)" in out
    live_only = _allow(tmp_path, f"frame = '{block}'\nphase = 'live'\nreason = 'x'")
    code, out, _ = run_check(capsys, trace.path, "--policy", live_only)
    assert code == 1 and "FAIL cache-entries" in out
    assert "allowlist entries that matched nothing (stale?):\n  - allow #1 (frame=" in out


def test_guard_pattern_never_allows_a_first_compile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {"name": "head_forward", "file": "/srv/app/head.py", "line": 3}
    extra = [
        *compile_event(1205, "1/0", "r0", 1, frame=other),
        *compile_event(3305, "0/1", "r1", 2, guards=[size_guard("0/0")]),
    ]
    trace = served_trace(tmp_path / "t", extra=extra)
    policy = _allow(tmp_path, "guard = '.*'\nreason = 'sizes vary'")
    code, out, _ = run_check(capsys, trace, "--policy", policy)
    assert code == 1
    assert "x head_forward compiled 1 time(s) during live requests (r0 step 1)" in out
    assert "[live-compile] block_forward compile 0/1 at live r1 step 2 (allow #1" in out
    # The frame glob also matches the file:line location.
    by_file = _allow(tmp_path, "frame = '*/head.py:*'\nreason = 'lazy head'")
    code, out, _ = run_check(capsys, trace, "--policy", by_file)
    assert code == 1 and "x block_forward recompiled" in out and "x head_forward" not in out


def test_first_matching_entry_wins_and_the_rest_are_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = compile_event(3305, "0/1", "r1", 2, guards=[size_guard("0/0")])
    trace = served_trace(tmp_path / "t", extra=extra)
    policy = _allow(
        tmp_path,
        "guard = 'tensor-size'\nreason = 'first'",
        "frame = 'block_forward'\nreason = 'second'",
    )
    code, out, _ = run_check(capsys, trace, "--policy", policy, "--format", "json")
    doc = json.loads(out)
    assert code == 0
    live = next(r for r in doc["rules"] if r["name"] == "live-compile")
    assert [a["entry"] for a in live["allowed"]] == [1]
    assert doc["unused_allow"] == ["allow #2 (frame='block_forward')"]
    assert doc["policy"]["allow"][0] == {
        "frame": None,
        "guard": "tensor-size",
        "phase": None,
        "reason": "first",
    }
