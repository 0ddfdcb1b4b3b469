"""Analyze a trace directory: findings as text (default) or documented JSON (docs/FINDINGS.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class AnalyzeCommand:
    """Analyze a recorded trace directory (or a TORCH_TRACE dir, or a profiler trace) and print
    the findings."""

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

    def run(self, args: argparse.Namespace) -> int:
        from diag.analysis import analyze, analyzer_names, check_names
        from diag.findings import findings_to_json, findings_to_text
        from diag.inputs import open_input

        if args.list:
            print("\n".join(analyzer_names()))
            return 0
        check_names(args.only)
        trace = open_input(
            args.trace, against=args.against, torch_trace=args.torch_trace, kineto=args.kineto
        )
        imported = trace.manifest.get("torch_trace")
        for warning in imported.get("warnings", []) if isinstance(imported, dict) else []:
            print(f"diag: warning: {warning}", file=sys.stderr)
        findings = analyze(trace, args.only)
        source = args.trace or args.torch_trace or args.kineto
        if args.json:
            print(findings_to_json(findings, str(source)))
        else:
            print(findings_to_text(findings))
        sys.stdout.flush()
        return 0
