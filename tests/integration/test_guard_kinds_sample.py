"""The guard-kind families of the fidelity harness (bench/fidelity_kit/guard_kinds.py) on their
CI sample: one planted section per guard kind the CPU can produce, in one program, run under
`diag record` (planted) and plain with the vocabulary's fix applied (fixed).

Per family: torch recorded a live recompile of the planted kind (its own text, classified by
diag.trace.guards as that kind: real compiles, aot_eager), diag recorded that recompile and
classified
it so (claims confirmed), and the fixed program serves without the recompile and with the same
outputs (fix verified), which is what diag/trace/guard_vocabulary.py's `verified_by` asserts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from diag.trace.guards import guard_check

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from fidelity_kit.guard_kinds import FAMILIES, KindResult, run_kinds  # noqa: E402

NAMES = [f.name for f in FAMILIES]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, KindResult], Path]:
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("guard-kinds")
    results = run_kinds(list(FAMILIES), seed=1, folder=folder, record=True, timeout=500)
    return {r.family: r for r in results}, folder


@pytest.mark.parametrize("name", NAMES)
def test_torch_text_classifies_as_planted(
    sample: tuple[dict[str, KindResult], Path], name: str
) -> None:
    planted: dict[str, Any] = json.loads((sample[1] / "planted.json").read_text("utf-8"))
    serve = planted[name]["serve"]
    assert serve, f"{name}: torch recorded no serving recompile ({planted[name]['error']})"
    want = next(f.check for f in FAMILIES if f.name == name)
    assert {guard_check(t) for t in serve} == {want}, serve


@pytest.mark.parametrize("name", NAMES)
def test_diag_claims_confirmed(sample: tuple[dict[str, KindResult], Path], name: str) -> None:
    result = sample[0][name]
    assert result.claims > 0, f"{name}: diag recorded none of {result.torch_serve[:1]}"
    assert result.confirmed == result.claims, result.diag_checks


@pytest.mark.parametrize("name", NAMES)
def test_fix_verified(sample: tuple[dict[str, KindResult], Path], name: str) -> None:
    result = sample[0][name]
    assert result.fix_verified, result.notes
