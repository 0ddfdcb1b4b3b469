"""diag's readers beside tlparse and HTA, file by file, over a corpus of public logs and traces.

    python bench/agreement.py CORPUS_DIR... [--out FILE]

CORPUS_DIR holds TORCH_TRACE logs (`*.log`, `*.log.gz`, `*_log.txt`) and Kineto traces
(`*.json`, `*.json.gz`): pytorch/tlparse's tests/inputs, HTA's tests/data, /work/shared/data
(fetched repositories are not in CI, so the corpus is an argument). Per TORCH_TRACE log: compiles,
recompiles and failures from diag's importer and from `tlparse --plain-text`'s
compile_directory.json and failures table. Per Kineto trace: kernel and memcpy counts and total
time from diag's reader and from HTA's parse (`TraceAnalysis`, include_last_profiler_step), and
GPU idle: HTA's temporal breakdown against diag's union of GPU activity over the same span (and
diag's per-step idle beside it). Each difference gets the reason found for it, or "unexplained".
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from diag.errors import DiagError  # noqa: E402

TLPARSE = Path(sys.executable).with_name("tlparse")
_ID = re.compile(r"^\[(?:!\d+/)?(\d+)/(\d+)(?:_(\d+))?\]$")
_FAILURE_ROW = re.compile(
    r"\[(?P<id>[^\]]+)\](?:</a>)?\s*</td>\s*<td>\s*(?:<pre>)?(?P<type>[^<]*)", re.S
)


@dataclass
class Row:
    file: str
    kind: str  # "torch-trace" | "kineto"
    ours: dict[str, Any] = field(default_factory=dict)
    theirs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --- TORCH_TRACE: diag beside tlparse ----------------------------------------------------------


def _diag_torch_trace(path: Path) -> dict[str, Any]:
    from diag.trace.torchtrace import load_torch_trace

    trace = load_torch_trace(path)
    run = trace.compiled
    assert run is not None
    compiles = run.compiles
    return {
        "compiles": len(compiles),
        "recompiles": sum(1 for c in compiles if _attempt(c.compile_id) > 0),
        "failures": sum(1 for c in compiles if c.result in ("failed", "recompile_limit")),
        "ids": sorted(c.compile_id for c in compiles),
        "failed_ids": sorted(c.compile_id for c in compiles if c.result != "ok"),
        "warnings": trace.manifest["torch_trace"]["warnings"],
    }


def _attempt(compile_id: str) -> int:
    part = compile_id.rsplit("/", 1)[-1]
    return int(part) if part.isdigit() else 0


def _tlparse(path: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agreement-tlparse-") as tmp:
        source = path
        if path.name.endswith(".gz"):  # tlparse reads plain text only
            source = Path(tmp) / path.name.removesuffix(".gz")
            source.write_bytes(gzip.decompress(path.read_bytes()))
        out = Path(tmp) / "out"
        proc = subprocess.run(
            [str(TLPARSE), str(source), "-o", str(out), "--no-browser", "--plain-text"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        directory = out / "compile_directory.json"
        if not directory.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"error": f"tlparse exit {proc.returncode}: {tail[0][:120]}"}
        entries = json.loads(directory.read_text())
        failures_html = out / "failures_and_restarts.html"
        table = failures_html.read_text() if failures_html.is_file() else ""
    compiles = []
    for key, value in entries.items():
        # One compilation_metrics artifact per compile: an id seen again after
        # torch._dynamo.reset() keeps one directory entry with several of them.
        names = [a.get("name", "") for a in value.get("artifacts", [])]
        compiles.extend(key for n in names if n.startswith("compilation_metrics"))
    failures = [
        m.group("id")
        for m in _FAILURE_ROW.finditer(table)
        if m.group("type").strip() and m.group("type").strip() != "RestartAnalysis"
    ]
    ids = []
    for key in compiles:
        match = _ID.match(key)
        ids.append(f"{match.group(1)}/{match.group(2)}" if match else key.strip("[]"))
    return {
        "compiles": len(compiles),
        "recompiles": sum(1 for i in ids if _attempt(i) > 0),
        "failures": len(failures),
        "ids": sorted(ids),
        "failed_ids": sorted(f.split("_")[0] for f in failures),
    }


def _explain_torch_trace(row: Row) -> None:
    ours, theirs = row.ours, row.theirs
    if "error" in ours or "error" in theirs:
        if "error" in ours and "error" in theirs:
            row.notes.append("both refuse the file")
        elif "error" in ours:
            row.notes.append(f"diag refuses it: {ours['error']}")
        else:
            row.notes.append(f"tlparse fails on it: {theirs['error']}")
        return
    for key in ("compiles", "recompiles", "failures"):
        if ours[key] == theirs[key]:
            continue
        only_ours = sorted(set(ours["ids"]) - set(theirs["ids"]))
        only_theirs = sorted(set(theirs["ids"]) - set(ours["ids"]))
        reason = "unexplained"
        if key == "failures":
            extra = sorted(set(ours["failed_ids"]) ^ set(theirs["failed_ids"]))
            reason = f"compile ids that differ: {', '.join(extra) or 'none (same ids)'}"
        elif only_theirs and not only_ours and any("payload" in w for w in ours["warnings"]):
            reason = (
                f"tlparse lists {', '.join(only_theirs[:4])}: their compilation_metrics record "
                "is in a payload diag skipped (md5 mismatch)"
            )
        elif only_ours or only_theirs:
            reason = (
                f"only diag: {', '.join(only_ours[:4]) or '-'}; "
                f"only tlparse: {', '.join(only_theirs[:4]) or '-'}"
            )
        row.notes.append(f"{key} {ours[key]} vs {theirs[key]}: {reason}")


# --- Kineto: diag beside HTA -------------------------------------------------------------------


def _diag_kineto(path: Path) -> dict[str, Any]:
    from diag.evidence.offload import breakdown, union_s
    from diag.trace.kineto import read_kineto
    from diag.trace.profiles import profiles_from_kineto

    trace = read_kineto(path)
    kernels = [a for a in trace.activities if a.kind == "kernel"]
    copies = [a for a in trace.activities if a.kind == "memcpy"]
    # GPU work with no launch record belongs to no step (diag.trace.profiles): idle is measured
    # over the launched work, as per step.
    launched = any(a.launch_ts >= 0 for a in trace.activities)
    gpu = [a for a in trace.activities if a.launch_ts >= 0 or not launched]
    span = (max(a.ts + a.dur for a in gpu) - min(a.ts for a in gpu)) / 1e6 if gpu else 0.0
    busy = union_s([(a.ts, a.ts + a.dur) for a in gpu])
    profiles = profiles_from_kineto("compiled", trace)
    step_idle = sum(breakdown(p).idle_s for p in profiles if p.activities)
    return {
        "platform": trace.platform,
        "kernels": len(kernels),
        "kernel_ms": sum(k.dur for k in kernels) / 1e3,
        "memcpys": len(copies),
        "memcpy_ms": sum(c.dur for c in copies) / 1e3,
        "idle_ms": max(0.0, span - busy) * 1e3,
        "step_idle_ms": step_idle * 1e3,
        "steps": len(profiles),
        "unlaunched_kernels": sum(1 for a in kernels if a.launch_ts < 0),
        "unlaunched_kernel_ms": sum(a.dur for a in kernels if a.launch_ts < 0) / 1e3,
        "unlaunched_memcpys": sum(1 for a in copies if a.launch_ts < 0),
        "unlaunched_memcpy_ms": sum(a.dur for a in copies if a.launch_ts < 0) / 1e3,
    }


def _hta(path: Path) -> dict[str, Any]:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory(prefix="agreement-hta-") as tmp:
        name = "rank0.json.gz" if path.name.endswith(".gz") else "rank0.json"
        shutil.copyfile(path, Path(tmp) / name)
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                analysis = TraceAnalysis(
                    trace_files={0: str(Path(tmp) / name)},
                    trace_dir=tmp,
                    include_last_profiler_step=True,
                )
                frame = analysis.t.get_trace(0)
                symbols = analysis.t.symbol_table.get_sym_id_map()
                try:
                    temporal = analysis.get_temporal_breakdown(visualize=False)
                    idle: float | None = float(temporal.iloc[0]["idle_time(us)"]) / 1e3
                except Exception as exc:  # HTA's own limits (no GPU kernels, no streams)
                    idle = None
                    del exc
    from diag.evidence.offload import union_s

    # Both spellings: 2021 traces say Kernel and Memcpy (HTA keeps the category as written).
    kernels = frame[frame["cat"].isin([symbols.get(c, -9) for c in ("kernel", "Kernel")])]
    copies = frame[frame["cat"].isin([symbols.get(c, -9) for c in ("gpu_memcpy", "Memcpy")])]
    names = {v: k for k, v in symbols.items()}
    streams = frame[frame["stream"].ne(-1)]
    on_streams: dict[str, int] = {}
    for cat in streams["cat"]:
        on_streams[names.get(cat, str(cat))] = on_streams.get(names.get(cat, str(cat)), 0) + 1
    # HTA's idle over the same activity kinds diag counts (its own counts cuda_sync too).
    same = streams[streams["cat"].isin([symbols.get(c, -9) for c in _GPU_CATS])]
    starts = same["ts"].astype(float)
    spans = list(zip(starts, starts + same["dur"].astype(float), strict=True))
    same_idle = None
    if spans:
        window = (max(e for _, e in spans) - min(b for b, _ in spans)) / 1e6
        same_idle = max(0.0, window - union_s(spans)) * 1e3
    return {
        "kernels": len(kernels),
        "kernel_ms": float(kernels["dur"].sum()) / 1e3,
        "memcpys": len(copies),
        "memcpy_ms": float(copies["dur"].sum()) / 1e3,
        "idle_ms": idle,
        "idle_same_kinds_ms": same_idle,
        "on_streams": on_streams,
    }


_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")


def _raw_categories(path: Path) -> dict[str, int]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:  # type: ignore[operator]
        document = json.loads(handle.read())
    events = document.get("traceEvents", []) if isinstance(document, dict) else document
    counts: dict[str, int] = {}
    for event in events if isinstance(events, list) else []:
        if isinstance(event, dict):
            cat = str(event.get("cat"))
            counts[cat] = counts.get(cat, 0) + 1
    return counts


def _explain_kineto(row: Row, path: Path) -> None:
    ours, theirs = row.ours, row.theirs
    if "error" in ours or "error" in theirs:
        if "error" in ours and "error" in theirs:
            row.notes.append("both refuse the file")
        elif "error" in ours:
            row.notes.append(f"diag refuses it: {ours['error']}")
        else:
            row.notes.append(f"HTA fails on it: {theirs['error']}")
        return
    categories = _raw_categories(path)
    dropped, unexplained = [], []
    checks = (("kernels", 0), ("kernel_ms", 1e-6), ("memcpys", 0), ("memcpy_ms", 1e-6))
    for key, tolerance in checks:
        a, b = ours[key], theirs[key]
        if abs(a - b) <= tolerance * max(1.0, abs(b)):
            continue
        unlaunched = ours.get(f"unlaunched_{key}", 0)
        if unlaunched and abs((a - unlaunched) - b) <= tolerance * max(1.0, abs(b)) + 1e-9:
            dropped.append(f"{key} {_fmt(a)} vs {_fmt(b)}")
        else:
            unexplained.append(f"{key} {_fmt(a)} vs {_fmt(b)}")
    if dropped:
        row.notes.append(
            f"{', '.join(dropped)}: HTA drops the GPU work that has no launch record in the "
            f"trace ({ours['unlaunched_kernels']} kernels, {ours['unlaunched_memcpys']} "
            "memcpys); diag keeps it in its totals and leaves it out of every step"
        )
    if unexplained:
        row.notes.append(f"{', '.join(unexplained)}: unexplained")
    device_cats = {c: n for c, n in categories.items() if c.startswith(("mtia", "privateuse1"))}
    idle_ours, idle_theirs = ours["idle_ms"], theirs["idle_ms"]
    same = theirs.get("idle_same_kinds_ms")
    if idle_theirs is None:
        row.notes.append("HTA gives no temporal breakdown (no GPU kernels); diag warns the same")
    elif abs(idle_ours - idle_theirs) > max(0.5, 0.01 * idle_theirs):
        extra = {c: n for c, n in theirs.get("on_streams", {}).items() if c not in _GPU_CATS}
        if device_cats and not ours["kernels"]:
            reason = f"HTA reads device events diag does not (diag warns of them): {device_cats}"
        elif same is not None and abs(idle_ours - same) <= max(0.5, 0.01 * same):
            reason = (
                f"HTA's idle also counts {extra} on GPU streams as busy; over kernels, copies "
                f"and memsets alone its own frame gives {same:.1f} ms"
            )
        else:
            reason = "unexplained"
        row.notes.append(f"idle {idle_ours:.1f} vs {idle_theirs:.1f} ms: {reason}")


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


# --- the corpus --------------------------------------------------------------------------------


def _kind(path: Path) -> str | None:
    name = path.name
    if name.endswith((".log", ".log.gz", "_log.txt")):
        return "torch-trace"
    if name.endswith((".json", ".json.gz")) and "/critical_path/end_to_end/" not in str(path):
        return "kineto"
    return None


def _files(roots: list[Path]) -> list[tuple[Path, str, Path]]:
    found = []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            kind = _kind(path)
            if kind is not None and path.stat().st_size > 0:
                found.append((root, kind, path))
    return found


def _measure(root: Path, kind: str, path: Path) -> Row:
    row = Row(f"{root.parent.name}/{root.name}/{path.relative_to(root)}", kind)
    ours_fn, theirs_fn = (
        (_diag_torch_trace, _tlparse) if kind == "torch-trace" else (_diag_kineto, _hta)
    )
    try:
        row.ours = ours_fn(path)
    except DiagError as exc:
        row.ours = {"error": exc.message.split(": ", 1)[-1][:120]}
    try:
        row.theirs = theirs_fn(path)
    except Exception as exc:  # the other tool's failure is a result, not ours
        row.theirs = {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    if kind == "torch-trace":
        _explain_torch_trace(row)
    else:
        _explain_kineto(row, path)
    return row


def _verdict(row: Row) -> str:
    if not row.notes:
        return "yes"
    return "NO" if any("unexplained" in n for n in row.notes) else "explained"


def _line(row: Row) -> str:
    def cell(values: dict[str, Any], keys: tuple[str, ...]) -> str:
        if "error" in values:
            return "error"
        return " ".join(_fmt(values[k]) if values.get(k) is not None else "-" for k in keys)

    keys = (
        ("compiles", "recompiles", "failures")
        if row.kind == "torch-trace"
        else ("kernels", "kernel_ms", "memcpys", "memcpy_ms", "idle_ms")
    )
    agree = _verdict(row)
    notes = "; ".join(row.notes) or ""
    return f"| {row.file} | {cell(row.ours, keys)} | {cell(row.theirs, keys)} | {agree} | {notes} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", type=Path, help="folders of logs and traces")
    parser.add_argument("--out", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    missing = [p for p in args.corpus if not p.is_dir()]
    if missing:
        print(f"agreement: no such folder: {missing[0]}", file=sys.stderr)
        return 2
    rows = []
    for root, kind, path in _files(args.corpus):
        rows.append(_measure(root, kind, path))
        print(_line(rows[-1]), file=sys.stderr, flush=True)
    out = []
    for kind, theirs, keys in (
        ("torch-trace", "tlparse", "compiles recompiles failures"),
        ("kineto", "HTA", "kernels kernel_ms memcpys memcpy_ms idle_ms"),
    ):
        chosen = [r for r in rows if r.kind == kind]
        if not chosen:
            continue
        verdicts = [_verdict(r) for r in chosen]
        out.append(
            f"{kind}: {len(chosen)} files; {verdicts.count('yes')} agree with {theirs}, "
            f"{verdicts.count('explained')} differ for the reason given, "
            f"{verdicts.count('NO')} differ unexplained"
        )
        out.append("")
        out.append(f"| file | diag: {keys} | {theirs} | agree | difference, explained |")
        out.append("|---|---|---|---|---|")
        out.extend(_line(r) for r in chosen)
        out.append("")
    text = "\n".join(out)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
