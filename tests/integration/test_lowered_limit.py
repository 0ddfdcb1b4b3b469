"""A recompile limit the program lowered, hit by a live request (issues 35 and 38), against
torch's own record.

The program: a small DiT serving loop (aot_eager) that sets
`torch._dynamo.config.recompile_limit = 2`, warms up two resolutions with CFG on (batch 2: the
second makes height and width dynamic, 2 entries), then serves a new resolution (served by the
dynamic entry), a request without CFG (batch 1) and another resolution. Torch's record,
TORCH_LOGS=recompiles: at the batch-1 request `0/1: tensor 't' size mismatch at index 0.
expected 2, actual 1` and `0/0: tensor 'latents' size mismatch at index 0. expected 2, actual 1`,
then `torch._dynamo hit config.recompile_limit (2)`; Dynamo's counters: 3 frames, 2 compiled.
Under torch's default limit the same call compiles a third entry live. Fix tried: the limit at 3
with the batch-1 variant warmed up (`diag warmup-plan --verify`) leaves no live compile and no
limit hit; with the limit left at 2 the plan's own warmup hits it (no warmup can prevent it).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from diag.analyzers import run_analyzers
from diag.findings.model import Finding
from diag.trace.load import load_trace

from .support import PYTHON, diag_record

PROGRAM = """
import sys
import torch
import diag.api as diag
from torch._dynamo.utils import counters

LIMIT = int(sys.argv[1])
torch._dynamo.config.recompile_limit = LIMIT  # the program keeps its compiles few


class Block(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 32), torch.nn.GELU(), torch.nn.Linear(32, dim)
        )
        self.ada = torch.nn.Linear(dim, 2 * dim)

    def forward(self, x, temb):
        shift, scale = self.ada(temb).unsqueeze(1).chunk(2, dim=-1)
        h = self.norm(x) * (1 + scale) + shift
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm(x))


class TinyDiT(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.patch = torch.nn.Conv2d(4, dim, 2, 2)
        self.t_embed = torch.nn.Linear(1, dim)
        self.block = Block(dim)
        self.out = torch.nn.Linear(dim, 16)

    def forward(self, latents, t):
        b, c, h, w = latents.shape
        x = self.patch(latents).flatten(2).transpose(1, 2)
        x = self.block(x, self.t_embed(t[:, None]))
        return self.out(x).transpose(1, 2).reshape(b, 4, h, w)


torch.manual_seed(0)
model = TinyDiT().eval()
model.compile(backend="aot_eager")


def serve(batch, height, width, steps=2):
    cfg = batch == 2  # batch 1: guidance_scale <= 1, no uncond pass
    with diag.request(shape=[batch, height, width]), torch.no_grad():
        x = torch.randn(1, 4, height, width, generator=torch.Generator().manual_seed(0))
        for i in range(steps):
            with diag.step():
                t = torch.full((batch,), 999.0 - 100 * i)
                out = model(torch.cat([x, x]) if cfg else x, t)
                if cfg:
                    cond, uncond = out.chunk(2)
                    out = uncond + 4.0 * (cond - uncond)
                x = x - 0.1 * out


with diag.phase("warmup"):
    for shape in diag.warmup_shapes([(2, 16, 16), (2, 24, 32)]):
        serve(*shape)
for shape in diag.live_shapes([(2, 32, 24), (1, 16, 16), (2, 24, 24)]):
    serve(*shape)
print("frames", json.dumps(dict(counters["frames"])), flush=True)
""".replace("import sys\n", "import json, sys\n", 1)


def _plan(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", "warmup-plan", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The program at limit 2, recorded once; torch's own log in its stderr."""
    tmp = tmp_path_factory.mktemp("lowered")
    program = tmp / "serve.py"
    program.write_text(PROGRAM)
    out = tmp / "trace"
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    result = diag_record(out, PYTHON, str(program), "2", timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, program, result.stdout + result.stderr


@pytest.fixture(scope="module")
def limit(recorded: tuple[Path, Path, str]) -> Finding:
    findings = run_analyzers(load_trace(recorded[0]))
    (found,) = [f for f in findings if f.analyzer == "recompile-limit"]
    return found


def test_torch_record(recorded: tuple[Path, Path, str]) -> None:
    log = recorded[2]
    assert "0/1: tensor 't' size mismatch at index 0. expected 2, actual 1" in log
    assert "hit config.recompile_limit (2)" in log
    frames = json.loads(log.split("frames ", 1)[1].splitlines()[0])
    assert frames == {"total": 3, "ok": 2}  # the third compile was refused


def test_cause_is_the_lowered_limit(limit: Finding) -> None:
    assert limit.title.startswith(
        "forward hit the recompile limit at live r4 step 0 because the program lowered "
        "torch._dynamo.config.recompile_limit to 2 (torch's default: 8): its entry 3 (the batch "
        "went from 2 to 1 (`t` dim 0)) was refused"
    )
    assert "2 call(s) ran eagerly (r4 steps 0-1), 2 still ran compiled entries" in limit.title
    assert any("under torch's default limit (8)" in line for line in limit.evidence)
    assert limit.data["recompile_limit"] == 2 and limit.data["lowered_limit_refused"] is True
    (hit,) = [c for c in limit.claims if c["kind"] == "recompile-limit"]
    assert hit["limit"] == {
        "setting": "recompile_limit",
        "value": 2,
        "default": 8,
        "cause": "lowered-setting",
    }


def test_fix_raises_the_limit_then_warms_up(limit: Finding) -> None:
    assert limit.fix.startswith(
        "The program lowered torch._dynamo.config.recompile_limit to 2 (torch's default: 8), and "
        "forward needs at least 3 entries"
    )
    assert "Raise the limit to 3 or more" in limit.fix
    assert "Warm up a call where `t` has size 1 at dim 0" in limit.fix
    assert "only hides it" not in limit.fix and "mark_dynamic(" not in limit.fix


def test_plan_says_no_warmup_can_prevent_it(recorded: tuple[Path, Path, str]) -> None:
    proc = _plan(str(recorded[0]), "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    (item,) = plan["unpreventable"]
    assert item["request"] == "r4" and item["finding"] == "recompile-limit:forward"
    assert item["cannot"].startswith(
        "the program lowered torch._dynamo.config.recompile_limit to 2 (torch's default: 8)"
    )
    assert "Raise the limit to at least 3" in item["cannot"]
    # once the limit allows it, the batch-1 variant covers it: the plan needs 3 entries
    assert plan["requests"][item["covered_by"]]["shape"][0] == 1
    assert any("Raise the limit to at least 3 for this plan to hold" in n for n in plan["notes"])


def test_verify_the_fix_and_that_warmup_alone_cannot(
    recorded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    trace, program = str(recorded[0]), str(recorded[1])
    kept = _plan(trace, "-o", str(tmp_path / "at2"), "--verify", "--", PYTHON, program, "2")
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert "recompile-limit hits: 1 (0 expected" in kept.stdout  # in warmup, at the variant
    raised = _plan(trace, "-o", str(tmp_path / "at3"), "--verify", "--", PYTHON, program, "3")
    assert raised.returncode == 0, raised.stdout + raised.stderr
    assert "live compiles: 0 (0 expected)" in raised.stdout
    assert "recompile-limit hits" not in raised.stdout
    # a lowered limit (3) that is never hit: diag stays quiet about it
    findings = run_analyzers(load_trace(tmp_path / "at3"))
    assert not [f for f in findings if f.severity == "error"]
    assert not [f for f in findings if f.analyzer == "recompile-limit"]
