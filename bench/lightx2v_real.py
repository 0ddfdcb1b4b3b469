"""Record the real LightX2V (ModelTC/LightX2V, unmodified) on a CPU with `diag record`.

Each case runs LightX2V's own entry point, `python -m lightx2v.infer`, on a tiny random
Wan2.1 T2V that this script writes (its config.json plus a random safetensors file; LightX2V's
`dummy_model` mode then draws the weights from that file's shapes and builds the VAE at random),
with warmup at 64x64 and 96x64 and one request at `--target_shape 64 96`. The CPU start-up
(a registered `cpu` platform, torch.cpu stand-ins, a stand-in umt5-xxl text encoder, the
warmup resolutions) is LightX2V's own out-of-tree plugin mechanism: bench/lightx2v_cpu.

Needs a Python with LightX2V's requirements (minus its torch/torchvision/torchaudio pins) and
diag installed, e.g.

    python3 -m venv /tmp/lx/venv && /tmp/lx/venv/bin/pip install torch==2.13.0
    /tmp/lx/venv/bin/pip install -e . -r <(grep -v '^torch' LightX2V/requirements.txt) \
        triton av soundfile
    /tmp/lx/venv/bin/python bench/lightx2v_real.py --lightx2v LightX2V --out /tmp/lx/runs

`--sign-off` runs the compile on/off sign-off instead, as one `diag bench` command (printed
before it runs): LightX2V with `use_compile` false (the reference) and true, warmup on in both
(64x64 and 96x96, so the request at 64x96 compiles nothing live), 10 steps per request,
`--trials` trials each, interleaved; the clock is LightX2V's own `infer_main` log
(PROFILING_DEBUG_LEVEL=1). The tables print at the end; the bench directory is OUT/sign-off.

`--save-test-data` copies each recording's manifest and event files (no Kineto traces) and
LightX2V's own step log lines to tests/data/lightx2v/<case>/, which
tests/integration/test_lightx2v_recordings.py analyzes in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STARTUP = HERE / "lightx2v_cpu"
TEST_DATA = REPO / "tests" / "data" / "lightx2v"

# A Wan2.1 of Wan's own layout (original checkpoint names), at a size two cores run in seconds.
MODEL_CONFIG = {
    "_class_name": "WanModel",
    "model_type": "t2v",
    "dim": 128,
    "ffn_dim": 256,
    "freq_dim": 256,
    "in_dim": 16,
    "out_dim": 16,
    "num_heads": 4,
    "num_layers": 2,
    "text_len": 16,
    "text_dim": 64,
    "eps": 1e-06,
}

BASE_CONFIG = {
    "infer_steps": 3,
    "target_video_length": 5,
    "text_len": 16,
    "target_height": 64,
    "target_width": 96,
    "self_attn_1_type": "torch_sdpa",
    "cross_attn_1_type": "torch_sdpa",
    "cross_attn_2_type": "torch_sdpa",
    "rms_norm_type": "torch",
    "modulate_type": "torch",
    "rope_type": "torch_real_rope",
    "sample_guide_scale": 5,
    "sample_shift": 5,
    "enable_cfg": False,
    "cpu_offload": False,
    "use_compile": True,
    "dummy_model": True,
    "vae_dtype": "fp32",
    "fps": 8,
}

# On a CPU every case offloads: LightX2V treats weights that load on the host as offload staging
# and moves them to the device only in `to_cuda` (model offload: at step 0 of each request).
CASES: dict[str, dict[str, object]] = {
    "model-offload": {"cpu_offload": True, "offload_granularity": "model"},
    "block-offload": {"cpu_offload": True, "offload_granularity": "block"},
    "phase-offload": {"cpu_offload": True, "offload_granularity": "phase"},
}
WARMUP = "64x64,96x64"
# The fix diag prints for the cases above ("a second value of width in warmup"), applied: warmup
# varies the width too, and the same request compiles nothing live.
FIXED = {"warm-width": ("model-offload", "64x64,96x96")}
TARGET_SHAPE = ("64", "96")


def write_model(folder: Path) -> None:
    """config.json and a random safetensors file with Wan2.1's tensor names and shapes."""
    import torch
    from safetensors.torch import save_file

    c = MODEL_CONFIG
    dim, ffn, freq = int(c["dim"]), int(c["ffn_dim"]), int(c["freq_dim"])
    in_dim, out_dim, text_dim = int(c["in_dim"]), int(c["out_dim"]), int(c["text_dim"])
    shapes: dict[str, list[int]] = {
        "patch_embedding.weight": [dim, in_dim, 1, 2, 2],
        "patch_embedding.bias": [dim],
        "text_embedding.0.weight": [dim, text_dim],
        "text_embedding.0.bias": [dim],
        "text_embedding.2.weight": [dim, dim],
        "text_embedding.2.bias": [dim],
        "time_embedding.0.weight": [dim, freq],
        "time_embedding.0.bias": [dim],
        "time_embedding.2.weight": [dim, dim],
        "time_embedding.2.bias": [dim],
        "time_projection.1.weight": [6 * dim, dim],
        "time_projection.1.bias": [6 * dim],
        "head.head.weight": [out_dim * 4, dim],
        "head.head.bias": [out_dim * 4],
        "head.modulation": [1, 2, dim],
    }
    for i in range(int(c["num_layers"])):
        p = f"blocks.{i}"
        shapes[f"{p}.modulation"] = [1, 6, dim]
        for attn in ("self_attn", "cross_attn"):
            for proj in ("q", "k", "v", "o"):
                shapes[f"{p}.{attn}.{proj}.weight"] = [dim, dim]
                shapes[f"{p}.{attn}.{proj}.bias"] = [dim]
            shapes[f"{p}.{attn}.norm_q.weight"] = [dim]
            shapes[f"{p}.{attn}.norm_k.weight"] = [dim]
        shapes[f"{p}.norm3.weight"] = [dim]
        shapes[f"{p}.norm3.bias"] = [dim]
        shapes[f"{p}.ffn.0.weight"] = [ffn, dim]
        shapes[f"{p}.ffn.0.bias"] = [ffn]
        shapes[f"{p}.ffn.2.weight"] = [dim, ffn]
        shapes[f"{p}.ffn.2.bias"] = [dim]
    generator = torch.Generator().manual_seed(0)
    tensors = {
        name: (torch.randn(shape, generator=generator) * 0.02).to(torch.bfloat16)
        for name, shape in shapes.items()
    }
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "diffusion_pytorch_model.safetensors"))
    (folder / "config.json").write_text(json.dumps(MODEL_CONFIG, indent=2))
    # dummy_model builds the VAE at random, but LightX2V still resolves its file name first.
    (folder / "Wan2.1_VAE.pth").touch()


def run_case(
    name: str, lightx2v: Path, model: Path, out: Path, diag_options: list[str]
) -> tuple[Path, subprocess.CompletedProcess[str], float]:
    base, warmup = FIXED.get(name, (name, WARMUP))
    config = {**BASE_CONFIG, **CASES[base]}
    config_json = out / f"{name}.json"
    config_json.write_text(json.dumps(config, indent=2))
    trace = out / name
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(lightx2v), str(STARTUP)]),
        "PLATFORM": "cpu",
        "LIGHTX2V_CPU_WARMUP": warmup,
        "PROFILING_DEBUG_LEVEL": "1",
    }
    cmd = [
        sys.executable, "-m", "diag", "record", "-o", str(trace), "--force", *diag_options,
        "--", sys.executable, "-m", "lightx2v.infer",
        "--model_cls", "wan2.1", "--task", "t2v",
        "--model_path", str(model), "--config_json", str(config_json),
        "--prompt", "a cat walks on the grass", "--warmup",
        "--target_shape", *TARGET_SHAPE,
        "--save_result_path", str(out / f"{name}.mp4"),
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True, check=False)
    return trace, proc, time.perf_counter() - start


SIGN_OFF_STEPS = 10
SIGN_OFF_WARMUP = "64x64,96x96"


def sign_off(lightx2v: Path, model: Path, out: Path, trials: int) -> int:
    """One `diag bench` of use_compile false against true (docs/BENCH.md)."""
    import shlex

    configs: list[str] = []
    for name, compiled in (("eager", False), ("compiled", True)):
        config = {
            **BASE_CONFIG,
            **CASES["model-offload"],
            "use_compile": compiled,
            "infer_steps": SIGN_OFF_STEPS,
        }
        config_json = out / f"sign-off-{name}.json"
        config_json.write_text(json.dumps(config, indent=2))
        command = [
            sys.executable, "-m", "lightx2v.infer",
            "--model_cls", "wan2.1", "--task", "t2v",
            "--model_path", str(model), "--config_json", str(config_json),
            "--prompt", "a cat walks on the grass", "--warmup",
            "--target_shape", *TARGET_SHAPE,
            "--save_result_path", str(out / f"sign-off-{name}.mp4"),
        ]  # fmt: skip
        configs += ["--config", f"{name}={shlex.join(command)}"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(lightx2v), str(STARTUP)]),
        "PLATFORM": "cpu",
        "LIGHTX2V_CPU_WARMUP": SIGN_OFF_WARMUP,
        "PROFILING_DEBUG_LEVEL": "1",
    }
    bench = [
        sys.executable, "-m", "diag", "bench", "-o", str(out / "sign-off"), "--force",
        "--trials", str(trials), *configs,
    ]  # fmt: skip
    shown = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("PYTHONPATH", "PLATFORM"))
    shown += f" LIGHTX2V_CPU_WARMUP={SIGN_OFF_WARMUP} PROFILING_DEBUG_LEVEL=1"
    print(f"{shown} {shlex.join(bench)}", flush=True)
    return subprocess.run(bench, env=env, cwd=out, check=False).returncode


LOG_LINES = ("infer_main cost", "==> step_index", "Warmup: ", "Warmup cost", "RUN pipeline cost")
#: torch's own record of each recompile (TORCH_LOGS=recompiles), and what the server driver
#: (bench/lightx2v_serve.py) served.
RECORD_LINES = ("[__recompiles]", "lightx2v_serve: ")


def save_test_archive(name: str, trace: Path, log: str) -> Path:
    """tests/data/lightx2v/NAME.tar.gz: the recording's manifest and event files (no Kineto
    traces) under NAME/, and NAME/lightx2v.log: LightX2V's own warmup and step lines and
    torch's recompile log (run with TORCH_LOGS=recompiles), for tests that hold diag's reading
    against both."""
    import io
    import tarfile

    target = TEST_DATA / f"{name}.tar.gz"
    lines = [
        line for line in log.splitlines() if any(key in line for key in LOG_LINES + RECORD_LINES)
    ]
    files = [trace / "manifest.json", *sorted(trace.glob("runs/*/*/events.jsonl"))]
    with tarfile.open(target, "w:gz", compresslevel=9) as archive:
        for path in files:
            info = archive.gettarinfo(str(path), f"{name}/{path.relative_to(trace)}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with path.open("rb") as handle:
                archive.addfile(info, handle)
        data = ("\n".join(lines) + "\n").encode()
        info = tarfile.TarInfo(f"{name}/lightx2v.log")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return target


def save_test_data(name: str, trace: Path, stderr: str) -> None:
    """Manifest and event files only (no Kineto traces), and LightX2V's own step log lines
    (`[Profile] ... infer_main cost`), so tests can hold diag's steps against LightX2V's."""
    target = TEST_DATA / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copy2(trace / "manifest.json", target / "manifest.json")
    for events in sorted(trace.glob("runs/*/*/events.jsonl")):
        dest = target / events.relative_to(trace)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(events, dest)
    lines = [line for line in stderr.splitlines() if any(key in line for key in LOG_LINES)]
    (target / "lightx2v.log").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--lightx2v", type=Path, help="ModelTC/LightX2V checkout")
    parser.add_argument("--out", type=Path, default=Path("/tmp/lightx2v-real"))
    parser.add_argument(
        "--case", action="append", choices=sorted([*CASES, *FIXED]), help="default: all"
    )
    parser.add_argument("--diag-option", action="append", default=[], help="e.g. --profile=none")
    parser.add_argument("--save-test-data", action="store_true")
    parser.add_argument(
        "--sign-off", action="store_true", help="the use_compile on/off sign-off (diag bench)"
    )
    parser.add_argument("--trials", type=int, default=3, help="--sign-off trials (default: 3)")
    parser.add_argument(
        "--archive",
        nargs=3,
        action="append",
        default=[],
        metavar=("NAME", "TRACE", "LOG"),
        help="only write tests/data/lightx2v/NAME.tar.gz from a recording and its console log",
    )
    args = parser.parse_args(argv)
    if args.archive:
        for name, trace, log in args.archive:
            text = Path(log).read_text(errors="replace")
            print(save_test_archive(name, Path(trace), text))
        return 0

    if args.lightx2v is None:
        parser.error("--lightx2v is required")
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.out / "tiny-wan2.1"
    if not (model / "config.json").exists():
        write_model(model)
    if args.sign_off:
        return sign_off(args.lightx2v.resolve(), model, args.out.resolve(), args.trials)
    failed = 0
    for name in args.case or [*CASES, *FIXED]:
        trace, proc, wall = run_case(
            name, args.lightx2v.resolve(), model, args.out, args.diag_option
        )
        (args.out / f"{name}.stdout").write_text(proc.stdout)
        (args.out / f"{name}.stderr").write_text(proc.stderr)
        print(f"== {name}: exit {proc.returncode} in {wall:.1f} s, trace {trace}")
        if proc.returncode != 0:
            failed += 1
            print("\n".join(proc.stderr.splitlines()[-15:]))
            continue
        analyzed = subprocess.run(
            [sys.executable, "-m", "diag", "analyze", str(trace)],
            capture_output=True,
            text=True,
            check=False,
        )
        print(analyzed.stdout)
        if args.save_test_data:
            save_test_data(name, trace, proc.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
