"""Run a program with diag's collectors injected, into a trace directory.

Everything after `--` is the command, verbatim. The command's exit code is passed through (a
signal as 128+N); its output is left as it is; diag's own summary goes to stderr at the end.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from diag.errors import DiagError
from diag.trace.format import ENV_METRICS_JOIN


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a port number, 0 to 65535")
    return int(text)


#: --max-size when not given, per process: 600 k to 1 M steps (268-448 bytes of events a step),
#: about a day of a service at 10 steps/s, the size of trace the analysis is built to read in
#: seconds (issue 22: 900 k steps).
DEFAULT_MAX_SIZE = "256M"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """--max-size: `500M`, `2G`, plain bytes, or `none` (0: no bound); a DiagError otherwise."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    if value in ("NONE", "0"):
        return 0
    number, unit = (value[:-1], value[-1]) if value[-1:] in _UNITS else (value, "")
    try:
        size = float(number) * _UNITS[unit]
    except ValueError:
        size = -1
    if not size >= 1 << 20 or size != size or size > 1 << 60:
        raise DiagError(
            f"--max-size {text!r}: expected a size of 1M or more such as 500M or 2G, or none"
        )
    return int(size)


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of requests, 1 or more")
    return int(text)


class RecordCommand:
    """Run a program with collectors injected: diag record [options] -- CMD ARGS..."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.usage = "diag record [options] -- CMD [ARGS...]"
        parser.add_argument(
            "-o",
            "--output",
            type=Path,
            help="trace directory (default: diag-<program>-<timestamp>)",
        )
        parser.add_argument(
            "--force", action="store_true", help="replace an existing trace directory"
        )
        parser.add_argument(
            "--baseline",
            choices=["eager"],
            help="run the command again with every torch.compile'd callable "
            "forced eager, as a second run in the same directory",
        )
        parser.add_argument(
            "--profile",
            default="default",
            metavar="SPEC",
            help="which live steps torch.profiler traces: default "
            "(new-shapes,steady:2), none, or a comma list of new-shapes, "
            "steady:N, all, request:ID",
        )
        parser.add_argument(
            "--torch-trace",
            action="store_true",
            help="also keep torch's raw structured trace (TORCH_TRACE; tlparse reads it)",
        )
        parser.add_argument(
            "--step-fn", metavar="MOD:QUALNAME", help="each call of this function is one step"
        )
        parser.add_argument(
            "--request-fn", metavar="MOD:QUALNAME", help="each call of this function is one request"
        )
        parser.add_argument(
            "--warmup-fn",
            metavar="MOD:QUALNAME",
            help="calls of this function are the warmup phase",
        )
        parser.add_argument(
            "--warmup-requests",
            type=_positive_int,
            metavar="N",
            help="the first N requests of each process are warmup, whoever reports them "
            "(an adapter, --request-fn, diag.api)",
        )
        parser.add_argument(
            "--max-size",
            default=DEFAULT_MAX_SIZE,
            metavar="SIZE",
            help="per-step events each process keeps, e.g. 500M or 2G (default "
            f"{DEFAULT_MAX_SIZE}): beyond it the oldest steps are dropped, every compile, "
            "guard failure, graph break, crash and request boundary is kept; none: no bound",
        )
        parser.add_argument(
            "--metrics-port",
            type=_port,
            metavar="PORT",
            help="serve live counters (compiles, live compiles, recompile-limit hits, step-0 "
            "spikes) for Prometheus at http://HOST:PORT/metrics while recording (0: any free "
            "port); docs/FLEET.md",
        )
        parser.add_argument(
            "--metrics-host",
            default="127.0.0.1",
            metavar="HOST",
            help="address --metrics-port binds (default 127.0.0.1)",
        )
        parser.add_argument(
            "--metrics-join",
            action="store_true",
            help="also add the counters to the program's own Prometheus registry when it uses "
            "prometheus_client (its /metrics endpoint then shows them)",
        )
        parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(self, args: argparse.Namespace) -> int:
        from diag.record.launcher import LaunchError, RecordOptions, record
        from diag.record.output import default_output
        from diag.record.profilespec import ProfileSpecError, parse_profile_spec
        from diag.record.summary import summarize

        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            raise DiagError("no command to record: diag record [options] -- CMD [ARGS...]")
        for option, value in (
            ("--step-fn", args.step_fn),
            ("--request-fn", args.request_fn),
            ("--warmup-fn", args.warmup_fn),
        ):
            if value is not None and (":" not in value or not all(value.partition(":")[::2])):
                raise DiagError(f"{option} {value!r}: expected MODULE:QUALNAME")
        try:
            parse_profile_spec(args.profile)
        except ProfileSpecError as exc:
            raise DiagError(str(exc)) from None
        output = args.output or default_output(command)
        options = RecordOptions(
            command=command,
            output=output,
            force=args.force,
            baseline=args.baseline,
            profile=args.profile,
            torch_trace=args.torch_trace,
            step_fn=args.step_fn,
            request_fn=args.request_fn,
            warmup_fn=args.warmup_fn,
            warmup_requests=args.warmup_requests,
            max_size=parse_size(args.max_size),
        )
        if args.metrics_join:
            os.environ[ENV_METRICS_JOIN] = "1"  # the child's environment is a copy of ours
        metrics = None
        if args.metrics_port is not None:
            from diag.live.server import start_metrics

            metrics, where = start_metrics(output, args.metrics_host, args.metrics_port)
            print(f"diag: {where}", file=sys.stderr, flush=True)
        try:
            trace_dir, outcomes = record(options)
        except LaunchError as exc:
            raise LaunchError(
                f"{exc.message} (nothing ran; {exc.trace_dir}/ is marked failed-to-start)",
                exit_code=exc.exit_code,
            ) from None
        finally:
            if metrics is not None:
                metrics.close()
        err = sys.stderr
        last = outcomes[-1]
        first = outcomes[0]
        ended = (
            f"exit {first.exit_code}"
            if first.signal_name is None
            else f"killed by {first.signal_name}"
        )
        print(
            f"\ndiag: recorded {shlex.join(command)} -> {trace_dir}/ ({ended}, "
            f"{sum(o.duration_s for o in outcomes):.1f} s)",
            file=err,
        )
        if first.signal_name is not None:
            print(
                f"diag: the command was killed by signal {first.signal_name} "
                f"(exit code {first.shell_code}); its trace is kept, marked killed",
                file=err,
            )
        for outcome in outcomes:
            if outcome.truncated is not None:
                print(
                    f"diag: the recording of run {outcome.label} stopped early "
                    f"({outcome.truncated}); later events are missing, the trace is kept and "
                    "says so",
                    file=err,
                )
        try:
            summaries = summarize(trace_dir)
        except OSError as exc:  # the program's exit code stands whatever diag could not read
            print(f"  (no summary: {exc.strerror or exc})", file=err)
            summaries = []
        for summary in summaries:
            for line in summary.lines():
                print(f"  {line}", file=err)
        if args.baseline and len(outcomes) == 1 and first.status != "complete":
            print("  (no eager baseline: the command did not complete)", file=err)
        elif args.baseline and len(outcomes) == 1 and first.truncated is not None:
            print("  (no eager baseline: the recording of the command stopped early)", file=err)
        from diag.cli.invocation import diag_command

        diag = diag_command()
        print(
            f"next:\n  {diag} analyze {trace_dir}\n  {diag} tui {trace_dir}\n"
            f"  {diag} report {trace_dir}\n  {diag} check {trace_dir}",
            file=err,
        )
        return first.shell_code if first.status != "complete" else last.shell_code
