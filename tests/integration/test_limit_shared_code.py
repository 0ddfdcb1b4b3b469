"""Blocks that share one code object share its recompile limit (issue 23, item 4; issue 24).

Two of diffusers' SD3 `JointTransformerBlock`s, compiled one by one (aot_eager): the last block
has `context_pre_only`, so warmup leaves one cache entry per block on the one code object
(attention.py's `forward`). Their attention processor reads a module-level dict, set per
request from a quality tier. With `recompile_limit = 3`, a live request at the other tier
compiles a third entry for block 0, and block 1's call in that same step hits the limit.

Torch's own record (the fidelity oracle: every entry's guards checked before each call, no
diag involved), written down before this test: r2 step 0: block 0 compiled 0/2, then block 1
ran eagerly; r2 steps 1-2: block 0 ran 0/2, block 1 eagerly; r3 (the warmed tier): both ran
their warmup entries. So 3 calls ran eagerly and 6 ran compiled after the hit; block 0's call
in the step of the hit ran compiled *before* it (the harness once counted it after: 7).
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from diag.analyzers import run_analyzers
from diag.trace.run import load_trace

from .support import PYTHON, diag_record

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from fidelity_kit import checks, compare  # noqa: E402
from fidelity_kit.records import read_diag_requests, read_oracle  # noqa: E402
from fidelity_kit.spec import ProgramSpec  # noqa: E402

pytest.importorskip("diffusers")

PROGRAM = """
import torch
import diag.api as diag
import fidelity_oracle as oracle
from diffusers.models.attention import JointTransformerBlock
from diffusers.models.attention_processor import JointAttnProcessor2_0

torch.set_num_threads(1)
torch._dynamo.config.recompile_limit = 3
ATTN_CONFIG = {"impl": "sdpa"}


class TierProcessor(JointAttnProcessor2_0):
    def __call__(self, attn, hidden_states, *args, **kwargs):
        if ATTN_CONFIG["impl"] == "math":  # a module-level dict read inside the graph
            hidden_states = hidden_states * 1.0
        return super().__call__(attn, hidden_states, *args, **kwargs)


torch.manual_seed(0)
# SD3's layout: every block but the last also updates the text stream.
blocks = [
    JointTransformerBlock(dim=32, num_attention_heads=4, attention_head_dim=8,
                          context_pre_only=last)
    for last in (False, True)
]
oracle.install("main")
for block in blocks:
    block.eval()
    block.attn.set_processor(TierProcessor())
    block.compile(backend="aot_eager", dynamic=False)
    oracle.watch_module(block)


def serve(request_id, tier, steps):
    ATTN_CONFIG["impl"] = tier
    gen = torch.Generator().manual_seed(len(request_id))
    x = torch.randn(1, 16, 32, generator=gen)
    text = torch.randn(1, 8, 32, generator=gen)
    temb = torch.randn(1, 32, generator=gen)
    with oracle.request(request_id, [4, 4]), diag.request(request_id, shape=[4, 4]):
        for i in range(steps):
            with oracle.step(i), diag.step(i):
                context, h = text, x
                for block in blocks:
                    context, h = block(h, context, temb)
                x = x - 0.1 * h
    print(request_id, round(float(x.double().sum()), 4), flush=True)


with torch.no_grad():
    with oracle.phase("warmup"), diag.phase("warmup"):
        serve("w1", "sdpa", 2)
    serve("r2", "math", 3)
    serve("r3", "sdpa", 2)
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[compare.Program, dict[str, Any]]:
    """The program run once under `diag record` with the oracle on: torch's record and diag's
    eager-calls claim of the blocks' forward."""
    tmp = tmp_path_factory.mktemp("limit_blocks")
    (tmp / "program.py").write_text(PROGRAM)
    shutil.copy(REPO / "bench" / "fidelity_kit" / "oracle.py", tmp / "fidelity_oracle.py")
    (tmp / "oracle").mkdir()
    env = dict(os.environ, FIDELITY_ORACLE_DIR=str(tmp / "oracle"))
    proc = diag_record(
        tmp / "trace",
        PYTHON,
        str(tmp / "program.py"),
        options=("--profile", "none"),
        cwd=tmp,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    spec = ProgramSpec(
        "limit-blocks", 0, "sd3", "per-block", "False", "one", "api", "single", "aot_eager",
        ["global-switch", "recompile-limit"], [],
    )  # fmt: skip
    program = compare.Program(
        spec,
        tmp / "program.py",
        read_oracle(tmp / "oracle"),
        read_diag_requests(tmp / "trace"),
        [],
    )
    finding = next(
        f for f in run_analyzers(load_trace(tmp / "trace")) if f.analyzer == "recompile-limit"
    )
    claim = next(c for c in finding.claims if c["kind"] == "eager-calls")
    return program, claim


def _rows(program: compare.Program) -> list[dict[str, Any]]:
    [process] = program.processes
    return [
        r for r in process.calls if str(r["code"]).startswith("forward@") and r["phase"] == "live"
    ]


def test_torchs_record_of_the_shared_limit(recorded: tuple[compare.Program, Any]) -> None:
    program, _ = recorded
    rows = {(r["request"], r["step"]): r for r in _rows(program)}
    # The step of the hit: block 0 compiled the third entry, then block 1 ran eagerly.
    hit = rows["r2", 0]
    assert (hit["compiled_new"], hit["eager"], hit["compiled_after_eager"]) == (1, 1, 0)
    for step in (1, 2):
        assert rows["r2", step]["eager"] == 1 and rows["r2", step]["matched"] == {"0/2": 1}
    for step in (0, 1):
        assert rows["r3", step]["eager"] == 0 and rows["r3", step]["calls"] == 2


def test_diags_eager_calls_are_torchs(recorded: tuple[compare.Program, Any]) -> None:
    program, claim = recorded
    rows = _rows(program)
    eager = [(r["request"], r["step"]) for r in rows if r["eager"]]
    first = next(i for i, r in enumerate(rows) if r["eager"])
    compiled_after = rows[first]["compiled_after_eager"] + sum(
        r["calls"] - r["eager"] for r in rows[first + 1 :]
    )
    assert claim["extent"] == "checked"
    assert eager == [("r2", 0), ("r2", 1), ("r2", 2)]
    assert [(c["request"], c["step"]) for c in claim["calls"]] == eager
    assert claim["count"] == sum(r["eager"] for r in rows) == 3
    assert claim["compiled"] == compiled_after == 6


def test_the_harness_counts_from_the_hit_not_its_step(
    recorded: tuple[compare.Program, Any],
) -> None:
    program, claim = recorded
    verdict = checks.check_claim(program, claim)
    assert verdict.status == compare.CONFIRMED, verdict
    assert "compiled" in verdict.checked
    # Block 0's call in the step of the hit ran before it: counting it is one too many.
    wrong = checks.check_claim(program, dict(claim, compiled=claim["compiled"] + 1))
    assert wrong.status == compare.CONTRADICTED
    assert wrong.why == ["compiled: torch ran 6 call(s) compiled after it"]
    # An oracle record from before the per-step order was kept: the call that compiled the
    # third entry still ran before the hit (torch compiles nothing for the frame after it).
    older = copy.deepcopy(program)
    for row in older.processes[0].calls:
        del row["compiled_after_eager"]
    assert checks.check_claim(older, claim).status == compare.CONFIRMED
    assert checks.check_claim(older, dict(claim, compiled=7)).status == compare.CONTRADICTED
