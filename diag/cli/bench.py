"""Benchmark configurations as the LightX2V posts' sign-off does, and prove it measured steady
state (docs/BENCH.md)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diag.benchmark.spec import ConfigSpec

EPILOG = """\
examples:
  diag bench -o eager-vs-compiled \\
      --config eager='python -m diag.fixtures -q' \\
      --config compiled='python -m diag.fixtures --compile -q'
  diag bench --config before=run1,run2,run3 --config after=run4,run5,run6
  diag bench eager-vs-compiled --json       # the tables of a bench directory again

Trials run interleaved (A B A B ...), each under diag record (--profile none unless given).
The program's output passes through unchanged; a copy is kept in each trial's trace, and where
the program logs LightX2V's `infer_main cost` lines those times are the clock.

exit codes: 0 tables printed, 1 a trial's command failed (its trace is kept and left out),
2 usage error or unreadable input
"""


def _trials(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of trials, 1 or more")
    return int(text)


class BenchCommand:
    """Benchmark configurations as interleaved trials: steady state, pairs, validity."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = EPILOG
        parser.usage = (
            "diag bench [-o DIR] [--trials N] --config NAME='CMD ...' [--config ...]\n"
            "       diag bench BENCH_DIR [--json]"
        )
        parser.add_argument(
            "bench", nargs="?", type=Path, metavar="BENCH_DIR", help="print an existing bench"
        )
        parser.add_argument(
            "--config",
            action="append",
            default=[],
            metavar="NAME=CMD|NAME=TRACE_DIR,...",
            help="a configuration: a command (quoted, split as a shell would) recorded --trials "
            "times, or trace directories already recorded (comma-separated); repeat to compare "
            "(the first is the reference of each pair)",
        )
        parser.add_argument(
            "--trials", type=_trials, default=3, metavar="N", help="trials per command (default: 3)"
        )
        parser.add_argument(
            "-o",
            "--output",
            type=Path,
            metavar="DIR",
            help="bench directory (default: diag-bench-<timestamp>; with only recordings "
            "given, nothing is written unless -o is given)",
        )
        parser.add_argument("--force", action="store_true", help="replace an existing DIR")
        parser.add_argument(
            "--profile",
            default="none",
            metavar="SPEC",
            help="diag record's --profile for each trial (default: none; profiled steps are "
            "left out of the means)",
        )
        parser.add_argument(
            "--warmup-requests",
            type=_trials,
            metavar="N",
            help="diag record's --warmup-requests for each trial: the first N requests are "
            "warmup (for programs that have no warmup diag knows, e.g. a diffusers script)",
        )
        parser.add_argument("--json", action="store_true", help="print the tables as JSON")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress line per trial")

    def run(self, args: argparse.Namespace) -> int:
        from diag.benchmark.read import bench_tables, spec_tables
        from diag.benchmark.render import render_json, render_text
        from diag.benchmark.runner import plan, prepare_dir, run_bench
        from diag.benchmark.spec import check_specs, parse_config
        from diag.errors import DiagError
        from diag.record.profilespec import ProfileSpecError, parse_profile_spec

        if args.bench is not None:
            if args.config:
                raise DiagError("give either BENCH_DIR or --config, not both")
            _, tables = bench_tables(args.bench)
            print(render_json(tables) if args.json else render_text(tables, f"bench {args.bench}"))
            return 0
        specs = [parse_config(text) for text in args.config]
        check_specs(specs)
        try:
            parse_profile_spec(args.profile)
        except ProfileSpecError as exc:
            raise DiagError(str(exc)) from None
        commands = [s for s in specs if s.command is not None]
        if not commands and args.output is None:
            tables = spec_tables(specs)
            print(render_json(tables) if args.json else render_text(tables, _describe(specs)))
            return 0
        out: Path = args.output or Path(f"diag-bench-{datetime.now():%Y%m%d-%H%M%S}")
        prepare_dir(out, args.force)
        manifest = run_bench(
            plan(specs, args.trials, out), args.profile, args.quiet, args.warmup_requests
        )
        _, tables = bench_tables(out)
        header = f"{_describe(specs)} -> {out}/"
        print(render_json(tables) if args.json else render_text(tables, header))
        failed = [e for e in manifest.entries if e.exit_code not in (0, None)]
        return 1 if failed else 0


def _describe(specs: Sequence[ConfigSpec]) -> str:
    parts = []
    for spec in specs:
        what = shlex.join(spec.command) if spec.command else f"{len(spec.traces)} recording(s)"
        parts.append(f"{spec.name}: {what}")
    return "diag bench: " + "; ".join(parts)
