"""The optional HTA section: Holistic Trace Analysis's temporal and idle-time breakdowns of the
run's profiled windows, next to diag's own kernel total for the same file.

Only when `import hta` works (the `hta` extra, traceinsight). HTA maps one trace file to one
rank, so each window is analysed on its own, linked into a temporary directory as
`rank<R>.json.gz`. HTA failing (a CPU-only trace, a format it does not know) never breaks the
report: the section then says, in one line, that it failed and why.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from diag.report.escape import html_text, plot_text
from diag.report.plot import Plot, new_figure
from diag.trace.run import Process, RunData

#: Windows analysed at most (each costs HTA a parse; a run profiling every step has hundreds).
MAX_WINDOWS = 12


@dataclass(frozen=True)
class HtaWindow:
    """HTA's figures for one profiled window (microseconds)."""

    process: str  # "rank 0" or "pid 420"
    rank: int
    window: str  # Kineto file, relative to the run folder
    idle_us: float
    compute_us: float
    non_compute_us: float
    idle_by_category: dict[str, float]  # host_wait, kernel_wait, other: summed over streams
    diag_kernel_us: float | None  # diag's own kernel total on the same file


@dataclass
class HtaResult:
    windows: list[HtaWindow] = field(default_factory=list)
    error: str | None = None  # one line: HTA failed, and why
    skipped: str | None = None  # one line: there was nothing for HTA to analyse
    notes: list[str] = field(default_factory=list)


def hta_available() -> bool:
    return importlib.util.find_spec("hta") is not None


def window_files(run: RunData) -> list[tuple[Process, str, Path]]:
    """(process, window file relative to the run folder, path) for every window written that
    the reader accepts (diag.trace.profiles: a regular file inside the trace)."""
    from diag.trace.profiles import window_files as windows

    return [(p, f"{p.folder.name}/{name}", path) for p, name, path, _ in windows(run)]


def hta_breakdown(run: RunData, max_windows: int = MAX_WINDOWS) -> HtaResult:
    """HTA's breakdowns of each window of `run`; any failure ends up in `error`, never raised."""
    result = HtaResult()
    windows = window_files(run)
    if not windows:
        result.skipped = f"HTA section skipped: the {run.label} run has no profiled windows."
        return result
    if len(windows) > max_windows:
        result.notes.append(f"HTA analysed the first {max_windows} of {len(windows)} windows.")
        windows = windows[:max_windows]
    try:
        analysis = _import_hta()
    except Exception as exc:  # an optional extra that fails to import
        result.error = f"HTA section failed: importing hta raised {_one_line(exc)}"
        return result
    for process, relative, path in windows:
        diag_total, platform = _diag_kernel_total(run, process, path)
        if platform == "cpu":
            result.skipped = (
                "HTA section skipped: the profiled windows hold no GPU activity (a CPU-only "
                "trace); HTA breaks down GPU time."
            )
            return result
        try:
            result.windows.append(_analyse(analysis, process, relative, path, diag_total))
        except Exception as exc:  # HTA is a third party; report, don't crash
            result.error = f"HTA section failed on {relative}: {_one_line(exc)}"
            return result
    return result


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _import_hta() -> Any:
    _disable_ns_rounding()
    with _quiet():
        return importlib.import_module("hta.trace_analysis")


def _disable_ns_rounding() -> None:
    """HTA rounds timestamps to whole ns by default, which breaks on torch 2.11 GPU traces."""
    try:
        options = importlib.import_module("hta.configs.env_options")
        options.HTAEnvOptions.instance().set_disable_ns_rounding(True)
    except (ImportError, AttributeError):
        os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """HTA logs and prints progress for every parse; keep it off the user's terminal."""
    logger = logging.getLogger("hta")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas deprecations inside HTA
            yield
    finally:
        logger.setLevel(level)


def _diag_kernel_total(run: RunData, process: Process, path: Path) -> tuple[float | None, str]:
    """diag's own sum of kernel durations (us) in the window, and the window's platform."""
    try:
        cache = importlib.import_module("diag.trace.kinetocache")
        parsed = cache.load_kineto(path, run.window_cache(process), None)
    except Exception:  # the HTA section must not depend on diag's parser
        return None, "unknown"
    total = sum(a.dur for a in parsed.activities if a.kind == "kernel")
    return round(total, 3), str(getattr(parsed, "platform", "unknown"))


def _analyse(
    analysis: Any, process: Process, relative: str, path: Path, diag_total: float | None
) -> HtaWindow:
    rank = process.rank if process.rank is not None else 0
    with tempfile.TemporaryDirectory(prefix="diag-hta-") as tmp:
        link = Path(tmp) / f"rank{rank}.json.gz"
        try:
            link.symlink_to(path.resolve())
        except OSError:
            shutil.copyfile(path, link)
        with _quiet():
            ta = analysis.TraceAnalysis(
                trace_files={rank: str(link)}, trace_dir=tmp, include_last_profiler_step=True
            )
            temporal = ta.get_temporal_breakdown(visualize=False)
            idle, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
    row = temporal.iloc[0]
    categories: dict[str, float] = {}
    for _, item in idle.iterrows():
        key = str(item["idle_category"])
        categories[key] = categories.get(key, 0.0) + float(item["idle_time"])
    label = f"rank {process.rank}" if process.rank is not None else f"pid {process.pid}"
    return HtaWindow(
        process=label,
        rank=rank,
        window=relative,
        idle_us=float(row["idle_time(us)"]),
        compute_us=float(row["compute_time(us)"]),
        non_compute_us=float(row["non_compute_time(us)"]),
        idle_by_category=categories,
        diag_kernel_us=diag_total,
    )


def hta_plot(result: HtaResult) -> Plot | None:
    """Stacked bars per window: HTA's compute, non-compute and idle time, idle split by cause."""
    if not result.windows:
        return None
    plot = Plot(
        new_figure(
            "HTA temporal breakdown per rank and profiled window",
            "rank / window",
            "share of the window's GPU time (%)",
        ),
        list(result.notes),
    )
    labels = [plot_text(f"{w.process}: {w.window}", 70) for w in result.windows]
    colours = {"host_wait": "#bbbbbb", "kernel_wait": "#888888", "other": "#dddddd"}
    series = [
        ("compute", [w.compute_us for w in result.windows], "#1f5fa8"),
        (
            "non-compute (copies, memsets, communication)",
            [w.non_compute_us for w in result.windows],
            "#e8710a",
        ),
    ]
    series.extend(
        (
            f"idle: {plot_text(category)}",
            [w.idle_by_category.get(category, 0.0) for w in result.windows],
            colours.get(category, "#cccccc"),
        )
        for category in sorted({c for w in result.windows for c in w.idle_by_category})
    )
    totals = [w.idle_us + w.compute_us + w.non_compute_us for w in result.windows]
    for name, values, colour in series:
        pairs = list(zip(values, totals, strict=True))
        plot.figure.add_trace(
            go.Bar(
                x=labels,
                y=[round(100 * v / t, 3) if t > 0 else 0.0 for v, t in pairs],
                name=name,
                marker={"color": colour},
                hovertext=[f"{name}: {v / 1e3:.3f} ms of {t / 1e3:.3f} ms" for v, t in pairs],
                hoverinfo="text",
            )
        )
    plot.figure.update_layout(barmode="stack")
    return plot


def hta_table(result: HtaResult) -> str:
    """Per window: HTA's figures and diag's kernel total on the same file, side by side."""
    if not result.windows:
        return ""
    rows = []
    for w in result.windows:
        total = w.idle_us + w.compute_us + w.non_compute_us
        idle = ", ".join(
            f"{html_text(k)} {v / 1e3:.3f}" for k, v in sorted(w.idle_by_category.items())
        )
        diag_total = "&ndash;" if w.diag_kernel_us is None else f"{w.diag_kernel_us / 1e3:.3f}"
        rows.append(
            f"<tr><td>{html_text(w.process)}</td><td><code>{html_text(w.window)}</code></td>"
            f'<td class="num">{w.compute_us / 1e3:.3f}</td>'
            f'<td class="num">{diag_total}</td>'
            f'<td class="num">{w.non_compute_us / 1e3:.3f}</td>'
            f'<td class="num">{w.idle_us / 1e3:.3f}</td>'
            f'<td class="num">{(w.idle_us / total * 100) if total else 0:.1f}%</td>'
            f"<td>{idle}</td></tr>"
        )
    return (
        '<table class="hta"><thead><tr><th>process</th><th>window</th>'
        "<th>HTA compute ms</th><th>diag kernel ms</th><th>HTA non-compute ms</th>"
        "<th>HTA idle ms</th><th>idle share</th><th>HTA idle by cause, ms</th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table>"
    )
