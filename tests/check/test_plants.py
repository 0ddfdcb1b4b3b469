"""The default policy on real recordings of the reference service (CPU, aot_eager): each compile
plant fails under the rule that names its problem, the clean run and the plants that change no
compile pass (docs/CHECK.md, "Worked example")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from diag.fixtures.ground_truth import BLOCK_FRAME, expectation
from diag.trace.run import Trace

from .support import run_check

RecordFixture = Callable[..., Trace]

#: plant -> the rules the default policy fails, exactly.
FAILING = {
    None: set[str](),
    "guard-churn": {"live-compile", "guard-churn"},
    "unwarmed-shape": {"live-compile"},
    "recompile-limit": {"live-compile", "recompile-limit", "guard-churn", "cache-entries"},
    "cache-bloat": {"cache-entries"},
    "routing": set[str](),
    "offload-bound": set[str](),
    "empty-cache": set[str](),
}


@pytest.fixture
def defaults(tmp_path: Path) -> Path:
    """An empty check table: the defaults, whatever the project's own pyproject.toml holds.
    (Changing directory instead would change the cwd of the shared recordings.)"""
    path = tmp_path / "diag.toml"
    path.write_text("[check]\n", encoding="utf-8")
    return path


def _verdict(
    capsys: pytest.CaptureFixture[str], trace: Trace, policy: Path
) -> tuple[int, dict[str, object]]:
    code, out, err = run_check(capsys, trace.path, "--format", "json", "--policy", policy)
    assert err == ""
    return code, json.loads(out)


def _failed(doc: dict[str, object]) -> set[str]:
    rules = doc["rules"]
    assert isinstance(rules, list)
    return {r["name"] for r in rules if r["status"] == "fail"}


@pytest.mark.slow
@pytest.mark.parametrize("plant", list(FAILING), ids=[str(p) for p in FAILING])
def test_default_policy_on_each_plant(
    plant: str | None,
    record_fixture: RecordFixture,
    capsys: pytest.CaptureFixture[str],
    defaults: Path,
) -> None:
    trace = record_fixture(plant) if plant else record_fixture()
    code, doc = _verdict(capsys, trace, defaults)
    assert _failed(doc) == FAILING[plant]
    assert code == (1 if FAILING[plant] else 0)
    assert doc["passed"] is (code == 0)


def test_live_compile_evidence_names_request_step_and_guard(
    record_fixture: RecordFixture, capsys: pytest.CaptureFixture[str], defaults: Path
) -> None:
    truth = expectation("unwarmed-shape", "wan").live_recompiles[0]
    code, out, _ = run_check(capsys, record_fixture("unwarmed-shape").path, "--policy", defaults)
    assert code == 1
    assert "FAIL live-compile: 1 compile(s) during live requests (max 0)" in out
    assert (
        f"x {truth.frame} recompiled 1 time(s) during live requests "
        f"({truth.request_id} step {truth.step})"
    ) in out
    assert f"live {truth.request_id} step {truth.step}: compile" in out
    assert f"{truth.guard_kind} on {truth.source}" in out
    assert "at fixtures/models/wan.py:" in out  # relative to the recording's cwd


def test_cache_bloat_is_a_warmup_problem_only_the_entry_count_sees(
    record_fixture: RecordFixture, capsys: pytest.CaptureFixture[str], defaults: Path
) -> None:
    block = BLOCK_FRAME["wan"]
    entries = expectation("cache-bloat", "wan").cache_entries[block]
    code, out, _ = run_check(capsys, record_fixture("cache-bloat").path, "--policy", defaults)
    assert code == 1
    assert f"x {block} holds {entries} cache entries (max 7)" in out
    assert f"compiles of this frame: {entries} in warmup, 0 live" in out
    assert "block.block_idx (python-value)" in out
    # guard-churn sees the same churn, but only at warning severity: warmup only.
    assert "pass guard-churn: no finding at severity error (1 of lower severity)" in out


def test_empty_cache_fails_only_when_the_policy_asks_for_hygiene(
    record_fixture: RecordFixture, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = record_fixture("empty-cache")
    policy = tmp_path / "strict.toml"
    policy.write_text('[check]\nfail_on = ["warmup-hygiene"]\nfail_severity = "warning"\n')
    code, out, _ = run_check(capsys, trace.path, "--policy", policy)
    assert code == 1, out
    assert "FAIL warmup-hygiene: 1 finding(s) at severity error or warning" in out
    assert "empty_cache()" in out
    # At the default severity (error) the same rule passes: the hygiene finding is a warning.
    policy.write_text('[check]\nfail_on = ["warmup-hygiene"]\n')
    assert run_check(capsys, trace.path, "--policy", policy)[0] == 0
