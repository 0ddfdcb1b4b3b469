"""The figures drawn from a run's events: step times, the compile timeline, cache entries.

One function per figure, each `(run, limits) -> Plot | None` (None: the run has nothing to
draw). Every trace string is passed through `plot_text` before it reaches a label or hover text.
"""

from __future__ import annotations

import os
from collections import defaultdict

import plotly.graph_objects as go  # type: ignore[import-untyped]

from diag.evidence.request_names import request_name
from diag.report.escape import hover, plot_text
from diag.report.plot import (
    Figure,
    Limits,
    Plot,
    log_axis,
    ms,
    ms_text,
    new_figure,
    percentile,
    run_origin,
    seconds,
)
from diag.trace.run import Compile, Frame, RunData, Step

PHASE_COLOURS = {"warmup": "#9aa8d8", "live": "#1f5fa8"}
#: Compile result -> (legend name, colour, marker symbol).
COMPILE_STYLES = {
    "ok": ("compile", "#e8710a", "x"),
    "failed": ("failed compile", "#b00020", "x-open"),
    "recompile_limit": ("recompile-limit hit", "#6a0dad", "star"),
    "cut-off": ("compile cut off (the process ended first)", "#b00020", "triangle-up-open"),
}
_GUARDS_SHOWN = 4


def process_label(run: RunData, pid: int) -> str:
    """`rank 1` or `pid 420`: how the figures name a process when a run has several."""
    for process in run.processes:
        if process.pid == pid and process.rank is not None:
            return f"rank {process.rank}"
    return f"pid {pid}"


def frame_label(frame: Frame | None) -> str:
    if frame is None:
        return "unknown frame"
    if frame.file:
        return f"{frame.name} ({os.path.basename(frame.file)}:{frame.line})"
    return frame.name


def compile_hover(compile_: Compile, run: RunData | None = None) -> str:
    where = compile_.request_id or "outside requests"
    if run is not None and compile_.request_id is not None:
        where = request_name(run, compile_.pid, compile_.request_id)
    if compile_.step is not None:
        where += f" step {compile_.step}"
    lines = [
        f"<b>compile {plot_text(compile_.compile_id)}</b> ({plot_text(compile_.result)})",
        plot_text(frame_label(compile_.frame), 120),
        f"{plot_text(compile_.phase)}: {plot_text(where)}",
    ]
    if compile_.duration_s is not None:
        lines.append(f"{compile_.duration_s:.3f} s")
    lines.extend(
        "failing guard: " + plot_text(guard.raw or guard.source or "", 160)
        for guard in compile_.guards[:_GUARDS_SHOWN]
    )
    if len(compile_.guards) > _GUARDS_SHOWN:
        lines.append(f"... {len(compile_.guards) - _GUARDS_SHOWN} more guard(s)")
    if compile_.fail_reason:
        lines.append("reason: " + plot_text(compile_.fail_reason, 160))
    return hover(lines)


def _step_hover(run: RunData, step: Step, multi: bool) -> str:
    name = request_name(run, step.pid, step.request_id)
    lines = [f"<b>{plot_text(step.phase)} {plot_text(name)} step {step.index}</b>"]
    if multi:
        lines.append(process_label(run, step.pid))
    lines.append(f"wall {ms_text(step.wall_s)} ms")
    if step.gpu_s is not None:
        lines.append(f"GPU {ms_text(step.gpu_s)} ms")
    if step.shape:
        lines.append("shape " + plot_text("x".join(str(d) for d in step.shape)))
    if step.profiled:
        lines.append("profiled (torch.profiler was on)")
    return hover(lines)


def _timed_steps(run: RunData) -> list[Step]:
    return [s for s in run.steps if s.wall_s is not None]


def step_times(run: RunData, limits: Limits, reference: RunData | None = None) -> Plot | None:
    """Step time per request over the run, phases coloured, compiles and profiled steps marked."""
    steps = _timed_steps(run)
    if not steps and not run.compiles:
        return None
    origin = run_origin(run)
    plot = Plot(
        new_figure(
            f"Step time per request ({run.label} run)",
            "time since the run started (s)",
            "step wall time (ms, log scale)",
        )
    )
    walls = [ms(s.wall_s) for s in steps]
    if reference is not None:
        walls += [ms(s.wall_s) for s in _timed_steps(reference) if s.phase == "live"]
    log_axis(plot.figure, walls)
    multi = len({p.pid for p in run.processes}) > 1
    if len(steps) <= limits.step_points:
        _raw_steps(plot.figure, run, steps, origin, multi)
    else:
        plot.notes.append(_aggregated_steps(plot.figure, run, steps, origin, limits, multi))
    _profiled_steps(plot, run, steps, origin, limits, multi)
    shown = drawn_compiles(run.compiles, limits)
    if len(shown) < len(run.compiles):
        plot.notes.append(_compiles_note(shown, run.compiles))
    _compile_markers(plot.figure, shown, origin, run)
    if reference is not None and _timed_steps(reference):
        plot.notes.extend(_reference_steps(plot.figure, run, reference, limits))
    live = [r.start_t for r in run.requests if r.phase == "live"]
    if live:
        plot.figure.add_vline(
            x=seconds(min(live), origin),
            line={"dash": "dot", "color": "#555"},
            annotation_text="live traffic starts",
        )
    return plot


def _groups(steps: list[Step]) -> dict[tuple[str, int], list[Step]]:
    grouped: dict[tuple[str, int], list[Step]] = defaultdict(list)
    for step in sorted(steps, key=lambda s: s.start_t):
        grouped[(step.phase, step.pid)].append(step)
    return grouped


def _trace_name(run: RunData, phase: str, pid: int, multi: bool) -> str:
    name = f"{plot_text(phase)} steps"
    return f"{name} ({process_label(run, pid)})" if multi else name


def _raw_steps(figure: Figure, run: RunData, steps: list[Step], origin: int, multi: bool) -> None:
    for (phase, pid), group in _groups(steps).items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        texts: list[str] = []
        previous: str | None = None
        for step in group:
            if previous is not None and step.request_id != previous:
                xs.append(None)  # break the line between requests
                ys.append(None)
                texts.append("")
            previous = step.request_id
            xs.append(seconds(step.start_t, origin))
            ys.append(ms(step.wall_s))
            texts.append(_step_hover(run, step, multi))
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name=_trace_name(run, phase, pid, multi),
                marker={"color": PHASE_COLOURS.get(phase, "#777"), "size": 5},
                line={"color": PHASE_COLOURS.get(phase, "#777"), "width": 1},
                hovertext=texts,
                hoverinfo="text",
                connectgaps=False,
            )
        )


def _aggregated_steps(
    figure: Figure, run: RunData, steps: list[Step], origin: int, limits: Limits, multi: bool
) -> str:
    """Per request (or per run of consecutive requests): median with a p10-p90 bar, and the
    slowest step, so a step-0 spike stays visible."""
    buckets = 0
    for (phase, pid), group in _groups(steps).items():
        by_request: dict[str, list[Step]] = defaultdict(list)
        for step in group:
            by_request[step.request_id].append(step)
        requests = list(by_request.items())
        size = max(1, -(-len(requests) // max(1, limits.step_points // 4)))
        xs, medians, up, down, texts, slow_x, slow_y, slow_text = ([] for _ in range(8))
        for start in range(0, len(requests), size):
            chunk = requests[start : start + size]
            members = [s for _, chunk_steps in chunk for s in chunk_steps]
            walls = sorted(ms(s.wall_s) or 0.0 for s in members)
            median = percentile(walls, 50)
            label = plot_text(chunk[0][0])
            if len(chunk) > 1:
                label += f" .. {plot_text(chunk[-1][0])} ({len(chunk)} requests)"
            xs.append(seconds(members[0].start_t, origin))
            medians.append(round(median, 4))
            up.append(round(percentile(walls, 90) - median, 4))
            down.append(round(median - percentile(walls, 10), 4))
            texts.append(
                hover(
                    [
                        f"<b>{plot_text(phase)} {label}</b>",
                        f"{len(members)} steps: median {median:.2f} ms",
                        f"p10 {percentile(walls, 10):.2f} / p90 {percentile(walls, 90):.2f} ms",
                        f"min {walls[0]:.2f} / max {walls[-1]:.2f} ms",
                    ]
                )
            )
            slowest = max(members, key=lambda s: s.wall_s or 0.0)
            slow_x.append(seconds(slowest.start_t, origin))
            slow_y.append(ms(slowest.wall_s))
            slow_text.append(_step_hover(run, slowest, multi))
            buckets += 1
        colour = PHASE_COLOURS.get(phase, "#777")
        name = _trace_name(run, phase, pid, multi)
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=medians,
                mode="markers",
                name=f"{name}: median per request (p10-p90 bar)",
                marker={"color": colour, "size": 6},
                error_y={"type": "data", "array": up, "arrayminus": down, "color": colour},
                hovertext=texts,
                hoverinfo="text",
            )
        )
        figure.add_trace(
            go.Scatter(
                x=slow_x,
                y=slow_y,
                mode="markers",
                name=f"{name}: slowest step per request",
                marker={"color": colour, "size": 5, "symbol": "triangle-up"},
                hovertext=slow_text,
                hoverinfo="text",
            )
        )
    return (
        f"Aggregated: {len(steps)} steps exceed {limits.step_points}, so each request "
        f"(or run of consecutive requests) is drawn as its median step with a p10-p90 bar and "
        f"its slowest step ({buckets} points per series in all); compiles and profiled steps "
        "are still drawn one by one."
    )


def _profiled_steps(
    plot: Plot, run: RunData, steps: list[Step], origin: int, limits: Limits, multi: bool
) -> None:
    profiled = [s for s in steps if s.profiled]
    if not profiled:
        return
    if len(profiled) > limits.step_points:
        plot.notes.append(
            f"Only the first {limits.step_points} of {len(profiled)} profiled steps are marked."
        )
        profiled = profiled[: limits.step_points]
    plot.figure.add_trace(
        go.Scatter(
            x=[seconds(s.start_t, origin) for s in profiled],
            y=[ms(s.wall_s) for s in profiled],
            mode="markers",
            name="profiled step (Kineto window)",
            marker={"symbol": "circle-open", "size": 14, "color": "#2ca02c", "line": {"width": 2}},
            hovertext=[_step_hover(run, s, multi) for s in profiled],
            hoverinfo="text",
        )
    )


def drawn_compiles(compiles: list[Compile], limits: Limits) -> list[Compile]:
    """Every compile, or beyond the limit every failed one and then the longest, in time order."""
    if len(compiles) <= limits.compile_bars:
        return list(compiles)
    ranked = sorted(compiles, key=lambda c: (c.result == "ok", -(c.duration_s or 0.0)))
    return sorted(ranked[: limits.compile_bars], key=_compile_start)


def _compiles_note(shown: list[Compile], compiles: list[Compile]) -> str:
    return (
        f"Aggregated: {len(shown)} of {len(compiles)} compiles are drawn: every failed one and "
        "recompile-limit hit, then the longest."
    )


def _compile_markers(
    figure: Figure, compiles: list[Compile], origin: int, run: RunData | None = None
) -> None:
    by_result: dict[str, list[Compile]] = defaultdict(list)
    for compile_ in compiles:
        by_result[compile_.result if compile_.result in COMPILE_STYLES else "failed"].append(
            compile_
        )
    for result, compiles in by_result.items():
        name, colour, symbol = COMPILE_STYLES[result]
        figure.add_trace(
            go.Scatter(
                x=[seconds(_compile_start(c), origin) for c in compiles],
                y=[ms(c.duration_s) if c.duration_s else None for c in compiles],
                mode="markers",
                name=f"{name} (y: its duration)",
                marker={"symbol": symbol, "size": 11, "color": colour},
                hovertext=[compile_hover(c, run) for c in compiles],
                hoverinfo="text",
            )
        )


def _compile_start(compile_: Compile) -> int:
    if compile_.start_t is not None:
        return compile_.start_t
    return compile_.t - int((compile_.duration_s or 0.0) * 1e9)


def _reference_steps(figure: Figure, run: RunData, reference: RunData, limits: Limits) -> list[str]:
    """The reference run's live steps beside this run's live steps: its time axis is shifted
    so both runs' live traffic starts at the same x (drawn from the reference run's own start,
    its points would sit on top of this run's warmup)."""
    live = [s for s in _timed_steps(reference) if s.phase == "live"]
    if not live:
        return []
    steps = _timed_steps(run)
    own = [s.start_t for s in steps if s.phase == "live"] or [s.start_t for s in steps]
    shift = seconds(min(own), run_origin(run)) if own else 0.0
    reference_start = min(s.start_t for s in live)
    notes = [
        f"Grey: the {reference.label} run's live steps, shifted so that its live traffic "
        "starts where this run's does (the runs ran one after the other)."
    ]
    if len(live) > limits.step_points:
        stride = -(-len(live) // limits.step_points)
        live = live[::stride]
        notes.append(f"The {reference.label} run's steps are drawn one in {stride}.")
    figure.add_trace(
        go.Scatter(
            x=[round(shift + seconds(s.start_t, reference_start), 6) for s in live],
            y=[ms(s.wall_s) for s in live],
            mode="markers",
            name=f"{plot_text(reference.label)} run, live steps",
            marker={"color": "#aaaaaa", "size": 5, "symbol": "diamond"},
            hovertext=[_step_hover(reference, s, False) for s in live],
            hoverinfo="text",
        )
    )
    return notes


def compile_timeline(run: RunData, limits: Limits) -> Plot | None:
    """One bar per compile, on the run's time axis, one row per code object."""
    if not run.compiles:
        return None
    origin = run_origin(run)
    plot = Plot(
        new_figure(f"Compile timeline ({run.label} run)", "time since the run started (s)", "")
    )
    totals: dict[str, float] = defaultdict(float)
    for compile_ in run.compiles:
        totals[frame_label(compile_.frame)] += compile_.duration_s or 0.0
    ranked = sorted(totals, key=lambda label: (-totals[label], label))
    kept = set(ranked[: limits.frames])
    other = f"other code objects ({len(ranked) - len(kept)})"
    if len(ranked) > len(kept):
        plot.notes.append(
            f"Aggregated: {len(ranked)} code objects compiled; the {len(kept)} with the most "
            f"compile time have a row each, the other {len(ranked) - len(kept)} share one row."
        )
    compiles = drawn_compiles(run.compiles, limits)
    if len(compiles) < len(run.compiles):
        plot.notes.append(_compiles_note(compiles, run.compiles))
    span = max(
        (seconds(c.t, origin) for c in compiles),
        default=1.0,
    )
    categories: dict[str, list[Compile]] = defaultdict(list)
    for compile_ in sorted(compiles, key=_compile_start):
        if compile_.result == "ok":
            key = "live compile" if compile_.live else "warmup / startup compile"
        else:
            key = COMPILE_STYLES.get(compile_.result, COMPILE_STYLES["failed"])[0]
        categories[key].append(compile_)
    colours = {"live compile": "#d62728", "warmup / startup compile": "#9aa8d8"}
    colours.update({name: colour for name, colour, _ in COMPILE_STYLES.values()})
    for key, members in categories.items():
        labels = [frame_label(c.frame) for c in members]
        plot.figure.add_trace(
            go.Bar(
                orientation="h",
                y=[plot_text(label if label in kept else other, 100) for label in labels],
                base=[seconds(_compile_start(c), origin) for c in members],
                # Bars narrower than 0.3% of the axis cannot be seen or hovered.
                x=[max(c.duration_s or 0.0, span * 0.003) for c in members],
                name=key,
                marker={"color": colours.get(key, "#777")},
                hovertext=[compile_hover(c, run) for c in members],
                hoverinfo="text",
            )
        )
    rows = len({frame_label(c.frame) if frame_label(c.frame) in kept else other for c in compiles})
    plot.figure.update_layout(barmode="overlay", height=max(300, 160 + 28 * rows))
    plot.figure.update_yaxes(autorange="reversed")
    return plot


def cache_entries(run: RunData, limits: Limits) -> Plot | None:
    """Cache entries per code object over the run, as each step end reported them."""
    if not run.cache_history:
        return None
    origin = run_origin(run)
    series: dict[tuple[int, Frame], list[tuple[int, int, str | None, int | None]]] = defaultdict(
        list
    )
    for t, pid, request_id, step, frame, entries in sorted(run.cache_history, key=lambda r: r[0]):
        points = series[(pid, frame)]
        if not points or points[-1][1] != entries:
            points.append((t, entries, request_id, step))
    peak: dict[Frame, int] = defaultdict(int)
    for (_, frame), points in series.items():
        peak[frame] = max(peak[frame], *(p[1] for p in points))
    ranked = sorted(peak, key=lambda f: (-peak[f], f.name, f.file or ""))
    kept = set(ranked[: limits.frames])
    plot = Plot(
        new_figure(
            f"Cache entries per code object ({run.label} run)",
            "time since the run started (s)",
            "cache entries",
        )
    )
    # Entries are counts: whole-number ticks (plotly would put some at 1.5, 2.5).
    plot.figure.update_yaxes(tickformat="d", dtick=1 if peak and max(peak.values()) <= 12 else None)
    if len(ranked) > len(kept):
        dropped = ranked[len(kept) :]
        plot.notes.append(
            f"Aggregated: the {len(kept)} code objects with the most entries are drawn; "
            f"{len(dropped)} more (at most {peak[dropped[0]]} entries each) are left out."
        )
    chosen = [(key, points) for key, points in series.items() if key[1] in kept]
    budget = max(2, limits.cache_points // max(1, len(chosen)))
    multi = len({pid for pid, _ in series}) > 1
    for (pid, frame), points in sorted(chosen, key=lambda item: ranked.index(item[0][1])):
        shown = _thin(points, budget)
        if len(shown) < len(points):
            plot.notes.append(f"{frame.name}: {len(shown)} of its {len(points)} changes are drawn.")
        name = plot_text(frame_label(frame), 80)
        if multi:
            name += f" ({process_label(run, pid)})"
        plot.figure.add_trace(
            go.Scatter(
                x=[seconds(t, origin) for t, _, _, _ in shown],
                y=[entries for _, entries, _, _ in shown],
                mode="lines+markers",
                line={"shape": "hv"},
                name=name,
                hovertext=[
                    hover(
                        [
                            f"<b>{plot_text(frame.name, 80)}</b>",
                            f"{entries} cache entries",
                            plot_text(request_id or "at exit")
                            + (f" step {step}" if step is not None else ""),
                        ]
                    )
                    for _, entries, request_id, step in shown
                ],
                hoverinfo="text",
            )
        )
    return plot


def _thin(
    points: list[tuple[int, int, str | None, int | None]], budget: int
) -> list[tuple[int, int, str | None, int | None]]:
    """Evenly spaced points, always keeping the first, the last and the peak."""
    if len(points) <= budget:
        return points
    stride = -(-len(points) // budget)
    keep = set(range(0, len(points), stride)) | {len(points) - 1}
    keep.add(max(range(len(points)), key=lambda i: points[i][1]))
    return [points[i] for i in sorted(keep)]
