"""warmup-plan on real LightX2V recordings, held against torch's and LightX2V's own logs (issue 38).

tests/data/lightx2v/*.tar.gz: what `bench/lightx2v_real.py --archive` kept of `diag record` runs of
ModelTC/LightX2V f8aee98, unmodified, on a tiny random Wan2.1 T2V on a 2-core CPU (torch 2.13,
inductor, TORCH_LOGS=recompiles; tests/data/lightx2v/README.md): the manifest, the event files
and `lightx2v.log`, LightX2V's warmup and step lines with torch's recompile log.

- `server`: LightX2V's own server (`python -m lightx2v.server`, driven by bench/lightx2v_serve.py)
  warmed at 64x64 and 96x64 (`_WARMUP_RESOLUTIONS`), then served 64x64, 96x64 and twice 64x96, a
  width warmup never served. Torch recompiled block_runner in warmup for the height and live,
  during the 64x96 request, on the rotary table's stride guard.
- `server-replay-8x12-12x8`: `diag warmup-plan server --verify` with a plan whose second request
  only swapped height and width (64x96, then 96x64): the block sees the flattened sequence, 48
  tokens both times, so torch compiled once in warmup and recompiled live for 64x64. Why the
  generalising request must change the token count too.
- `server-replay`: the same with the plan diag now gives, 64x96 then 128x64: torch recompiled in
  warmup for the second request and nothing live.
- `infer`, `infer-replay`: `python -m lightx2v.infer --warmup --target_shape 64 96` with warmup
  64x64 and 96x64, and its replay with the plan (one request, 64x96).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.trace.load import load_trace
from diag.trace.run import RunData, Trace
from diag.warmup.forms import render
from diag.warmup.plan import GENERALISE, SPECIALISE, plan_warmup
from tests.archives import unpack

DATA = Path(__file__).resolve().parent.parent / "data" / "lightx2v"
NAMES = ("server", "server-replay-8x12-12x8", "server-replay", "infer", "infer-replay")
RECOMPILE = re.compile(r"\[(\d+/\d+)\] \[__recompiles\] Recompiling function (\w+)")
GUARD = re.compile(r"\[(\d+/\d+)\] \[__recompiles\]\s+- \d+/\d+: (.*)")
WAN = "lightx2v.models.runners.wan.wan_runner.WanRunner"
ROPE = "self.cos_sin._base.stride()[0] == 64*self.cos_sin._base.size()[1]"


def _tokens(expected: int, actual: int) -> str:
    """block_runner's first argument is the flattened sequence: its dim 0 is the token count."""
    return f"tensor 'args[0]' size mismatch at index 0. expected {expected}, actual {actual}"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lightx2v")
    for name in NAMES:
        unpack(DATA / f"{name}.tar.gz", folder)
    return folder


def _trace(folder: Path, name: str) -> Trace:
    return load_trace(folder / name)


def _run(trace: Trace) -> RunData:
    run = trace.compiled
    assert run is not None
    return run


def _log(folder: Path, name: str) -> list[str]:
    return (folder / name / "lightx2v.log").read_text().splitlines()


def _torch_record(lines: list[str]) -> list[tuple[str, str, str]]:
    """torch's recompiles in log order: (compile id, what the program had said last: the warmup
    resolution or the request served before it, its first guard failure)."""
    said, found = "start", []
    for line in lines:
        if "Warmup: " in line:
            said = "warmup " + line.rsplit("Warmup: ", 1)[1].strip()
        elif "Warmup cost" in line:
            said = "after warmup"
        elif line.startswith("lightx2v_serve: "):
            said = "after " + line.split()[1]
        elif (match := RECOMPILE.search(line)) is not None:
            found.append([match.group(1), said, ""])
        elif (match := GUARD.search(line)) is not None and found and not found[-1][2]:
            found[-1][2] = match.group(2).split("  #")[0]
    return [(a, b, c) for a, b, c in found]


def test_server_torch_record_and_the_plan(unpacked: Path) -> None:
    # Torch's record first: a recompile in warmup for the height, one live for the width.
    assert _torch_record(_log(unpacked, "server")) == [
        ("0/1", "warmup 96x64", _tokens(32, 48)),
        ("0/2", "after 96x64", ROPE),
    ]
    trace = _trace(unpacked, "server")
    run = _run(trace)
    shapes = {r.request_id: r.shape for r in run.requests}
    assert [(c.compile_id, c.phase, shapes[c.request_id or ""], c.step) for c in run.compiles] == [
        ("0/0", "warmup", [16, 2, 8, 8], 0),
        ("0/1", "warmup", [16, 2, 12, 8], 0),
        ("0/2", "live", [16, 2, 8, 12], 0),  # the first 64x96 request
    ]
    plan = plan_warmup([trace])
    assert [(r.shape, r.role) for r in plan.requests] == [
        ([16, 2, 8, 12], SPECIALISE),
        ([16, 2, 16, 8], GENERALISE),  # height and width change, and the token count (64)
    ]
    (live,) = plan.live_compiles
    assert live.compile_id == "0/2" and live.covered_by == 0 and live.cannot is None
    # The form for the recorded runner: its own entry, its VAE's stride.
    assert plan.runner is not None and plan.runner["warmup_owner"] == WAN
    assert render(plan, "lightx2v").splitlines() == [
        "_WARMUP_RESOLUTIONS = ((64, 96), (128, 64))  # latent height x 8, width x 8 (the "
        "runner's vae_stride)",
        f"# in {WAN} (model_cls wan2.1, task t2v); recorded with _WARMUP_RESOLUTIONS = "
        "((64, 64), (96, 64))",
    ]


def test_swapped_height_and_width_keep_the_token_count(unpacked: Path) -> None:
    """Torch's record of a replay warmed at 64x96 then 96x64: no recompile in warmup (48 tokens
    both times), one live for 64x64 (32 tokens)."""
    assert _torch_record(_log(unpacked, "server-replay-8x12-12x8")) == [
        ("0/1", "after warmup", _tokens(48, 32)),
    ]
    run = _run(_trace(unpacked, "server-replay-8x12-12x8"))
    assert [(c.compile_id, c.phase, c.request_id) for c in run.compiles] == [
        ("0/0", "warmup", "w1"),
        ("0/1", "live", "r3"),
    ]
    warm = [r.shape for r in run.requests if r.phase == "warmup"]
    assert warm == [[16, 2, 8, 12], [16, 2, 12, 8]]
    assert 8 * 12 == 12 * 8  # the flattened sequence the block sees did not change
    (event,) = run.of("lightx2v_runner")
    assert event.data["applied"] is True


def test_server_replay_with_the_plan_compiles_nothing_live(unpacked: Path) -> None:
    log = _log(unpacked, "server-replay")
    assert _torch_record(log) == [
        ("0/1", "warmup 128x64", _tokens(48, 64)),
    ]
    served = [line.split()[1] for line in log if line.startswith("lightx2v_serve: ")]
    assert served == ["64x64", "96x64", "64x96", "64x96"]  # the recorded live requests
    run = _run(_trace(unpacked, "server-replay"))
    assert [(c.compile_id, c.phase) for c in run.compiles] == [("0/0", "warmup"), ("0/1", "warmup")]
    (event,) = run.of("lightx2v_runner")
    assert event.data["applied"] is True
    assert event.data["warmup_resolutions"] == [[64, 96], [128, 64]]
    assert [r.shape for r in run.requests if r.phase == "warmup"] == [
        [16, 2, 8, 12],
        [16, 2, 16, 8],
    ]


def test_infer_torch_record_and_the_plan(unpacked: Path) -> None:
    assert _torch_record(_log(unpacked, "infer")) == [
        ("0/1", "warmup 96x64", _tokens(32, 48)),
        ("0/2", "after warmup", ROPE),
    ]
    trace = _trace(unpacked, "infer")
    run = _run(trace)
    assert [(c.compile_id, c.phase, c.step) for c in run.compiles] == [
        ("0/0", "warmup", 0),
        ("0/1", "warmup", 0),
        ("0/2", "live", 0),
    ]
    plan = plan_warmup([trace])
    # One live resolution: warming it is enough.
    assert [(r.shape, r.role) for r in plan.requests] == [([16, 2, 8, 12], SPECIALISE)]
    assert render(plan, "lightx2v").startswith("_WARMUP_RESOLUTIONS = ((64, 96),)  # latent")
    assert plan.served == [{"shape": [16, 2, 8, 12], "steps": 3}]


def test_infer_replay_warms_through_the_runner_entry(unpacked: Path) -> None:
    log = _log(unpacked, "infer-replay")
    assert _torch_record(log) == []  # one compile, in warmup: no recompile at all
    assert [line.rsplit("Warmup: ", 1)[1] for line in log if "Warmup: " in line] == ["64x96"]
    run = _run(_trace(unpacked, "infer-replay"))
    assert [(c.compile_id, c.phase) for c in run.compiles] == [("0/0", "warmup")]
    (event,) = run.of("lightx2v_runner")
    assert (event.data["applied"], event.data["warmup_resolutions"]) == (True, [[64, 96]])
    assert [(r.phase, r.shape) for r in run.requests] == [
        ("warmup", [16, 2, 8, 12]),
        ("live", [16, 2, 8, 12]),
    ]
