"""Record the built-in reference model with planted problems, then print what diag finds.

The default plants show the three kinds of finding diag exists for: a live recompile from a
shape warmup missed, guard churn on Python state, and a kernel that eager runs and compiled
code routes around (seen by comparing with the eager baseline, two profiled steady steps each:
kernel-routing needs two a side to judge what the routing costs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class DemoCommand:
    """Record the built-in reference model with a planted problem and print the findings."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-o",
            "--output",
            type=Path,
            default=Path("diag-demo"),
            help="trace directory (default: diag-demo; an earlier demo is replaced)",
        )
        parser.add_argument(
            "--plant",
            action="append",
            metavar="NAME",
            help="problem to plant (default: unwarmed-shape, guard-churn and routing); "
            "see python -m diag.fixtures --help",
        )
        parser.add_argument("--model", default="wan", choices=["wan", "qwen", "ltx"])

    def run(self, args: argparse.Namespace) -> int:
        from diag.findings.analysis import analyze_trace
        from diag.findings.text import findings_to_text
        from diag.record.launcher import RecordOptions, record
        from diag.record.summary import summarize

        plants = args.plant or ["unwarmed-shape", "guard-churn", "routing"]
        command = [
            sys.executable,
            "-m",
            "diag.fixtures",
            "--model",
            args.model,
            "--compile",
            "--backend",
            "aot_eager",
            "-q",
        ]
        for plant in plants:
            command += ["--plant", plant]
        print(
            f"diag demo: recording the reference service ({args.model}, aot_eager, "
            f"plants: {', '.join(plants)}; then its eager baseline) into {args.output}/ ...",
            file=sys.stderr,
        )
        options = RecordOptions(
            command=command,
            output=args.output,
            force=True,
            baseline="eager",
            profile="steady:2",
        )
        trace_dir, outcomes = record(options)
        if outcomes[0].status != "complete":
            print(
                f"diag demo: the reference service failed ({outcomes[0].status})", file=sys.stderr
            )
            return outcomes[0].shell_code or 1
        for summary in summarize(trace_dir):
            for line in summary.lines():
                print(f"  {line}", file=sys.stderr)
        from diag.cli.invocation import diag_command
        from diag.evidence.status import assess
        from diag.findings.colors import use_color
        from diag.trace.load import load_trace

        findings = analyze_trace(trace_dir)
        color = use_color(sys.stdout)
        print(findings_to_text(findings, assess(load_trace(trace_dir)), color=color))
        diag = diag_command()
        hints = [
            (f"{diag} tui {trace_dir}", "browse from each finding to its evidence"),
            (f"{diag} report {trace_dir}", "one HTML file to attach to a bug"),
            (f"{diag} check {trace_dir}", "the CI gate: exit 1 on a live recompile"),
            (f"{diag} analyze {trace_dir} -v", "every evidence line (--json: every field)"),
        ]
        width = max(len(command) for command, _ in hints) + 2
        print(
            "\nnext:\n" + "\n".join(f"  {c:{width}}# {why}" for c, why in hints),
            file=sys.stderr,
        )
        return 0
