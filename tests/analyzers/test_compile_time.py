"""compile-time on real inductor recordings (CPU): the same program twice over one fresh
Inductor cache, cold then warm. The cold start names its FX-graph cache misses and what a warm
cache saves; the warm one its hits, with no fix to make."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from diag.analyzers.compile_time import analyze
from diag.findings.model import Finding
from diag.trace.load import load_trace
from tests.integration.support import PYTHON, diag_record

PROGRAM = textwrap.dedent(
    """
    import torch

    def block(x):
        return (x.sin() + x.cos()).relu() * 2

    compiled = torch.compile(block)
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randn(64, 64))
    """
)


def _summary(findings: list[Finding]) -> Finding:
    (finding,) = [f for f in findings if f.id.startswith("compile-time:summary")]
    return finding


@pytest.mark.slow
@pytest.mark.inductor
def test_cold_then_warm_start(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    results = []
    for name in ("cold", "warm"):
        proc = diag_record(tmp_path / name, PYTHON, str(program), env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        results.append(_summary(analyze(load_trace(tmp_path / name))))
    cold, warm = results
    assert cold.severity == warm.severity == "info"
    assert cold.data["start"] == "cold" and cold.data["caches"]["fx_graph"] == {"hit": 0, "miss": 1}
    assert cold.data["could_save_s"] > 0
    assert "TORCHINDUCTOR_CACHE_DIR" in cold.fix and "save_cache_artifacts" in cold.fix
    assert "Inductor codegen" in cold.evidence[0]
    assert warm.data["start"] == "warm" and warm.data["caches"]["fx_graph"] == {"hit": 1, "miss": 0}
    assert warm.fix == "" and warm.data["saved_s"] > 0


def test_aot_eager_has_no_inductor_to_cache(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(
        PROGRAM.replace("torch.compile(block)", "torch.compile(block, backend='aot_eager')")
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(program))
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(tmp_path / "t")
    assert trace.compiled is not None and trace.compiled.of("compile_timing")
    assert analyze(trace) == []
