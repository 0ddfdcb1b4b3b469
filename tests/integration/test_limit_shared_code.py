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

Why each compile happened, torch's own record (TORCH_LOGS=recompiles, one failure per entry,
newest first; the same texts on torch 2.11 in the fidelity sample), written down before the
cause tests below:

- 0/1, block 1's first call (warmup): `0/0: KeyError on self._modules['attn']._modules
  ['to_add_out']`. Block 0's entry reads a submodule block 1 does not have: no entry was
  compiled for block 1, so the cause is the new module.
- 0/2, block 0 at the new tier: `0/1: self._modules['attn'].context_pre_only == True` (block
  1's entry) and `0/0: G['__import___main__'].ATTN_CONFIG['impl'] == 'sdpa'` (block 0's own):
  the global.
- 0/3, block 1 at the new tier, the hit: `0/2: KeyError on ...['to_add_out']`, `0/1:
  G['__import___main__'].ATTN_CONFIG['impl'] == 'sdpa'`, `0/0: KeyError on ...['to_add_out']`.
  Entries 0/2 and 0/0 were compiled for block 0 and could never serve block 1; the cause is
  block 1's own entry's failure, the global. diag once called this undecided and named the
  guard `unknown` in the title.

A second program, SD3.5's three block structures (dual attention, plain, last) with
`recompile_limit = 2`, hits the limit at the last block's first call. Torch's record: `0/1: 0/0:
KeyError on self._modules['attn2']`; at the hit `0/1: KeyError on self._modules['attn']._modules
['to_add_out']` and `0/0:` the same. Every entry was compiled for another module: the cause is
the new module, and raising the limit (not resolving a value) is the fix.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from diag.analyzers import run_analyzers
from diag.evidence.causes import MODULE_ENTRY, NEW_MODULE, recompile_cause
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.run import RunData

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


STRUCTURES = """
import torch
import diag.api as diag
from diffusers.models.attention import JointTransformerBlock

torch.set_num_threads(1)
torch._dynamo.config.recompile_limit = 2
torch.manual_seed(0)
# SD3.5's layout: dual attention in the first blocks; the last block updates no text stream.
blocks = [
    JointTransformerBlock(dim=32, num_attention_heads=4, attention_head_dim=8,
                          context_pre_only=last, use_dual_attention=dual)
    for dual, last in ((True, False), (False, False), (False, True))
]
for block in blocks:
    block.eval()
    block.compile(backend="aot_eager", dynamic=False)
x, text, temb = torch.randn(1, 16, 32), torch.randn(1, 8, 32), torch.randn(1, 32)
with torch.no_grad(), diag.phase("warmup"), diag.request("w1", shape=[4, 4]):
    for i in range(2):
        with diag.step(i):
            context, h = text, x
            for block in blocks:
                context, h = block(h, context, temb)
print(round(float(h.double().sum()), 4))
"""

_TORCH_REASON = re.compile(r"\[(?P<cid>\d+/\d+)\] \[__recompiles\]\s+- (?P<reason>\d+/\d+: .*)$")


def torch_reasons(stderr: str) -> dict[str, list[str]]:
    """TORCH_LOGS=recompiles, per recompile: each entry's failure as torch printed it."""
    found: dict[str, list[str]] = {}
    for line in stderr.splitlines():
        match = _TORCH_REASON.search(line)
        if match is not None:
            found.setdefault(match.group("cid"), []).append(match.group("reason").strip())
    return found


def _record(tmp: Path, program: str, env: dict[str, str]) -> dict[str, list[str]]:
    """Run `program` under `diag record` with TORCH_LOGS=recompiles; torch's reasons."""
    (tmp / "program.py").write_text(program)
    proc = diag_record(
        tmp / "trace",
        PYTHON,
        str(tmp / "program.py"),
        options=("--profile", "none"),
        cwd=tmp,
        env=dict(env, TORCH_LOGS="recompiles"),
    )
    assert proc.returncode == 0, proc.stderr
    return torch_reasons(proc.stderr)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """The program run once under `diag record` with the oracle on, and torch's reasons."""
    tmp = tmp_path_factory.mktemp("limit_blocks")
    shutil.copy(REPO / "bench" / "fidelity_kit" / "oracle.py", tmp / "fidelity_oracle.py")
    (tmp / "oracle").mkdir()
    reasons = _record(tmp, PROGRAM, dict(os.environ, FIDELITY_ORACLE_DIR=str(tmp / "oracle")))
    return tmp, reasons


@pytest.fixture(scope="module")
def recorded(
    recording: tuple[Path, dict[str, list[str]]],
) -> tuple[compare.Program, dict[str, Any]]:
    """Torch's record (the oracle) and diag's eager-calls claim of the blocks' forward."""
    tmp, _ = recording
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


def _analyzed(tmp: Path) -> tuple[RunData, list[Finding]]:
    trace = load_trace(tmp / "trace")
    assert trace.compiled is not None
    return trace.compiled, run_analyzers(trace)


def _cause(run: RunData, compile_id: str) -> Any:
    [item] = [c for c in run.compiles if c.compile_id == compile_id]
    return recompile_cause(run, item)


def test_the_cause_at_the_hit_is_block_1s_own_entry(
    recording: tuple[Path, dict[str, list[str]]],
) -> None:
    tmp, reasons = recording
    # Torch's record at the hit (0/3): two entries fail on a submodule block 1 lacks, block 1's
    # own entry on the global.
    at_hit = reasons["0/3"]
    assert [r.split(":", 1)[0] for r in at_hit] == ["0/2", "0/1", "0/0"]
    assert all("KeyError on self._modules['attn']._modules['to_add_out']" in r for r in at_hit[::2])
    assert "ATTN_CONFIG['impl'] == 'sdpa'" in at_hit[1]
    run, findings = _analyzed(tmp)
    cause = _cause(run, "0/3")
    assert (cause.entry, cause.guard.source, cause.decided) == (
        "0/1",
        "__main__.ATTN_CONFIG['impl']",
        True,
    )
    assert cause.why == MODULE_ENTRY
    assert [f.entry for f in cause.failures if f.other_module] == ["0/2", "0/0"]
    [limit] = [f for f in findings if f.analyzer == "recompile-limit"]
    assert limit.title.endswith(
        "(failing guards on `__main__.ATTN_CONFIG['impl']`); the program lowered "
        "torch._dynamo.config.recompile_limit to 3 (torch's default: 8)"
    ), limit.title
    assert "unknown" not in limit.title and "undecided" not in " ".join(limit.evidence)
    assert any(
        "(entry 0/1, the only one compiled for this call's module); the other entries were "
        "compiled for other modules: 0/2 compiled for a module whose self._modules['attn'] has "
        "the submodule 'to_add_out' (the call's has not)" in line
        for line in limit.evidence
    ), limit.evidence
    assert "`__main__.ATTN_CONFIG['impl']`" in limit.fix
    assert cause.claim() == {
        "entry": "0/1",
        "guard_kind": "python-value",
        # The vocabulary's entry for a global read in compiled code; its fix (a tensor argument
        # instead of the global) is verified by the guard-kind harness's `global` family.
        "guard_check": "global-value",
        "fix_verified": True,
        "source": "__main__.ATTN_CONFIG['impl']",
        "decided": True,
        "why": MODULE_ENTRY,
    }


def test_the_cause_at_the_hit_is_torchs_guard_failures(
    recording: tuple[Path, dict[str, list[str]]],
    recorded: tuple[compare.Program, Any],
) -> None:
    """The oracle read torch's `guard_failures` at the hit, in the program and with no diag:
    the entry diag names failed on the global, the entries it rules out on block 0's
    submodule."""
    tmp, _ = recording
    program, _ = recorded
    [process] = program.processes
    [hit] = process.limits
    failures = {str(r).split(":", 1)[0]: str(r) for r in hit["reasons"]}
    assert sorted(failures) == ["0/0", "0/1", "0/2"]
    run, _ = _analyzed(tmp)
    cause = _cause(run, "0/3")
    assert "ATTN_CONFIG['impl'] == 'sdpa'" in failures[cause.entry]
    for other in cause.others:
        assert other.other_module
        assert "KeyError on self._modules['attn']._modules['to_add_out']" in failures[other.entry]


def test_block_1s_first_compile_is_a_new_module(
    recording: tuple[Path, dict[str, list[str]]],
) -> None:
    tmp, reasons = recording
    assert reasons["0/1"] == ["0/0: KeyError on self._modules['attn']._modules['to_add_out']"]
    run, findings = _analyzed(tmp)
    cause = _cause(run, "0/1")
    assert (cause.why, cause.entry, cause.decided) == (NEW_MODULE, "0/0", True)
    # ...and it is no Python-state churn: guard-churn reports only the global.
    churn = [f for f in findings if f.analyzer == "guard-churn"]
    assert [f.data["source"] for f in churn] == ["__main__.ATTN_CONFIG['impl']"]
    # 0/2: block 1's entry was compiled for other parameter sizes; block 0's fails on the global.
    assert [r.split(":", 1)[0] for r in reasons["0/2"]] == ["0/1", "0/0"]
    assert _cause(run, "0/2").guard.source == "__main__.ATTN_CONFIG['impl']"


def test_a_hit_on_a_new_module_says_so_and_raises_the_limit(
    tmp_path: Path,
) -> None:
    reasons = _record(tmp_path, STRUCTURES, dict(os.environ))
    # Torch's record: every entry fails on a submodule the called block does not have.
    assert reasons["0/1"] == ["0/0: KeyError on self._modules['attn2']"]
    assert reasons["0/2"] == [
        "0/1: KeyError on self._modules['attn']._modules['to_add_out']",
        "0/0: KeyError on self._modules['attn']._modules['to_add_out']",
    ]
    run, findings = _analyzed(tmp_path)
    cause = _cause(run, "0/2")
    assert (cause.why, cause.decided) == (NEW_MODULE, True)
    assert all(f.other_module for f in cause.failures)
    [limit] = [f for f in findings if f.analyzer == "recompile-limit"]
    assert limit.title.endswith(
        "(a new module, no cache entry was compiled for it: KeyError on "
        "self._modules['attn']._modules['to_add_out']); the program lowered "
        "torch._dynamo.config.recompile_limit to 2 (torch's default: 8)"
    ), limit.title
    assert "undecided" not in " ".join(limit.evidence) and "unknown" not in limit.title
    assert limit.fix.startswith(
        "The program lowered torch._dynamo.config.recompile_limit to 2 (torch's default: 8): the "
        "frame stops compiling after 2 entries. Every cache entry was compiled for another module"
    )
    assert "Raise torch._dynamo.config.recompile_limit" in limit.fix
    assert not [f for f in findings if f.analyzer == "guard-churn"]
