"""Write a self-contained HTML report of a trace directory (docs/REPORT.md)."""

from __future__ import annotations

import argparse
from pathlib import Path


class ReportCommand:
    """Write one HTML file with the findings and figures of a trace, readable offline."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "trace",
            type=Path,
            metavar="TRACE_DIR",
            help="a diag record output, or a diag bench directory (its tables)",
        )
        parser.add_argument(
            "-o",
            "--output",
            type=Path,
            metavar="FILE",
            help="the HTML file to write (default: TRACE_DIR-report.html beside TRACE_DIR); "
            "an existing file is replaced",
        )
        parser.add_argument(
            "--against",
            type=Path,
            metavar="DIR",
            help="compare kernels against this trace directory's run instead of the eager baseline",
        )
        parser.add_argument(
            "--no-hta",
            action="store_true",
            help="leave out the HTA section even when the hta extra is installed",
        )

    def run(self, args: argparse.Namespace) -> int:
        from diag.errors import DiagError
        from diag.findings.analysis import analyze
        from diag.report.build import build_report, default_output, write_report
        from diag.trace.inputs import input_warnings, open_input
        from diag.trace.printable import print_warnings

        output: Path = args.output or default_output(args.trace)
        if output.is_dir():  # refuse before the slow part
            raise DiagError(f"{output}: is a directory; give a file name with -o")
        from diag.benchmark.layout import is_bench_dir

        if is_bench_dir(args.trace):
            return _bench_report(args.trace, output)
        trace = open_input(args.trace, against=args.against)
        findings = analyze(trace)
        report = build_report(trace, findings, hta=not args.no_hta)
        write_report(report, output)
        print_warnings(input_warnings(trace))  # in the report's header too
        size = len(report.html.encode("utf-8")) / 1e6
        failed = [s.title for s in report.sections if s.error]
        print(f"wrote {output} ({size:.1f} MB, {len(findings)} finding(s))")
        if failed:
            print(f"incomplete sections (the report says why): {', '.join(failed)}")
        return 0


def _bench_report(bench_dir: Path, output: Path) -> int:
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

    from diag.benchmark.read import bench_tables
    from diag.report.bench import bench_header, bench_sections
    from diag.report.build import Report, write_report
    from diag.report.html import render_page

    manifest, tables = bench_tables(bench_dir)
    sections = bench_sections(tables)
    report = Report(render_page(bench_header(manifest, tables), sections, get_plotlyjs()), sections)
    write_report(report, output)
    size = len(report.html.encode("utf-8")) / 1e6
    print(f"wrote {output} ({size:.1f} MB, bench of {len(tables.trials)} trial(s))")
    return 0
