"""Analyze a trace directory: findings as text (default) or documented JSON (docs/FINDINGS.md),
headed by how the recording ended and what diag could not see in it (diag.evidence.status)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class AnalyzeCommand:
    """Print the findings of a trace directory, a TORCH_TRACE log or a profiler trace.

    Findings come as text or, with --json, as the document docs/FINDINGS.md describes."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "trace", type=Path, nargs="?", metavar="TRACE_DIR", help="a diag record output"
        )
        parser.add_argument(
            "--against",
            type=Path,
            metavar="PATH",
            help="compare kernels with this run: another trace directory (its main run), or "
            "with --kineto another profiler trace file",
        )
        parser.add_argument(
            "--torch-trace",
            type=Path,
            metavar="DIR",
            help="analyze a TORCH_TRACE log directory (compiles, guards, graph breaks)",
        )
        parser.add_argument(
            "--kineto",
            type=Path,
            metavar="FILE",
            help="analyze a torch.profiler trace file (.json or .json.gz); steps come from "
            "ProfilerStep#N",
        )
        parser.add_argument("--json", action="store_true", help="print findings as JSON")
        parser.add_argument(
            "--only",
            action="append",
            metavar="NAME",
            help="run only this analyzer (repeatable); see --list",
        )
        parser.add_argument("--list", action="store_true", help="list the analyzers and exit")
        parser.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            help="every evidence line of every finding (text shows at most 5 a finding; "
            "--json always has all)",
        )
        parser.add_argument(
            "--color",
            choices=("auto", "always", "never"),
            default="auto",
            help="colour the text: auto (a terminal, unless NO_COLOR is set), always, never",
        )

    def run(self, args: argparse.Namespace) -> int:
        from diag.evidence.status import assess, status_lines
        from diag.findings.analysis import analyze, analyzer_names, check_names
        from diag.findings.colors import use_color
        from diag.findings.model import findings_to_json
        from diag.findings.text import findings_to_text
        from diag.trace.inputs import input_warnings, open_input
        from diag.trace.printable import print_warnings, printable

        if args.list:
            print("\n".join(analyzer_names()))
            return 0
        check_names(args.only)
        trace = open_input(
            args.trace, against=args.against, torch_trace=args.torch_trace, kineto=args.kineto
        )
        findings = analyze(trace, args.only)
        # After the analysis: reading Kineto windows can skip one (diag.trace.profiles).
        warnings = input_warnings(trace)
        print_warnings(warnings)
        visibility = assess(trace)
        source = args.trace or args.torch_trace or args.kineto
        if args.json:
            print(findings_to_json(findings, str(source), warnings, visibility))
        elif warnings and not findings:
            # Not "No findings: ... no problem was detected": the reader said what it missed.
            print(printable("\n".join([*status_lines(visibility), ""])))
            print("No findings in what could be read; see the warnings above.")
        else:
            color = use_color(sys.stdout, args.color)
            print(findings_to_text(findings, visibility, args.only, args.verbose, color))
        sys.stdout.flush()
        return 0
