"""diag warmup-plan on the reference service and a diffusers model loop, against torch's own
record (issue 38).

Torch's record for `--plant unwarmed-shape` (warmup 2x8x8 then 2x12x8, live 2x8x8 then 2x8x12):
warmup's second request recompiles on the height and automatic dynamic makes it dynamic; the
width stays static, so live r1 recompiles `wan_block_forward` on `tensor 'freqs_w' size mismatch
at index 0. expected 4, actual 6` (the width 8 -> 12 in latent pixels, patch 2). Live traffic
never changes the height, so the smallest warmup is 2x8x8 then 2x8x12: the second changes the
width and Dynamo makes it dynamic. `--verify` replays the live shapes with that warmup: no live
compile. `--plant guard-churn` grows the config dict a block reads each request: no warmup can
prevent those recompiles, and the plan says so with guard-churn's finding.

The diffusers loop (tiny Wan transformer of diffusers' tests, blocks compiled with
`dynamic=None`, aot_eager) serves requests [batch, height, width]: batch 2 is CFG on, 1 CFG off.
Warmup 2x16x16 and 2x24x16 (the height varies), live 2x16x16, 2x16x24, 2x24x32, 1x16x16. Torch's
record: the new width recompiles through a stride guard on the rotary table's `_base`
(`rotary_emb[0]._base.stride()[0] == 96*rotary_emb[0]._base.size()[1]`), CFG off on `tensor
'temb' size mismatch at index 0. expected 2, actual 1` (Dynamo specialises 1). The plan:
2x16x16, then 2x24x32 (height and width change together), then 1x16x16 on its own; replayed
through diag.api.warmup_shapes()/live_shapes(), nothing compiles live.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.warmup.forms import render
from diag.warmup.plan import GENERALISE, SPECIALISE, VARIANT, plan_warmup

from ..conftest import RecordFixture
from .support import PYTHON, diag_record

FIXTURE = [PYTHON, "-m", "diag.fixtures", "--compile", "--backend", "aot_eager", "--model", "wan"]


def _plan_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", "warmup-plan", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def unwarmed(record_fixture: RecordFixture) -> Trace:
    return record_fixture("unwarmed-shape")


def test_torch_record_is_what_the_plan_reads(unwarmed: Trace) -> None:
    run = unwarmed.compiled
    assert run is not None
    live = [c for c in run.compiles if c.live]
    assert len(live) == 1
    raw = [g.raw for g in live[0].guards]
    assert any("tensor 'freqs_w' size mismatch at index 0. expected 4, actual 6" in r for r in raw)


def test_plan_warms_the_width_live_traffic_changed(unwarmed: Trace) -> None:
    plan = plan_warmup([unwarmed])
    assert plan.dims == ["frames", "height", "width"]
    assert plan.varied == ["width"]
    assert [(r.shape, r.role) for r in plan.requests] == [
        ([2, 8, 8], SPECIALISE),
        ([2, 8, 12], GENERALISE),
    ]
    (live,) = plan.live_compiles
    assert live.frame == "wan_block_forward" and live.request == "r1" and live.step == 0
    assert live.covered_by == 1 and live.cannot is None
    assert "freqs_w" in live.cause
    # Costs are the recording's own compile times: the first compile, then a size recompile.
    warm = sorted(c.duration_s or 0.0 for c in unwarmed.compiled.compiles if c.phase == "warmup")  # type: ignore[union-attr]
    assert sorted(r.cost_s or 0.0 for r in plan.requests) == pytest.approx(warm)
    assert render(plan, "fixture") == "--warmup-shapes 2x8x8,2x8x12"
    assert render(plan, "lightx2v") == "_WARMUP_RESOLUTIONS = ((8, 8), (8, 12))"
    assert render(plan, "diffusers").startswith("WARMUP_SHAPES = [(8, 8, 2), (8, 12, 2)]")
    assert plan.served == [{"shape": [2, 8, 8], "steps": 4}, {"shape": [2, 8, 12], "steps": 4}]


def test_cli_json_and_forms(unwarmed: Trace) -> None:
    proc = _plan_cli(str(unwarmed.path), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["shape"] for r in data["requests"]] == [[2, 8, 8], [2, 8, 12]]
    assert data["unpreventable"] == []
    proc = _plan_cli("--as", "fixture", str(unwarmed.path))
    assert proc.stdout.strip() == "--warmup-shapes 2x8x8,2x8x12"


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    proc = _plan_cli(str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not a diag trace directory" in proc.stderr
    proc = _plan_cli()
    assert proc.returncode == 2 and "no trace directory" in proc.stderr


def test_verify_replays_with_no_live_compile(unwarmed: Trace, tmp_path: Path) -> None:
    out = tmp_path / "replay"
    command = [*FIXTURE, "-q", "--plant", "unwarmed-shape"]
    proc = _plan_cli(str(unwarmed.path), "-o", str(out), "--verify", "--", *command, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "live compiles: 0 (0 expected)" in proc.stdout
    assert "variable-resolution:" in proc.stdout
    replay = load_trace(out).compiled
    assert replay is not None
    assert [c for c in replay.compiles if c.live] == []
    warm = [r.shape for r in replay.requests if r.phase == "warmup"]
    live = [r.shape for r in replay.requests if r.phase == "live"]
    assert warm == [[2, 8, 8], [2, 8, 12]] and live == [[2, 8, 8], [2, 8, 12]]
    # The plan's warmup compiled twice (a first compile, then the width made dynamic).
    assert [c.phase for c in replay.compiles] == ["warmup", "warmup"]


def test_guard_churn_is_not_warmups_to_fix(record_fixture: RecordFixture) -> None:
    trace = record_fixture("guard-churn")
    plan = plan_warmup([trace], {str(trace.path): _finding_ids(trace)})
    live = plan.live_compiles
    assert live, "guard-churn recompiles live"
    value = [c for c in live if c.cannot is not None]
    assert value, [c.cause for c in live]
    assert all("Python value" in c.cannot for c in value if c.cannot)
    assert any(c.finding and c.finding.startswith("guard-churn") for c in value)
    text = render(plan, "text")
    assert "NO WARMUP CAN PREVENT IT" in text


WAN_LOOP = """
import torch
import diag.api as diag
from diffusers import WanTransformer3DModel

torch.manual_seed(0)
model = WanTransformer3DModel(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
    out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
).eval()
for block in model.blocks:
    block.compile(backend="aot_eager", dynamic=None)
warm = diag.warmup_shapes([(2, 16, 16), (2, 24, 16)])
live = diag.live_shapes([(2, 16, 16), (2, 16, 24), (2, 24, 32), (1, 16, 16)])
text = torch.randn(1, 6, 16)


def serve(batch, height, width, steps):
    with diag.request(shape=[batch, height, width]):
        x = torch.randn(batch, 4, 2, height, width)
        for i in range(steps):
            with diag.step():
                t = torch.full((batch,), 999 - i)
                x = x - 0.01 * model(x, t, text.expand(batch, -1, -1), return_dict=False)[0]
    print(batch, height, width, round(float(x.double().sum()), 3), flush=True)


with torch.no_grad():
    with diag.phase("warmup"):
        for shape in warm:
            serve(*shape, 2)
    for shape in live:
        serve(*shape, 3)
"""


@pytest.fixture(scope="module")
def wan_loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    pytest.importorskip("diffusers")
    folder = tmp_path_factory.mktemp("wan_loop")
    script = folder / "wan_loop.py"
    script.write_text(WAN_LOOP)
    proc = diag_record(folder / "t", PYTHON, str(script), options=("--profile", "none"))
    assert proc.returncode == 0, proc.stderr
    return script, load_trace(folder / "t")


def test_diffusers_loop_plan_against_torch(wan_loop: tuple[Path, Trace]) -> None:
    _, trace = wan_loop
    run = trace.compiled
    assert run is not None
    live = [c for c in run.compiles if c.live]
    raws = [" ".join(g.raw for g in c.guards) for c in live]
    assert len(live) == 2
    assert "rotary_emb[0]._base.stride()[0]" in raws[0]
    assert "tensor 'temb' size mismatch at index 0. expected 2, actual 1" in raws[1]
    plan = plan_warmup([trace])
    assert [(r.shape, r.role) for r in plan.requests] == [
        ([2, 16, 16], SPECIALISE),
        ([2, 24, 32], GENERALISE),
        ([1, 16, 16], VARIANT),
    ]
    assert [c.covered_by for c in plan.live_compiles] == [1, 2]
    assert plan.unpreventable == []
    # The variant's cost is the live compile it moves into warmup.
    assert plan.requests[2].cost_s == pytest.approx(live[1].duration_s)


def test_diffusers_loop_verify_through_diag_api(
    wan_loop: tuple[Path, Trace], tmp_path: Path
) -> None:
    script, trace = wan_loop
    out = tmp_path / "replay"
    proc = _plan_cli(
        str(trace.path), "-o", str(out), "--verify", "--", PYTHON, str(script), timeout=400
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "live compiles: 0 (0 expected)" in proc.stdout
    replay = load_trace(out).compiled
    assert replay is not None
    assert [c for c in replay.compiles if c.live] == []
    warm = [r.shape for r in replay.requests if r.phase == "warmup"]
    assert warm == [[2, 16, 16], [2, 24, 32], [1, 16, 16]]
    assert [r.shape for r in replay.requests if r.phase == "live"] == [
        [2, 16, 16],
        [2, 16, 24],
        [2, 24, 32],
        [1, 16, 16],
    ]


def _finding_ids(trace: Trace) -> dict[str, str]:
    from diag.cli.warmup_plan import _explanations

    return _explanations([trace])[str(trace.path)]
