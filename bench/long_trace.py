"""A day of a recorded service: `diag check`, `analyze` and `report` on ~900 k steps, before
and after, side by side.

The trace is synthetic but has the event mix `diag record` writes for a LightX2V-style GPU
service (one process, docs/FORMAT.md): two warmup requests that compile and recompile, then
live requests of 40 steps, each step a `step_start`, a `step_end` with CPU time, host load and
allocator figures, and a `step_gpu`; request boundaries; a new live shape every few thousand
requests (a recompile with its guards, the compile, the cache-entry change); a `gc.collect`
now and then; the exit snapshot. 900 k steps at 10 steps/s is 25 hours; the events come to
about 430 MB, what a day of such a service writes (issue 22 measured 268-448 bytes a step).

Each command runs as a subprocess under /usr/bin/time (wall and CPU seconds, peak RSS); the
baseline is another commit of this repository, extracted into a temporary folder and run from
there (`--baseline REF`, default: where this branch left main), the two interleaved. Medians of
`--runs` runs are printed, and after/before ratios:

    python bench/long_trace.py [--steps 900000] [--runs 3] [--baseline REF] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS_PER_REQUEST = 40
SHAPES = ([1, 21, 60, 104], [1, 21, 90, 160], [1, 21, 60, 104], [1, 21, 48, 84])
NEW_SHAPE_EVERY = 4000  # requests
CODE = ("wan_block_forward", "/srv/lightx2v/models/networks/wan/infer/transformer_infer.py", 87)
STEP_S = 0.1
TARGET_CHECK_S = 5.0
TARGET_CHECK_MB = 300.0


def write_trace(folder: Path, steps: int, seed: int = 0) -> int:
    """Write the trace directory; returns the event file's size in bytes."""
    rng = random.Random(seed)
    process = folder / "runs" / "compiled" / "pid4242"
    process.mkdir(parents=True)
    (folder / "manifest.json").write_text(
        '{"format":"diag-trace","version":1,"diag_version":"0.1.0","status":"complete",'
        '"command":["python","-m","lightx2v.server"],"cwd":"/srv","started":'
        '"2026-12-01T00:00:00Z","ended":"2026-12-02T01:00:00Z","host":{"hostname":"h200",'
        '"platform":"Linux","launcher_python":"3.11.7"},"launcher_pid":4240,"options":{},'
        '"versions":{},"runs":[{"label":"compiled","stance":"default","status":"complete",'
        '"exit_code":0,"signal":null}]}\n',
        encoding="utf-8",
    )
    name, file, line = CODE
    frame = f'{{"name":"{name}","file":"{file}","line":{line}}}'
    t = 10_000_000_000
    entries = 0
    compiles = 0
    out: list[str] = []
    path = process / "events.jsonl"
    handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    write = out.append

    def flush() -> None:
        handle.write("".join(out))
        out.clear()

    write(
        f'{{"t":{t},"ev":"process_start","pid":4242,"ppid":4240,"rank":null,'
        f'"world_size":null,"argv":["python","-m","lightx2v.server"],'
        f'"wall_ns":1796157913224506519,"label":"compiled","stance":"default","versions":'
        f'{{"python":"3.11.7","torch":"2.11.0+cu130","cuda":"13.0","triton":"3.6.0",'
        f'"diag":"0.1.0"}}}}\n'
    )
    write(f'{{"t":{t + 1},"ev":"adapter","name":"lightx2v"}}\n')

    def compile_(t: int, phase: str, rid: str, shape_from: int, shape_to: int) -> int:
        nonlocal entries, compiles
        position = f'"phase":"{phase}","request_id":"{rid}","step":0'
        cid = f"0/{compiles}"
        if compiles:
            write(
                f'{{"t":{t},"ev":"recompile","compile_id":"{cid}","epoch":0,"guards":'
                f'[{{"compile_id":"0/{compiles - 1}","kind":"tensor-size","source":"x",'
                f'"expected":"{shape_from}","actual":"{shape_to}","user_location":null,'
                f'"raw":"0/{compiles - 1}: tensor \'x\' size mismatch at index 2. expected '
                f'{shape_from}, actual {shape_to}"}}],{position}}}\n'
            )
        write(f'{{"t":{t + 1},"ev":"compile_start","compile_id":"{cid}","epoch":0}}\n')
        write(
            f'{{"t":{t + 2_000_000_000},"ev":"compile_end","compile_id":"{cid}","epoch":0,'
            f'"frame":{frame},"result":"ok","duration_s":2.0,"start_t":{t + 1},'
            f'"fail_type":null,"fail_reason":null,"cache_size":{entries},'
            f'"graph_op_count":412,"guard_count":930,"restart_reasons":[],{position}}}\n'
        )
        compiles += 1
        entries += 1
        return t + 2_000_000_000

    request = 0
    done = 0
    shape = SHAPES[0]
    phase = "warmup"
    write(f'{{"t":{t + 2},"ev":"phase","phase":"warmup"}}\n')
    while done < steps:
        if request == 2:
            phase = "live"
            write(f'{{"t":{t},"ev":"phase","phase":"live"}}\n')
        previous = shape
        if request < 2:
            shape = SHAPES[request]
        elif request % NEW_SHAPE_EVERY == 0:
            shape = [1, 21, 60 + 4 * (request // NEW_SHAPE_EVERY), 104]
        rid = f"warmup{request}" if phase == "warmup" else f"r{request - 2}"
        shape_text = ",".join(map(str, shape))
        count = min(STEPS_PER_REQUEST, steps - done)
        write(
            f'{{"t":{t},"ev":"request_start","request_id":"{rid}","phase":"{phase}",'
            f'"shape":[{shape_text}],"steps":{count}}}\n'
        )
        for index in range(count):
            t += 1_000_000
            write(
                f'{{"t":{t},"ev":"step_start","request_id":"{rid}","step":{index},'
                f'"phase":"{phase}","shape":[{shape_text}],"profiled":false}}\n'
            )
            changed = False
            if index == 0 and (request < 2 or shape != previous):
                t = compile_(t, phase, rid, previous[2], shape[2])
                changed = True
            wall = STEP_S * rng.lognormvariate(0, 0.05)
            t += int(wall * 1e9)
            allocated = 21_474_836_480 + rng.randrange(1 << 20)
            write(
                f'{{"t":{t},"ev":"step_end","request_id":"{rid}","step":{index},'
                f'"phase":"{phase}","wall_s":{wall:.9f},"cpu_s":{wall * 0.97:.9f},'
                f'"host_load":{0.3 + rng.random() / 10:.3f},"profiled":false,"memory":'
                f'{{"allocated":{allocated},"reserved":25769803776,'
                f'"max_allocated":{allocated + 4096}}}}}\n'
            )
            if changed:
                write(
                    f'{{"t":{t + 1},"ev":"cache_entries","when":"step_end","full":false,'
                    f'"codes":[{{"name":"{name}","file":"{file}","line":{line},'
                    f'"entries":{entries}}}],"request_id":"{rid}","step":{index}}}\n'
                )
            write(
                f'{{"t":{t + 2},"ev":"step_gpu","request_id":"{rid}","step":{index},'
                f'"gpu_s":{wall * 0.92:.9f}}}\n'
            )
            if index == count - 1 and request % 50 == 49:
                write(
                    f'{{"t":{t + 3},"ev":"gc_collect","duration_s":0.004,"phase":"{phase}",'
                    f'"request_id":"{rid}","step":{index}}}\n'
                )
        t += 2_000_000
        write(f'{{"t":{t},"ev":"request_end","request_id":"{rid}","phase":"{phase}"}}\n')
        done += count
        request += 1
        if len(out) > 20_000:
            flush()
    write(
        f'{{"t":{t + 10},"ev":"cache_entries","when":"exit","full":true,"codes":'
        f'[{{"name":"{name}","file":"{file}","line":{line},"entries":{entries}}}],'
        f'"request_id":null,"step":null}}\n'
    )
    write(f'{{"t":{t + 11},"ev":"process_end","gpu":"NVIDIA H200"}}\n')
    flush()
    handle.close()
    return path.stat().st_size


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _checkout(ref: str, target: Path) -> Path:
    """`ref` of this repository, extracted and laid out as the installed package (the
    top-level folders under `diag.`, as pyproject's package-dir does): a PYTHONPATH entry."""
    tree = target / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for name in ("collectors", "analyzers", "tui", "fixtures"):
        (tree / "diag" / name).symlink_to(tree / name)
    return tree


def _measure(command: list[str], pythonpath: Path | None) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in MB, exit code) of one run."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    # Not from this checkout's root, where `python -m diag` would import this tree's diag
    # whatever PYTHONPATH says; elsewhere the baseline's comes first and this tree's is the
    # editable install.
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-o", report.name, "-f", "%M %U %S", *command],
            env=env,
            cwd=tempfile.gettempdir(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        wall = time.perf_counter() - started
        lines = report.read().split()
    rss_mb = int(lines[-3]) / 1024 if len(lines) >= 3 else float("nan")
    cpu = float(lines[-2]) + float(lines[-1]) if len(lines) >= 3 else float("nan")
    if proc.returncode not in (0, 1):
        print(f"    {command[3:5]}: exit {proc.returncode}: {proc.stderr[-300:]}", file=sys.stderr)
    return wall, cpu, rss_mb, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=900_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--baseline",
        default="merge-base",
        help="git ref to compare (default: where this branch left main; 'none': no baseline)",
    )
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    parser.add_argument("--commands", default="check,analyze,report")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="diag-long-") as tmp:
        folder = args.keep or Path(tmp) / "trace"
        if not (folder / "manifest.json").exists():
            started = time.perf_counter()
            size = write_trace(folder, args.steps)
            print(
                f"trace: {args.steps} steps, {size / 1e6:.0f} MB of events.jsonl, written in "
                f"{time.perf_counter() - started:.1f} s"
            )
        versions: dict[str, Path | None] = {}
        if args.baseline != "none":
            ref = args.baseline
            if ref == "merge-base":
                ref = _git("merge-base", "HEAD", "main")[:7]
            versions[f"baseline {ref}"] = _checkout(ref, Path(tmp) / "old")
        versions[f"this tree ({_git('rev-parse', '--short', 'HEAD')})"] = None
        html = Path(tmp) / "report.html"
        commands = {
            "check": ["check", str(folder)],
            "analyze": ["analyze", str(folder), "--json"],
            "report": ["report", str(folder), "-o", str(html)],
        }
        chosen = [c for c in args.commands.split(",") if c in commands]
        results: dict[tuple[str, str], list[tuple[float, float, float, int]]] = {}
        # Interleaved: each round runs every version once, so load changes hit both alike.
        for _ in range(args.runs):
            for name in chosen:
                for version, path in versions.items():
                    command = [sys.executable, "-m", "diag", *commands[name]]
                    results.setdefault((name, version), []).append(_measure(command, path))
        load = os.getloadavg()[0]
        print(f"\nmedians of {args.runs} run(s); {os.cpu_count()} CPUs, load {load:.1f} at the end")
        print(f"{'command':8} {'version':28} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}  exit")
        for name in chosen:
            medians = []
            for version in versions:
                rows = results[(name, version)]
                wall, cpu, rss = (statistics.median(r[i] for r in rows) for i in range(3))
                medians.append((wall, cpu, rss))
                codes = sorted({r[3] for r in rows})
                print(f"{name:8} {version:28} {wall:8.2f} {cpu:8.2f} {rss:8.0f}  {codes}")
            if len(medians) == 2:
                (w0, c0, r0), (w1, c1, r1) = medians
                ratio = "after / before"
                print(f"{name:8} {ratio:28} {w1 / w0:8.2f} {c1 / c0:8.2f} {r1 / r0:8.2f}")
        print(f"target: check under {TARGET_CHECK_S:.0f} s and {TARGET_CHECK_MB:.0f} MB")
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
