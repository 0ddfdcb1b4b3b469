"""The report's sections, in reading order, built from a loaded Trace and its findings.

Each section is built on its own: one that fails (a Kineto file diag cannot parse, say) says so
in one line and the rest of the report is still written.
"""

from __future__ import annotations

from collections.abc import Callable

from diag.evidence.status import assess
from diag.findings.model import Finding
from diag.report.findings_table import findings_table
from diag.report.html import Section
from diag.report.plot import Limits
from diag.trace.run import RunData, Trace


def main_run(trace: Trace) -> RunData | None:
    """The run the report is about: the compiled one, else whichever the trace has."""
    if trace.compiled is not None:
        return trace.compiled
    others = [run for label, run in trace.runs.items() if label != "against"]
    return others[0] if others else None


def build_sections(
    trace: Trace, findings: list[Finding], limits: Limits, hta: bool
) -> list[Section]:
    run = main_run(trace)
    sections = [
        Section(
            "findings",
            "Findings",
            "What diag analyze found, most severe first: each with its evidence, where in "
            "your code, and the fix.",
            table_html=findings_table(
                findings, limits.findings, limits.finding_rows, assess(trace).all_clear_possible
            ),
        )
    ]
    if run is None:
        return sections
    builders: list[tuple[Section, Callable[[Section], None]]] = [
        (
            Section(
                "warmup",
                "Warmup coverage and the warmup plan",
                "Which live request shapes the recorded warmup covered (live-compile's "
                "warmup-coverage finding), and beside it the smallest ordered warmup that "
                "covers every live compile, as diag warmup-plan gives it (docs/WARMUP.md).",
            ),
            lambda s: _warmup(s, trace, findings),
        ),
        (
            Section(
                "steps",
                "Step time per request",
                "Each point is one step's wall time; lines join the steps of one request. "
                "Crosses are compiles (placed at their start, height = their duration); "
                "open circles are steps torch.profiler traced, which pay the profiler's cost.",
            ),
            lambda s: _steps(s, run, trace.reference, limits),
        ),
        (
            Section(
                "compiles",
                "Compile timeline",
                "One bar per Dynamo compile, one row per code object; red bars are compiles "
                "during live requests. Hover a bar for the guards that failed.",
            ),
            lambda s: _compiles(s, run, limits),
        ),
        (
            Section(
                "compiler",
                "Inside the compiler",
                "Each compile's seconds by phase as torch measures them (nested, not adding "
                "up) with its FX-graph and AOTAutograd cache hits and misses; then, per "
                "compiled frame, each input dim Dynamo made symbolic or baked in, beside the "
                "values the frame's calls really had there.",
            ),
            lambda s: _compiler(s, run),
        ),
        (
            Section(
                "regions",
                "Eager against compiled, per compiled region",
                "Kernel time per step inside each compiled region (CPU op time on CPU-only "
                "traces) in the reference run (the eager baseline or --against) and in the "
                "compiled run. A star marks a region "
                "whose hand-written or library kernels did not run under compile; the table "
                "names them and what ran instead.",
            ),
            lambda s: _regions(s, trace, limits),
        ),
        (
            Section(
                "offload",
                "Offload breakdown per profiled step",
                "Where each profiled step's time went on the GPU: compute kernels, copies per "
                "direction, idle, and CPU time blocked in synchronize calls. Copies and compute "
                "overlap, so the bars stand side by side; the dash is the step's span. While "
                "copies take as long as compute, compiling cannot make the step faster.",
            ),
            lambda s: _offload(s, run, limits),
        ),
        (
            Section(
                "cache",
                "Cache entries per code object",
                "How many compiled entries each code object held over the run, as reported at "
                "each step end. A count that keeps growing is a cache that never settles.",
            ),
            lambda s: _cache(s, run, limits),
        ),
    ]
    if hta:
        builders.append(
            (
                Section(
                    "hta",
                    "HTA: temporal and idle-time breakdown",
                    "Holistic Trace Analysis (the hta extra) on each profiled window: GPU "
                    "compute, non-compute and idle time per rank, idle time split by cause. "
                    "diag's own kernel total for the same file stands beside HTA's compute "
                    "time as a cross-check.",
                ),
                lambda s: _hta(s, run),
            )
        )
    for section, build in builders:
        try:
            build(section)
        except Exception as exc:  # one section must not sink the report
            detail = " ".join(str(exc).split())[:300]
            section.error = f"This section could not be drawn: {type(exc).__name__}" + (
                f": {detail}" if detail else ""
            )
        sections.append(section)
    return sections


def _warmup(section: Section, trace: Trace, findings: list[Finding]) -> None:
    """The coverage finding's evidence and the plan's lines side by side, every string escaped
    (the plan is made once here, by diag/warmup/summary.py, as the TUI makes it)."""
    from diag.report.escape import html_inline, html_text
    from diag.warmup.summary import COVERAGE_ID, plan_for, summary_lines

    coverage = next((f for f in findings if f.id == COVERAGE_ID), None)
    plan = plan_for(trace, findings)
    if coverage is None and plan is None:
        section.notes.append("No live request with a shape was recorded: nothing to cover or plan.")
        return
    covered = (
        f"<p>{html_inline(coverage.title)}</p><ul>"
        + "".join(f"<li>{html_inline(item)}</li>" for item in coverage.evidence)
        + "</ul>"
        if coverage is not None
        else "<p>No warmup coverage was stated (no warmup request with a shape).</p>"
    )
    if plan is None:
        planned = "<p>No plan: no live request with a shape.</p>"
    else:
        head, *rest = summary_lines(plan, trace)
        planned = (
            f"<p>{html_text(head)}</p><ul>"
            + "".join(f"<li><code>{html_text(line)}</code></li>" for line in rest)
            + "</ul>"
        )
    section.table_html = (
        '<table class="warmup-plan"><thead><tr><th>warmup coverage</th><th>warmup plan</th>'
        f"</tr></thead><tbody><tr><td>{covered}</td><td>{planned}</td></tr></tbody></table>"
    )


def _steps(section: Section, run: RunData, reference: RunData | None, limits: Limits) -> None:
    from diag.report.figures import step_times

    section.plot = step_times(run, limits, reference)
    if section.plot is None:
        section.notes.append("The run recorded no steps.")


def _compiles(section: Section, run: RunData, limits: Limits) -> None:
    from diag.report.figures import compile_timeline

    section.plot = compile_timeline(run, limits)
    if section.plot is None:
        section.notes.append("Nothing was compiled in this run.")


def _compiler(section: Section, run: RunData) -> None:
    from diag.report.compile_tables import cudagraph_table, dims_table, phase_table

    phases, dims = phase_table(run), dims_table(run)
    section.table_html = phases + cudagraph_table(run) + dims
    if not phases:
        section.notes.append(
            "No compile timing was recorded (nothing compiled, or an older trace)."
        )
    if not dims:
        section.notes.append("No compile made an input dim symbolic or baked one in.")


def _cache(section: Section, run: RunData, limits: Limits) -> None:
    from diag.report.figures import cache_entries

    section.plot = cache_entries(run, limits)
    if section.plot is None:
        section.notes.append("No cache entries were reported (nothing was compiled).")


def _regions(section: Section, trace: Trace, limits: Limits) -> None:
    from diag.evidence.regions import compare_regions
    from diag.report.kernel_figures import region_comparison

    reference = trace.reference
    if reference is None:
        section.notes.append(
            "No reference run: record with --baseline eager, or pass --against DIR."
        )
        return
    drawn = region_comparison(compare_regions(trace), reference.label, limits)
    if drawn is None:
        section.notes.append(
            "The compiled and reference runs have no profiled steps in common to compare "
            "(record with --profile, the default)."
        )
        return
    section.plot, section.table_html = drawn.plot, drawn.table_html


def _offload(section: Section, run: RunData, limits: Limits) -> None:
    from diag.evidence.offload import offload_breakdown
    from diag.report.kernel_figures import offload_chart

    drawn = offload_chart(offload_breakdown(run), limits)
    if drawn is None:
        section.notes.append("No profiled step ran on a GPU, so there are no copies to break down.")
        return
    section.plot, section.table_html = drawn.plot, drawn.table_html


def _hta(section: Section, run: RunData) -> None:
    from diag.report.hta_view import hta_breakdown, hta_plot, hta_table

    result = hta_breakdown(run)
    section.plot = hta_plot(result)
    section.table_html = hta_table(result)
    section.error = result.error
    if result.skipped:
        section.notes.append(result.skipped)
    if section.plot is None:
        section.notes.extend(result.notes)
