"""The `diag` command: a thin dispatcher over one module per subcommand.

Each subcommand is a class with `prepare_parser()` and `run()`; its name comes from the class and
its help from the docstring (memray's shape). Subcommands arrive with the issues that build them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Protocol

from diag import __version__
from diag.errors import EXIT_INTERNAL, EXIT_USAGE, DiagError
from diag.trace.printable import printable


class Command(Protocol):
    """One subcommand."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _commands() -> dict[str, Command]:
    # Each command module imports only what its own run() needs, inside run().
    from diag.cli.analyze import AnalyzeCommand
    from diag.cli.bench import BenchCommand
    from diag.cli.check import CheckCommand
    from diag.cli.demo import DemoCommand
    from diag.cli.export import ExportCommand
    from diag.cli.record import RecordCommand
    from diag.cli.report import ReportCommand
    from diag.cli.tui import TuiCommand
    from diag.cli.warmup_plan import WarmupPlanCommand

    return {
        "record": RecordCommand(),
        "analyze": AnalyzeCommand(),
        "check": CheckCommand(),
        "bench": BenchCommand(),
        "demo": DemoCommand(),
        "report": ReportCommand(),
        "tui": TuiCommand(),
        "export": ExportCommand(),
        "warmup-plan": WarmupPlanCommand(),
    }


def build_parser(commands: dict[str, Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diag",
        description="Diagnostics for torch.compile'd diffusion-transformer inference.",
        epilog="exit codes: 0 success, 1 a check failed, 2 usage error or unreadable input, "
        "3 internal error (a bug in diag; DIAG_DEBUG=1 shows its traceback)",
    )
    parser.add_argument("--version", action="version", version=f"diag {__version__}")
    subparsers = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    for name, command in commands.items():
        doc = (type(command).__doc__ or "").strip()
        sub = subparsers.add_parser(
            name, help=doc.splitlines()[0] if doc else None, description=doc
        )
        command.prepare_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    commands = _commands()
    parser = build_parser(commands)
    args = parser.parse_args(argv)
    if args.subcommand is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return commands[args.subcommand].run(args)
    except DiagError as exc:
        print(f"diag: error: {printable(exc.message, one_line=True)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("diag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`diag analyze DIR | head`): stop quietly, as cat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug in diag: one line and its own code, never a verdict
        if os.environ.get("DIAG_DEBUG"):
            raise
        what = printable(f"{type(exc).__name__}: {exc}", one_line=True)[:300]
        print(
            f"diag: internal error: {what} (a bug in diag; DIAG_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def entry_point() -> None:
    sys.exit(main())
