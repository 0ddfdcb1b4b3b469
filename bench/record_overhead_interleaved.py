"""What `diag record` adds to a step, measured inside one recorded process.

Whole-run pairs (bench/record_overhead.py) cannot resolve 1%: a plain process's steady median
moves by up to 40% from one process to the next on an H200. Here one process does both: under
`diag record`, after warmup, the reference service serves many requests of one shape in pairs,
one with diag's per-step work on and one with it switched off (`Session.pause()`: the step
tracker, the adapters' hooks, the call-shape sampler, the region markers and the compiled-call
wrappers only call through), in random order within each pair. Each request's figure is the
median of its steps' wall times (the fixture's own, which on CUDA end in a synchronize); the
overhead is the median of the per-pair ratios recorded/paused, with a bootstrap 95% confidence
interval.

More figures say what the paused state costs and whether the method can be trusted:
- paused / bare: the recorded process also serves, in each group (now a triple, in random
  order), a request with the session paused and diag's wrappers taken off the step path
  (`DiagLayers`): what the paused switch still costs, measured in process.
- paused / no diag: the same program in a second process that never loads diag, against the
  paused requests of the recorded one. This one is across processes, so it carries the
  process-to-process noise the interleaving removes; its interval (requests resampled within
  each process) does not include that noise.
- A/A: the process without diag alternates its requests the same way; the ratio of its two
  labels must come out 1 within its interval (nothing differs between them).

Every request of both processes has the same id, hence the same seed: their latents must be
bit-identical (checked and printed).

    python bench/record_overhead_interleaved.py                        # CPU, small, aot_eager
    python bench/record_overhead_interleaved.py --device cuda --size large --backend inductor
    python bench/record_overhead_interleaved.py --against ddd7987      # A/B: this tree / REF

A/B (`--against REF`, a git commit or a diag wheel): REF's diag is installed into a temporary
folder (`git archive` + `pip install --no-deps --target`) and put first on the children's
PYTHONPATH; recorded processes of this tree and of REF then alternate (`--rounds` each, in a
random order per round, one host, one run), each serving the same interleaved pairs with this
script's child. The figure is the ratio of ratios: median recorded/paused pair ratio of this
tree over REF's, with a bootstrap 95% interval (pairs resampled within each process, processes
resampled within each side, so process-to-process noise is in it when --rounds > 1). No process
without diag runs in this mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REQUEST_ID = "bench"  # one id, one seed: every request computes the same latents
ON, OFF, BARE = "recorded", "paused", "bare"
BOOTSTRAP = 4000


# -- the child: one process serving the interleaved requests ---------------------------------------


class DiagLayers:
    """diag's own wrappers on the reference service's step path, to take off and put back.

    `bare()` leaves the recorded process's step path as a program without diag has it: the
    runner's `run_pipeline` and the model's `infer` (instance attributes the adapter set) are
    dropped, and each compiled block the dispatcher holds is unwrapped down to what
    `torch.compile` returned (the layers whose code lives in diag's collectors, followed by
    `__wrapped__`). With the session paused too, what is left of diag is only what acts at
    compile time or import time (log handlers, the wrapped `torch.compile`, an import hook).
    """

    def __init__(self, runner: Any, collectors_dir: str) -> None:
        self.runner = runner
        self.model = runner.model
        self.dispatcher = runner.model.dispatcher
        self.wrapped_entries = dict(self.dispatcher.entries)
        self.bare_entries = {
            k: self._peel(v, collectors_dir) for k, v in self.wrapped_entries.items()
        }
        self.run_pipeline = runner.__dict__.get("run_pipeline")
        self.infer = self.model.__dict__.get("infer")
        self.layers = sum(
            self.wrapped_entries[k] is not self.bare_entries[k] for k in self.wrapped_entries
        )

    @staticmethod
    def _peel(fn: Any, collectors_dir: str) -> Any:
        while True:
            code = getattr(fn, "__code__", None)
            inner = getattr(fn, "__wrapped__", None)
            if code is None or inner is None or not code.co_filename.startswith(collectors_dir):
                return fn
            fn = inner

    def bare(self) -> None:
        self.dispatcher.entries = self.bare_entries
        self.runner.__dict__.pop("run_pipeline", None)
        self.model.__dict__.pop("infer", None)

    def wrapped(self) -> None:
        self.dispatcher.entries = self.wrapped_entries
        if self.run_pipeline is not None:
            self.runner.__dict__["run_pipeline"] = self.run_pipeline
        if self.infer is not None:
            self.model.__dict__["infer"] = self.infer


def serve_groups(
    runner: Any,
    request: Any,
    session: Any,
    layers: DiagLayers | None,
    rng: random.Random,
    settle: int,
    pairs: int,
    started: float,
    budget_s: float,
    deadline: float | None,
) -> list[dict[str, Any]]:
    """Serve `request` in groups, one request per state in random order within each group
    (recorded, paused, bare; recorded and paused without a session), until `settle + pairs`
    groups, `budget_s` after `started` (monotonic) or `deadline` (wall clock). One row per
    request; the first `settle` groups' rows have a negative `pair`. The session is left
    resumed and diag's wrappers in place. (bench/record_costs.py serves the same way.)"""
    states = [ON, OFF, BARE] if layers is not None else [ON, OFF]
    rows: list[dict[str, Any]] = []
    pair = 0
    while (
        pair < settle + pairs
        and time.monotonic() - started < budget_s
        and (deadline is None or time.time() < deadline)
    ):
        order = rng.sample(states, len(states))
        for state in order:
            if session is not None and layers is not None:
                (session.resume if state == ON else session.pause)()
                (layers.bare if state == BARE else layers.wrapped)()
            runner.run_pipeline(request)
            result = runner.results[-1]
            rows.append(
                {
                    "pair": pair - settle,
                    "state": state,
                    "steps": result.step_seconds,
                    "latents": result.latents_sha256,
                }
            )
        pair += 1
    if session is not None and layers is not None:
        layers.wrapped()
        session.resume()
    return rows


def child(args: argparse.Namespace) -> int:
    import torch

    from diag.fixtures.config import FixtureConfig, Request
    from diag.fixtures.runner import FixtureRunner

    if args.threads:
        torch.set_num_threads(args.threads)
    fields = {f.name for f in dataclasses.fields(FixtureConfig)}
    extra: dict[str, Any] = {}
    if args.mode != "default":
        if "mode" not in fields:
            print(f"this fixture has no --mode (asked for {args.mode})", file=sys.stderr)
            return 2
        extra["mode"] = args.mode
    config = FixtureConfig(
        compile=True, device=args.device, size=args.size, backend=args.backend, **extra
    )
    runner = FixtureRunner(config)
    module = sys.modules.get("diag.collectors.session")
    session = module.current_session() if module is not None else None
    if args.recorded and session is None:
        print("not recording: run under diag record", file=sys.stderr)
        return 2
    shape = config.warmup_shapes[0]
    request = Request(REQUEST_ID, shape, args.steps)
    rng = random.Random(args.seed)
    begun = time.monotonic()
    with torch.no_grad():
        runner.init_modules()  # the fixture's warmup: every compile happens here
        runner.phase = "live"
        layers = None
        if session is not None and module is not None:
            layers = DiagLayers(runner, os.path.dirname(module.__file__ or "") + os.sep)
        started = time.monotonic()
        rows = serve_groups(
            runner,
            request,
            session,
            layers,
            rng,
            args.settle,
            args.pairs,
            started,
            args.budget_s,
            args.deadline,
        )
    Path(args.out).write_text(
        json.dumps(
            {
                "recorded": session is not None,
                "unwrapped_blocks": layers.layers if layers is not None else 0,
                "shape": str(shape),
                "rows": [r for r in rows if r["pair"] >= 0],
                "seconds": time.monotonic() - started,
                "warmup_seconds": started - begun,
                "load": os.getloadavg()[0],
            }
        )
    )
    return 0


# -- the parent: two processes, the figures ------------------------------------------------------


def request_medians(rows: list[dict[str, Any]], state: str) -> list[float]:
    return [statistics.median(r["steps"]) for r in rows if r["state"] == state]


def pair_ratios(
    rows: list[dict[str, Any]], num: str, den: str, within: Any = statistics.median
) -> list[float]:
    """Per pair: `within` (median, or min) of the `num` request's steps over the `den` one's."""
    by_pair: dict[int, dict[str, float]] = {}
    for r in rows:
        by_pair.setdefault(r["pair"], {})[r["state"]] = within(r["steps"])
    return [p[num] / p[den] for p in by_pair.values() if num in p and den in p]


def bootstrap_median(values: list[float], rng: random.Random) -> tuple[float, float]:
    """95% percentile interval of the median, values resampled with replacement."""
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(BOOTSTRAP))
    return medians[int(0.025 * BOOTSTRAP)], medians[int(0.975 * BOOTSTRAP) - 1]


def bootstrap_ratio_of_medians(
    num: list[float], den: list[float], rng: random.Random
) -> tuple[float, float]:
    ratios = sorted(
        statistics.median(rng.choices(num, k=len(num)))
        / statistics.median(rng.choices(den, k=len(den)))
        for _ in range(BOOTSTRAP)
    )
    return ratios[int(0.025 * BOOTSTRAP)], ratios[int(0.975 * BOOTSTRAP) - 1]


def run_child(
    args: argparse.Namespace,
    recorded: bool,
    workdir: Path,
    budget_s: float,
    deadline: float | None,
    site: Path | None = None,
    name: str | None = None,
) -> Any:
    """One child process; `site`: a folder put first on its PYTHONPATH (REF's diag)."""
    out = workdir / ((name or ("recorded" if recorded else "plain")) + ".json")
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--out",
        str(out),
        "--device",
        args.device,
        "--size",
        args.size,
        "--backend",
        args.backend,
        "--mode",
        args.mode,
        "--steps",
        str(args.steps),
        "--pairs",
        str(args.pairs),
        "--settle",
        str(args.settle),
        "--budget-s",
        str(budget_s),
        *(["--deadline", str(deadline)] if deadline is not None else []),
        "--seed",
        str(args.seed),
        *(["--threads", str(args.threads)] if args.threads else []),
    ]
    if recorded:
        command = [
            sys.executable,
            "-m",
            "diag",
            "record",
            "--profile",
            args.profile,
            "-o",
            str(workdir / ("trace-" + name if name else "trace")),
            "--",
            *command,
            "--recorded",
        ]
    env = os.environ.copy()
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    # Run from the work folder: a checkout's diag/ in the current folder would shadow REF's.
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=workdir if site else None
    )
    if done.returncode != 0 or not out.exists():
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"the {name or ('recorded' if recorded else 'plain')} child failed")
    result = json.loads(out.read_text())
    if recorded:
        result["window_stalls"] = window_stalls(workdir / ("trace-" + name if name else "trace"))
    return result


def window_stalls(trace: Path) -> list[float]:
    """Each profile window's stop and export on the program's thread (`export_s` of its
    `profile_window_end`), in seconds. These fall between steps, so no step time (and no median
    of them) shows them: a change that makes a window stall for seconds shows here instead."""
    stalls = []
    for path in sorted(trace.glob("runs/**/events.jsonl")):
        with open(path, "rb") as handle:
            for line in handle:
                if b'"profile_window_end"' not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event.get("export_s"), (int, float)):
                    stalls.append(float(event["export_s"]))
    return stalls


def stall_summary(results: list[dict[str, Any]]) -> str:
    stalls = [s for r in results for s in r.get("window_stalls", [])]
    if not stalls:
        return "no profile window"
    return (
        f"{len(stalls)} profile window(s), longest stall {max(stalls):.3f} s, "
        f"median {statistics.median(stalls):.3f} s"
    )


# -- A/B: this tree against REF, in one run -------------------------------------------------------


def install_ref(ref: str, into: Path, python: str) -> Path:
    """REF's diag in `into`/site: a wheel installed as is, or a commit of this checkout
    archived and installed (no network: --no-deps --no-build-isolation)."""
    site = into / "site"
    source: str = ref
    if not (ref.endswith(".whl") and Path(ref).is_file()):
        repo = Path(__file__).resolve().parent.parent
        src = into / "src"
        src.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", ref], capture_output=True, check=False
        )
        if archive.returncode != 0:
            raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode()[-400:]}")
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
        source = str(src)
    pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "--no-index", "--no-compile", "--target", str(site), source],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"installing {ref} failed (try --pip with a Python whose setuptools builds diag, "
            f"or a wheel):\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
        )
    return site


def bootstrap_ratio_of_ratios(
    this: list[list[float]], ref: list[list[float]], rng: random.Random
) -> tuple[float, float]:
    """95% interval of median(this pair ratios) / median(REF's): processes resampled within
    each side, then pairs within each process."""

    def draw(side: list[list[float]]) -> float:
        pooled: list[float] = []
        for process in rng.choices(side, k=len(side)):
            pooled.extend(rng.choices(process, k=len(process)))
        return statistics.median(pooled)

    values = sorted(draw(this) / draw(ref) for _ in range(BOOTSTRAP))
    return values[int(0.025 * BOOTSTRAP)], values[int(0.975 * BOOTSTRAP) - 1]


def against(args: argparse.Namespace, rng: random.Random) -> int:
    """Recorded processes of this tree and of REF, alternating; the ratio of their ratios."""
    load_before = os.getloadavg()
    wall = time.monotonic()
    sides = ("this", "ref")
    results: dict[str, list[Any]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="diag-ab-") as tmp:
        workdir = Path(tmp)
        site = install_ref(args.against, workdir / "ref", args.pip or sys.executable)
        built = time.monotonic() - wall
        runs = [side for _ in range(args.rounds) for side in rng.sample(sides, 2)]
        begun = time.time()
        for i, side in enumerate(runs):
            deadline = None
            if args.total_s:  # each child stops serving at the end of its share of the total
                deadline = begun + (args.total_s - built - 5) * (i + 1) / len(runs)
            result = run_child(
                args,
                True,
                workdir,
                args.budget_s,
                deadline,
                site=site if side == "ref" else None,
                name=f"{side}-{i}",
            )
            results[side].append(result)
    load_after = os.getloadavg()
    what = (
        f"{args.device}, {args.size}, {args.backend}, mode {args.mode}, profile {args.profile}, "
        f"threads {args.threads or 'default'}"
    )
    print(f"A/B interleaved overhead, this tree / {args.against} ({what}); order {' '.join(runs)}")
    ratios: dict[str, list[list[float]]] = {}
    for side in sides:
        # A process whose warmup ran past its share served no pair: it is left out.
        ratios[side] = [p for r in results[side] if (p := pair_ratios(r["rows"], ON, OFF))]
        pooled = [x for process in ratios[side] for x in process]
        if len(pooled) < 2:
            print(f"  {side}: {len(pooled)} pairs: raise --budget-s or --total-s")
            return 2
        lo, hi = bootstrap_median(pooled, rng)
        rows = [row for r in results[side] for row in r["rows"]]
        per_process = ", ".join(f"{statistics.median(p):.4f} ({len(p)})" for p in ratios[side] if p)
        label = "this tree" if side == "this" else args.against
        print(
            f"  {label}: recorded/paused {statistics.median(pooled):.4f} (95% CI {lo:.4f} .. "
            f"{hi:.4f}), {len(pooled)} pairs; per process {per_process}; median request step "
            f"{ms(statistics.median(request_medians(rows, ON)))} recorded, "
            f"{ms(statistics.median(request_medians(rows, OFF)))} paused"
        )
    for side in sides:
        label = "this tree" if side == "this" else args.against
        print(f"  {label}: on the program's thread between steps: {stall_summary(results[side])}")
    this_med = statistics.median([x for p in ratios["this"] for x in p])
    ref_med = statistics.median([x for p in ratios["ref"] for x in p])
    lo, hi = bootstrap_ratio_of_ratios(ratios["this"], ratios["ref"], rng)
    digests = {row["latents"] for side in sides for r in results[side] for row in r["rows"]}
    print(
        "  latents of all requests, both trees: "
        + ("bit-identical" if len(digests) == 1 else f"{len(digests)} different digests")
    )
    if len(digests) > 1:  # one process's (torch's choices) or one state's (diag's doing)?
        for side in sides:
            for number, result in enumerate(results[side], start=1):
                print(f"   {side} process {number}:")
                print(digest_breakdown(result["rows"], []))
    print(
        f"  load average {load_before[0]:.2f} at start, {load_after[0]:.2f} at end "
        f"({os.cpu_count()} CPUs); {time.monotonic() - wall:.0f} s in all "
        f"({built:.0f} s installing {args.against})"
    )
    print(
        f"RESULT A/B ratio of ratios (this/{args.against}) {this_med / ref_med:.4f} "
        f"95% CI [{lo:.4f}, {hi:.4f}]; this {this_med:.4f}, {args.against} {ref_med:.4f}; "
        f"latents {'identical' if len(digests) == 1 else 'DIFFER'}; {what}; window stalls: "
        f"this {stall_summary(results['this'])}; REF {stall_summary(results['ref'])}"
    )
    return 0


def digest_breakdown(rows: list[dict[str, Any]], plain_rows: list[dict[str, Any]]) -> str:
    """Where each latents digest came from (process, state, pairs): whether the requests that
    differ are one process's (torch's choices per process, such as kernel autotuning) or one
    state's within a process (which would mean diag changed what the program computes)."""
    lines = []
    for process, group in (("recorded process", rows), ("process without diag", plain_rows)):
        seen: dict[str, dict[str, list[int]]] = {}
        for r in group:
            seen.setdefault(r["latents"][:12], {}).setdefault(r["state"], []).append(r["pair"])
        for digest, states in seen.items():
            parts = ", ".join(
                f"{state} {len(p)} (pairs {min(p)}-{max(p)})" for state, p in sorted(states.items())
            )
            lines.append(f"    {digest}: {process}: {parts}")
    return "\n".join(lines)


def ms(value: float) -> str:
    return f"{value * 1e3:.3f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument(
        "--mode",
        default="default",
        help="torch.compile mode for the fixture's blocks (reduce-overhead: CUDA graphs; only "
        "where the fixture has --mode)",
    )
    parser.add_argument("--profile", default="none", help="diag record --profile (default none)")
    parser.add_argument("--steps", type=int, default=10, help="steps per request (default 10)")
    parser.add_argument("--pairs", type=int, default=2000, help="at most this many pairs")
    parser.add_argument("--settle", type=int, default=3, help="pairs run first and left out")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=150.0,
        help="seconds of the recorded process's serving after its warmup (compiles); the "
        "process without diag gets --plain-share of it (default 150)",
    )
    parser.add_argument("--plain-share", type=float, default=0.5)
    parser.add_argument(
        "--total-s",
        type=float,
        default=None,
        help="stop serving early so that the whole bench ends within about this many seconds "
        "(the recorded process serves until 72%% of it, the one without diag until 8 s "
        "before it; warmups and process start count)",
    )
    parser.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads in both processes (default: 1 on CPU, where two OpenMP "
        "threads on a shared 2-core machine stall whenever another process runs; torch's own "
        "default on CUDA)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--against",
        metavar="REF",
        help="A/B: a git commit of this checkout or a diag wheel; recorded processes of this "
        "tree and REF alternate and the ratio of their recorded/paused ratios is printed",
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="with --against: processes per side (default 2)"
    )
    parser.add_argument(
        "--pip",
        metavar="PYTHON",
        help="with --against: the Python whose pip builds REF (default this one; its "
        "setuptools must build diag's pyproject)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--recorded", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.threads is None and args.device == "cpu":
        args.threads = 1

    rng = random.Random(args.seed)
    if args.against:
        return against(args, rng)
    load_before = os.getloadavg()
    wall = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="diag-interleaved-") as tmp:
        workdir = Path(tmp)
        # --total-s: the recorded process stops serving by 72% of it, the plain one 8 s before it.
        begun = time.time()
        total = args.total_s
        recorded = run_child(
            args, True, workdir, args.budget_s, begun + 0.72 * total if total else None
        )
        plain = run_child(
            args,
            False,
            workdir,
            args.budget_s * args.plain_share,
            begun + total - 8 if total else None,
        )
    load_after = os.getloadavg()
    rows, plain_rows = recorded["rows"], plain["rows"]

    what = (
        f"{args.device}, {args.size}, {args.backend}, mode {args.mode}, profile {args.profile}, "
        f"threads {args.threads or 'default'}"
    )
    print(f"interleaved overhead ({what}); shape {recorded['shape']}, {args.steps} steps/request")
    ratios = pair_ratios(rows, ON, OFF)
    if len(ratios) < 2:
        print(f"the recorded process served {len(ratios)} groups: raise --budget-s or --total-s")
        return 2
    lo, hi = bootstrap_median(ratios, rng)
    overhead = statistics.median(ratios)
    on_med = statistics.median(request_medians(rows, ON))
    off_med = statistics.median(request_medians(rows, OFF))
    print(
        f"  recorded process: warmup {recorded['warmup_seconds']:.0f} s, then {len(ratios)} "
        f"pairs in {recorded['seconds']:.0f} s; "
        f"median request step {ms(on_med)} recorded, {ms(off_med)} paused"
    )
    print(
        f"  recorded/paused: median of pair ratios {overhead:.4f} "
        f"(95% CI {lo:.4f} .. {hi:.4f}, half-width {(hi - lo) / 2 * 100:.2f}%)"
    )
    bare = pair_ratios(rows, OFF, BARE)
    blo, bhi = bootstrap_median(bare, rng)
    print(
        f"  paused/bare (same process; bare: paused and diag's wrappers taken off the step path, "
        f"{recorded['unwrapped_blocks']} compiled blocks unwrapped): {statistics.median(bare):.4f} "
        f"(95% CI {blo:.4f} .. {bhi:.4f})"
    )
    fastest = pair_ratios(rows, ON, OFF, min)
    flo, fhi = bootstrap_median(fastest, rng)
    print(
        f"  the same with each request's fastest step instead of its median: "
        f"{statistics.median(fastest):.4f} (95% CI {flo:.4f} .. {fhi:.4f})"
    )
    plain_medians = request_medians(plain_rows, ON) + request_medians(plain_rows, OFF)
    null = pair_ratios(plain_rows, ON, OFF)
    cross_text = null_text = "n/a (the process without diag served no pair: raise --total-s)"
    if null:
        off_medians = request_medians(rows, OFF)
        cross = statistics.median(off_medians) / statistics.median(plain_medians)
        clo, chi = bootstrap_ratio_of_medians(off_medians, plain_medians, rng)
        cross_text = f"{cross:.4f} [{clo:.4f}, {chi:.4f}]"
        print(
            f"  paused/no diag (across processes): {cross:.4f} (95% CI {clo:.4f} .. {chi:.4f}, "
            f"requests resampled; process-to-process noise not included); no-diag median "
            f"request step {ms(statistics.median(plain_medians))}, {len(plain_medians)} requests"
        )
        nlo, nhi = bootstrap_median(null, rng)
        null_text = f"{statistics.median(null):.4f} [{nlo:.4f}, {nhi:.4f}]"
        print(
            f"  A/A in the process without diag: {statistics.median(null):.4f} "
            f"(95% CI {nlo:.4f} .. {nhi:.4f}), {len(null)} pairs"
        )
    else:
        print(f"  paused/no diag and A/A: {cross_text}")
    digests = {r["latents"] for r in rows + plain_rows}
    print(
        f"  latents of all {len(rows) + len(plain_rows)} requests, both processes: "
        + ("bit-identical" if len(digests) == 1 else f"{len(digests)} different digests")
    )
    if len(digests) > 1:
        print(digest_breakdown(rows, plain_rows))
    print(
        f"  load average {load_before[0]:.2f} at start, {load_after[0]:.2f} at end "
        f"({os.cpu_count()} CPUs); {time.monotonic() - wall:.0f} s in all"
    )
    print(
        f"RESULT recorded/paused {overhead:.4f} 95% CI [{lo:.4f}, {hi:.4f}] "
        f"(+-{(hi - lo) / 2 * 100:.2f}%, {len(ratios)} pairs); paused/bare "
        f"{statistics.median(bare):.4f} [{blo:.4f}, {bhi:.4f}]; paused/no-diag {cross_text}; "
        f"A/A {null_text}; "
        f"latents {'identical' if len(digests) == 1 else 'DIFFER'}; {what}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
