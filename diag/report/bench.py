"""`diag report BENCH_DIR`: the bench's tables as report sections, with each trial's window
means drawn (the spread the intervals come from). The same tables `diag bench` prints
(diag.benchmark.render builds the rows); every trace string is escaped here."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import plotly.graph_objects as go  # type: ignore[import-untyped]

from diag import __version__
from diag.benchmark.layout import BenchManifest
from diag.benchmark.render import (
    PAIR_HEADER,
    PHASE_HEADER,
    STEADY_HEADER,
    ms_interval,
    pair_rows,
    steady_rows,
    validity_lines,
)
from diag.benchmark.tables import WINDOWS, BenchTables, shape_name
from diag.benchmark.validity import unchecked
from diag.report.escape import html_text, plot_text
from diag.report.html import Header, Section
from diag.report.plot import Plot, new_figure


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html_text(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _list(lines: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{html_text(line)}</li>" for line in lines) + "</ul>"


def bench_header(manifest: BenchManifest, tables: BenchTables) -> Header:
    facts: list[tuple[str, str]] = [("bench", str(manifest.path)), ("status", manifest.status)]
    for config in manifest.configs:
        command = " ".join(config.command) if config.command else "reused recordings"
        facts.append((f"config {config.name}", command))
    order = " ".join(e.config for e in sorted(manifest.entries, key=lambda e: e.order))
    facts.append(("run order", order or "none"))
    facts.append(("clock", f"{tables.clock.name} ({tables.clock.why})"))
    facts.append(("recorded", f"{manifest.started} .. {manifest.ended or '?'}"))
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts.append(("report", f"diag {__version__}, {now}"))
    return Header(f"diag bench report: {Path(manifest.path).name}", facts)


def bench_sections(tables: BenchTables) -> list[Section]:
    sections = [
        Section(
            "bench-steady",
            "Steady state per configuration and shape",
            f"Mean of each valid trial's window mean from step {WINDOWS[0]} and from step "
            f"{WINDOWS[1]} on (steps counted from 0), with its 95% interval over trials; the "
            "median of the trials' medians; step 0 against the steady mean. Clock: "
            f"{tables.clock.name}.",
            plot=_trial_plot(tables),
            table_html=_table(STEADY_HEADER, steady_rows(tables)),
            notes=[
                f"{s.config} {shape_name(s.shape)}: lingering start-up: {s.lingering.verdict}: "
                f"{s.lingering.text}"
                for s in tables.shapes
            ],
        )
    ]
    if tables.pairs:
        sections.append(
            Section(
                "bench-pairs",
                "Pairs of configurations",
                "Reduction = (reference - other) / reference of the steady means, with its 95% "
                "interval; an interval that spans zero is no difference within noise.",
                table_html=_table(PAIR_HEADER, pair_rows(tables)),
            )
        )
    for variable in tables.variable_resolution:
        rows = [
            [
                str(p.index),
                shape_name(p.shape),
                str(p.requests),
                ms_interval(p.step0),
                ms_interval(p.steady),
                ", ".join(str(c) for c in p.compiles),
            ]
            for p in variable.phases
        ]
        problems = [f"phase {p.index}: {text}" for p in variable.phases for text in p.problems]
        sections.append(
            Section(
                f"bench-variable-{len(sections)}",
                f"Variable resolution: {variable.config}",
                "Phases in serving order; step 0 of each phase's first request against the "
                "phase's other steps. Passes when nothing recompiled or hit the recompile limit "
                "and, after the first shape, nothing compiled and every step 0 is within the "
                f"noise of steady. Verdict: {variable.verdict}",
                table_html=_table(PHASE_HEADER, rows) + (_list(problems) if problems else ""),
            )
        )
    lines = validity_lines(tables)
    missing = sorted({text for t in tables.trials for text in unchecked(t)})
    sections.append(
        Section(
            "bench-validity",
            "Validity",
            "Trials whose measured window held a compile, a CUDA-graph recording, autotuning, a "
            "recompile-limit hit, an offload reload or empty_cache() are left out of the means.",
            table_html=_list(lines or ["every trial's windows held steady state"]),
            notes=[f"not checked: {text}" for text in missing] + tables.notes,
        )
    )
    return sections


def _trial_plot(tables: BenchTables) -> Plot | None:
    figure = new_figure(
        "Each valid trial's window mean", "configuration and shape", "step time (ms)"
    )
    drawn = False
    for start in WINDOWS:
        xs: list[str] = []
        ys: list[float] = []
        for stats in tables.shapes:
            for value in stats.windows[start].trial_means:
                xs.append(plot_text(f"{stats.config} {shape_name(stats.shape)}"))
                ys.append(round(value * 1e3, 4))
        if ys:
            drawn = True
            figure.add_trace(
                go.Scatter(
                    x=xs, y=ys, mode="markers", name=f"from step {start}", marker={"size": 9}
                )
            )
    return Plot(figure) if drawn else None
