"""live-compile on real recordings of the reference service (CPU, aot_eager) and on the H200
recording kept in tests/data/h200: each plant's live compile is found with the frame, request,
step and guard that fixtures/ground_truth.py says, and a clean run gives no error.

One hand-written trace covers a service without warmup, which the reference service (whose
warmup runs inside init_modules) cannot be made to record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.analyzers.live_compiles import analyze
from diag.findings.model import Finding
from diag.fixtures.ground_truth import BLOCK_FILE, BLOCK_FRAME, expectation
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.fixture_lines import fixture_line

RecordFixture = Callable[..., Trace]

H200 = Path(__file__).resolve().parent.parent / "data" / "h200"


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def _by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def _check_ground_truth(findings: list[Finding], plant: str) -> None:
    """Every live recompile of the plant's ground truth is in one error finding, as it says."""
    truth = expectation(plant, "wan")
    errors = _errors(findings)
    groups = {(r.frame, r.request_id) for r in truth.live_recompiles}
    assert {(f.data["frame"], f.data["request_id"]) for f in errors} == groups
    for recompile in truth.live_recompiles:
        finding = _by_id(errors)[f"live-compile:{recompile.frame}:{recompile.request_id}"]
        assert recompile.step in finding.data["steps"]
        guard = next(g for g in finding.data["guards"] if g["step"] == recompile.step)
        assert (guard["kind"], guard["source"]) == (recompile.guard_kind, recompile.source)
        assert re.search(recompile.guard, "\n".join(finding.evidence))
        assert finding.location is not None
        assert finding.location.endswith(
            f"{BLOCK_FILE['wan']}:{fixture_line('models/wan.py', 'def wan_block_forward(')}"
        )


def test_registered() -> None:
    assert get_analyzer("live-compile") is analyze


def test_unwarmed_shape(record_fixture: RecordFixture) -> None:
    findings = analyze(record_fixture("unwarmed-shape"))
    _check_ground_truth(findings, "unwarmed-shape")
    finding = _by_id(findings)["live-compile:wan_block_forward:r1"]
    text = "\n".join(finding.evidence)
    assert finding.data["shape"] == [2, 8, 12]
    assert finding.data["uncovered"] == ["width"]
    served = "warmup served 2x8x8 and 2x12x8 (height varied; frames fixed at 2, width fixed at 8)"
    assert served in text
    assert "live r1 is 2x8x12: width 12 was never warmed" in text
    assert "freqs_w 4 -> 6 scales as the width 8 -> 12" in text
    assert finding.data["compile_s"] > 0
    assert "mark_dynamic" in finding.fix and "second value of width" in finding.fix

    coverage = _by_id(findings)["live-compile:warmup-coverage"]
    assert coverage.severity == "info"
    assert coverage.title == "Warmup covered 1 of 2 live shape(s); not covered: 2x8x12"
    assert "not covered by warmup: 2x8x12 (r1): width never warmed" in coverage.evidence
    cold = _by_id(findings)["live-compile:warmup-compiles"]
    assert cold.severity == "info" and cold.data["compiles"] == 2
    assert cold.data["live_compiles"] == 1


def test_recompile_limit_plant(record_fixture: RecordFixture) -> None:
    """r0 recompiles on every step (one finding); the limit hit at r1 is recompile-limit's."""
    findings = analyze(record_fixture("recompile-limit"))
    _check_ground_truth(findings, "recompile-limit")
    finding = _by_id(findings)["live-compile:wan_block_forward:r0"]
    assert finding.data["steps"] == [0, 1, 2, 3]
    assert "python-value on block.state.cnt" in "\n".join(finding.evidence)
    assert "then hit the recompile limit at live r1 step 0" in "\n".join(finding.evidence)
    assert "guard-churn" in finding.fix
    # Warmup compiled 4 times: two shapes, and the counter in warmup0 step 1 and warmup1 step 1.
    assert _by_id(findings)["live-compile:warmup-compiles"].data["compiles"] == 4
    assert _by_id(findings)["live-compile:warmup-coverage"].title.startswith(
        "Warmup covered every live shape"
    )


def test_clean_run_has_no_error(record_fixture: RecordFixture) -> None:
    findings = analyze(record_fixture())
    assert [f for f in findings if f.severity != "info"] == []
    by_id = _by_id(findings)
    assert set(by_id) == {"live-compile:warmup-coverage", "live-compile:warmup-compiles"}
    assert by_id["live-compile:warmup-compiles"].data["compiles"] == 2
    assert by_id["live-compile:warmup-coverage"].title == "Warmup covered every live shape (2)"
    assert expectation(None, "wan").live_recompiles == ()


def test_h200_recording_names_the_uncovered_width() -> None:
    """The same plant recorded on an H200 (inductor, large size): same id, GPU-sized shapes."""
    trace = load_trace(H200 / "record-wan-offload-unwarmed")
    findings = analyze(trace)
    errors = _errors(findings)
    assert [f.id for f in errors] == ["live-compile:wan_block_forward:r1"]
    finding = errors[0]
    assert finding.run == "compiled"
    assert finding.data["frame"] == BLOCK_FRAME["wan"]
    assert finding.data["uncovered"] == ["width"]
    text = "\n".join(finding.evidence)
    assert "tensor 'freqs_w' size mismatch at index 0. expected 48, actual 64" in text
    assert "live r1 is 4x48x128: width 128 was never warmed" in text
    # The eager baseline compiles nothing, so it gets no finding at all.
    assert [f for f in findings if f.run == "eager"] == []


def test_no_warmup_first_compile_is_live(tmp_path: Path) -> None:
    frame = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
    where = {"phase": "live", "request_id": "r0", "step": 0}
    events = [
        {"t": 1, "ev": "process_start", "pid": 7, "ppid": 1, "argv": ["serve"]},
        {"t": 2, "ev": "request_start", "request_id": "r0", "phase": "live", "shape": [1, 4, 4]},
        {"t": 3, "ev": "step_start", **where, "shape": [1, 4, 4], "profiled": False},
        {"t": 4, "ev": "compile_start", "compile_id": "0/0", "epoch": 0},
        {"t": 5, "ev": "compile_end", "compile_id": "0/0", "epoch": 0, "frame": frame}
        | {"result": "ok", "duration_s": 2.5, **where},
        {"t": 6, "ev": "step_end", **where, "wall_s": 2.6, "profiled": False},
        {"t": 7, "ev": "request_end", "request_id": "r0", "phase": "live"},
    ]
    manifest = {"format": "diag-trace", "version": 1, "runs": [{"label": "compiled"}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = tmp_path / "runs" / "compiled" / "pid7"
    proc.mkdir(parents=True)
    (proc / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    findings = analyze(load_trace(tmp_path))
    by_id = _by_id(findings)
    # No warmup identified: the cold start is one finding (what compiled, how long, how to
    # mark warmup), not an error per frame; with nothing warmed there is no coverage to judge.
    assert set(by_id) == {"live-compile:no-warmup"}
    cold = by_id["live-compile:no-warmup"]
    assert cold.severity == "warning"
    assert cold.title == "No warmup identified: r0 compiled 2.50 s cold (1 compile(s))"
    text = "\n".join(cold.evidence)
    assert "block_forward: 1 compile(s), 2.50 s (r0)" in text
    assert "--warmup-requests 1" in cold.fix and 'diag.phase("warmup")' in cold.fix
    assert [c["kind"] for c in cold.claims] == ["no-warmup", "compile"]
    assert not any("after warmup" in line for f in findings for line in [f.title, *f.evidence])
