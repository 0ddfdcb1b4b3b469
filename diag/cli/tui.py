"""`diag tui DIR [--against DIR]`: the Textual UI over a trace directory.

The directories are checked before the UI starts, so a bad one is one line and exit 2, never a
half-drawn screen. Textual (and the app, loaded by name from diag.tui) is imported in run() only:
every other subcommand starts without it.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from diag.errors import DiagError


def check_trace_dir(path: Path) -> None:
    """Raise DiagError (exit 2) unless `path` is a readable diag trace holding a run."""
    from diag.trace.format import RUNS_DIR
    from diag.trace.load import read_manifest

    read_manifest(path)
    runs = path / RUNS_DIR
    if not runs.is_dir() or not any(p.is_dir() for p in runs.iterdir()):
        raise DiagError(f"{path}: the trace holds no runs (was the recording interrupted?)")


class TuiCommand:
    """Browse a trace directory's findings and their evidence in a terminal UI."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", type=Path, metavar="TRACE_DIR", help="a diag record output")
        parser.add_argument(
            "--against",
            type=Path,
            metavar="DIR",
            help="compare kernels with this trace directory's run instead of the eager baseline",
        )

    def run(self, args: argparse.Namespace) -> int:
        check_trace_dir(args.trace)
        if args.against is not None:
            check_trace_dir(args.against)
        module = importlib.import_module("diag.tui.app")
        app = module.DiagApp(args.trace, against=args.against)
        app.run()
        return int(app.return_code or 0)
