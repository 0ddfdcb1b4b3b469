"""magi-compile on real MagiCompiler runs recorded on an H200 (tests/data/h200/magi-*, made by
bench/magi_session.sh: the reference service with `--compiler magi`, MagiCompiler 8e2e47c, torch
2.11), and the collector's guard evaluation on a real Dynamo guard manager here on CPU.

MagiCompiler needs Python 3.12 and CUDA, so CPU CI cannot run it; the recordings are what the
analyzer reads, and the ground truth is fixtures/ground_truth.py's magi_expectation.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from diag.analyzers import get_analyzer, run_analyzers
from diag.analyzers.magi import analyze, magi_owned_failure
from diag.collectors.magi import _explain
from diag.findings.model import Finding
from diag.fixtures.ground_truth import magi_expectation
from diag.trace.load import load_trace
from diag.trace.run import Trace
from tests.integration.support import PYTHON, diag_record

RecordFixture = Callable[..., Trace]
DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
LARGE_TOKENS = 4 * (48 // 2) * (96 // 2)  # the first warmup shape of --size large


def _trace(name: str) -> Trace:
    return load_trace(DATA / name)


def _loud(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity in ("error", "warning")]


def _text(finding: Finding) -> str:
    return "\n".join([finding.title, *finding.evidence, finding.fix])


def test_registered() -> None:
    assert get_analyzer("magi-compile") is analyze


@pytest.mark.parametrize("name", ["magi-clean", "magi-clean-baseline", "magi-newshape"])
def test_clean_magi_run_gets_no_warning_from_any_analyzer(name: str) -> None:
    """A clean magi run (with the eager baseline, warm from magi's cache, at a live shape warmup
    never served) is quiet: magi's fast path never recompiles, and every check passes."""
    trace = _trace(name)
    assert _loud(run_analyzers(trace)) == []
    [summary] = [f for f in analyze(trace) if f.id == "magi-compile:summary"]
    truth = magi_expectation(None, LARGE_TOKENS)
    for pattern in truth.evidence:
        assert re.search(pattern, _text(summary)), pattern
    assert summary.severity == "info"
    assert summary.data["compiles"] == 4 and summary.data["targets"] == ["wan_block_forward"]
    assert summary.data["guard_checks"] > 0
    assert "invisible" not in _text(summary)


def test_warm_start_reads_magis_cache() -> None:
    """The second clean run of the session found magi's cache: no block compiled cold."""
    cold = _trace("magi-clean-baseline")
    warm = _trace("magi-clean")
    [cold_summary] = [f for f in analyze(cold) if f.id == "magi-compile:summary"]
    [warm_summary] = [f for f in analyze(warm) if f.id == "magi-compile:summary"]
    assert cold_summary.data["cold"] == 4 and cold_summary.data["cached"] == 0
    assert warm_summary.data["cold"] == 0 and warm_summary.data["cached"] >= 3
    assert warm_summary.data["seconds"] < cold_summary.data["seconds"]
    assert "before live traffic" in warm_summary.title


def test_specialised_declared_dim_is_one_error_with_the_line_and_fix() -> None:
    trace = _trace("magi-specialized-dim")
    truth = magi_expectation("magi-specialized-dim", LARGE_TOKENS)
    [finding] = [f for f in analyze(trace) if f.severity == "error"]
    assert finding.id == truth.finding
    for pattern in truth.evidence:
        assert re.search(pattern, _text(finding)), pattern
    assert finding.location is not None and finding.location.endswith(
        "fixtures/models/common.py:79"
    )
    # the fix names what the line reads (`state.tokens`), not a placeholder
    assert "reading it from state.tokens at" in finding.fix and "dynamic_arg_dims" in finding.fix
    assert "self.xxx" not in finding.fix
    assert "the program died of it" in _text(finding)
    run = trace.compiled
    assert run is not None
    [failed] = [c for c in run.compiles if c.result == "failed"]
    assert magi_owned_failure(run, failed)


# torch 2.13's own ConstraintViolationError on CPU (tmp/spec.py of issue 35: a block reads
# `self.tokens` into `.view(b, self.tokens, 2, 4)` at line 18; `freqs`, marked dynamic too, is
# tied to that dim by a broadcast): the declared dim first, with its user stack, then the
# consequence. MagiCompiler needs CUDA, so a magi recording of it cannot be made here: the
# H200 recording's failed compile is given this text instead.
TWO_VIOLATIONS = """Constraints violated (L['freqs'].size()[0], L['x'].size()[1])! For more \
information, run with TORCH_LOGS="+dynamic".
  - You marked L['x'].size()[1] as dynamic but your code specialized it to be a constant (16). \
If you're using mark_dynamic, either remove it or use maybe_mark_dynamic.

User stack:
  File "/tmp/causes/spec.py", line 18, in forward
    q = h.view(b, self.tokens, 2, 4)

  - You marked L['freqs'].size()[0] as dynamic but your code specialized it to be a constant \
(16). If you're using mark_dynamic, either remove it or use maybe_mark_dynamic.

User stack:
  File "/tmp/causes/spec.py", line 5, in rope
    f = torch.cat([freqs, freqs], -1)
"""


def test_specialisation_is_located_at_its_first_cause(tmp_path: Path) -> None:
    copy = tmp_path / "trace"
    shutil.copytree(DATA / "magi-specialized-dim", copy)
    events = copy / "runs" / "compiled" / "pid839" / "events.jsonl"
    lines = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("ev") == "magi_compile_end" and event.get("error"):
            event["error"] = TWO_VIOLATIONS
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n")
    [finding] = [f for f in analyze(load_trace(copy)) if f.severity == "error"]
    assert finding.location is not None and finding.location.endswith("causes/spec.py:18")
    assert "L['x'].size()[1] (pinned to 16)" in finding.title
    assert "L['freqs']" not in finding.title
    text = _text(finding)
    assert "consequence: L['freqs'].size()[0] (pinned to 16) too, at causes/spec.py:5" in text
    assert "reading it from self.tokens at causes/spec.py:18" in finding.fix
    assert "spec.py:5" not in finding.fix


def test_guard_bypass_names_the_guard_the_value_seen_and_the_value_baked_in() -> None:
    trace = _trace("magi-guard-bypass")
    truth = magi_expectation("magi-guard-bypass", LARGE_TOKENS)
    errors = [f for f in run_analyzers(trace) if f.severity == "error"]
    assert [f.id for f in errors] == [truth.finding]
    [finding] = errors
    for pattern in truth.evidence:
        assert re.search(pattern, _text(finding)), pattern
    assert finding.data["seen"] == "'uncond'" and finding.data["baked"] == "'cond'"
    assert 0 < finding.data["failed_checks"] < finding.data["checks"]
    assert _loud(run_analyzers(_trace("magi-clean"))) == []  # the same service, unplanted


def test_boundary_op_that_no_longer_runs_under_magi_is_a_warning() -> None:
    trace = _trace("magi-unsplit-baseline")
    truth = magi_expectation("magi-unsplit-attention", LARGE_TOKENS)
    loud = _loud(run_analyzers(trace))
    assert [f.id for f in loud] == [truth.finding]
    [finding] = loud
    assert finding.severity == truth.severity
    for pattern in truth.evidence:
        assert re.search(pattern, _text(finding)), pattern
    assert "is_subgraph_boundary=True" in finding.fix
    assert re.search(r"cudnn|sdpa|flash", _text(finding))  # the attention kernels, by name
    # What took its place: Inductor's own softmax kernel and GEMMs, in the magi region.
    assert re.search(r"magi ran what eager did not .*triton_\w*softmax", _text(finding))


def test_compile_sizes_entry_compiled_live_is_the_step0_cause() -> None:
    """compile_sizes [12800, 40, 80] and a live request at 4x80x160 (magi-compile-sizes): magi
    compiles that size on its fast path in live r1 step 0, which Dynamo never sees."""
    trace = _trace("magi-compile-sizes")
    [finding] = [f for f in analyze(trace) if ":step0:" in f.id]
    assert finding.id == "magi-compile:step0:r1"
    assert finding.severity == "warning"
    assert "4 compile(s) on magi's fast path" in finding.title
    assert "compile_sizes [12800, 40, 80]" in _text(finding)
    assert finding.data["step0_s"] > 100 * finding.data["steady_s"]
    run = trace.compiled
    assert run is not None
    assert not [c for c in run.compiles if c.live]  # Dynamo compiled nothing live


def test_torch_compile_mode_is_said_and_left_to_the_compile_analyzers() -> None:
    trace = _trace("magi-torch-mode")
    [summary] = analyze(trace)
    assert summary.id == "magi-compile:summary" and summary.severity == "info"
    assert summary.title.startswith("magi runs in TORCH_COMPILE mode")
    assert summary.data["dynamo_compiles"] >= 1
    assert _loud(run_analyzers(trace)) == []


def test_no_step0_finding_without_a_magi_cause() -> None:
    """A live request at a new width under magi (magi-newshape): nothing magi-specific happened
    in its step 0, so magi-compile adds no step-0 finding."""
    assert [f for f in analyze(_trace("magi-newshape")) if ":step0:" in f.id] == []


def test_stand_in_package_without_magis_internals_is_not_an_all_clear(tmp_path: Path) -> None:
    """A stand-in `magi_compiler` (same import path and decorator, none of magi's internals):
    diag cannot hook its compiles, and says so instead of staying quiet."""
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

            print(block(torch.ones(2)).tolist())
            """
        )
    )
    proc = diag_record(
        tmp_path / "t", PYTHON, "app.py", options=("--profile", "none"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    [finding] = analyze(load_trace(tmp_path / "t"))
    assert finding.id == "magi-compile:unseen"
    assert finding.severity == "warning"
    assert finding.location == "app.py:5"
    assert "diag saw none of its compiles" in finding.title
    assert "TORCH_COMPILE" in finding.fix


def test_no_magi_no_finding(record_fixture: RecordFixture) -> None:
    assert analyze(record_fixture()) == []


# -- the collector's guard evaluation, on a real guard manager (no magi needed) ------------------


class _State:
    def __init__(self, pass_name: str = "cond") -> None:
        self.pass_name = pass_name


def _guarded(state: _State, x: torch.Tensor) -> torch.Tensor:
    return x * 2 if state.pass_name == "cond" else x * 3


def _guard_manager() -> object:
    torch._dynamo.reset()
    state = _State()
    compiled = torch.compile(_guarded, backend="aot_eager", fullgraph=True)
    compiled(state, torch.ones(4))
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    entries = _debug_get_cache_entry_list(_guarded.__code__)
    return entries[0].guard_manager


def test_failing_guard_is_explained_with_the_value_seen_and_baked_in() -> None:
    manager = _guard_manager()
    f_locals = {"state": _State("uncond"), "x": torch.ones(4)}
    result = manager.check_verbose(f_locals)  # type: ignore[attr-defined]
    assert not result.result
    [part] = result.verbose_code_parts
    explained = _explain(part, f_locals, {})
    assert explained["guard"] == "L['state'].pass_name == 'cond'"
    assert explained["seen"] == "'uncond'" and explained["baked"] == "'cond'"
    assert explained["where"].endswith(" in _guarded")
    dtype = manager.check_verbose({"state": _State(), "x": torch.ones(4, dtype=torch.float64)})  # type: ignore[attr-defined]
    [mismatch] = dtype.verbose_code_parts
    explained = _explain(mismatch, {}, {})
    assert (explained["baked"], explained["seen"]) == ("Float", "Double")


# -- LightX2V's use_magi_compile ----------------------------------------------------------------


def _with_event(tmp_path: Path, name: str, line: str) -> Trace:
    trace = tmp_path / name
    shutil.copytree(DATA / name, trace)
    [events] = trace.glob("runs/compiled/*/events.jsonl")
    with events.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return load_trace(trace)


def test_lightx2v_adapter_records_the_compile_keys(tmp_path: Path) -> None:
    """The adapter's hook on a runner whose config is a dict, as LightX2V's is (LightX2V itself
    does not run on this CPU machine): the compile keys become one event."""
    from diag.collectors.adapters.lightx2v import _emit_compile_config
    from diag.collectors.session import Session

    session = Session(tmp_path, "compiled")
    runner = SimpleNamespace(config={"use_magi_compile": True, "use_compile": False, "seed": 1})
    _emit_compile_config(session, runner)
    session.writer.close()
    [events] = tmp_path.glob("runs/compiled/*/events.jsonl")
    [record] = [json.loads(line) for line in events.read_text().splitlines()]
    assert record["ev"] == "lightx2v_config"
    assert (record["use_magi_compile"], record["use_compile"]) == (True, False)
    assert "seed" not in record


def test_use_magi_compile_without_magi_is_said(tmp_path: Path) -> None:
    """LightX2V's config asks for magi, but the run never imported magi_compiler (an eager
    H200 recording with the adapter's event added: a LightX2V run cannot be made here)."""
    event = '{"t": 1, "ev": "lightx2v_config", "use_magi_compile": true, "use_compile": false}'
    [finding] = analyze(_with_event(tmp_path, "magi-off", event))
    assert finding.id == "magi-compile:not-imported"
    assert finding.severity == "info"
    assert "use_magi_compile=True" in _text(finding)
    with_magi = _with_event(tmp_path, "magi-clean", event)
    [summary] = [f for f in analyze(with_magi) if f.id == "magi-compile:summary"]
    assert "LightX2V runner config: use_magi_compile=True" in _text(summary)
