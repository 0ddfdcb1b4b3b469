"""magi-compile on a real recording of a program that uses a stand-in `magi_compiler` package
(MAGI's compiler is not installable here; same import path and decorator name): one warning
naming the decorated targets."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.analyzers.magi import analyze
from diag.run import Trace, load_trace
from tests.integration.support import PYTHON, diag_record

RecordFixture = Callable[..., Trace]


def test_registered() -> None:
    assert get_analyzer("magi-compile") is analyze


def test_magi_targets_are_listed(tmp_path: Path) -> None:
    package = tmp_path / "magi_compiler"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import torch\n\ndef magi_compile(fn):\n    return torch.compile(fn, backend='aot_eager')\n"
    )
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """
            import torch
            from magi_compiler import magi_compile

            @magi_compile
            def block(x):
                return x * 2

            @magi_compile
            def head(x):
                return x + 1

            print(head(block(torch.ones(2))).tolist())
            """
        )
    )
    proc = diag_record(
        tmp_path / "t", PYTHON, "app.py", options=("--profile", "none"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    [finding] = analyze(load_trace(tmp_path / "t"))
    assert finding.id == "magi-compile:magi_compiler"
    assert finding.severity == "warning"
    assert [t["name"] for t in finding.data["targets"]] == ["block", "head"]
    assert finding.location == "app.py:5"
    text = "\n".join(finding.evidence)
    assert "block (app.py:5), head (app.py:9)" in text
    assert "invisible to Dynamo's logs" in finding.title
    assert "does not prove none happened" in text


def test_no_magi_no_finding(record_fixture: RecordFixture) -> None:
    assert analyze(record_fixture()) == []
