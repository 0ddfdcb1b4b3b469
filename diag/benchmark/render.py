"""The bench tables as text (the terminal) and JSON (`--json`); the report draws them as HTML."""

from __future__ import annotations

import json
from typing import Any

from diag.benchmark.tables import WINDOWS, BenchTables, shape_name
from diag.benchmark.validity import flaws, unchecked
from diag.check.render import clean
from diag.evidence.stats import Interval


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def ms_interval(interval: Interval | None) -> str:
    if interval is None:
        return "-"
    if interval.low is None or interval.high is None:
        return f"{interval.mean * 1e3:.2f} (1 trial: no interval)"
    return f"{interval.mean * 1e3:.2f} ({interval.low * 1e3:.2f} .. {interval.high * 1e3:.2f})"


def pct_interval(interval: Interval | None) -> str:
    if interval is None:
        return "-"
    if interval.low is None or interval.high is None:
        return f"{interval.mean:+.1%} (no interval)"
    return f"{interval.mean:+.1%} ({interval.low:+.1%} .. {interval.high:+.1%})"


def speedup_text(interval: Interval | None) -> str:
    if interval is None or interval.mean >= 1:
        return "-"
    point = f"{1 / (1 - interval.mean):.2f}x"
    if interval.low is None or interval.high is None:
        return point
    low = f"{1 / (1 - interval.low):.2f}" if interval.low < 1 else "?"
    high = f"{1 / (1 - interval.high):.2f}" if interval.high < 1 else "inf"
    return f"{point} ({low} .. {high})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(no usable trial)"]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line.rstrip()]
    out.extend(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )
    return out


def steady_rows(tables: BenchTables) -> list[list[str]]:
    rows: list[list[str]] = []
    for stats in tables.shapes:
        steady = stats.windows[WINDOWS[0]].interval
        ratio = (
            f"{stats.step0.mean / steady.mean:.2f}x"
            if stats.step0 and steady and steady.mean > 0
            else "-"
        )
        total = len([t for t in tables.trials if t.config == stats.config and t.usable])
        for n, start in enumerate(WINDOWS):
            window = stats.windows[start]
            rows.append(
                [
                    clean(stats.config) if n == 0 else "",
                    shape_name(stats.shape) if n == 0 else "",
                    f"{start}+",
                    f"{len(window.trial_means)}/{total}",
                    ms_interval(window.interval),
                    ms(window.median),
                    ms_interval(stats.step0) if n == 0 else "",
                    ratio if n == 0 else "",
                ]
            )
    return rows


STEADY_HEADER = [
    "config",
    "shape",
    "steps",
    "trials",
    "mean ms (95% CI)",
    "median ms",
    "step 0 ms",
    "step 0 / steady",
]
PAIR_HEADER = ["reference", "other", "shape", "steps", "reduction (95% CI)", "speedup", "verdict"]
PHASE_HEADER = ["phase", "shape", "requests", "step 0 ms", "steady ms", "compiles per trial"]


def pair_rows(tables: BenchTables) -> list[list[str]]:
    return [
        [
            clean(row.reference),
            clean(row.other),
            shape_name(row.shape),
            f"{row.start}+",
            pct_interval(row.reduction),
            speedup_text(row.reduction),
            row.verdict,
        ]
        for row in tables.pairs
    ]


def validity_lines(tables: BenchTables) -> list[str]:
    lines: list[str] = []
    for trial in tables.trials:
        tag = f"{clean(trial.config)} trial {trial.number}"
        if not trial.usable:
            lines.append(f"{tag}: not used: {clean(trial.problem or '')}")
            continue
        by_window = {start: flaws(trial, start) for start in WINDOWS}
        if not any(by_window.values()):
            continue
        shown: set[str] = set()
        for found in by_window.values():
            for flaw in found:
                if flaw.text in shown:
                    continue
                shown.add(flaw.text)
                windows = [f"{k}+" for k, f in by_window.items() if flaw in f]
                lines.append(
                    f"{tag}: left out of window(s) {', '.join(windows)}: [{flaw.kind}] "
                    f"{clean(flaw.text)}"
                )
    return lines


def render_text(tables: BenchTables, header: str = "") -> str:
    out: list[str] = []
    if header:
        out.append(header)
    out.append(f"clock: {tables.clock.name}")
    if tables.clock.why:
        out.append(f"  ({clean(tables.clock.why)})")
    out.append("")
    out.append(
        "Steady state per configuration and request shape: mean of each valid trial's "
        "window mean, 95% interval over trials"
    )
    out.extend("  " + line for line in _table(STEADY_HEADER, steady_rows(tables)))
    lingering = [
        f"  {clean(s.config)} {shape_name(s.shape)}: {s.lingering.verdict}: "
        f"{clean(s.lingering.text)}"
        for s in tables.shapes
    ]
    out.append("")
    out.append(f"Lingering start-up (steps {WINDOWS[0]}-{WINDOWS[1] - 1} against {WINDOWS[1]}+)")
    out.extend(lingering)
    if tables.pairs:
        out.append("")
        out.append(
            "Pairs: reduction = (reference - other) / reference of the steady means; "
            "speedup = reference / other"
        )
        out.extend("  " + line for line in _table(PAIR_HEADER, pair_rows(tables)))
    for variable in tables.variable_resolution:
        out.append("")
        out.append(
            f"Variable resolution, {clean(variable.config)} (phases in serving order; step 0 of "
            "each phase's first request, steady = its other steps)"
        )
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
        if rows:
            out.extend("  " + line for line in _table(PHASE_HEADER, rows))
        out.append(f"  verdict: {clean(variable.verdict)}")
        for phase in variable.phases:
            out.extend(f"    phase {phase.index}: {clean(p)}" for p in phase.problems)
    out.append("")
    out.append("Validity")
    lines = validity_lines(tables)
    out.extend("  " + line for line in lines)
    if not lines:
        out.append("  every trial's windows held steady state (no compile, CUDA-graph recording,")
        out.append("  autotuning, recompile-limit hit or empty_cache() in them)")
    missing = sorted({text for t in tables.trials for text in unchecked(t)})
    out.extend(f"  not checked: {text}" for text in missing)
    out.extend(f"  {clean(note)}" for note in tables.notes if "not used" not in note)
    return "\n".join(out)


def render_json(tables: BenchTables, extra: dict[str, Any] | None = None) -> str:
    payload = dict(extra or {})
    payload.update(tables.as_dict())
    return json.dumps(payload, indent=1)
