"""A recompile limit lowered through `torch._dynamo.config.patch`, as a context manager and as a
decorator, against torch's own record (issue 35).

The program is test_lowered_limit's DiT loop (aot_eager): warmup serves two resolutions with CFG
on (batch 2: the second makes height and width dynamic, 2 entries), live serves a new
resolution, a request without CFG (batch 1: a third entry) and another resolution. The limit is
lowered to 2 four ways:

- `with config.patch(recompile_limit=2):` around warmup and serving;
- `@config.patch(recompile_limit=2)` on the function that serves;
- `with config.patch(cache_size_limit=2):` (the old name: an alias of recompile_limit here);
- `with config.patch(recompile_limit=2):` around live serving only, warmup under torch's 8.

Torch's record (TORCH_LOGS=recompiles) is the same in each: at the batch-1 request `0/1: tensor
't' size mismatch at index 0. expected 2, actual 1`, then `hit config.recompile_limit (2)`;
Dynamo's counters: 3 frames, 2 compiled. Torch refuses that compile before it logs
dynamo_start, so diag reads the settings at the refusal too: the last form's warmup compiled
under 8 and only the refused compile saw 2.

In the last form warmup alone does keep the call compiled (torch checks the limit only when it
compiles; entries compiled before still serve): with the batch-1 variant warmed up before the
patch, no compile is refused and none runs live. diag says so there, and says "warmup alone
cannot help" only where warmup compiled under the lowered limit too.
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

from .support import PYTHON, diag_record, events, of

PROGRAM = """
import json, sys
import torch
import diag.api as diag
from torch._dynamo.utils import counters

LIMIT, FORM = int(sys.argv[1]), sys.argv[2]
NAME = "cache_size_limit" if FORM == "old-name" else "recompile_limit"
WARM_BATCH_1 = len(sys.argv) > 3 and sys.argv[3] == "warm-batch-1"


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


def warm():
    shapes = [(2, 16, 16), (2, 24, 32)] + ([(1, 16, 16)] if WARM_BATCH_1 else [])
    with diag.phase("warmup"):
        for shape in diag.warmup_shapes(shapes):
            serve(*shape)


def live():
    for shape in diag.live_shapes([(2, 32, 24), (1, 16, 16), (2, 24, 24)]):
        serve(*shape)


@torch._dynamo.config.patch(recompile_limit=LIMIT)
def main_decorated():
    warm()
    live()


if FORM in ("patch", "old-name"):
    with torch._dynamo.config.patch(**{NAME: LIMIT}):
        warm()
        live()
elif FORM == "decorator":
    main_decorated()
elif FORM == "live-only":
    warm()
    with torch._dynamo.config.patch(recompile_limit=LIMIT):
        live()
print("frames", json.dumps(dict(counters["frames"])), flush=True)
"""

FORMS = ("patch", "decorator", "old-name", "live-only")


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("patched") / "serve.py"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(scope="module")
def recorded(program: Path) -> dict[str, tuple[Path, str]]:
    """Each form at limit 2, recorded once; torch's own log in its stderr."""
    found = {}
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    for form in FORMS:
        out = program.parent / form
        result = diag_record(out, PYTHON, str(program), "2", form, timeout=300, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        found[form] = (out, result.stdout + result.stderr)
    return found


def _frames(log: str) -> dict[str, int]:
    frames: dict[str, int] = json.loads(log.split("frames ", 1)[1].splitlines()[0])
    return frames


def _limit(trace: Path) -> Finding:
    (found,) = [f for f in run_analyzers(load_trace(trace)) if f.analyzer == "recompile-limit"]
    return found


@pytest.mark.parametrize("form", FORMS)
def test_torch_record(recorded: dict[str, tuple[Path, str]], form: str) -> None:
    log = recorded[form][1]
    assert "0/1: tensor 't' size mismatch at index 0. expected 2, actual 1" in log
    assert "hit config.recompile_limit (2)" in log
    assert _frames(log) == {"total": 3, "ok": 2}  # the third compile was refused


@pytest.mark.parametrize("form", FORMS)
def test_the_lowered_limit_is_named(recorded: dict[str, tuple[Path, str]], form: str) -> None:
    limit = _limit(recorded[form][0])
    assert limit.title.startswith(
        "forward hit the recompile limit at live r4 step 0 because the program lowered "
        "torch._dynamo.config.recompile_limit to 2 (torch's default: 8): its entry 3 (the batch "
        "went from 2 to 1 (`t` dim 0)) was refused"
    )
    assert limit.data["recompile_limit"] == 2 and limit.data["lowered_limit_refused"] is True
    (hit,) = [c for c in limit.claims if c["kind"] == "recompile-limit"]
    assert hit["limit"] == {
        "setting": "recompile_limit",
        "value": 2,
        "default": 8,
        "cause": "lowered-setting",
    }


@pytest.mark.parametrize("form", ["patch", "decorator", "old-name"])
def test_lowered_around_warmup_too(recorded: dict[str, tuple[Path, str]], form: str) -> None:
    """Warmup compiled under the patched limit: warmup alone cannot help."""
    limit = _limit(recorded[form][0])
    assert limit.data["warmup_recompile_limit"] is None
    assert "warmup alone cannot help" in limit.fix
    assert "Raise the limit to 3 or more" in limit.fix


def test_lowered_after_warmup(recorded: dict[str, tuple[Path, str]]) -> None:
    """Torch refuses the compile before its dynamo_start: diag read the patched value there."""
    trace = recorded["live-only"][0]
    settings = [e["settings"]["recompile_limit"] for e in of("compile_settings", events(trace))]
    assert settings == [8, 2]
    limit = _limit(trace)
    assert limit.data["warmup_recompile_limit"] == 8
    assert any("warmup compiled forward under a limit of 8" in line for line in limit.evidence)
    assert limit.fix.startswith(
        "The program lowered torch._dynamo.config.recompile_limit to 2 (torch's default: 8) "
        "after warmup, which compiled forward under a limit of 8"
    )
    assert "Warm up a call where `t` has size 1 at dim 0" in limit.fix
    assert "Run that warmup before the limit is lowered" in limit.fix
    assert "warmup alone cannot help" not in limit.fix


@pytest.mark.parametrize(
    ("limit", "extra"),
    [("2", "warm-batch-1"), ("3", "")],
    ids=["warm-before-the-patch", "raise-the-patched-limit"],
)
def test_each_fix_for_the_live_only_patch(program: Path, limit: str, extra: str) -> None:
    """Run without diag: torch's own counters and log are the record."""
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    argv = [PYTHON, str(program), limit, "live-only"] + ([extra] if extra else [])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _frames(result.stdout) == {"total": 3, "ok": 3}
    assert "hit config.recompile_limit" not in result.stderr


def test_the_warmup_plan_warms_the_refused_call_when_only_serving_was_limited(
    recorded: dict[str, tuple[Path, str]],
) -> None:
    """Warmup compiled under 8, serving under 2: an entry warmup compiles then serves the
    batch-1 call later with no compile, so the plan warms it (the fix run above removed the
    hit); with the limit lowered around warmup too, no warmup can."""
    from diag.warmup.plan import plan_warmup

    live_only = plan_warmup([load_trace(recorded["live-only"][0])])
    (refused,) = [c for c in live_only.live_compiles if "recompile limit" in c.cause]
    assert refused.cannot is None and refused.covered_by is not None
    assert live_only.requests[refused.covered_by].shape[0] == 1  # the batch-1 variant
    assert "before the limit is lowered" in refused.cause
    patched = plan_warmup([load_trace(recorded["patch"][0])])
    (refused,) = [c for c in patched.live_compiles if "recompile limit" in c.cause]
    assert refused.cannot is not None and "no warmup keeps it compiled" in refused.cannot
