"""Check a trace directory against a policy: the CI gate (docs/CHECK.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
policy: --policy FILE, else [check] in ./diag.toml, else [tool.diag.check] in ./pyproject.toml,
else the defaults (no compile during live requests; recompile-limit and guard-churn errors fail;
at most 7 cache entries per code object). Keys and rules: docs/CHECK.md.

exit codes:
  0  every rule passed
  1  the policy was violated (each violation is listed with its evidence)
  2  usage error, bad policy, or unreadable trace directory (one line on stderr)
  3  internal error: diag itself failed (a bug; one line on stderr), no verdict
"""


class CheckCommand:
    """Check a recorded trace directory against a policy and exit 1 if it is violated (CI)."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = EPILOG
        parser.add_argument(
            "trace", type=Path, nargs="?", metavar="TRACE_DIR", help="a diag record output"
        )
        parser.add_argument(
            "--policy", type=Path, metavar="FILE", help="a diag.toml or pyproject.toml"
        )
        parser.add_argument(
            "--baseline",
            type=Path,
            metavar="DIR",
            help="a known-good trace directory: fail on new frames, recompile reasons, cache "
            "entries and slower steady-state steps",
        )
        parser.add_argument(
            "--bench",
            type=Path,
            metavar="DIR",
            help="a diag bench directory: fail on too few valid trials, a configuration slower "
            "than the baseline configuration beyond bench_max_regression and the noise, and a "
            "failed variable-resolution test",
        )
        parser.add_argument(
            "--junit", type=Path, metavar="FILE", help="also write JUnit XML (one case per rule)"
        )
        parser.add_argument(
            "--format",
            choices=("text", "json", "github"),
            default="text",
            help="text (default), json, or github (GitHub Actions annotations)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import gc

        # A short-lived process that builds many acyclic objects: the cyclic collector would
        # only add pauses (about a fifth of the time on a 10 000-compile trace).
        gc.disable()
        from diag.check import run_check
        from diag.check.junit import write_junit
        from diag.check.policy import find_policy
        from diag.check.render import verdict_github, verdict_json, verdict_text
        from diag.trace.printable import print_warnings

        policy = find_policy(args.policy, Path.cwd())
        verdict = run_check(args.trace, policy, args.baseline, args.bench)
        print_warnings(verdict.warnings)
        if args.junit is not None:
            write_junit(verdict, args.junit)
        if args.format == "json":
            print(verdict_json(verdict, policy.as_dict()))
        elif args.format == "github":
            print(verdict_github(verdict))
        else:
            print(verdict_text(verdict))
        sys.stdout.flush()
        return 0 if verdict.passed else 1
