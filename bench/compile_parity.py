"""Does `diag record` change what or how Dynamo and Inductor compile? Plain against recorded.

Runs one program (by default the reference service with a live recompile, inductor) in pairs,
plain and under `diag record`, with torch's own structured trace (TORCH_TRACE) on in both, and
compares what torch says it compiled: the frames and compile ids in order, the recompile
reasons, the guards of every entry, the FX graphs Dynamo produced and the post-grad graphs
Inductor compiled (md5 of each payload), and the FX-graph cache hits and misses; then the
compile seconds side by side.

Two cache modes:
- `fresh` (default): every run gets its own empty Inductor/Triton cache directory and the order
  of the pair alternates, so neither side inherits the other's compiled artifacts.
- `shared`: one cache directory for all runs, in the order plain, recorded, plain, recorded:
  the second run of a pair finds the first one's FX graphs in the cache. This is how the
  interleaved LightX2V pairs of issue 13 ran (recorded after plain, ~2x faster): the speed-up
  follows the order and the cache, not diag.

    python bench/compile_parity.py [--pairs 2] [--cache fresh|shared] [-- CMD ARGS...]

Exits 1 when a pair differs in anything but time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CMD = [
    sys.executable, "-m", "diag.fixtures", "--compile", "--backend", "inductor",
    "--plant", "unwarmed-shape", "-q",
]  # fmt: skip
# Records whose payload says what was compiled: Dynamo's FX graph and guards, AOTAutograd's
# graph, Inductor's post-grad graph (top-level keys or `artifact` names, as torch 2.11-2.13 log
# them); and the cache verdicts (artifacts named *_cache_hit / *_cache_miss / *_cache_bypass).
_PAYLOADS = (
    "dynamo_output_graph",
    "dynamo_cpp_guards_str",
    "aot_inference_graph",
    "inductor_post_grad_graph",
)
_CACHES = ("fx_graph_cache", "aotautograd_cache")


@dataclass
class Compiled:
    """What one run's structured trace says torch compiled."""

    compiles: list[str] = field(default_factory=list)  # "frame_id/attempt name file:line"
    reasons: list[str] = field(default_factory=list)
    payloads: dict[str, list[str]] = field(default_factory=dict)  # event -> md5 in order
    # Per compile: Inductor FX-graph and AOTAutograd local cache hits/misses.
    fx_cache: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # entire_frame_compile_time_s
    wall_s: float = 0.0

    def identity(self) -> dict[str, object]:
        return {
            "compiles": self.compiles,
            "reasons": self.reasons,
            "payloads": self.payloads,
        }


def _envelopes(folder: Path) -> list[tuple[dict[str, object], str]]:
    """(envelope, payload) per record of every TORCH_TRACE log in `folder`."""
    records: list[tuple[dict[str, object], str]] = []
    for log in sorted(folder.rglob("*.log")):
        current: dict[str, object] | None = None
        payload: list[str] = []
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("\t"):
                payload.append(line[1:])
                continue
            if current is not None:
                records.append((current, "\n".join(payload)))
            payload = []
            start = line.find("{")
            try:
                current = json.loads(line[start:]) if start >= 0 else None
            except ValueError:
                current = None
        if current is not None:
            records.append((current, "\n".join(payload)))
    return records


# Object ids and addresses differ from process to process (ID_MATCH guards, reprs), as do the
# cache directories Inductor names and the guard latency torch measures: not what was compiled.
_VOLATILE = re.compile(r"0x[0-9a-f]+|\b\d{9,}\b|/tmp/[^\s'\"]+|Guard latency = [\d.]+ us")


def _normal(payload: str) -> str:
    return _VOLATILE.sub("#", payload)


def read_compiled(folder: Path) -> Compiled:
    out = Compiled(payloads={name: [] for name in _PAYLOADS})
    verdicts: dict[str, list[str]] = {}
    for envelope, payload in _envelopes(folder):
        cid = f"{envelope.get('frame_id')}/{envelope.get('frame_compile_id')}"
        artifact = envelope.get("artifact")
        name = artifact.get("name") if isinstance(artifact, dict) else None
        metrics = envelope.get("compilation_metrics")
        if isinstance(metrics, dict):
            file = os.path.basename(str(metrics.get("co_filename") or ""))
            out.compiles.append(
                f"{cid} {metrics.get('co_name')} {file}:{metrics.get('co_firstlineno')} "
                f"{metrics.get('fail_type') or 'ok'}"
            )
            seconds = metrics.get("entire_frame_compile_time_s")
            if isinstance(seconds, (int, float)):
                out.seconds.append(float(seconds))
            out.fx_cache.append(" ".join(verdicts.pop(cid, [])) or "no cache")
        if name == "recompile_reasons":
            out.reasons.append(f"{cid} {_normal(payload.strip())}")
        for cache in _CACHES:
            if isinstance(name, str) and name.startswith(cache + "_"):
                verdicts.setdefault(cid, []).append(
                    name.removeprefix(cache + "_").replace("cache_", "")
                )
                verdicts[cid][-1] = f"{cache.split('_')[0]} {verdicts[cid][-1]}"
        for kind in _PAYLOADS:
            if kind in envelope or name == kind:
                digest = hashlib.md5(_normal(payload).encode()).hexdigest()
                out.payloads[kind].append(f"{cid} {digest}")
    return out


def run_once(cmd: list[str], recorded: bool, cache: Path, work: Path) -> Compiled:
    trace = work / "torch_trace"
    env = {
        **os.environ,
        "TORCH_TRACE": str(trace),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        # One compile worker: the bench shares two cores with other work (same on both sides).
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }
    full = (
        [sys.executable, "-m", "diag", "record", "-o", str(work / "diag"), "--profile", "none"]
        + ["--", *cmd]
        if recorded
        else cmd
    )
    start = time.perf_counter()
    proc = subprocess.run(full, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"{'recorded' if recorded else 'plain'} run failed:\n{proc.stderr[-2000:]}"
        )
    out = read_compiled(trace)
    out.wall_s = wall
    return out


def _secs(values: list[float]) -> str:
    return " + ".join(f"{v:.2f}" for v in values) + f" = {sum(values):.2f} s"


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    cmd = DEFAULT_CMD
    if "--" in args_in:
        cut = args_in.index("--")
        args_in, cmd = args_in[:cut], args_in[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--cache", choices=("fresh", "shared"), default="fresh")
    parser.add_argument("--keep", type=Path, help="keep the runs' folders here")
    args = parser.parse_args(args_in)

    root = Path(tempfile.mkdtemp(prefix="compile-parity-"))
    shared = root / "cache"
    results: list[tuple[str, Compiled]] = []
    for pair in range(args.pairs):
        # fresh: the order alternates; shared: always plain first (its cache serves the second).
        order = (False, True) if args.cache == "shared" or pair % 2 == 0 else (True, False)
        for recorded in order:
            name = f"pair{pair}-{'recorded' if recorded else 'plain'}"
            cache = shared if args.cache == "shared" else root / name / "cache"
            results.append((name, run_once(cmd, recorded, cache, root / name)))
            done = results[-1][1]
            print(
                f"{name:18} compiles {len(done.compiles):2}  compile {_secs(done.seconds)}  "
                f"wall {done.wall_s:.1f} s  load {os.getloadavg()[0]:.1f}  "
                f"cache hit/miss {', '.join(done.fx_cache)}",
                flush=True,
            )

    # Compare the two runs of each pair: the program may change between pairs (a checkout being
    # edited), never within one. A graph logged from a cache hit (AOTAutograd prints the cached
    # graph with other symbol names) is compared only between runs with the same cache verdicts.
    differ: list[str] = []
    for pair in range(args.pairs):
        (a_name, a), (b_name, b) = results[2 * pair], results[2 * pair + 1]
        same_cache = a.fx_cache == b.fx_cache
        left, right = a.identity(), b.identity()
        if not same_cache:
            for side in (left, right):
                payloads = side["payloads"]
                assert isinstance(payloads, dict)
                payloads.pop("aot_inference_graph", None)
        verdict = "identical" if left == right else "DIFFERENT"
        if left != right:
            differ.append(f"pair{pair}")
        skipped = "" if same_cache else " (AOT graphs not compared: one side hit the cache)"
        print(f"pair{pair}: {a_name} and {b_name} {verdict}{skipped}")
    plain_s = [sum(r.seconds) for n, r in results if n.endswith("plain")]
    recorded_s = [sum(r.seconds) for n, r in results if n.endswith("recorded")]
    print(f"\ncache: {args.cache}; command: {' '.join(cmd)}")
    print(
        f"compile seconds, plain: {', '.join(f'{v:.2f}' for v in plain_s)} "
        f"(median {statistics.median(plain_s):.2f}); recorded: "
        f"{', '.join(f'{v:.2f}' for v in recorded_s)} (median {statistics.median(recorded_s):.2f})"
    )
    first = results[0][1]
    print(
        f"{len(first.compiles)} compiles ({'; '.join(first.compiles)}), "
        f"{len(first.reasons)} recompile reason(s), "
        + ", ".join(f"{len(v)} {k} payloads" for k, v in first.payloads.items())
    )
    for name, result in results:
        if any(name.startswith(pair + "-") for pair in differ):
            print(f"  {name}: {json.dumps(result.identity(), indent=1)[:3000]}")
    if args.keep:
        shutil.copytree(root, args.keep, dirs_exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
