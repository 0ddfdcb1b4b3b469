"""Export a trace for another viewer: `--perfetto OUT` writes one Trace Event Format file that
ui.perfetto.dev (and chrome://tracing) opens (diag.perfetto; docs/PERFETTO.md)."""

from __future__ import annotations

import argparse
from pathlib import Path


class ExportCommand:
    """Write a trace as one timeline file for Perfetto: steps, compiles and kernels together.

    Opens in ui.perfetto.dev (the file stays on your machine) or chrome://tracing; steps are
    named `r3 s0` (search for them)."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "trace", type=Path, nargs="?", metavar="TRACE_DIR", help="a diag record output"
        )
        parser.add_argument(
            "--perfetto",
            type=Path,
            required=True,
            metavar="OUT",
            help="the Trace Event Format file to write (OUT.json, or OUT.json.gz gzip'd); an "
            "existing file is replaced",
        )
        parser.add_argument(
            "--torch-trace", type=Path, metavar="DIR", help="export a TORCH_TRACE log directory"
        )
        parser.add_argument(
            "--kineto", type=Path, metavar="FILE", help="export a torch.profiler trace file"
        )
        parser.add_argument(
            "--no-kineto",
            action="store_true",
            help="leave out the profiler windows' CPU and GPU events (diag's own tracks only)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from diag.errors import DiagError
        from diag.perfetto import export_perfetto
        from diag.trace.inputs import open_input

        if args.perfetto.is_dir():  # refuse before the slow part
            raise DiagError(f"{args.perfetto}: is a directory; give a file name (OUT.json.gz)")
        trace = open_input(args.trace, torch_trace=args.torch_trace, kineto=args.kineto)
        done = export_perfetto(trace, args.perfetto, kineto=not args.no_kineto)
        # A window that could not be read is skipped, as analyze, check and report skip it.
        from diag.trace.inputs import input_warnings
        from diag.trace.printable import print_warnings

        print_warnings(input_warnings(trace))
        size = done.output.stat().st_size / 1e6
        print(
            f"wrote {done.output} ({size:.1f} MB, {done.events} events, "
            f"{done.processes} process(es)); open it in ui.perfetto.dev"
        )
        for note in done.notes:
            print(f"note: {note}")
        return 0
