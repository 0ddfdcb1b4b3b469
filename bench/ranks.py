"""Analysis at scale in ranks: `diag analyze` and `diag check` on trace directories of 1 to 64
ranks, made by replicating a real two-rank recording.

Each made rank is a copy of one source rank with its pid, rank, world size, times, Kineto
correlation and External ids and folder name remapped, and its own Kineto windows, so that the
readers and analyzers see 64 distinct processes. Every rank copies source rank 0 except the
`--odd` ones (default: the middle rank), which copy source rank 1: recorded with the
`rank-recompile` plant, that rank recompiles live and every other rank waits for it.

Each measurement is one child process (the real `diag` CLI), the variants alternating; wall
time is the child's, peak RSS is the largest sum over the child's whole process tree (parallel
readers included), sampled every 20 ms from /proc. Cold: `.diag-cache` removed first; warm:
the cache the cold open wrote.

    diag record -o SRC -- torchrun --standalone --nproc_per_node 2 -m diag.fixtures \\
        --compile --plant rank-recompile -q           # OMP_NUM_THREADS=1 on a 2-core host
    python bench/ranks.py --source SRC                 # 1, 8, 16, 32, 64 ranks, 3 repeats
    python bench/ranks.py --source SRC --make-only OUT --ranks 64
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DIAG = Path(sys.executable).with_name("diag")
#: Made ranks' pids: far from real ones, distinct per rank.
PID_BASE = 200_000
#: Per-rank shift of every clock (events' monotonic t, wall_ns, Kineto's base): 7 us per rank,
#: so ranks are distinct instants without moving any step out of its window.
SHIFT_NS = 7_000
#: Kineto correlation and External ids move by this much per rank.
ID_STRIDE = 10_000_000

# Kineto JSON fields rewritten as text (the files are torch's, one field per line or inline).
_PID = re.compile(rb'("(?:pid|tid|sort_index)":\s*)(\d+)')
_IDS = re.compile(rb'("(?:correlation|External id|external id)":\s*)(\d+)')
_BASE = re.compile(rb'("baseTimeNanoseconds":\s*)(\d+)')
_DIST = re.compile(rb'("rank":\s*)\d+(,\s*"world_size":\s*)\d+')


# --- making the trace directory ---------------------------------------------------------------


def source_ranks(source: Path) -> dict[int, Path]:
    """rank -> process folder of the source recording's compiled run. A recording of one
    process without ranks (a single-GPU run, for its GPU-sized Kineto windows) is rank 0."""
    found: dict[int, Path] = {}
    alone: list[Path] = []
    for events in sorted((source / "runs" / "compiled").glob("*/events.jsonl")):
        with open(events, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
        rank = first.get("rank")
        if isinstance(rank, int):
            found[rank] = events.parent
        elif (events.parent / "kineto").is_dir() or events.stat().st_size > 4096:
            alone.append(events.parent)
    if not found and len(alone) == 1:
        found[0] = alone[0]
    if not found:
        raise SystemExit(f"{source}: no ranked process in runs/compiled (record under torchrun)")
    return found


def _remap_events(src: Path, dst: Path, pid: int, rank: int, world: int, shift: int) -> None:
    lines = []
    with open(src, "rb") as handle:
        for raw in handle:
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # a torn last line: the reader skips it too
            if isinstance(event.get("t"), int):
                event["t"] += shift
            if isinstance(event.get("start_t"), int):
                event["start_t"] += shift
            if event.get("ev") == "process_start":
                event.update(pid=pid, rank=rank, world_size=world)
                if isinstance(event.get("wall_ns"), int):
                    event["wall_ns"] += shift
            lines.append(json.dumps(event, separators=(",", ":")) + "\n")
    dst.write_text("".join(lines), encoding="utf-8")


def _remap_kineto(
    src: Path, dst: Path, old_pid: int, pid: int, rank: int, world: int, shift: int
) -> None:
    data = gzip.decompress(src.read_bytes())
    old = str(old_pid).encode()
    new = str(pid).encode()
    data = _PID.sub(lambda m: m.group(1) + (new if m.group(2) == old else m.group(2)), data)
    offset = rank * ID_STRIDE
    data = _IDS.sub(lambda m: m.group(1) + str(int(m.group(2)) + offset).encode(), data)
    data = _BASE.sub(lambda m: m.group(1) + str(int(m.group(2)) + shift).encode(), data, 1)
    data = _DIST.sub(
        lambda m: m.group(1) + str(rank).encode() + m.group(2) + str(world).encode(), data, 1
    )
    data = data.replace(str(src.parent.parent).encode(), str(dst.parent.parent).encode())
    dst.write_bytes(gzip.compress(data, compresslevel=1))


def make_ranks(
    source: Path, out: Path, ranks: int, odd: set[int], kineto: bool = True
) -> list[int]:
    """Write a trace directory of `ranks` ranks at `out`; returns the ranks copied from source
    rank 1 (the odd ones that exist)."""
    sources = source_ranks(source)
    if 0 not in sources:
        raise SystemExit(f"{source}: no rank 0")
    shutil.rmtree(out, ignore_errors=True)
    run_dir = out / "runs" / "compiled"
    run_dir.mkdir(parents=True)
    manifest = json.loads((source / "manifest.json").read_text(encoding="utf-8"))
    manifest["runs"] = [r for r in manifest.get("runs", []) if r.get("label") == "compiled"]
    manifest.setdefault("options", {})["baseline"] = None
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    # The launcher (a process without a rank), as recorded.
    for events in (source / "runs" / "compiled").glob("*/events.jsonl"):
        if events.parent not in sources.values():
            shutil.copytree(events.parent, run_dir / events.parent.name)
    old_pids = {r: int(f.name.rsplit("pid", 1)[1]) for r, f in sources.items()}
    made_odd = []
    for rank in range(ranks):
        from_rank = 1 if rank in odd and 1 in sources else 0
        if from_rank == 1:
            made_odd.append(rank)
        folder = sources[from_rank]
        old_pid = old_pids[from_rank]
        pid = PID_BASE + rank
        target = run_dir / f"rank{rank}-pid{pid}"
        target.mkdir()
        shift = rank * SHIFT_NS
        _remap_events(folder / "events.jsonl", target / "events.jsonl", pid, rank, ranks, shift)
        if kineto and (folder / "kineto").is_dir():
            (target / "kineto").mkdir()
            for window in sorted((folder / "kineto").glob("*.json.gz")):
                _remap_kineto(
                    window, target / "kineto" / window.name, old_pid, pid, rank, ranks, shift
                )
    return made_odd


# --- measuring --------------------------------------------------------------------------------


def _tree_rss_kib(root: int) -> int:
    """Sum of VmRSS over `root` and its descendants, now."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        ppid = re.search(r"^PPid:\s+(\d+)", text, re.M)
        size = re.search(r"^VmRSS:\s+(\d+)", text, re.M)
        parents[int(entry)] = int(ppid.group(1)) if ppid else 0
        rss[int(entry)] = int(size.group(1)) if size else 0
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(rss.get(pid, 0) for pid in tree)


def run_child(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one command; its wall time, exit code and the peak RSS of its process tree."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env={**os.environ, **(env or {})})
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss_kib(proc.pid))
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        done.set()
        sampler.join()
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if code not in (0, 1):  # check exits 1 on a failing rule: that is a result
        raise SystemExit(f"{' '.join(argv)} exited {code}:\n{stderr[-2000:]}")
    return {
        "seconds": seconds,
        "code": code,
        "tree_rss_mb": peak[0] / 1024,
        "max_process_rss_mb": usage.ru_maxrss / 1024,
        "stdout": stdout,
    }


PROFILE_CHILD = r"""
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from diag.trace.load import load_trace
from diag.findings.analysis import preload_profiles
from diag.analyzers import REGISTRY, get_analyzer
t1 = time.perf_counter()
trace = load_trace(Path(sys.argv[1]))
t2 = time.perf_counter()
preload_profiles(trace, show=False)
t3 = time.perf_counter()
parts = {"imports": t1 - t0, "load_trace (events)": t2 - t1, "Kineto windows": t3 - t2}
for name in REGISTRY:
    s = time.perf_counter()
    get_analyzer(name)(trace)
    parts[f"analyzer {name}"] = time.perf_counter() - s
print(json.dumps(parts))
"""


#: name -> (argv after `diag`, extra environment). `serial`: DIAG_WORKERS=1, no pool.
VARIANTS: dict[str, tuple[list[str], dict[str, str]]] = {
    "analyze cold": (["analyze"], {}),
    "analyze cold serial": (["analyze"], {"DIAG_WORKERS": "1"}),
    "analyze warm": (["analyze"], {}),
    "check": (["check"], {}),
}


def measure(folders: dict[int, Path], repeats: int) -> dict[int, dict[str, Any]]:
    samples: dict[int, dict[str, list[dict[str, Any]]]] = {n: {} for n in folders}
    for repeat in range(repeats):
        for n, trace in folders.items():
            for name, (args, env) in VARIANTS.items():
                if "cold" in name:
                    shutil.rmtree(trace / ".diag-cache", ignore_errors=True)
                sample = run_child([str(DIAG), *args, str(trace)], env)
                sample["load"] = os.getloadavg()[0]
                samples[n].setdefault(name, []).append(sample)
                print(
                    f"  [{repeat + 1}/{repeats}] {n:3d} ranks {name:<13} "
                    f"{sample['seconds']:7.2f} s {sample['tree_rss_mb']:7.0f} MB tree "
                    f"(load {sample['load']:.2f})",
                    file=sys.stderr,
                )
    result: dict[int, dict[str, Any]] = {}
    for n, by_name in samples.items():
        result[n] = {
            name: {
                "median_s": statistics.median(s["seconds"] for s in runs),
                "runs_s": [round(s["seconds"], 2) for s in runs],
                "tree_rss_mb": statistics.median(s["tree_rss_mb"] for s in runs),
                "max_tree_rss_mb": max(s["tree_rss_mb"] for s in runs),
                "load": [round(s["load"], 2) for s in runs],
            }
            for name, runs in by_name.items()
        }
        result[n]["findings"] = by_name["analyze warm"][-1]["stdout"]
    return result


def profile(trace: Path) -> dict[str, float]:
    """Where one warm-cache analysis spends its time, in one child (the part that grows)."""
    shutil.rmtree(trace / ".diag-cache", ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, "-c", PROFILE_CHILD, str(trace)],
        capture_output=True,
        text=True,
        check=True,
    )
    parts: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return parts


def _fit(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """Least-squares line y = a + b x."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var
    return mean_y - slope * mean_x, slope


def report(info: dict[str, Any]) -> str:
    names = list(VARIANTS)
    lines = [
        f"source: {info['source']} ({info['source_mb']:.1f} MB per rank: events + Kineto gzip)",
        f"machine: {info['cpus']} CPUs, python {info['python']}; load average "
        f"{info['load_before']} before, {info['load_after']} after; {info['repeats']} repeat(s)",
        "median wall s, then peak RSS of the process tree in MB (the largest of the repeats)",
        "",
        f"{'ranks':>5} {'MB':>6} " + " ".join(f"{n:>19}" for n in names) + "   load (1 min)",
    ]
    curve = info["curve"]
    for n, row in curve.items():
        cells = " ".join(
            f"{row[k]['median_s']:8.2f} s {row[k]['max_tree_rss_mb']:5.0f} MB" for k in names
        )
        loads = ",".join(f"{x:.1f}" for k in names for x in row[k]["load"])
        lines.append(f"{n:5d} {row['mb']:6.1f} {cells}   {loads}")
    xs = [int(n) for n in curve]
    lines.append("")
    lines.append("least-squares line over the curve, extrapolated to 512 ranks:")
    for name in names:
        a, b = _fit(xs, [curve[n][name]["median_s"] for n in curve])
        ra, rb = _fit(xs, [curve[n][name]["max_tree_rss_mb"] for n in curve])
        lines.append(
            f"  {name:<20} {a:6.2f} s + {b * 1000:6.1f} ms/rank -> {a + 512 * b:6.1f} s;  "
            f"RSS {ra:5.0f} MB + {rb:5.2f} MB/rank -> {ra + 512 * rb:6.0f} MB"
        )
    lines.append("")
    for n, parts in info["profiles"].items():
        lines.append(f"where the time goes at {n} rank(s) (one child, cold cache, in process):")
        for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1])[:8]:
            lines.append(f"  {name:<34} {seconds:7.3f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a two-rank recording")
    parser.add_argument("--ranks", default="1,8,16,32,64", help="comma-separated rank counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--odd", default="", help="ranks copied from source rank 1 (default: the middle rank)"
    )
    parser.add_argument("--work", type=Path, help="keep the made directories here")
    parser.add_argument("--make-only", type=Path, metavar="OUT", help="make one directory, exit")
    parser.add_argument("--no-kineto", action="store_true", help="leave the windows out")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.ranks.split(",")]

    def odd_for(n: int) -> set[int]:
        if args.odd:
            return {int(r) for r in args.odd.split(",")}
        return {n // 2} if n > 1 else set()

    if args.make_only:
        odd = make_ranks(args.source, args.make_only, counts[-1], odd_for(counts[-1]))
        print(f"{args.make_only}: {counts[-1]} ranks, copied from source rank 1: {odd}")
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="diag-ranks-"))
    folders: dict[int, Path] = {}
    for n in counts:
        folders[n] = work / f"ranks{n}"
        make_ranks(args.source, folders[n], n, odd_for(n), kineto=not args.no_kineto)
    size = {
        n: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for n, p in folders.items()
    }
    info: dict[str, Any] = {
        "source": str(args.source),
        "source_mb": size[counts[-1]] / counts[-1] / 1e6,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "repeats": args.repeats,
        "load_before": round(os.getloadavg()[0], 2),
    }
    curve = measure(folders, args.repeats)
    for n in curve:
        curve[n]["mb"] = size[n] / 1e6
    info["curve"] = curve
    info["profiles"] = {n: profile(folders[n]) for n in (counts[0], counts[-1])}
    info["load_after"] = round(os.getloadavg()[0], 2)
    text = report(info)
    print(json.dumps(info, indent=1) if args.json else text)
    print(
        f"\nfindings at {counts[-1]} ranks (diag analyze, warm):\n{curve[counts[-1]]['findings']}"
    )
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
