"""The report's "Inside the compiler" tables: each compile's time by phase and cache hits
(`compile_timing`), and per compiled frame its dims: symbolic ones with the values the frame's
sampled calls had, and the ones Dynamo baked in (`shape_symbol`, `shape_specialization`,
`call_shapes`). Every trace string is escaped here."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from diag.evidence.frames import label as frame_label
from diag.evidence.shapes import sampled_dims, size_source
from diag.report.escape import html_text
from diag.trace.cudagraph_counts import graphs_by_compile
from diag.trace.run import Compile, Event, Frame, RunData

_PHASES = (
    ("total_s", "total"),
    ("dynamo_s", "Dynamo"),
    ("aot_s", "AOTAutograd"),
    ("inductor_s", "Inductor"),
    ("codegen_s", "codegen"),
    ("triton_s", "Triton"),
    ("autotune_s", "autotuning"),
    ("runtime_autotune_s", "autotuning at 1st call"),
    ("cudagraphify_s", "CUDA-graph capture"),
)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _key(pid: int, data: dict[str, Any]) -> tuple[int, int, str]:
    epoch = data.get("epoch")
    return (pid, epoch if isinstance(epoch, int) else 0, str(data.get("compile_id")))


def _cell(value: object) -> str:
    return f"<td>{html_text(value)}</td>"


def _seconds(value: float) -> str:
    return f"{value:.3f} s" if value else ""


def phase_table(run: RunData, limit: int = 200) -> str:
    """One row per compile with `compile_timing`: seconds by phase and cache hits/misses."""
    by_compile: dict[tuple[int, int, str], list[Event]] = defaultdict(list)
    for event in run.of("compile_timing"):
        by_compile[_key(event.pid, event.data)].append(event)
    if not by_compile:
        return ""
    compiles = {(c.pid, c.epoch, c.compile_id): c for c in run.compiles}
    shown = [k for k, _ in sorted(by_compile.items(), key=lambda kv: kv[1][0].t)][:limit]
    used = [
        (key, label)
        for key, label in _PHASES
        if any(_number(e.data.get(key)) for k in shown for e in by_compile[k])
    ]
    head = "".join(f"<th>{html_text(label)}</th>" for _, label in used)
    rows = []
    for key in shown:
        events = by_compile[key]
        item = compiles.get(key)
        frame = frame_label(run, item.frame) if item is not None else "?"
        caches = []
        for event in events:
            for name, counts in (event.data.get("caches") or {}).items():
                if isinstance(counts, dict):
                    caches.append(
                        f"{name}: {int(_number(counts.get('hit')))} hit, "
                        f"{int(_number(counts.get('miss')))} miss"
                    )
        cells = "".join(
            _cell(_seconds(sum(_number(e.data.get(phase)) for e in events))) for phase, _ in used
        )
        rows.append(
            f"<tr>{_cell(key[2])}{_cell(frame)}{cells}{_cell('; '.join(caches) or '-')}</tr>"
        )
    more = len(by_compile) - len(shown)
    note = f"<p>and {more} more compile(s) left out</p>" if more > 0 else ""
    return (
        '<table class="compile-phases"><thead><tr><th>compile</th><th>frame</th>'
        f"{head}<th>caches</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"
    )


def cudagraph_table(run: RunData, limit: int = 200) -> str:
    """One row per compile whose CUDA graphs were recorded: in warmup, live, and which requests."""
    counts = graphs_by_compile(run)
    if not counts:
        return ""
    compiles = {(c.pid, c.compile_id): c for c in run.compiles}
    rows = []
    for (pid, compile_id), count in list(counts.items())[:limit]:
        item = compiles.get((pid, compile_id))
        frame = frame_label(run, item.frame) if item is not None else "?"
        rows.append(
            f"<tr>{_cell(compile_id)}{_cell(frame)}{_cell(count.warmup)}{_cell(count.live)}"
            f"{_cell(', '.join(count.live_requests) or '-')}"
            f"{_cell(f'{count.capture_s * 1000:.1f} ms')}</tr>"
        )
    return (
        '<table class="cudagraphs"><thead><tr><th>compile</th><th>frame</th>'
        "<th>CUDA graphs in warmup</th><th>live</th><th>live requests</th><th>capture</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _calls(values: dict[tuple[str, int], set[int]], source: str) -> str:
    key = size_source(source)
    if key is None:
        return "not an argument"
    seen = values.get(key)
    if not seen:
        return "not sampled"
    return ", ".join(map(str, sorted(seen)[:8])) + (" ..." if len(seen) > 8 else "")


def dims_table(run: RunData, limit: int = 200) -> str:
    """Per compiled frame, each dim made symbolic (first compile that did) and each baked in."""
    compiles: dict[tuple[int, int, str], Compile] = {
        (c.pid, c.epoch, c.compile_id): c for c in run.compiles
    }
    sampled = sampled_dims(run)
    rows: list[str] = []
    seen: set[tuple[int, Frame | None, str, str]] = set()
    for kind, event_kind in (("symbolic", "shape_symbol"), ("baked in", "shape_specialization")):
        for event in run.of(event_kind):
            item = compiles.get(_key(event.pid, event.data))
            frame = item.frame if item is not None else None
            if kind == "symbolic":
                sources = [str(event.data.get("source"))]
            else:
                sources = [str(s) for s in event.data.get("sources") or []][:3]
            source = ", ".join(sources)
            if (event.pid, frame, kind, source) in seen or len(rows) >= limit:
                continue
            seen.add((event.pid, frame, kind, source))
            values = sampled.get((event.pid, frame), {}) if frame is not None else {}
            rows.append(
                "<tr>"
                + _cell(frame_label(run, frame) if frame is not None else "?")
                + _cell(event.data.get("compile_id"))
                + _cell(kind)
                + _cell(event.data.get("symbol"))
                + _cell(source)
                + _cell(event.data.get("value"))
                + _cell(_calls(values, sources[0]) if sources else "")
                + _cell(event.data.get("user_location") or "")
                + "</tr>"
            )
    if not rows:
        return ""
    return (
        '<table class="compile-dims"><thead><tr><th>frame</th><th>compile</th><th>dim</th>'
        "<th>symbol</th><th>source</th><th>value</th><th>values in calls</th><th>where</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
