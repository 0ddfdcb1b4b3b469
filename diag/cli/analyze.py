"""Analyze a trace directory: findings as text (default) or documented JSON (docs/FINDINGS.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class AnalyzeCommand:
    """Analyze a recorded trace directory and print the findings."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", type=Path, metavar="TRACE_DIR", help="a diag record output")
        parser.add_argument("--json", action="store_true", help="print findings as JSON")
        parser.add_argument(
            "--only",
            action="append",
            metavar="NAME",
            help="run only this analyzer (repeatable); see --list",
        )
        parser.add_argument("--list", action="store_true", help="list the analyzers and exit")

    def run(self, args: argparse.Namespace) -> int:
        from diag.analysis import analyze_trace, analyzer_names
        from diag.findings import findings_to_json, findings_to_text

        if args.list:
            print("\n".join(analyzer_names()))
            return 0
        findings = analyze_trace(args.trace, args.only)
        if args.json:
            print(findings_to_json(findings, str(args.trace)))
        else:
            print(findings_to_text(findings))
        sys.stdout.flush()
        return 0
