"""The figures drawn from the Kineto windows: eager against compiled per region, and the
offload breakdown per profiled step. Each returns the figure and an escaped HTML table with
the same numbers, since kernel names are read better in a table than in hover text."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import plotly.graph_objects as go  # type: ignore[import-untyped]

from diag.evidence.offload import StepOffload
from diag.evidence.regions import KernelStat, RegionComparison
from diag.report.escape import LABEL_CHARS, hover, html_text, plot_text, shorten
from diag.report.plot import Limits, Plot, log_axis, ms, ms_text, new_figure

_TOP_KERNELS = 5


@dataclass
class KernelPlot:
    plot: Plot
    table_html: str


def _kernel_line(stat: KernelStat) -> str:
    return f"{plot_text(stat.name, 70)} [{stat.kind}] x{stat.count}, {ms_text(stat.total_s)} ms"


def _region_hover(comparison: RegionComparison, reference_label: str) -> str:
    lines = [f"<b>{plot_text(comparison.region, 80)}</b> ({comparison.device})"]
    for label, stats, total in (
        (reference_label, comparison.reference, comparison.reference_s),
        ("compiled", comparison.compiled, comparison.compiled_s),
    ):
        lines.append(f"{plot_text(label)}: {ms_text(total)} ms per step; top kernels:")
        lines.extend("  " + _kernel_line(s) for s in stats[:_TOP_KERNELS])
    if comparison.missing:
        lines.append(
            "gone under compile: " + ", ".join(plot_text(n, 70) for n in comparison.missing)
        )
    if comparison.replacements:
        lines.append(
            "in their place: " + ", ".join(plot_text(n, 70) for n in comparison.replacements)
        )
    if comparison.swapped_attention:
        before, after = comparison.swapped_attention
        lines.append(f"attention backend: {plot_text(before)} -> {plot_text(after)}")
    return hover(lines)


def region_comparison(
    comparisons: list[RegionComparison], reference_label: str, limits: Limits
) -> KernelPlot | None:
    """Kernel time per step in each compiled region, reference run against compiled run, with
    the regions whose hand-written or library kernels changed under compile starred."""
    if not comparisons:
        return None
    unit = "kernel" if comparisons[0].device == "gpu" else "CPU"
    plot = Plot(
        new_figure(
            f"{reference_label} against compiled, per compiled region",
            "compiled region",
            f"{unit} time per step (ms)",
        )
    )
    shown = sorted(comparisons, key=lambda c: -max(c.reference_s, c.compiled_s))
    if len(shown) > limits.regions:
        plot.notes.append(
            f"Aggregated: the {limits.regions} regions with the most time of "
            f"{len(comparisons)} are drawn; the table lists them all."
        )
        shown = shown[: limits.regions]
    labels = [plot_text(c.region, 60) for c in shown]
    texts = [_region_hover(c, reference_label) for c in shown]
    plot.figure.add_trace(
        go.Bar(
            x=labels,
            y=[ms(c.reference_s) for c in shown],
            name=plot_text(reference_label),
            marker={"color": "#9aa8d8"},
            hovertext=texts,
            hoverinfo="text",
        )
    )
    plot.figure.add_trace(
        go.Bar(
            x=labels,
            y=[ms(c.compiled_s) for c in shown],
            name="compiled",
            marker={"color": "#1f5fa8"},
            hovertext=texts,
            hoverinfo="text",
        )
    )
    divergent = [
        (label, c, text) for label, c, text in zip(labels, shown, texts, strict=True) if c.divergent
    ]
    if divergent:
        plot.figure.add_trace(
            go.Scatter(
                x=[label for label, _, _ in divergent],
                y=[ms(max(c.reference_s, c.compiled_s) * 1.08) for _, c, _ in divergent],
                mode="markers+text",
                text=["divergent kernels" for _ in divergent],
                textposition="top center",
                name="divergent kernels (hover for names)",
                marker={"symbol": "star", "size": 14, "color": "#d62728"},
                hovertext=[text for _, _, text in divergent],
                hoverinfo="text",
            )
        )
    plot.figure.update_layout(barmode="group")
    return KernelPlot(plot, _region_table(comparisons, reference_label))


def _names_html(names: list[str]) -> str:
    if not names:
        return "&ndash;"
    return "<br>".join(
        f'<span class="kernel" title="{html_text(n)}">{html_text(shorten(n, LABEL_CHARS))}</span>'
        for n in names
    )


def _region_table(comparisons: list[RegionComparison], reference_label: str) -> str:
    rows = []
    for c in sorted(comparisons, key=lambda c: (not c.divergent, c.region)):
        ratio = f"{c.compiled_s / c.reference_s:.2f}x" if c.reference_s > 0 else "&ndash;"
        if c.compiling_steps:
            # Only steps that compiled were profiled: their time is mostly the compile's.
            ratio += f" (includes compile: {c.compiling_steps} of {c.steps} steps compiled)"
        swapped = ""
        if c.swapped_attention:
            swapped = (
                f"<br>attention: {html_text(c.swapped_attention[0])} &rarr; "
                f"{html_text(c.swapped_attention[1])}"
            )
        rows.append(
            f"<tr><td><code>{html_text(c.region)}</code></td><td>{html_text(c.device)}</td>"
            f'<td class="num">{ms_text(c.reference_s)}</td>'
            f'<td class="num">{ms_text(c.compiled_s)}</td>'
            f'<td class="num">{ratio}</td><td>{"yes" if c.divergent else "no"}</td>'
            f"<td>{_names_html(c.missing)}{swapped}</td><td>{_names_html(c.replacements)}</td>"
            "</tr>"
        )
    return (
        '<table class="regions"><thead><tr><th>region</th><th>device</th>'
        f"<th>{html_text(reference_label)} ms/step</th><th>compiled ms/step</th>"
        "<th>compiled/reference</th><th>divergent</th><th>custom kernels gone under compile</th>"
        "<th>kernels in their place</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _step_label(row: StepOffload, multi: bool) -> str:
    label = f"{plot_text(row.request_id, 40)} s{row.step}"
    if multi:
        label += f" r{row.rank}" if row.rank is not None else f" p{row.pid}"
    return label


def _per_request(rows: list[StepOffload]) -> list[StepOffload]:
    """Mean of each figure over a request's profiled steps (step = -1 marks the mean)."""
    groups: dict[tuple[str, int], list[StepOffload]] = defaultdict(list)
    for row in rows:
        groups[(row.request_id, row.pid)].append(row)
    means = []
    for (request_id, pid), members in groups.items():
        n = len(members)
        directions = {d for m in members for d in m.copy_s}
        means.append(
            StepOffload(
                request_id=request_id,
                step=-1,
                pid=pid,
                rank=members[0].rank,
                span_s=sum(m.span_s for m in members) / n,
                kernel_s=sum(m.kernel_s for m in members) / n,
                copy_s={d: sum(m.copy_s.get(d, 0.0) for m in members) / n for d in directions},
                copy_bytes={
                    d: sum(m.copy_bytes.get(d, 0) for m in members) // n for d in directions
                },
                sync_s=sum(m.sync_s for m in members) / n,
                idle_s=sum(m.idle_s for m in members) / n,
                bound=sum(m.bound for m in members) * 2 >= n,
                max_gain_s=sum(m.max_gain_s for m in members) / n,
            )
        )
    return means


def offload_chart(rows: list[StepOffload], limits: Limits) -> KernelPlot | None:
    """Per profiled step: how long the GPU computed, copied (per direction), sat idle, and how
    long the CPU blocked in syncs. Copies and compute overlap, so the bars are side by side."""
    if not rows:
        return None
    plot = Plot(
        new_figure("Offload breakdown per profiled step", "profiled step", "time in the step (ms)")
    )
    if len(rows) > limits.offload_steps:
        plot.notes.append(
            f"Aggregated: {len(rows)} profiled steps exceed {limits.offload_steps}; each "
            "request's steps are averaged into one group of bars (labelled s-1)."
        )
        rows = _per_request(rows)[: limits.offload_steps]
    multi = len({(r.pid, r.rank) for r in rows}) > 1
    labels = [_step_label(r, multi) + (" (bound)" if r.bound else "") for r in rows]
    directions = sorted({d for r in rows for d in r.copy_s})
    series: list[tuple[str, list[float | None], str]] = [
        ("compute kernels", [ms(r.kernel_s) for r in rows], "#1f5fa8"),
    ]
    palette = ["#e8710a", "#f2b134", "#a0522d", "#c9a227"]
    for i, direction in enumerate(directions):
        series.append(
            (
                f"copy {plot_text(direction)}",
                [ms(r.copy_s.get(direction, 0.0)) for r in rows],
                palette[i % len(palette)],
            )
        )
    series.append(("CPU blocked in syncs", [ms(r.sync_s) for r in rows], "#b00020"))
    series.append(("GPU idle", [ms(r.idle_s) for r in rows], "#bbbbbb"))
    texts = [_offload_hover(r) for r in rows]
    for name, values, colour in series:
        plot.figure.add_trace(
            go.Bar(
                x=labels,
                y=values,
                name=name,
                marker={"color": colour},
                hovertext=texts,
                hoverinfo="text",
            )
        )
    plot.figure.add_trace(
        go.Scatter(
            x=labels,
            y=[ms(r.span_s) for r in rows],
            mode="markers",
            name="step span",
            marker={"symbol": "line-ew-open", "size": 28, "color": "#222", "line": {"width": 2}},
            hovertext=texts,
            hoverinfo="text",
        )
    )
    bound = [(label, r) for label, r in zip(labels, rows, strict=True) if r.bound]
    if bound:
        plot.figure.add_trace(
            go.Scatter(
                x=[label for label, _ in bound],
                y=[ms(r.span_s * 1.06) for _, r in bound],
                mode="markers",
                name="offload-bound step",
                marker={"symbol": "triangle-down", "size": 12, "color": "#b00020"},
                hovertext=[_offload_hover(r) for _, r in bound],
                hoverinfo="text",
            )
        )
    plot.figure.update_layout(barmode="group")
    spans = sorted(r.span_s for r in rows if r.span_s > 0)
    if spans and spans[-1] > 20 * spans[len(spans) // 2]:
        # One step (a live compile, the profiler's start) dwarfs the rest.
        log_axis(plot.figure, [ms(r.span_s) for r in rows], "time in the step (ms, log scale)")
    return KernelPlot(plot, _offload_table(rows, multi))


def _offload_hover(row: StepOffload) -> str:
    lines = [
        f"<b>{plot_text(row.request_id, 40)} step {row.step}</b>"
        + (" (offload-bound)" if row.bound else ""),
        f"span {ms_text(row.span_s)} ms, compute {ms_text(row.kernel_s)} ms",
    ]
    for direction, seconds_ in sorted(row.copy_s.items()):
        size = row.copy_bytes.get(direction, 0)
        lines.append(f"copy {plot_text(direction)}: {ms_text(seconds_)} ms, {size / 1e6:.1f} MB")
    lines.append(f"CPU in syncs {ms_text(row.sync_s)} ms, GPU idle {ms_text(row.idle_s)} ms")
    lines.append(f"compiling could save at most {ms_text(row.max_gain_s)} ms")
    return hover(lines)


def _offload_table(rows: list[StepOffload], multi: bool) -> str:
    body = []
    for row in rows:
        copies = "<br>".join(
            f"{html_text(d)}: {ms_text(s)} ms, {row.copy_bytes.get(d, 0) / 1e6:.1f} MB"
            + (f", {row.copy_bytes.get(d, 0) / s / 1e9:.1f} GB/s" if s > 0 else "")
            for d, s in sorted(row.copy_s.items())
        )
        body.append(
            f"<tr><td>{html_text(row.request_id)} step {row.step}"
            + (
                f" ({'rank ' + str(row.rank) if row.rank is not None else 'pid ' + str(row.pid)})"
                if multi
                else ""
            )
            + f'</td><td class="num">{ms_text(row.span_s)}</td>'
            f'<td class="num">{ms_text(row.kernel_s)}</td>'
            f"<td>{copies or '&ndash;'}</td>"
            f'<td class="num">{ms_text(row.sync_s)}</td><td class="num">{ms_text(row.idle_s)}</td>'
            f"<td>{'yes' if row.bound else 'no'}</td>"
            f'<td class="num">{ms_text(row.max_gain_s)}</td></tr>'
        )
    return (
        '<table class="offload"><thead><tr><th>step</th><th>span ms</th><th>compute ms</th>'
        "<th>copies</th><th>CPU in syncs ms</th><th>GPU idle ms</th><th>offload-bound</th>"
        "<th>most compiling could save, ms</th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table>"
    )
