"""`--baseline DIR`: new frames, new recompile reasons, more cache entries and steady-state step
time against a known-good recording; real recordings for compiles, hand-written traces for times
(CPU step times on a shared machine are too noisy to test a tolerance with)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from diag.fixtures.ground_truth import BLOCK_FRAME, expectation
from diag.trace.run import Trace

from .support import (
    MS,
    compile_event,
    request,
    run_check,
    served_trace,
    set_manifest,
    write_policy,
)

RecordFixture = Callable[..., Trace]
BASELINE_RULES = [
    "baseline-frames",
    "baseline-recompile-reasons",
    "baseline-cache-entries",
    "baseline-step-time",
]


@pytest.fixture
def defaults(tmp_path: Path) -> Path:
    return write_policy(tmp_path, "[check]\n")


def _rules(
    capsys: pytest.CaptureFixture[str], *args: str | Path
) -> tuple[int, dict[str, dict[str, Any]]]:
    code, out, err = run_check(capsys, *args, "--format", "json")
    assert code in (0, 1), err
    return code, {rule["name"]: rule for rule in json.loads(out)["rules"]}


def test_a_recording_against_itself_passes(
    record_fixture: RecordFixture, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = record_fixture().path
    code, rules = _rules(capsys, clean, "--baseline", clean, "--policy", defaults)
    assert code == 0
    assert list(rules)[-4:] == BASELINE_RULES
    # Against itself every judged shape is +0.0%; a shape whose CPU steps spread too widely
    # (a loaded host) is skipped as too noisy, never passed or failed on a guess.
    step_time = rules["baseline-step-time"]
    if step_time["status"] == "pass":
        assert "(+0.0%, tolerance +25%" in step_time["summary"]
    else:
        assert step_time["status"] == "skip"
        assert step_time["summary"].startswith("too noisy to judge: "), step_time["summary"]


def test_guard_churn_against_the_clean_run(
    record_fixture: RecordFixture, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    block = BLOCK_FRAME["wan"]
    churn = expectation("guard-churn", "wan")
    clean = expectation(None, "wan")
    _, rules = _rules(
        capsys,
        record_fixture("guard-churn").path,
        "--baseline",
        record_fixture().path,
        "--policy",
        defaults,
    )
    assert rules["baseline-frames"]["status"] == "pass"
    reasons = rules["baseline-recompile-reasons"]
    recompile = churn.live_recompiles[0]
    assert [v["message"] for v in reasons["violations"]] == [
        f"new recompile reason in {block} (fixtures/models/wan.py): {recompile.guard_kind} "
        f"guard on {recompile.source}"
    ]
    assert "first at live r0 step 0" in reasons["violations"][0]["evidence"][0]
    entries = rules["baseline-cache-entries"]
    assert [v["message"] for v in entries["violations"]] == [
        f"{block} (fixtures/models/wan.py) holds {churn.cache_entries[block]} cache entries, "
        f"{clean.cache_entries[block]} in the baseline"
    ]
    run = record_fixture("guard-churn").compiled
    assert run is not None
    line = next(c.frame.line for c in run.compiles if c.frame and c.frame.name == block)
    assert entries["violations"][0]["location"] == f"fixtures/models/wan.py:{line}"


def _service(folder: Path, walls: list[float], **kwargs: Any) -> Path:
    return served_trace(folder, walls=walls, **kwargs)


@pytest.mark.parametrize(
    ("walls", "status"),
    [
        ([5.0, 0.012, 0.012, 0.012], "pass"),  # +20%: within 25%; step 0 does not count
        ([0.010, 0.013, 0.013, 0.013], "fail"),  # +30%
        ([0.010, 0.008, 0.009, 0.009], "pass"),  # faster
    ],
)
def test_step_time_tolerance(
    walls: list[float],
    status: str,
    tmp_path: Path,
    defaults: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = _service(tmp_path / "base", [0.010] * 4)
    now = _service(tmp_path / "now", walls)
    code, rules = _rules(capsys, now, "--baseline", base, "--policy", defaults)
    rule = rules["baseline-step-time"]
    assert rule["status"] == status
    assert code == (1 if status == "fail" else 0)
    if status == "fail":
        assert rule["violations"][0]["message"] == (
            "steady-state steps are 30.0% slower than the baseline (tolerance 25%)"
        )
        assert rule["summary"].startswith("median host wall time 13.00 ms vs 10.00 ms (+30.0%")
    tight = write_policy(tmp_path, "[check]\nstep_time_tolerance = 0.1\n", "tight.toml")
    if walls[1] == 0.012:
        assert _rules(capsys, now, "--baseline", base, "--policy", tight)[0] == 1


def test_profiled_steps_do_not_count_and_gpu_time_wins(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _service(tmp_path / "base", [0.010] * 4)
    # Step 2 of every request was profiled (profiler start: 10x slower): ignored.
    folder = tmp_path / "now"
    slow_profiled = [
        *request("r0", 1000, [0.01, 0.01, 0.1, 0.01], profiled=(2,)),
        *request("r1", 3000, [0.01, 0.01, 0.1, 0.01], profiled=(2,)),
    ]
    from ..analyzers.support import write_trace

    folder.mkdir()
    write_trace(folder, slow_profiled)
    _, rules = _rules(capsys, folder, "--baseline", base, "--policy", defaults)
    assert rules["baseline-step-time"]["status"] == "pass"
    assert "10.00 ms vs 10.00 ms" in rules["baseline-step-time"]["summary"]

    def gpu(rid: str, start_ms: int, value: float) -> list[dict[str, Any]]:
        return [
            {"t": (start_ms + 100 * (i + 1) + 60) * MS, "ev": "step_gpu", "request_id": rid}
            | {"step": i, "gpu_s": value}
            for i in range(4)
        ]

    # Both have GPU times: they decide, whatever the host saw.
    base_gpu = _service(
        tmp_path / "base_gpu", [0.010] * 4, extra=[*gpu("r0", 1000, 0.008), *gpu("r1", 3000, 0.008)]
    )
    now_gpu = _service(
        tmp_path / "now_gpu", [0.010] * 4, extra=[*gpu("r0", 1000, 0.012), *gpu("r1", 3000, 0.012)]
    )
    _, rules = _rules(capsys, now_gpu, "--baseline", base_gpu, "--policy", defaults)
    step_time = rules["baseline-step-time"]
    assert step_time["status"] == "fail"
    assert step_time["summary"].startswith("median GPU time 12.00 ms vs 8.00 ms (+50.0%")


def test_step_time_skipped_without_steady_steps(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _service(tmp_path / "base", [0.010])  # one step per request: only step 0
    now = _service(tmp_path / "now", [0.010] * 4)
    code, out, _ = run_check(capsys, now, "--baseline", base, "--policy", defaults)
    assert code == 0
    assert "skip baseline-step-time: not enough steady live steps to compare (6 now, 0 in" in out


def test_step_time_refuses_a_noisy_baseline(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A baseline recorded during a load spike (steps 80 ms to 1.2 s, ten times the current
    81.8 ms): neither passed nor failed, skipped as too noisy, with the numbers."""
    base = _service(tmp_path / "base", [1.0, 0.7426, 0.080, 1.2, 0.35])
    now = _service(tmp_path / "now", [0.2, 0.0818, 0.0818, 0.0818, 0.0818])
    code, rules = _rules(capsys, now, "--baseline", base, "--policy", defaults)
    rule = rules["baseline-step-time"]
    assert (code, rule["status"]) == (0, "skip")
    assert rule["summary"] == (
        "too noisy to judge: baseline steps spread ±90% around their median (more than ±25%); "
        "median host wall time 81.80 ms vs 546.30 ms"
    )
    code, out, _ = run_check(capsys, now, "--baseline", base, "--policy", defaults)
    assert "skip baseline-step-time: too noisy to judge" in out


def test_step_time_noise_band_and_shapes(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """+30% fails on quiet steps (tolerance 25%) but not on steps spreading ±11%: 3 spreads
    widen the band to 34%."""
    base = _service(tmp_path / "base", [0.01, 0.010, 0.010, 0.010, 0.010])
    spread = [0.01, 0.0110, 0.0130, 0.0150, 0.0130]  # median 13 ms, MAD 1 ms x 1.4826 = ±11%
    now = _service(tmp_path / "now", spread)
    _, rules = _rules(capsys, now, "--baseline", base, "--policy", defaults)
    rule = rules["baseline-step-time"]
    assert rule["status"] == "pass"
    assert rule["summary"] == (
        "median host wall time 13.00 ms vs 10.00 ms (+30.0%, tolerance +25%, noise band +34%)"
    )
    quiet = _service(tmp_path / "quiet", [0.01, 0.013, 0.013, 0.013, 0.013])
    _, rules = _rules(capsys, quiet, "--baseline", base, "--policy", defaults)
    assert rules["baseline-step-time"]["status"] == "fail"


def test_frames_compare_by_name_and_file_across_checkouts(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def frame(root: str, name: str = "block_forward") -> dict[str, Any]:
        return {"name": name, "file": f"{root}/model.py", "line": 12}

    def recorded(folder: Path, root: str, extra_frames: tuple[str, ...] = ()) -> Path:
        extra = [*compile_event(120, "0/0", "warmup0", 0, phase="warmup", frame=frame(root))]
        for i, name in enumerate(extra_frames):
            extra += compile_event(130 + i, f"{i + 1}/0", "warmup0", 0, "warmup", frame(root, name))
        trace = _service(folder, [0.01] * 4, extra=extra)
        set_manifest(trace, cwd=root)
        return trace

    base = recorded(tmp_path / "base", "/home/ci/a/repo")
    same = recorded(tmp_path / "same", "/home/ci/b/repo")
    _, rules = _rules(capsys, same, "--baseline", base, "--policy", defaults)
    assert rules["baseline-frames"]["status"] == "pass"
    more = recorded(tmp_path / "more", "/home/ci/b/repo", ("head_forward",))
    _, rules = _rules(capsys, more, "--baseline", base, "--policy", defaults)
    assert [v["message"] for v in rules["baseline-frames"]["violations"]] == [
        "new compiled frame head_forward (model.py): 1 compile(s), none in the baseline"
    ]
    # A new frame accepted by the allowlist.
    policy = write_policy(
        tmp_path, "[[check.allow]]\nframe = 'head_*'\nreason = 'new head'\n", "allow.toml"
    )
    policy.write_text("[check]\n" + policy.read_text())
    assert _rules(capsys, more, "--baseline", base, "--policy", policy)[0] == 0


def test_recompile_reasons_ignore_the_numbers_in_the_text(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def identity(value: int) -> dict[str, Any]:
        return {
            "compile_id": "0/0",
            "kind": "object-identity",
            "source": None,
            "raw": f"0/0: ___check_obj_id(L['fn'], {value})",
        }

    def traced(folder: Path, value: int, kind: str = "object-identity") -> Path:
        guard = identity(value) | {"kind": kind}
        extra = compile_event(130, "0/1", "warmup0", 1, phase="warmup", guards=[guard])
        return _service(folder, [0.01] * 4, extra=extra, entries=2)

    base = traced(tmp_path / "base", 140234)
    now = traced(tmp_path / "n", 990011)
    _, rules = _rules(capsys, now, "--baseline", base, "--policy", defaults)
    assert rules["baseline-recompile-reasons"]["status"] == "pass"
    _, rules = _rules(
        capsys, traced(tmp_path / "k", 1, "type"), "--baseline", base, "--policy", defaults
    )
    assert [v["message"] for v in rules["baseline-recompile-reasons"]["violations"]] == [
        "new recompile reason in block_forward (/srv/app/model.py): type guard on "
        "___check_obj_id(L['fn'], N)"
    ]
    # Accepted by the frame's function name (the reason's frame key also holds its file).
    policy = write_policy(
        tmp_path, "[[check.allow]]\nframe = 'block_forward'\nreason = 'r'\n", "allow.toml"
    )
    now = traced(tmp_path / "k2", 1, "type")
    code, rules = _rules(capsys, now, "--baseline", base, "--policy", policy)
    assert code == 0 and len(rules["baseline-recompile-reasons"]["allowed"]) == 1


def test_unreadable_baseline_is_exit_2(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = _service(tmp_path / "now", [0.01] * 4)
    code, out, err = run_check(capsys, now, "--baseline", tmp_path / "nope", "--policy", defaults)
    assert (code, out) == (2, "")
    assert err == f"diag: error: {tmp_path / 'nope'}: no such trace directory\n"
