"""Causes read off evidence, checked against torch's own record, on programs built the way users
write them (issue 23).

1. A hand-written loop over diffusers' Wan blocks (the tiny config of diffusers' own tests) whose
   attention processor reads a module-level dict set per request from a quality tier; block 0
   gets the patch embedding's transposed view, block 1 a contiguous tensor, so each layer holds
   its own cache entry. A live request at the other tier recompiles both layers. Torch's record
   (TORCH_LOGS=recompiles, written down before this test): for each live recompile the entry
   compiled for the call's layout failed on `G['__import___main__'].ATTN_CONFIG['impl'] ==
   'sdpa'`, the other entries on a stride. So the cause is the global, not the stride.
2. A compiled CFG helper taking the sigmas as Python floats with `dynamic=False`, warmup filling
   the 8 entries of the recompile limit. Torch's record (each call checked against every entry's
   guard manager before it runs, in the program itself, with no diag): after the hit at the live
   request's step 0, steps 0-10 ran eagerly, step 11 and the whole next request ran compiled.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from diag.analyzers import run_analyzers
from diag.trace.load import load_trace
from diag.trace.run import Trace

from .support import PYTHON, diag_record

pytest.importorskip("diffusers")

TIER = """
import sys
import torch
import diag.api as diag
from diffusers import WanTransformer3DModel
from diffusers.models.transformers.transformer_wan import WanAttnProcessor

ATTN_CONFIG = {"impl": "sdpa"}


class TierProcessor(WanAttnProcessor):
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 rotary_emb=None):
        out = super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask,
                               rotary_emb)
        if ATTN_CONFIG["impl"] == "sdpa":
            return out
        return out * 0.5


torch.manual_seed(0)
model = WanTransformer3DModel(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
    out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
).eval()
model.set_attn_processor(TierProcessor())
for block in model.blocks:
    block.compile(backend="aot_eager", dynamic=None)
warm_tiers = sys.argv[1].split(",")
live_tiers = sys.argv[2].split(",")
text = torch.randn(1, 12, 16)


def denoise(x, t):
    rotary = model.rope(x)
    h = model.patch_embedding(x).flatten(2).transpose(1, 2)  # block 0: a transposed view
    temb, proj, enc, _ = model.condition_embedder(torch.tensor([t]), text, None)
    proj = proj.unflatten(1, (6, -1))
    for block in model.blocks:
        h = block(h, enc, proj, rotary).contiguous()  # block 1: contiguous
    return x - 0.01 * h.mean()


def serve(tier, steps):
    ATTN_CONFIG["impl"] = tier
    x = torch.randn(1, 4, 2, 16, 16)
    with torch.no_grad():
        for i in range(steps):
            with diag.step():
                x = denoise(x, 999 - i)
    print(tier, round(float(x.double().sum()), 4), flush=True)


with diag.phase("warmup"):
    for tier in warm_tiers:
        with diag.request(shape=[1, 4, 2, 16, 16]):
            serve(tier, 2)
for tier in live_tiers:
    with diag.request(shape=[1, 4, 2, 16, 16]):
        serve(tier, 3)
"""

LIMIT = """
import json, sys
import torch
import diag.api as diag
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

ORACLE = "--oracle" in sys.argv
torch.manual_seed(0)


@torch.compile(backend="aot_eager", dynamic=False)
def cfg_step(noise, latents, sigma, sigma_next, scale):
    cond, uncond = noise.chunk(2)
    guided = uncond + scale * (cond - uncond)
    return latents + (sigma_next - sigma) * guided


record = []


def step(noise, latents, sigma, sigma_next):
    if ORACLE:  # torch's own record: which entry's guards accept this call, before it runs
        fn = cfg_step._torchdynamo_orig_callable
        f_locals = {"noise": noise, "latents": latents, "sigma": sigma,
                    "sigma_next": sigma_next, "scale": 4.5}
        entries = _debug_get_cache_entry_list(fn.__code__)
        record.append(next((str(e.compile_id) for e in entries
                            if e.guard_manager.check(f_locals)), None) if entries else "none")
    return cfg_step(noise, latents, sigma, sigma_next, 4.5)


def serve(sigmas):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    for i in range(len(sigmas) - 1):
        with diag.step():
            noise = torch.cat([latents * 0.9, latents * 1.1])
            latents = step(noise, latents, sigmas[i], sigmas[i + 1])
    print(len(sigmas) - 1, round(float(latents.double().sum()), 4), flush=True)


warm = [1 - i / 8 for i in range(9)]
live = [1 - i * (0.875 / 11) for i in range(12)] + [0.0]
live[11] = 0.125
with diag.phase("warmup"):
    with diag.request(shape=[1, 4, 8, 8]):
        serve(warm)
for sigmas in (live, warm):
    with diag.request(shape=[1, 4, 8, 8]):
        serve(sigmas)
if ORACLE:
    print("ORACLE", json.dumps(record[8:]))
"""


def _record(tmp: Path, name: str, source: str, *args: str) -> Trace:
    script = tmp / f"{name}.py"
    script.write_text(source)
    proc = diag_record(tmp / name, PYTHON, str(script), *args, options=("--profile", "none"))
    assert proc.returncode == 0, proc.stderr
    return load_trace(tmp / name)


@pytest.fixture(scope="module")
def tier_one_warm(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return _record(tmp_path_factory.mktemp("tier"), "tier", TIER, "sdpa", "sdpa,math")


def test_recompile_cause_is_the_entry_that_fits_the_call(tier_one_warm: Trace) -> None:
    findings = run_analyzers(tier_one_warm)
    live = [f for f in findings if f.analyzer == "live-compile" and f.severity == "error"]
    assert len(live) == 1, [f.title for f in findings]
    finding = live[0]
    assert "ATTN_CONFIG['impl'] == 'sdpa'" in finding.title
    assert "stride" not in finding.title
    causes = [c["cause"] for c in finding.claims if c["kind"] == "recompile"]
    assert len(causes) == 2
    for cause in causes:
        assert cause["source"] == "__main__.ATTN_CONFIG['impl']"
    # Layer 1's call: its entry's tensors match the call's exactly (decided). Layer 0's: the
    # recompile left two strides dynamic, so the match is the likeliest, not proven.
    assert {(c["decided"], c["why"]) for c in causes} == {
        (True, "tensor-compatible"),
        (False, "undecided"),
    }
    text = "\n".join(finding.evidence)
    assert "the other entries were compiled for other tensors" in text
    assert "mark_dynamic" not in finding.fix
    # Warmup served the live shape: covered, no size verdict.
    coverage = next(f for f in findings if f.id == "live-compile:warmup-coverage")
    assert coverage.title.startswith("Warmup covered every live shape")
    # The global's own finding: a module-level variable, resolved outside the graph.
    churn = next(f for f in findings if f.analyzer == "guard-churn")
    assert churn.data["source"] == "__main__.ATTN_CONFIG['impl']"
    assert "module-level variable" in churn.fix and "allow_unspec_int" not in churn.fix
    assert not churn.data["per_call"]
    # One stride recompile (layer 1's first call, in warmup) is no dimension that never
    # generalised.
    assert not [f for f in findings if f.analyzer == "recompiles"]


def test_both_tiers_warmed_is_quiet(tmp_path: Path) -> None:
    trace = _record(tmp_path, "tier2", TIER, "sdpa,math", "sdpa,math")
    loud = [f for f in run_analyzers(trace) if f.severity in ("error", "warning")]
    assert loud == [], [f.title for f in loud]


def _oracle(tmp: Path) -> list[Any]:
    script = tmp / "limit_oracle.py"
    script.write_text(LIMIT)
    proc = subprocess.run(
        [PYTHON, str(script), "--oracle"], capture_output=True, text=True, timeout=240, check=True
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ORACLE "))
    found: list[Any] = json.loads(line[len("ORACLE ") :])
    return found


def test_recompile_limit_eager_calls_match_torchs_record(tmp_path: Path) -> None:
    served = _oracle(tmp_path)  # after warmup's 8 calls: the entry each call ran, or None
    # Torch's record: r's steps 0-10 ran no entry (eager), step 11 and the next request did.
    assert served[:11] == [None] * 11 and all(s is not None for s in served[11:])
    trace = _record(tmp_path, "limit", LIMIT)
    finding = next(f for f in run_analyzers(trace) if f.analyzer == "recompile-limit")
    claim = next(c for c in finding.claims if c["kind"] == "eager-calls")
    assert claim["extent"] == "checked"
    assert claim["count"] == served.count(None)
    assert claim["compiled"] == len(served) - served.count(None)
    eager_steps = sorted(c["step"] for c in claim["calls"])
    assert eager_steps == list(range(11))
    assert "from then on" not in finding.title
    assert "dynamic=False" in finding.fix


EULER = """
import torch
import diag.api as diag

torch._dynamo.config.recompile_limit = 64


@torch.compile(backend="aot_eager", dynamic=False)
def euler_step(latents, noise, sigma, sigma_next):
    return latents + (sigma_next - sigma) * noise


def serve(width, steps):
    latents = torch.randn(1, 4, 16, width)
    sigmas = [1.0 - i / steps for i in range(steps + 1)]
    with diag.request(shape=[16, width]):
        for i in range(steps):
            with diag.step():
                latents = euler_step(latents, torch.randn_like(latents), sigmas[i], sigmas[i + 1])


with diag.phase("warmup"):
    serve(16, 3)
    serve(24, 3)
serve(16, 4)
"""


def test_a_new_sigma_is_a_new_value_not_a_new_tensor(tmp_path: Path) -> None:
    """A `dynamic=False` Euler step over Python-float sigmas, warmed at two widths with 3 steps,
    then a live 4-step request at the first width. Torch's record (guard_failures, written down
    first): at live steps 1 and 2 every entry fails, those of the other width on `noise`'s size
    (its tensor guard comes first), those of this width on `sigma`; no entry had the call's
    sigma. The cause is the value the call brought, never the other width's tensor failure."""
    trace = _record(tmp_path, "euler", EULER)
    findings = run_analyzers(trace)
    live = next(f for f in findings if f.analyzer == "live-compile" and f.severity == "error")
    causes = {c["step"]: c["cause"] for c in live.claims if c["kind"] == "recompile"}
    assert sorted(causes) == [0, 1, 2, 3]
    for cause in causes.values():
        assert cause["guard_kind"] == "python-value", causes
        assert cause["source"] in ("sigma", "sigma_next"), causes
    assert causes[1]["why"] == causes[2]["why"] == "new-value"
    text = "\n".join(live.evidence)
    assert "no entry was compiled for this value" in text
    assert "could not serve it" in text  # value mismatches are not called other tensors
