"""recompiles on real programs: each compile and recompile named when diag knows no steps, and a
dimension that never generalises named in every run, once.

Real parts: a hand-written denoising loop over diffusers' `WanTransformer3DModel` (the tiny
config diffusers' own tests use, one layer, blocks compiled one by one with aot_eager) whose
TORCH_TRACE log a user holds; small programs compiled with aot_eager, run plainly under
TORCH_TRACE or under `diag record`; tlparse's own shape-recompile log. One trace is written by
hand (test_recorded_run_without_steps_says_so): a recording whose compiles have no phase, which
a real run no longer produces now that every program that runs compiled code gets inferred steps.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from diag.analyzers import get_analyzer, run_analyzers
from diag.analyzers.recompiles import analyze
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.trace.torchtrace import load_torch_trace

from .support import write_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "third_party" / "tlparse"
#: The analyzers that judge compiles (the time-based ones are tested on their own).
COMPILE_ANALYZERS = ["live-compile", "guard-churn", "recompile-limit", "recompiles", "cache-bloat"]

WAN = """
import sys
import torch
from diffusers import WanTransformer3DModel

torch.manual_seed(0)
model = WanTransformer3DModel(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
    out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=1, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
).eval()
for block in model.blocks:
    block.compile(backend="aot_eager")
embeds = torch.randn(1, 12, 16)


@torch.no_grad()
def generate(height, width, steps=2):
    latents = torch.randn(1, 4, 2, height, width)
    for i in range(steps):
        t = torch.tensor([1000 - 500 * i])
        noise = model(hidden_states=latents, encoder_hidden_states=embeds, timestep=t,
                      return_dict=False)[0]
        latents = latents - 0.5 * noise
    return latents


for size in sys.argv[1:]:
    height, width = (int(v) for v in size.split("x"))
    print(size, round(float(generate(height, width).double().sum()), 4), flush=True)
"""

# `fn` called with 7 sizes of dim 0; automatic dynamic shapes off unless "dynamic" is passed.
REPEATED = """
import sys
import torch

torch._dynamo.config.automatic_dynamic_shapes = "dynamic" in sys.argv
if "limit" in sys.argv:
    torch._dynamo.config.recompile_limit = 4


def fn(x):
    return torch.sin(x) * 2


compiled = torch.compile(fn, backend="aot_eager")
for n in range(2, 9):
    compiled(torch.randn(n, 3))
print("ok")
"""

TWO_LAMBDAS = """
import torch

scale = torch.compile(lambda x: x * 2, backend="aot_eager")
shift = torch.compile(lambda x: x + 1, backend="aot_eager")
for n in (2, 3):
    scale(torch.randn(n))
    shift(torch.randn(n))
print("ok")
"""

WARMUP_ONLY = """
import torch
import diag.api as diag


def fn(x):
    return torch.sin(x) * 2


compiled = torch.compile(fn, backend="aot_eager")
with diag.phase("warmup"):
    compiled(torch.randn(4, 3))
    compiled(torch.randn(5, 3))
compiled(torch.randn(6, 3))
compiled(torch.randn(6, 4))
print("ok")
"""

needs_diffusers = pytest.mark.skipif(
    importlib.util.find_spec("diffusers") is None, reason="diffusers is not installed (dev extra)"
)


def _program(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _torch_trace(folder: Path, text: str, *args: str) -> Trace:
    """Run the program plainly with TORCH_TRACE set, as a user who has only torch's log."""
    program = _program(folder, "app.py", text)
    env = {**os.environ, "TORCH_TRACE": str(folder / "log")}
    done = subprocess.run(
        [sys.executable, str(program), *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return load_torch_trace(folder / "log")


def _record(folder: Path, text: str, *args: str) -> Trace:
    program = _program(folder, "app.py", text)
    trace_dir = folder / "t"
    done = subprocess.run(
        [sys.executable, "-m", "diag", "record", "-o", str(trace_dir), "--profile", "none"]
        + ["--", sys.executable, str(program), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return load_trace(trace_dir)


def _by_id(findings: list[Finding]) -> dict[str, Finding]:
    by_id = {f.id: f for f in findings}
    assert len(by_id) == len(findings), [f.id for f in findings]
    return by_id


def _loud(findings: list[Finding]) -> list[str]:
    return [f"{f.severity} {f.id}: {f.title}" for f in findings if f.severity != "info"]


def _text(findings: list[Finding]) -> str:
    return "\n".join(line for f in findings for line in [f.title, *f.evidence, f.fix])


def test_registered() -> None:
    assert get_analyzer("recompiles") is analyze


# --- a diffusers denoising loop's own TORCH_TRACE log: no steps known ---------------------------


@pytest.fixture(scope="module")
def wan_log(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """Warmup at two heights (16x16, 24x16), then a request at a new width (16x24)."""
    return _torch_trace(tmp_path_factory.mktemp("wan"), WAN, "16x16", "24x16", "16x24")


@needs_diffusers
def test_wan_log_names_the_stride_recompile(wan_log: Trace) -> None:
    from diffusers.models.transformers.transformer_wan import WanTransformerBlock

    findings = analyze(wan_log)
    by_id = _by_id(findings)
    assert set(by_id) == {"recompiles:forward", "recompiles:no-steps"}
    frame = by_id["recompiles:forward"]
    assert frame.severity == "info"
    # The frame, the guard and when: the width request recompiled on the rotary view's stride.
    assert frame.title.startswith("forward recompiled 2 time(s) with no steps known; the last at ")
    assert "after the log's first compile: rotary_emb[0]._base.stride()[0] == " in frame.title
    line = inspect.getsourcelines(WanTransformerBlock.forward)[1]
    assert frame.location is not None and frame.location.endswith(f"transformer_wan.py:{line}")
    [stride] = [e for e in frame.evidence if e.startswith("compile 0/2 at ")]
    assert "tensor-stride on rotary_emb[0]._base" in stride
    assert "after the log's first compile" in stride
    assert any(
        e.startswith("compile 0/1 at ") and "size mismatch at index 1" in e for e in frame.evidence
    )
    assert any("cannot tell whether these compiles ran in warmup" in e for e in frame.evidence)
    assert "--warmup-requests N" in frame.fix and 'diag.phase("warmup")' in frame.fix
    starts = [c["since_start_s"] for c in frame.data["compiles"]]
    assert starts[0] == 0 and starts == sorted(starts) and starts[2] > starts[1] > 0
    summary = by_id["recompiles:no-steps"]
    assert summary.title.startswith("3 compile(s) of 1 code object(s), 2 recompile(s), with no")
    # Nothing else guesses: no error or warning, and no word of a warmup nobody identified.
    everything = run_analyzers(wan_log, only=COMPILE_ANALYZERS)
    assert _loud(everything) == []
    assert "after warmup" not in _text(everything)


@needs_diffusers
def test_wan_log_of_one_shape_is_quiet(tmp_path: Path) -> None:
    trace = _torch_trace(tmp_path, WAN, "16x16", "16x16")
    findings = run_analyzers(trace, only=COMPILE_ANALYZERS)
    assert _loud(findings) == []
    assert [f.id for f in findings if f.analyzer == "recompiles"] == ["recompiles:no-steps"]


# --- a dimension that never generalises --------------------------------------------------------


def test_tlparse_shape_recompile_log() -> None:
    """tlparse's multi_rank_logs rank 1: 15 compiles of `kernel`, 14 `tensor 'x' size mismatch`
    recompiles with automatic_dynamic_shapes=False and the limit raised (no hit)."""
    trace = load_torch_trace(DATA / "multi_rank_logs" / "dedicated_log_torch_trace_rank_1.log.gz")
    compiled = trace.compiled
    assert compiled is not None
    # compilation_metrics.cache_size reaches the Run model: entries before each compile.
    assert [c.cache_size for c in compiled.compiles] == list(range(15))
    findings = run_analyzers(trace)
    assert _loud(findings) == [
        "warning recompiles:kernel:x:0: kernel recompiled 14 times on dim 0 of `x` and never "
        "generalised (sizes 2, 3, 4, 5, ..., 15, 16)"
    ]
    [warning] = [f for f in findings if f.severity == "warning"]
    assert "kernel holds 15 cache entries, more than torch's default recompile limit (8)" in (
        "\n".join(warning.evidence)
    )
    assert warning.data["compile_ids"] == [f"0/{i}" for i in range(1, 15)]
    assert "torch._dynamo.mark_dynamic(tensor, 0)" in warning.fix
    assert "automatic_dynamic_shapes = True" in warning.fix
    # One root cause, one finding: cache-bloat leaves the 15 entries to it.
    assert get_analyzer("cache-bloat")(trace) == []


def test_repeated_dimension_with_steps_known(tmp_path: Path) -> None:
    trace = _record(tmp_path, REPEATED)
    compiled = trace.compiled
    assert compiled is not None and compiled.steps  # the compiled-calls adapter inferred steps
    assert [c.cache_size for c in compiled.compiles] == list(range(7))
    by_id = _by_id(analyze(trace))
    assert set(by_id) == {"recompiles:fn:x:0"}
    found = by_id["recompiles:fn:x:0"]
    assert found.severity == "warning"
    assert found.data["values"] == [str(n) for n in range(2, 9)]
    assert found.data["live"] == 6
    assert "6 of them ran during live requests (see live-compile)" in found.evidence
    live = [f for f in get_analyzer("live-compile")(trace) if f.data.get("guards")]
    assert len(live) == 6
    for error in live:
        assert any(
            e.endswith("instead of making the dimension dynamic (see recompiles)")
            for e in error.evidence
        )
        # the program turned automatic dynamic off: a second size warmed makes nothing dynamic
        assert error.fix.startswith(
            "fn was compiled under torch._dynamo.config.automatic_dynamic_shapes = False: "
            "automatic dynamic is off for it"
        )
        assert "torch._dynamo.mark_dynamic(tensor, 0) on the input behind `x`" in error.fix


def test_automatic_dynamic_generalises(tmp_path: Path) -> None:
    trace = _torch_trace(tmp_path, REPEATED, "dynamic")
    findings = run_analyzers(trace, only=COMPILE_ANALYZERS)
    assert _loud(findings) == []
    by_id = _by_id([f for f in findings if f.analyzer == "recompiles"])
    # One recompile made dim 0 dynamic: listed, not judged.
    assert by_id["recompiles:fn"].severity == "info"
    assert by_id["recompiles:fn"].title.startswith("fn recompiled 1 time(s) with no steps known")


def test_repeated_dimension_at_the_limit_is_evidence(tmp_path: Path) -> None:
    trace = _torch_trace(tmp_path, REPEATED, "limit")
    findings = run_analyzers(trace, only=COMPILE_ANALYZERS)
    assert [f.id for f in findings if f.analyzer == "recompiles"] == ["recompiles:no-steps"]
    [limit] = [f for f in findings if f.analyzer == "recompile-limit"]
    assert limit.severity == "error"
    assert "at a point with no step information" in limit.title
    assert (
        "3 recompiles of fn failed on dim 0 of `x` (tensor-size; sizes 2, 3, 4, 5): each new "
        "size compiled a new entry instead of making the dimension dynamic" in limit.evidence
    )
    assert limit.fix.startswith("Make the dimension dynamic: torch._dynamo.mark_dynamic")
    assert not any(" live" in e for e in limit.evidence if "compiled 4 time(s)" in e)


# --- frames are code objects -------------------------------------------------------------------


def test_two_lambdas_are_two_frames(tmp_path: Path) -> None:
    trace = _torch_trace(tmp_path, TWO_LAMBDAS)
    frames = [f for f in analyze(trace) if f.id != "recompiles:no-steps"]
    assert sorted(f.id for f in frames) == [
        f"recompiles:<lambda>@{tmp_path.name}/app.py:4",
        f"recompiles:<lambda>@{tmp_path.name}/app.py:5",
    ]
    assert sorted(f.data["line"] for f in frames) == [4, 5]
    for finding in frames:
        assert finding.title.startswith("<lambda>@")
        assert "size mismatch at index 0. expected 2, actual 3" in finding.title


# --- recordings with no steps ------------------------------------------------------------------


def test_warmup_phase_without_requests(tmp_path: Path) -> None:
    """diag.phase("warmup") alone: diag knows warmup but no request, so a compile after the
    warmup phase is a warning placed in time."""
    trace = _record(tmp_path, WARMUP_ONLY)
    compiled = trace.compiled
    assert compiled is not None and not compiled.requests
    findings = run_analyzers(trace, only=COMPILE_ANALYZERS)
    assert [f.id for f in findings if f.severity != "info"] == ["recompiles:fn"]
    warning = next(f for f in findings if f.id == "recompiles:fn")
    assert warning.severity == "warning"
    assert warning.title.startswith(
        "fn recompiled after the warmup phase, outside any request (1 compile(s), the last at "
    )
    assert "tensor 'x' size mismatch at index 1. expected 3, actual 4" in warning.title
    assert "after the program started" in warning.title
    marks = [e.rsplit(" [", 1)[1] for e in warning.evidence if e.startswith("compile ")]
    assert marks == ["warmup phase]", "warmup phase]", "after the warmup phase]"]


def test_recorded_run_without_steps_says_so(tmp_path: Path) -> None:
    """Hand-written: compiles with phase `live` and no request anywhere (an older recording, or
    a program whose compiled calls no adapter saw); a Python-value guard churns and the frame
    then hits the limit."""
    frame = {"name": "block_forward", "file": "/srv/model.py", "line": 12}
    nowhere = {"phase": "live", "request_id": None, "step": None}
    events: list[dict[str, object]] = []
    for i in range(4):
        if i:
            guard = {"kind": "python-value", "source": "self.step", "expected": str(i - 1)}
            raw = f"0/{i - 1}: self.step == {i - 1}"
            events.append(
                {"t": 10 + 10 * i, "ev": "recompile", "compile_id": f"0/{i}", "epoch": 0}
                | {"guards": [guard | {"raw": raw, "compile_id": f"0/{i - 1}"}]}
            )
        events.append(
            {"t": 10 + 10 * i + 5, "ev": "compile_end", "compile_id": f"0/{i}", "epoch": 0}
            | {"frame": frame, "result": "ok", "duration_s": 1.0, "start_t": 10 + 10 * i}
            | {"cache_size": i, **nowhere}
        )
    events.append(
        {"t": 100, "ev": "recompile_limit", "compile_id": "0/4", "epoch": 0, "frame": frame}
        | {"reason": "cache_size_limit reached", **nowhere}
    )
    trace = write_trace(tmp_path, events)
    findings = run_analyzers(trace, only=COMPILE_ANALYZERS)
    text = _text(findings)
    assert "warmup only" not in text and "all in warmup" not in text
    assert "live (outside a request)" not in text and "0 in warmup, 0 live" not in text
    churn = next(f for f in findings if f.analyzer == "guard-churn")
    assert churn.title == (
        "block_forward recompiled 3 time(s) on `self.step` (python-value): then hit the "
        "recompile limit"
    )
    assert "no step information" in churn.evidence[0]
    limit = next(f for f in findings if f.analyzer == "recompile-limit")
    assert "at a point with no step information" in limit.title
    assert any(e.startswith("diag could not identify steps or requests") for e in limit.evidence)
    # The frame hit the limit: recompile-limit tells it; recompiles only lists the compiles.
    assert [f.id for f in findings if f.analyzer == "recompiles"] == ["recompiles:no-steps"]
    summary = next(f for f in findings if f.id == "recompiles:no-steps")
    assert "hit the recompile limit (see recompile-limit)" in summary.evidence[1]
