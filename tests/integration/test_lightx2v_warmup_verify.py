"""`diag warmup-plan --verify` on the real LightX2V (unmodified), through its own warmup entry:
`python -m lightx2v.infer` and its server (driven by bench/lightx2v_serve.py), a tiny random
Wan2.1 on CPU, warmup 64x64 and 96x64 (`_WARMUP_RESOLUTIONS`, set by bench/lightx2v_cpu), a live
width warmup never served. Torch's record first (TORCH_LOGS=recompiles, in the program's own
log): the live request recompiles block_runner. Then the plan, and the replay with it: diag's
adapter puts the plan in the runner's `_WARMUP_RESOLUTIONS`, LightX2V warms those resolutions
(its own `Warmup: HxW` lines) and nothing compiles live.

Each LightX2V process costs one to four minutes on two CPU cores. Needs LightX2V's Python and
checkout (tests/integration/lightx2v_server.py says how; that Python must import this diag)
and skips without them. tests/integration/test_lightx2v_warmup_plan.py checks the same on
committed recordings without LightX2V.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from diag.trace.load import load_trace

from .lightx2v_server import CONFIG, REPO, environment, lightx2v, prepare

RECOMPILING = "[__recompiles] Recompiling function block_runner"


def _run(command: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=1800, check=False
    )


def _env(checkout: Path) -> dict[str, str]:
    return {**environment(checkout), "TORCH_LOGS": "recompiles", "PROFILING_DEBUG_LEVEL": "1"}


def _warmed(log: str) -> list[str]:
    return [
        line.rsplit("Warmup: ", 1)[1].strip() for line in log.splitlines() if "Warmup: " in line
    ]


def test_infer_replay_through_warmup_resolutions(tmp_path: Path) -> None:
    python, checkout = lightx2v()
    model, config = prepare(tmp_path, python)
    config.write_text(json.dumps({**CONFIG, "target_height": 64, "target_width": 96}))
    program = [
        python, "-m", "lightx2v.infer", "--model_cls", "wan2.1", "--task", "t2v",
        "--model_path", str(model), "--config_json", str(config), "--prompt", "cat",
        "--warmup", "--target_shape", "64", "96", "--save_result_path", str(tmp_path / "o.mp4"),
    ]  # fmt: skip
    env = _env(checkout)
    recorded = _run(
        [sys.executable, "-m", "diag", "record", "-o", "t", "--profile", "none", "--", *program],
        tmp_path,
        env,
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    # Torch's record: the live request recompiled (after LightX2V's warmup of 64x64, 96x64).
    assert _warmed(recorded.stderr) == ["64x64", "96x64"]
    assert recorded.stderr.count(RECOMPILING) == 2
    run = load_trace(tmp_path / "t").compiled
    assert run is not None and [c.phase for c in run.compiles] == ["warmup", "warmup", "live"]
    replayed = _run(
        [sys.executable, "-m", "diag", "warmup-plan", "t", "--as", "lightx2v", "--verify", "--",
         *program],
        tmp_path,
        env,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    assert "_WARMUP_RESOLUTIONS = ((64, 96),)" in replayed.stdout
    assert "live compiles: 0 (0 expected)" in replayed.stdout
    assert "warmup: " in replayed.stdout and "s of start-up" in replayed.stdout
    assert _warmed(replayed.stderr) == ["64x96"]  # LightX2V's own warmup took the plan
    assert RECOMPILING not in replayed.stderr


def test_server_replay_through_warmup_resolutions(tmp_path: Path) -> None:
    python, checkout = lightx2v()
    model, config = prepare(tmp_path, python)
    program = [
        python, str(REPO / "bench" / "lightx2v_serve.py"), "--requests", "64x64,96x64,64x96,64x96",
        "--", "--model_cls", "wan2.1", "--task", "t2v", "--model_path", str(model),
        "--config_json", str(config), "--warmup",
    ]  # fmt: skip
    env = _env(checkout)
    recorded = _run(
        [sys.executable, "-m", "diag", "record", "-o", "t", "--profile", "none", "--", *program],
        tmp_path,
        env,
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert _warmed(recorded.stderr) == ["64x64", "96x64"]
    assert recorded.stderr.count(RECOMPILING) == 2  # one in warmup, one live (64x96)
    replayed = _run(
        [sys.executable, "-m", "diag", "warmup-plan", "t", "--as", "lightx2v", "--verify", "--",
         *program],
        tmp_path,
        env,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    assert "_WARMUP_RESOLUTIONS = ((64, 96), (128, 64))" in replayed.stdout
    assert "live compiles: 0 (0 expected)" in replayed.stdout
    assert _warmed(replayed.stderr) == ["64x96", "128x64"]
    assert replayed.stderr.count(RECOMPILING) == 1  # the second warmup resolution's
    served = [line for line in replayed.stdout.splitlines() if line.startswith("lightx2v_serve:")]
    assert served == [
        f"lightx2v_serve: {s} completed" for s in ("64x64", "96x64", "64x96", "64x96")
    ]
