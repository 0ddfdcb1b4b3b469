"""TORCH_TRACE import speed and memory: diag's importer against tlparse on big logs.

    python bench/torchtrace_ingest.py                  # 40, 150 and 400 MB logs, 3 repeats
    python bench/torchtrace_ingest.py --sizes 150 --repeats 5 --source LOG [LOG...]
    python bench/torchtrace_ingest.py --make 150 --out big.log   # only write a log

The logs are made by replicating real TORCH_TRACE logs (default: the two torch 2.13 logs of
/work/shared/data/torch_trace, real torch.compile runs with Inductor's payloads) one after the
other into one process's log: each copy's frame ids move past the previous copy's (envelope
`frame_id`, compilation_metrics `compile_id` and `frame_key`, chromium events' `compile_id`),
attempt numbers stay, and times move on by the copy's span plus a gap (glog prefix,
compilation_metrics start/end times, chromium events' `ts`; the payloads changed get their md5
again). The result is one long-running process that compiled many frames, with every payload.

Each measurement is a fresh child process, the variants alternating (the order turns each
repeat): diag's importer as `diag analyze --torch-trace LOG` calls it (`open_input`), tlparse
in its default mode (HTML pages, the issue's figure) and tlparse `--plain-text` (the least work
tlparse does while still parsing every record and payload: the same files, no highlighting),
both writing to a fresh temporary folder. Wall time is the whole process, start to exit (diag's
interpreter start and imports included, printed apart), CPU time is user + system from wait4
(less moved by other work on the machine than wall time); peak RSS is ru_maxrss from wait4 (this
process stays small: a child's ru_maxrss counts the pages it was forked with).

diag's child has a bytecode cache of its own (PYTHONPYCACHEPREFIX in the work folder, filled by
one unmeasured run), as an installed package has; the variant "diag, no bytecode cache" runs
it as a shell with PYTHONDONTWRITEBYTECODE=1 does, compiling every diag module on each start.

Then, on the log nearest 150 MB, where diag's time goes: each stage again in its own child, the
importer run with later stages switched off (read the blocks; + find the record lines and match
their glog prefix, the C search stepping over the payload lines; + decode each record's JSON;
+ handle the records and read the few payloads kept), a stage's cost being its CPU time less
the previous stage's.
"""

from __future__ import annotations

import argparse
import datetime as dt
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
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
TLPARSE = Path(sys.executable).with_name("tlparse")
DEFAULT_SOURCES = (
    Path("/work/shared/data/torch_trace/torch213_python_state_recompiles.log"),
    Path("/work/shared/data/torch_trace/torch213_graph_break_and_limit.log"),
)
_PREFIX = re.compile(
    r"^(?P<level>[VIWEC])(?P<mo>\d\d)(?P<d>\d\d) (?P<time>\d\d:\d\d:\d\d\.\d{6}) +(?P<pid>\d+) "
    r"(?P<where>[^\]]*)\] (?P<meta>\{.*)$"
)
_YEAR = 2026
_GAP_S = 30.0  # between one copy's last record and the next copy's first

# --- making a big log ----------------------------------------------------------------------------


@dataclass
class Record:
    level: str
    pid: int
    when: dt.datetime
    where: str
    meta: dict[str, Any]
    payload: list[str] | None  # lines without their tab


def read_records(path: Path) -> list[Record]:
    """A real log's records (CRLF checkouts read as LF); lines that are not records dropped."""
    records: list[Record] = []
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        for raw in handle:
            line = raw.rstrip("\n").rstrip("\r")
            if line.startswith("\t"):
                if records and records[-1].payload is not None:
                    records[-1].payload.append(line[1:])
                continue
            match = _PREFIX.match(line)
            if match is None:
                continue
            meta = json.loads(match.group("meta"))
            when = dt.datetime.strptime(
                f"{_YEAR}{match.group('mo')}{match.group('d')} {match.group('time')}",
                "%Y%m%d %H:%M:%S.%f",
            )
            payload: list[str] | None = [] if "has_payload" in meta else None
            records.append(
                Record(
                    match.group("level"),
                    int(match.group("pid")),
                    when,
                    match.group("where"),
                    meta,
                    payload,
                )
            )
    if not records:
        raise SystemExit(f"{path}: no TORCH_TRACE records")
    return records


def _frames(records: list[Record]) -> int:
    """How many frame ids a copy takes: one past the largest it uses."""
    top = -1
    for record in records:
        frame = record.meta.get("frame_id")
        if isinstance(frame, int):
            top = max(top, frame)
    return top + 1


def _shift_id(value: Any, frames: int) -> Any:
    if isinstance(value, str) and re.fullmatch(r"\d+/\d+", value):
        frame, attempt = value.split("/")
        return f"{int(frame) + frames}/{attempt}"
    return value


def _copy(record: Record, frames: int, seconds: float, pid: int) -> str:
    meta = json.loads(json.dumps(record.meta))
    payload = record.payload
    if isinstance(meta.get("frame_id"), int):
        meta["frame_id"] += frames
    metrics = meta.get("compilation_metrics")
    if isinstance(metrics, dict):
        metrics["compile_id"] = _shift_id(metrics.get("compile_id"), frames)
        key = metrics.get("frame_key")
        if isinstance(key, str) and key.isdigit():
            metrics["frame_key"] = str(int(key) + frames)
        if isinstance(metrics.get("start_time"), int | float):
            metrics["start_time"] += seconds
        for name in ("start_time_us", "end_time_us"):
            if isinstance(metrics.get(name), int):
                metrics[name] += int(seconds * 1e6)
    if "chromium_event" in meta and payload:
        event = json.loads("\n".join(payload))
        if isinstance(event.get("ts"), int | float):
            event["ts"] += seconds * 1e6
        args = event.get("args")
        if isinstance(args, dict) and "compile_id" in args:
            args["compile_id"] = _shift_id(args["compile_id"], frames)
        payload = json.dumps(event, indent=0).split("\n")
    if payload is not None:
        meta["has_payload"] = hashlib.md5("\n".join(payload).encode()).hexdigest()
    when = record.when + dt.timedelta(seconds=seconds)
    head = f"{record.level}{when:%m%d %H:%M:%S.%f} {pid} {record.where}] {json.dumps(meta)}\n"
    if not payload:
        return head if payload is None else head + "\t\n"
    return head + "".join(f"\t{line}\n" for line in payload)


def make_log(sources: list[Path], out: Path, megabytes: float) -> dict[str, Any]:
    """Copies of `sources`, in turn, into `out` until it holds `megabytes` MB; returns what
    the made log holds."""
    logs = [read_records(path) for path in sources]
    pid = logs[0][0].pid  # one process
    base = logs[0][0].when
    target = int(megabytes * 1e6)
    frames = copies = compiles = written = 0
    elapsed = 0.0  # where the next copy starts, seconds after the first copy's first record
    with open(out, "w", encoding="utf-8", newline="\n") as handle:
        while written < target:
            records = logs[copies % len(logs)]
            shift = (base - records[0].when).total_seconds() + elapsed
            written += _write(handle, records, frames, shift, pid)
            elapsed += (records[-1].when - records[0].when).total_seconds() + _GAP_S
            frames += _frames(records)
            compiles += sum(1 for r in records if "compilation_metrics" in r.meta)
            copies += 1
    return {
        "file": str(out),
        "mb": round(out.stat().st_size / 1e6, 1),
        "copies": copies,
        "compiles": compiles,
        "frames": frames,
        "span_h": round(elapsed / 3600, 2),
        "sources": [str(p) for p in sources],
    }


def _write(handle: IO[str], records: list[Record], frames: int, shift: float, pid: int) -> int:
    size = 0
    for record in records:
        text = _copy(record, frames, shift, pid)
        handle.write(text)
        size += len(text.encode())
    return size


# --- measuring -----------------------------------------------------------------------------------

DIAG_CHILD = r"""
import json, sys, time
start = time.perf_counter()
from pathlib import Path
from diag.trace.inputs import open_input
imported = time.perf_counter()
trace = open_input(torch_trace=Path(sys.argv[1]))
done = time.perf_counter()
run = trace.compiled
stats = trace.manifest["torch_trace"]
print(json.dumps({"import_s": imported - start, "ingest_s": done - imported,
                  "compiles": len(run.compiles), "records": stats["records"],
                  "corrupt": stats["corrupt_payloads"], "skipped": stats["skipped_lines"]}))
"""

# One compilation_metrics artifact per compile in tlparse's compile_directory.json.
COUNT_CHILD = r"""
import json, sys
directory = json.load(open(sys.argv[1]))
print(sum(1 for entry in directory.values() for artifact in entry.get("artifacts", [])
          if str(artifact.get("name", "")).startswith("compilation_metrics")))
"""

# The importer with its later stages switched off, for where the time goes: a line that does not
# open with a tab is only found and its prefix matched ("lines"), or also its JSON decoded
# ("envelopes"), but the record is not handled. CPU seconds (process_time): on a shared machine
# they move less than wall time.
STAGE_CHILD = r"""
import json, sys, time
from pathlib import Path
import diag.trace.torchtrace as tt
stage, path = sys.argv[1], Path(sys.argv[2])

def found(self, match, buf, begin, end):
    self.found, self.current = True, tt._UNREAD
    return min(match.end() + 1, end)

def decoded(self, match, buf, begin, end):
    self.found, self.current = True, tt._UNREAD
    if match.group("pid") is not None:
        tt._JSON.decode(match.group("body"))
    return min(match.end() + 1, end)

start = time.process_time()
if stage == "read":
    with open(path, "rb") as handle:
        while handle.read(tt._BLOCK):
            pass
else:
    if stage in ("lines", "envelopes"):
        tt._Scan._line = found if stage == "lines" else decoded
    tt.load_torch_trace(path)
print(json.dumps({"seconds": time.process_time() - start}))
"""
STAGES = {
    "read": "read the file in blocks",
    "lines": "find record lines, match their prefix",
    "envelopes": "decode each record's JSON",
    "full": "handle records, read kept payloads",
}

VARIANTS = {
    "diag": "diag open_input(torch_trace=LOG)",
    "diag-nocache": "diag, no bytecode cache",
    "tlparse": "tlparse LOG (default: HTML)",
    "tlparse-plain": "tlparse LOG --plain-text",
}


def run_child(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """One process: its wall time from start to exit, peak RSS from wait4, its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if code != 0:
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"{argv[0]} exited {code}:\n{tail}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "stdout": stdout,
    }


def diag_env(scratch: Path, cache: bool = True) -> dict[str, str]:
    """diag's child environment. With `cache`, Python's bytecode cache in a folder of the bench's
    own, as an installed package has (pip compiles it at install; a source checkout writes
    __pycache__ on first import): a shell with PYTHONDONTWRITEBYTECODE=1 (this machine's) would
    otherwise compile every diag module on every start. Without, the sources compile each run."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPO)}
    if cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def measure_one(mode: str, log: Path, scratch: Path) -> dict[str, Any]:
    if mode in ("diag", "diag-nocache"):
        env = diag_env(scratch, cache=mode == "diag")
        result = run_child([sys.executable, "-c", DIAG_CHILD, str(log)], env)
        result.update(json.loads(result.pop("stdout").strip().splitlines()[-1]))
        return result
    out = scratch / "tl_out"
    shutil.rmtree(out, ignore_errors=True)
    argv = [str(TLPARSE), str(log), "-o", str(out), "--overwrite", "--no-browser"]
    if mode == "tlparse-plain":
        argv.append("--plain-text")
    result = run_child(argv)
    result.pop("stdout")
    # Counted in a child: parsing tlparse's directory here would grow this process, and a
    # child's ru_maxrss counts the pages it was forked with, before its exec.
    counted = subprocess.run(
        [sys.executable, "-c", COUNT_CHILD, str(out / "compile_directory.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    result["compiles"] = int(counted.stdout)
    shutil.rmtree(out, ignore_errors=True)
    return result


def measure_size(log: Path, repeats: int, modes: list[str], scratch: Path) -> dict[str, Any]:
    samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    loads: list[float] = []
    measure_one("diag", log, scratch)  # unmeasured: fills the bytecode cache, reads the log in
    for repeat in range(repeats):
        order = modes[repeat % len(modes) :] + modes[: repeat % len(modes)]
        for mode in order:
            loads.append(os.getloadavg()[0])
            sample = measure_one(mode, log, scratch)
            samples[mode].append(sample)
            print(
                f"  {log.name} [{repeat + 1}/{repeats}] {VARIANTS[mode]:<34} "
                f"{sample['wall_s']:7.2f} s (cpu {sample['cpu_s']:6.2f} s) "
                f"{sample['peak_rss_mb']:7.0f} MB  "
                f"load {loads[-1]:.2f}",
                file=sys.stderr,
            )
    size_mb = log.stat().st_size / 1e6
    summary: dict[str, Any] = {}
    for mode, runs in samples.items():
        median = statistics.median(s["wall_s"] for s in runs)
        summary[mode] = {
            "median_s": median,
            "runs_s": [round(s["wall_s"], 3) for s in runs],
            "cpu_s": statistics.median(s["cpu_s"] for s in runs),
            "mb_per_s": size_mb / median,
            "peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in runs),
            "compiles": runs[0]["compiles"],
        }
        if mode in ("diag", "diag-nocache"):
            summary[mode]["import_s"] = statistics.median(s["import_s"] for s in runs)
            summary[mode]["ingest_s"] = statistics.median(s["ingest_s"] for s in runs)
            summary[mode]["records"] = runs[0]["records"]
            summary[mode]["corrupt"] = runs[0]["corrupt"]
    return {
        "mb": round(size_mb, 1),
        "variants": summary,
        "load_min": round(min(loads), 2),
        "load_max": round(max(loads), 2),
    }


def measure_stages(log: Path, repeats: int, scratch: Path) -> dict[str, Any]:
    env = diag_env(scratch)
    runs: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for repeat in range(repeats):
        for stage in STAGES:
            result = run_child([sys.executable, "-c", STAGE_CHILD, stage, str(log)], env)
            runs[stage].append(json.loads(result["stdout"].strip().splitlines()[-1])["seconds"])
            print(f"  stage [{repeat + 1}/{repeats}] {stage:<10} {runs[stage][-1]:6.2f} s",
                  file=sys.stderr)  # fmt: skip
    medians = {stage: statistics.median(values) for stage, values in runs.items()}
    out: dict[str, Any] = {}
    previous = 0.0
    for stage, value in medians.items():
        out[stage] = {"cumulative_s": value, "stage_s": max(value - previous, 0.0)}
        previous = value
    return out


# --- the report ----------------------------------------------------------------------------------


def table(info: dict[str, Any]) -> str:
    lines = [
        f"command: {info['command']}",
        f"machine: {info['cpus']} CPUs; python {info['python']}, msgspec {info['msgspec']}, "
        f"tlparse {info['tlparse']}; {info['repeats']} repeat(s), variants alternating",
        f"load average {info['load_before']} before, {info['load_after']} after",
        f"logs made from {', '.join(Path(p).name for p in info['sources'])}",
        "",
    ]
    for size in info["sizes"]:
        made = size["made"]
        lines.append(
            f"{made['mb']} MB log: {made['copies']} copies, {made['compiles']} compiles, "
            f"{made['frames']} frames, {made['span_h']} h; load {size['load_min']}-"
            f"{size['load_max']} while measured"
        )
        lines.append(
            f"  {'variant':<34} {'median s':>9} {'MB/s':>7} {'CPU s':>7} {'peak RSS MB':>12} "
            f"{'compiles':>9}  runs (s)"
        )
        for mode, label in VARIANTS.items():
            v = size["variants"].get(mode)
            if v is None:
                continue
            runs = " ".join(f"{s:.2f}" for s in v["runs_s"])
            lines.append(
                f"  {label:<34} {v['median_s']:9.2f} {v['mb_per_s']:7.0f} {v['cpu_s']:7.2f} "
                f"{v['peak_rss_mb']:12.0f} {v['compiles']:9}  {runs}"
            )
        diag = size["variants"]["diag"]
        rest = diag["median_s"] - diag["ingest_s"] - diag["import_s"]
        lines.append(
            f"  diag's wall: import call {diag['ingest_s']:.2f} s "
            f"({size['mb'] / diag['ingest_s']:.0f} MB/s), imports {diag['import_s']:.3f} s, "
            f"interpreter start and exit {rest:.3f} s; {diag['records']:,} records, "
            f"{diag['corrupt']} corrupt payloads"
        )
        if "diag-nocache" in size["variants"]:
            cold = size["variants"]["diag-nocache"]
            lines.append(
                f"  without a bytecode cache diag's imports take {cold['import_s']:.3f} s "
                f"(whole process {cold['median_s']:.2f} s)"
            )
        for mode in ("tlparse", "tlparse-plain"):
            if mode in size["variants"]:
                theirs = size["variants"][mode]
                ratio = theirs["median_s"] / diag["median_s"]
                cpu = theirs["cpu_s"] / diag["cpu_s"]
                rss = diag["peak_rss_mb"] / theirs["peak_rss_mb"]
                lines.append(
                    f"  {VARIANTS[mode]} / diag: wall {ratio:.1f}x (target >= 10x), CPU time "
                    f"{cpu:.1f}x, peak RSS diag/tlparse {rss:.2f}"
                )
        lines.append("")
    rss = [size["variants"]["diag"]["peak_rss_mb"] for size in info["sizes"]]
    mbs = [size["mb"] for size in info["sizes"]]
    lines.append(
        "diag peak RSS by log size: "
        + ", ".join(f"{mb} MB -> {r:.0f} MB" for mb, r in zip(mbs, rss, strict=True))
    )
    if info.get("stages"):
        lines += [
            "",
            f"where diag's time goes ({info['stages_log']}, CPU s, medians, own child each):",
        ]
        total = info["stages"]["full"]["cumulative_s"]
        for stage, label in STAGES.items():
            value = info["stages"][stage]
            lines.append(
                f"  {stage:<10} {label:<40} {value['stage_s']:6.2f} s "
                f"{100 * value['stage_s'] / total:4.0f}%"
            )
        lines.append(f"  {'':<10} {'sum (the import call)':<40} {total:6.2f} s")
    return "\n".join(lines)


def _sizes(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_sizes, default=[40.0, 150.0, 400.0], help="MB, comma")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stage-repeats", type=int, default=3)
    parser.add_argument(
        "--stages-mb", type=float, default=150.0, help="profile the log nearest this size"
    )
    parser.add_argument(
        "--html-up-to",
        type=float,
        default=200.0,
        metavar="MB",
        help="run tlparse's default (HTML) mode only on logs up to this size (it takes 10x "
        "diag's time and more: a 400 MB log alone would take minutes on a loaded machine)",
    )
    parser.add_argument("--source", type=Path, nargs="+", default=list(DEFAULT_SOURCES))
    parser.add_argument(
        "--modes",
        default="diag,diag-nocache,tlparse,tlparse-plain",
        help="variants, comma-separated (of: " + ", ".join(VARIANTS) + ")",
    )
    parser.add_argument("--workdir", type=Path, help="keep the made logs here (reused)")
    parser.add_argument("--make", type=float, metavar="MB", help="only write one log of MB")
    parser.add_argument("--out", type=Path, help="with --make: where")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.make:
        if args.out is None:
            parser.error("--make needs --out")
        print(json.dumps(make_log(args.source, args.out, args.make)))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    if "diag" not in modes or any(m not in VARIANTS for m in modes):
        parser.error(f"--modes: diag and any of {', '.join(VARIANTS)}")
    with tempfile.TemporaryDirectory(prefix="diag-torchtrace-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        info: dict[str, Any] = {
            "command": " ".join(["python bench/torchtrace_ingest.py", *(argv or sys.argv[1:])]),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "msgspec": metadata.version("msgspec"),
            "tlparse": subprocess.run(
                [str(TLPARSE), "--version"], capture_output=True, text=True, check=True
            ).stdout.split()[-1],
            "repeats": args.repeats,
            "sources": [str(p) for p in args.source],
            "load_before": round(os.getloadavg()[0], 2),
            "sizes": [],
        }
        logs: list[Path] = []
        for megabytes in args.sizes:
            log = work / f"dedicated_log_torch_trace_{int(megabytes)}mb.log"
            made_file = log.with_suffix(".json")
            if log.is_file() and made_file.is_file():
                made = json.loads(made_file.read_text())
            else:
                # In a child: the sources' records would stay in this process's heap, and a
                # child's ru_maxrss counts the parent's pages it was forked with.
                print(f"making a {megabytes:g} MB log in {log}", file=sys.stderr)
                sources = [str(p) for p in args.source]
                argv = [__file__, "--make", str(megabytes), "--out", str(log), "--source"]
                made_out = subprocess.run(
                    [sys.executable, *argv, *sources], capture_output=True, text=True, check=True
                )
                made = json.loads(made_out.stdout)
                made_file.write_text(json.dumps(made))
            logs.append(log)
            these = [m for m in modes if m != "tlparse" or megabytes <= args.html_up_to]
            size = measure_size(log, args.repeats, these, work)
            size["made"] = made
            info["sizes"].append(size)
        if args.stage_repeats:
            nearest = min(logs, key=lambda p: abs(p.stat().st_size / 1e6 - args.stages_mb))
            info["stages_log"] = f"{nearest.stat().st_size / 1e6:.1f} MB log"
            info["stages"] = measure_stages(nearest, args.stage_repeats, work)
        info["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(info, indent=1) if args.json else table(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
