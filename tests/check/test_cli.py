"""`diag check` as CI runs it: a real subprocess, its exit codes, its help, and what it imports
(no torch, pandas, plotly, numpy or Textual: a CI step must not pay seconds for them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .support import compile_event, served_trace, size_guard, write_policy

HEAVY = ("torch", "pandas", "plotly", "textual", "numpy")


def _live_recompile(folder: Path) -> Path:
    extra = compile_event(3305, "0/1", "r1", 2, guards=[size_guard("0/0")])
    return served_trace(folder, extra=extra)


def test_check_imports_nothing_heavy(tmp_path: Path) -> None:
    trace = _live_recompile(tmp_path / "t")
    base = served_trace(tmp_path / "base")
    policy = write_policy(
        tmp_path,
        '[check]\nfail_on = ["live-compile", "recompile-limit", "guard-churn", "cache-bloat"]\n'
        "[[check.allow]]\nphase = 'warmup'\nreason = 'warmup may compile'\n",
    )
    args = [str(trace), "--baseline", str(base), "--policy", str(policy), "--format", "github"]
    args += ["--junit", str(tmp_path / "j.xml")]
    code = (
        "import sys\n"
        "from diag.cli import main\n"
        f"rc = main(['check', *{args!r}])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(rc, heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stderr.strip() == "1 []", proc.stderr
    assert "::error " in proc.stdout and (tmp_path / "j.xml").exists()


def test_exit_codes_from_a_real_process(tmp_path: Path) -> None:
    policy = write_policy(tmp_path, "[check]\n")

    def check(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "diag", "check", *map(str, args), "--policy", str(policy)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    passed = check(served_trace(tmp_path / "clean"))
    assert passed.returncode == 0 and passed.stdout.startswith("diag check: PASS"), passed.stderr
    failed = check(_live_recompile(tmp_path / "live"))
    assert failed.returncode == 1 and "FAIL live-compile" in failed.stdout
    assert failed.stderr == ""
    unreadable = check(tmp_path / "missing")
    assert unreadable.returncode == 2 and unreadable.stdout == ""
    assert unreadable.stderr == f"diag: error: {tmp_path / 'missing'}: no such trace directory\n"


def test_help_documents_exit_codes_and_policy_lookup() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "diag", "check", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    text = " ".join(proc.stdout.split())
    assert "0 every rule passed" in text
    assert "1 the policy was violated" in text
    assert "2 usage error, bad policy, or unreadable trace directory" in text
    assert "[tool.diag.check] in ./pyproject.toml" in text
    assert "--format {text,json,github}" in text and "--junit FILE" in text
