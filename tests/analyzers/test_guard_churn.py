"""guard-churn on real recordings of the reference service (CPU, aot_eager): each plant's
non-tensor guard is found on the frame, source, requests and steps fixtures/ground_truth.py
gives; the clean run's tensor-size recompile and an int argument that automatic dynamic made
symbolic are not churn."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.analyzers.guard_churn import analyze
from diag.findings.model import Finding
from diag.fixtures.ground_truth import BLOCK_FILE, BLOCK_FRAME, GUIDER_FRAME, expectation
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.fixture_lines import fixture_line, fixture_location
from tests.integration.support import PYTHON, diag_record

RecordFixture = Callable[..., Trace]


def _one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, [f.id for f in findings]
    return findings[0]


def _check_live(finding: Finding, plant: str, model: str) -> None:
    """The finding holds every live recompile of the plant's ground truth."""
    truth = expectation(plant, model)
    text = "\n".join(finding.evidence)
    for recompile in truth.live_recompiles:
        assert finding.data["frame"] == recompile.frame
        assert (finding.data["kind"], finding.data["source"]) == (
            recompile.guard_kind,
            recompile.source,
        )
        assert f"live {recompile.request_id} step {recompile.step}" in text
        assert {"phase": "live", "request_id": recompile.request_id, "step": recompile.step} in (
            finding.data["where"]
        )
        assert re.search(recompile.guard, text)
    assert finding.data["live_requests"] == list(
        dict.fromkeys(r.request_id for r in truth.live_recompiles)
    )


def test_registered() -> None:
    assert get_analyzer("guard-churn") is analyze


def test_wan_config_length(record_fixture: RecordFixture) -> None:
    finding = _one(analyze(record_fixture("guard-churn", model="wan")))
    _check_live(finding, "guard-churn", "wan")
    assert finding.severity == "error"
    assert finding.id == "guard-churn:wan_block_forward:block.state.config"
    assert "values the cached entries expected: len 3 -> 6" in finding.evidence
    # A container-length guard's reason carries no user line; the failing entry's guard tree
    # (guard_sources) has its sibling guards on the dict, at the `.get()` that reads it.
    line = fixture_line("models/wan.py", 'self.state.config.get("attention_scale"')
    assert finding.location == f"{BLOCK_FILE['wan']}:{line}"
    assert f"the compiled code reads `block.state.config` at {BLOCK_FILE['wan']}:{line}" in (
        finding.evidence
    )
    assert not any("no user line recorded" in e for e in finding.evidence)
    assert "read the config once at init" in finding.fix.lower()
    assert ".get()" in finding.fix


def test_qwen_pass_name(record_fixture: RecordFixture) -> None:
    finding = _one(analyze(record_fixture("guard-churn", model="qwen")))
    _check_live(finding, "guard-churn", "qwen")
    assert finding.severity == "error"
    assert finding.data["values"] == ["'cond'"]
    assert finding.data["recompiles"] == 1
    assert finding.location == f"{BLOCK_FILE['qwen']}:76"
    assert "explicit input" in finding.fix


def test_ltx_skip_layers_in_the_guider(record_fixture: RecordFixture) -> None:
    finding = _one(analyze(record_fixture("guard-churn", model="ltx")))
    _check_live(finding, "guard-churn", "ltx")
    assert finding.id == f"guard-churn:{GUIDER_FRAME}:self.skip_layers"
    assert "values the cached entries expected: {3} then {1}" in finding.evidence
    assert finding.location == f"{BLOCK_FILE['ltx']}:117"


def test_recompile_limit_counter(record_fixture: RecordFixture) -> None:
    truth = expectation("recompile-limit", "wan")
    finding = _one(analyze(record_fixture("recompile-limit")))
    _check_live(finding, "recompile-limit", "wan")
    assert finding.severity == "error"
    assert finding.data["values"] == [str(i) for i in range(8)]
    assert truth.limit_hit is not None
    rid, step = truth.limit_hit
    assert finding.data["limit_hit"] == {"phase": "live", "request_id": rid, "step": step}
    text = "\n".join(finding.evidence)
    assert f"reached the recompile limit with 8 cache entries at live {rid} step {step}" in text
    assert "calls that match none of its entries run eagerly" in text
    assert "recompile limit" in finding.title
    # Warmup recompiled on the counter too, before the live ones.
    assert any(re.search(g, text) for g in truth.warmup_guards)
    assert "warmup warmup0 step 1" in text
    assert finding.location == fixture_location("models/common.py", "state.cnt >= 0")
    assert "explicit input" in finding.fix


def test_cache_bloat_block_index_is_a_warmup_warning(record_fixture: RecordFixture) -> None:
    truth = expectation("cache-bloat", "wan")
    finding = _one(analyze(record_fixture("cache-bloat")))
    assert finding.severity == "warning"
    assert finding.id == f"guard-churn:{BLOCK_FRAME['wan']}:block.block_idx"
    assert finding.data["live_recompiles"] == 0
    assert finding.data["requests"] == ["warmup0", "warmup1"]
    assert finding.data["per_call"] is True
    assert finding.data["values"] == ["0", "1", "2", "3"]
    text = "\n".join(finding.evidence)
    assert any(re.search(g, text) for g in truth.warmup_guards)
    # 8 entries of 8 is a full cache, as cache-bloat says: not "did not reach the limit".
    assert (
        "wan_block_forward is at the recompile limit: 8 cache entries at exit, torch's default "
        "limit is 8; no compile was refused yet, and the next new value runs eagerly"
    ) in text
    assert "did not reach" not in text
    assert finding.location == fixture_location(
        "models/common.py", "scale *= state.layer_scales[self.block_idx]"
    )
    assert "int attributes of nn.Modules" in finding.fix


def test_clean_run_has_no_churn(record_fixture: RecordFixture) -> None:
    trace = record_fixture()
    compiled = trace.compiled
    assert compiled is not None
    # The clean run does recompile once, in warmup, on a tensor size: that is not churn.
    assert [g.kind for c in compiled.compiles for g in c.guards] == ["tensor-size"]
    assert analyze(trace) == []


def test_int_argument_made_dynamic_is_not_churn(tmp_path: Path) -> None:
    """`n` fails once (n == 2), automatic dynamic makes it symbolic, later values compile
    nothing; a later shape recompile lists the old entry's `n == 2` again."""
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            import torch
            import diag.api as diag

            @torch.compile(backend="aot_eager")
            def f(x, n):
                return x * n

            with diag.phase("warmup"):
                with diag.request("w0", shape=[2]):
                    with diag.step():
                        f(torch.ones(2), 2)
            for r, (size, n) in enumerate([(2, 3), (2, 4), (2, 5), (3, 6)]):
                with diag.request(f"r{r}", shape=[size]):
                    with diag.step():
                        f(torch.ones(size), n)
            """
        )
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app), options=("--profile", "none"))
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(tmp_path / "t")
    compiled = trace.compiled
    assert compiled is not None
    sources = [g.source for c in compiled.compiles for g in c.guards if g.kind == "python-value"]
    assert sources == ["n", "n"], sources  # the guard did fail, twice, always on entry 0/0
    assert analyze(trace) == []
