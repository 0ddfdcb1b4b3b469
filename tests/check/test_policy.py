"""Where the policy comes from, and malformed policies: exit 2 with one line naming the key and
the file, never a traceback and never a silently ignored typo."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.check.policy import DEFAULT_FAIL_ON, Policy, find_policy
from diag.errors import DiagError

from .support import run_check, served_trace, write_policy


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return served_trace(tmp_path / "trace")


def test_defaults_without_any_file(tmp_path: Path) -> None:
    policy = find_policy(None, tmp_path)
    assert policy == Policy()
    assert policy.fail_on == DEFAULT_FAIL_ON
    assert DEFAULT_FAIL_ON == (
        "live-compile",
        "recompile-limit",
        "guard-churn",
        "compile-failure",
        "crash",
        "cudagraphs",
        "stances",
    )
    assert (policy.max_recompiles_after_warmup, policy.max_cache_entries) == (0, 7)


def test_lookup_prefers_diag_toml_then_pyproject(tmp_path: Path) -> None:
    write_policy(tmp_path, "[tool.diag.check]\nmax_cache_entries = 3\n", "pyproject.toml")
    found = find_policy(None, tmp_path)
    assert found.max_cache_entries == 3 and found.source.endswith("[tool.diag.check]")
    write_policy(tmp_path, "[check]\nmax_cache_entries = 5\n")
    found = find_policy(None, tmp_path)
    assert found.max_cache_entries == 5 and found.source == f"{tmp_path / 'diag.toml'} [check]"
    # A diag.toml without a [check] table is passed over, not an empty policy.
    write_policy(tmp_path, "")
    assert find_policy(None, tmp_path).max_cache_entries == 3


def test_pyproject_without_the_table_means_defaults(tmp_path: Path) -> None:
    text = "[project]\nname = 'x'\n[tool.ruff]\nline-length = 1\n"
    write_policy(tmp_path, text, "pyproject.toml")
    assert find_policy(None, tmp_path) == Policy()


def test_policy_found_in_the_working_directory(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_policy(tmp_path, '[tool.diag.check]\nfail_on = ["nope"]\n', "pyproject.toml")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_check(capsys, trace)
    assert (code, out) == (2, "")
    assert err == (
        f"diag: error: {tmp_path / 'pyproject.toml'} [tool.diag.check]: fail_on names unknown "
        "analyzer 'nope' (known: " + err.split("(known: ", 1)[1]
    )


BAD = [
    (
        "[check]\nmax_recompile = 1\n",
        "unknown key 'max_recompile' (did you mean 'max_recompiles_after_warmup'?)",
    ),
    ("max_cache_entries = 1\n", "unknown key 'max_cache_entries' (put the check keys under"),
    ("[chek]\n", "unknown key 'chek'"),
    ("[check]\nmax_cache_entries = -1\n", "max_cache_entries must be a whole number >= 0"),
    ("[check]\nmax_recompiles_after_warmup = true\n", "must be a whole number >= 0, not True"),
    ("[check]\nmax_recompiles_after_warmup = '0'\n", "must be a whole number >= 0, not '0'"),
    ("[check]\nfail_on = 'guard-churn'\n", "fail_on must be a list of analyzer names"),
    ("[check]\nfail_severity = 'info'\n", "fail_severity must be one of error, warning"),
    ("[check]\nstep_time_tolerance = -0.1\n", "step_time_tolerance must be a number >= 0"),
    ("[check]\nrequire_live_requests = 1\n", "require_live_requests must be true or false"),
    ("[check]\nallow = 3\n", "allow must be a list of tables"),
    ("[[check.allow]]\nframe = 'f'\n", "allow entry #1 has no reason"),
    ("[[check.allow]]\nframe = 'f'\nreason = '  '\n", "allow entry #1 has no reason"),
    ("[[check.allow]]\nreason = 'x'\n", "allow entry #1 matches everything"),
    (
        "[[check.allow]]\nframe='f'\nreason='x'\n[[check.allow]]\nguard = '('\nreason = 'x'\n",
        "allow entry #2: guard is not a valid regular expression",
    ),
    ("[[check.allow]]\nphase = 'steady'\nreason = 'x'\n", "phase must be warmup or live"),
    (
        "[[check.allow]]\nframe = 'f'\nreason = 'x'\nfile = 'a'\n",
        "unknown key 'file' (known: frame, guard, phase, reason)",
    ),
    ("[[check.allow]]\nframe = 3\nreason = 'x'\n", "frame must be a string, not 3"),
    ("[check\n", "invalid TOML: "),
    ("check = 3\n", "[check] must be a table"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m for _, m in BAD])
def test_malformed_policy_is_exit_2_with_one_line(
    text: str, message: str, trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_policy(tmp_path, text, "ci.toml")
    code, out, err = run_check(capsys, trace, "--policy", policy)
    assert (code, out) == (2, "")
    assert err.startswith(f"diag: error: {policy}") and err.endswith("\n")
    assert err.count("\n") == 1, err
    assert message in err


def test_explicit_policy_file_must_exist_and_hold_the_table(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_check(capsys, trace, "--policy", tmp_path / "missing.toml")
    assert code == 2 and "missing.toml: no such policy file" in err
    pyproject = write_policy(tmp_path, "[project]\nname = 'x'\n", "pyproject.toml")
    code, _, err = run_check(capsys, trace, "--policy", pyproject)
    assert code == 2 and err == f"diag: error: {pyproject}: no [tool.diag.check] table\n"
    empty = write_policy(tmp_path, "", "other.toml")
    assert "no [check] table" in run_check(capsys, trace, "--policy", empty)[2]


def test_unreadable_policy_file(tmp_path: Path) -> None:
    folder = tmp_path / "policy.toml"
    folder.mkdir()
    with pytest.raises(DiagError, match="policy.toml: not a file"):
        find_policy(folder, tmp_path)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe[check]\n")
    with pytest.raises(DiagError, match="bin.toml: cannot read: 'utf-8' codec can't decode"):
        find_policy(binary, tmp_path)


def test_limits_change_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = served_trace(tmp_path / "t", entries=3)
    strict = write_policy(tmp_path, "[check]\nmax_cache_entries = 2\n")
    code, out, _ = run_check(capsys, trace, "--policy", strict)
    assert code == 1 and "x block_forward holds 3 cache entries (max 2)" in out
    lenient = write_policy(tmp_path, "[check]\nmax_cache_entries = 3\n", "lenient.toml")
    assert run_check(capsys, trace, "--policy", lenient)[0] == 0


def test_the_policies_in_the_docs_are_valid(tmp_path: Path) -> None:
    import re

    docs = Path(__file__).resolve().parents[2] / "docs" / "CHECK.md"
    blocks = re.findall(r"```toml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3
    for i, text in enumerate(blocks):
        name = "pyproject.toml" if "[tool.diag.check" in text else "diag.toml"
        folder = tmp_path / str(i)
        folder.mkdir()
        policy = find_policy(write_policy(folder, text, name), folder)
        assert policy.allow and all(entry.reason for entry in policy.allow)
