"""`diag check`'s default policy fails a run whose compile failed and fell back to eager
(`suppress_errors`: exit 0, status complete, nothing else fails) and a run that crashed; a
failed compile in a live request is compile-failure's headline, not a second live-compile error.

Real recordings: `diag record` of small programs in subprocesses (torch CPU, a backend that
raises; aot_eager for the crash)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from diag.analyzers import get_analyzer
from diag.trace.load import load_trace

from ..integration.support import PYTHON, diag_record
from .support import run_check

SUPPRESSED = """
import torch
import diag.api as diag

torch._dynamo.config.suppress_errors = True

def broken_backend(gm, example_inputs):
    raise RuntimeError("broken backend")

def denoise(x):
    return torch.sin(x) * 2 + 1

step = torch.compile(denoise, backend=broken_backend)
x = torch.randn(8)
with diag.phase("warmup"):
    with diag.request("w0", shape=[8]):
        with diag.step():
            x = step(x)
with diag.request("r0", shape=[8]):
    for i in range(3):
        with diag.step():
            x = step(x)
print("done")
"""

#: The same failure inside a live request: no warmup reached the frame.
LIVE_FAILURE = SUPPRESSED.replace(
    """with diag.phase("warmup"):
    with diag.request("w0", shape=[8]):
        with diag.step():
            x = step(x)
""",
    "",
)

CRASH = """
import torch
import diag.api as diag

step = torch.compile(lambda x: x * 2, backend="aot_eager")
with diag.phase("warmup"):
    with diag.request("w0", shape=[4]):
        with diag.step():
            step(torch.ones(4))
with diag.request("r0", shape=[4]):
    with diag.step():
        step(torch.ones(4))
        raise ValueError("no latents cached")
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folders: dict[str, Path] = {}
    for name, body in (("suppressed", SUPPRESSED), ("live", LIVE_FAILURE), ("crash", CRASH)):
        root = tmp_path_factory.mktemp(name)
        app = root / "app.py"
        app.write_text(textwrap.dedent(body), encoding="utf-8")
        proc = diag_record(root / "t", PYTHON, str(app))
        assert proc.returncode == (1 if name == "crash" else 0), proc.stderr
        folders[name] = root / "t"
    return folders


def _check(capsys: pytest.CaptureFixture[str], trace: Path, tmp_path: Path) -> tuple[int, set[str]]:
    """`diag check` with the built-in defaults (an empty check table): exit code, failed rules."""
    policy = tmp_path / "diag.toml"
    policy.write_text("[check]\n", encoding="utf-8")
    code, out, err = run_check(capsys, trace, "--format", "json", "--policy", policy)
    assert err == ""
    doc = json.loads(out)
    return code, {r["name"] for r in doc["rules"] if r["status"] == "fail"}


def test_suppressed_compile_failure_fails_the_default_check(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, failed = _check(capsys, recorded["suppressed"], tmp_path)
    assert code == 1
    assert "compile-failure" in failed
    assert "recording" not in failed  # the program exited 0: only the failure fails it


def test_crash_fails_the_default_check(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, failed = _check(capsys, recorded["crash"], tmp_path)
    assert code == 1
    assert "crash" in failed


def test_failed_live_compile_is_compile_failures_headline_only(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert LIVE_FAILURE != SUPPRESSED
    code, failed = _check(capsys, recorded["live"], tmp_path)
    assert (code, failed) == (1, {"compile-failure"})  # not live-compile as well
    trace = load_trace(recorded["live"])
    assert [c.result for c in trace.compiled.compiles if c.live] == ["failed"]  # type: ignore[union-attr]
    failures = get_analyzer("compile-failure")(trace)
    assert [f.id for f in failures] == ["compile-failure:eager-fallback:denoise"]
    live = get_analyzer("live-compile")(trace)
    assert [f for f in live if f.severity == "error"] == []
    assert not any("denoise compiled during live request" in f.title for f in live)
