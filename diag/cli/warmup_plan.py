"""Plan the warmup that would have kept every recorded live compile out of traffic
(docs/WARMUP.md), and with --verify record the program again with it applied."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diag.trace.run import Trace

EPILOG = """\
examples:
  diag warmup-plan day1 day2                 # one plan for several recordings
  diag warmup-plan day1 --as lightx2v        # _WARMUP_RESOLUTIONS = ((h, w), ...)
  diag warmup-plan day1 --as diffusers       # [(height, width[, frames]), ...]
  diag warmup-plan day1 --as fixture         # --warmup-shapes for python -m diag.fixtures
  diag warmup-plan day1 --verify -- python -m diag.fixtures --compile -q

--verify records the command with the plan applied (the reference service through
--warmup-shapes and --requests; LightX2V through its runner's own warmup entry,
_WARMUP_RESOLUTIONS, which diag's adapter sets from DIAG_LIGHTX2V_WARMUP, and
`lightx2v.infer`'s --target_shape; any other program through DIAG_WARMUP_SHAPES and
DIAG_LIVE_SHAPES, read with diag.api.warmup_shapes() and diag.api.live_shapes()).

exit codes: 0 plan printed (with --verify: no live compile and no recompile-limit hit in the
replay), 1 the replay still compiled live or hit the recompile limit, 2 usage error or
unreadable trace
"""


class WarmupPlanCommand:
    """Plan the smallest warmup that covers every live compile of the recordings."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = EPILOG
        parser.usage = (
            "diag warmup-plan [--json] [--as FORM] [-o DIR] TRACE_DIR [TRACE_DIR ...] "
            "[--verify -- CMD ...]"
        )
        _options(parser)
        # argparse cannot end an option's values at `--` (`--verify -- CMD`): the traces, any
        # option after them and the command come as one list that run() splits.
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(self, args: argparse.Namespace) -> int:
        import json

        from diag.trace.load import load_trace
        from diag.warmup.forms import render
        from diag.warmup.plan import plan_warmup

        _split(args)
        traces = [load_trace(path) for path in args.traces]
        plan = plan_warmup(traces, _explanations(traces))
        if args.verify is None:
            print(render(plan, "json" if args.json else args.form, args.vae_stride))
            return 0
        from diag.warmup.verify import verify

        command = list(args.verify)
        output = args.output or Path(f"{str(args.traces[0]).rstrip('/')}-verify")
        result = verify(plan, traces[0], command, output, args.vae_stride)
        if args.json:
            print(json.dumps({"plan": plan.as_dict(), "verify": result.as_dict()}, indent=1))
        else:
            print(render(plan, args.form, args.vae_stride))
            print()
            print(result.text())
        sys.stdout.flush()
        return 0 if result.passed else 1


def _options(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--json", action="store_true", default=default(False), help="print the plan as JSON"
    )
    parser.add_argument(
        "--as",
        dest="form",
        choices=("text", "lightx2v", "diffusers", "fixture"),
        default=default("text"),
        help="the plan as text (default), a LightX2V _WARMUP_RESOLUTIONS, a diffusers "
        "(height, width[, frames]) list, or the reference service's --warmup-shapes",
    )
    parser.add_argument(
        "--vae-stride",
        type=int,
        default=default(None),
        metavar="N",
        help="--as lightx2v/diffusers from LightX2V's latents: pixels per latent pixel "
        "(default: the recorded runner's vae_stride, else 8, Wan2.1's VAE)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=default(None),
        metavar="DIR",
        help="with --verify: where the replay is recorded (default: FIRST_TRACE-verify)",
    )


def _split(args: argparse.Namespace) -> None:
    """`TRACE... [options] [--verify [--] CMD...]` -> args.traces, the options, args.verify."""
    from diag.errors import DiagError

    rest = list(args.rest)
    args.verify = None
    if "--verify" in rest:
        at = rest.index("--verify")
        rest, command = rest[:at], rest[at + 1 :]
        args.verify = command[1:] if command[:1] == ["--"] else command
    inner = argparse.ArgumentParser(prog="diag warmup-plan", add_help=False)
    _options(inner, defaults=False)
    inner.add_argument("traces", type=Path, nargs="*")
    parsed, unknown = inner.parse_known_args(rest)
    if unknown:
        raise DiagError(f"unrecognized arguments: {' '.join(unknown)}")
    for key, value in vars(parsed).items():
        setattr(args, key, value)
    if not args.traces:
        raise DiagError("no trace directory: diag warmup-plan TRACE_DIR [TRACE_DIR ...]")


def _explanations(traces: list[Trace]) -> dict[str, dict[str, str]]:
    """trace path -> compile id -> the finding that explains it (the analyzers' own words)."""
    from diag.findings.analysis import analyze
    from diag.warmup.plan import EXPLAINERS, explanations

    return {str(trace.path): explanations(analyze(trace, list(EXPLAINERS))) for trace in traces}
