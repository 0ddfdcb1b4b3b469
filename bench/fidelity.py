"""The fidelity harness (issue 24): diag's claims checked against torch's own record, on
generated programs.

    python bench/fidelity.py [--seed S] [--n N] [--families wan,flux,...] [--backend aot_eager]
                             [--layouts single,spawn,ranks] [--keep DIR] [--reuse DIR]

Each program (bench/fidelity_kit: a diffusers model from a tiny test config, a compiled unit,
dynamic, warmup and its marking, one or two planted causes, a layout) runs plain and under
`diag record`, both with the oracle (bench/fidelity_kit/oracle.py, which never imports diag);
`diag analyze --json` reads the recording. The report says, per analyzer, how many claims were
made, confirmed and contradicted (with the program and the claim); which problems torch
recorded that no finding claims; errors and warnings on clean programs; and every difference
between the plain and the recorded run (a defect of diag). Written to bench/results/.

`--guard-kinds` runs the guard-kind families instead (bench/fidelity_kit/guard_kinds.py, issue
35): one planted section per guard kind the CPU can produce, `--n` seeds from `--seed`, and
prints per kind torch's serving recompiles, diag's claims, confirmed, and fix verified.

`--reuse DIR` re-evaluates the kept run folders of an earlier `--keep DIR` without running
anything (after changing diag's analyzers: re-run `diag analyze` with `--reanalyze`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fidelity_kit import report  # noqa: E402
from fidelity_kit.evaluate import Evaluation, evaluate  # noqa: E402
from fidelity_kit.families import DIFFUSERS, FAMILIES  # noqa: E402
from fidelity_kit.generator import sample  # noqa: E402
from fidelity_kit.runner import run_program  # noqa: E402
from fidelity_kit.sample import ci_sample, inductor_sample  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument(
        "--start",
        type=int,
        default=0,
        help="skip the first K programs of the sample (to split --n across machines)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="programs run at once (each runs two processes)"
    )
    parser.add_argument("--families", default=",".join(DIFFUSERS))
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--layouts", default="single,spawn,ranks")
    parser.add_argument("--timeout", type=float, default=420)
    parser.add_argument("--profile", default=None, help="diag record --profile SPEC")
    parser.add_argument(
        "--serial",
        action="store_true",
        help="run the plain and the recorded run one after the other",
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep run folders here")
    parser.add_argument("--reuse", type=Path, default=None, help="evaluate kept folders")
    parser.add_argument(
        "--sample", choices=["ci", "inductor"], default=None, help="run a fixed sample instead"
    )
    parser.add_argument(
        "--only", default="", help="run only these program ids of the sample (comma-separated)"
    )
    parser.add_argument("--reanalyze", action="store_true", help="with --reuse: analyze again")
    parser.add_argument("--out", type=Path, default=None, help="report path (.txt; .json beside)")
    parser.add_argument("--note", default="", help="a line for the report's header")
    parser.add_argument(
        "--guard-kinds", action="store_true", help="run the guard-kind families (issue 35)"
    )
    args = parser.parse_args(argv)
    if args.guard_kinds:
        return _guard_kinds(args)
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        print(
            f"fidelity: unknown families {unknown}; known: {', '.join(FAMILIES)}", file=sys.stderr
        )
        return 2
    started = time.monotonic()
    if args.reuse is not None:
        # A folder without run.json is a program still running (or killed): not evaluated.
        folders = sorted(p.parent for p in args.reuse.glob("*/run.json"))
        if args.reanalyze:
            for folder in folders:
                _reanalyze(folder)
        evaluations = [evaluate(folder) for folder in folders]
        header = [f"fidelity: re-evaluated {len(folders)} kept program(s) from {args.reuse}"]
    else:
        layouts = tuple(x for x in args.layouts.split(",") if x)
        if args.sample == "ci":
            specs = ci_sample()
        elif args.sample == "inductor":
            specs = inductor_sample()
        else:
            specs = sample(args.seed, args.n, families, args.backend, layouts)[args.start :]
        if args.only:
            wanted = set(args.only.split(","))
            specs = [s for s in specs if s.program_id in wanted]
        root = args.keep or Path(tempfile.mkdtemp(prefix="fidelity-"))
        root.mkdir(parents=True, exist_ok=True)
        evaluations = _run_all(specs, root, args)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
        header = [
            f"fidelity: python bench/fidelity.py --seed {args.seed} --n {args.n} --start "
            f"{args.start} --jobs {args.jobs} --backend {args.backend} --families "
            f"{','.join(families)} --layouts {args.layouts}",
            f"run {datetime.datetime.now():%Y-%m-%d %H:%M}, {time.monotonic() - started:.0f} s "
            "on this machine",
        ]
    if args.note:
        header.append(args.note)
    header.append(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPU(s)")
    text = report.render(evaluations, header)
    print(text)
    out = args.out or RESULTS / (
        f"fidelity_{args.backend}_{datetime.date.today():%Y-%m-%d}_s{args.seed}_n{len(evaluations)}.txt"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    out.with_suffix(".json").write_text(report.to_json(evaluations, header), encoding="utf-8")
    print(f"written: {out} (and .json)", file=sys.stderr)
    return 0


def _guard_kinds(args: argparse.Namespace) -> int:
    """Each seed's program planted under `diag record` and fixed; one table over all seeds."""
    from fidelity_kit import guard_kinds

    started = time.monotonic()
    root = args.keep or Path(tempfile.mkdtemp(prefix="guard-kinds-"))
    results = []
    families = list(guard_kinds.FAMILIES)
    for seed in range(args.seed, args.seed + args.n):
        folder = root / f"s{seed}"
        if args.reuse is not None:  # re-score a kept run (`--keep`) without running anything
            results.extend(guard_kinds.score(args.reuse / f"s{seed}", families))
            continue
        results.extend(guard_kinds.run_kinds(families, seed, folder, True, args.timeout))
        print(f"seed {seed}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    header = (
        f"guard kinds: python bench/fidelity.py --guard-kinds --seed {args.seed} --n {args.n}"
        + (f" --reuse {args.reuse} (re-scored; {args.note})" if args.reuse else "")
        + "\n"
        f"run {datetime.datetime.now():%Y-%m-%d %H:%M}, {time.monotonic() - started:.0f} s; "
        f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPU(s)"
    )
    notes = [f"- {r.family} (seed run): {n}" for r in results for n in r.notes]
    text = "\n".join([header, "", guard_kinds.report(results), *notes]) + "\n"
    print(text)
    out = args.out or RESULTS / (
        f"guard_kinds_{datetime.date.today():%Y-%m-%d}_s{args.seed}_n{args.n}.md"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"written: {out}", file=sys.stderr)
    return 0


def _run_all(specs: list, root: Path, args: argparse.Namespace) -> list[Evaluation]:
    """Each program's evaluation, in the sample's order; `--jobs` programs at a time."""

    def one(spec: object) -> Evaluation:
        run = run_program(spec, root, args.timeout, args.profile, not args.serial)
        return evaluate(run.folder)

    done: dict[str, Evaluation] = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(one, spec): spec for spec in specs}
        for future in concurrent.futures.as_completed(futures):
            spec = futures[future]
            done[spec.program_id] = evaluation = future.result()
            print(
                f"[{len(done)}/{len(specs)}] {spec.describe()}\n    {_line(evaluation)}",
                file=sys.stderr,
                flush=True,
            )
    return [done[spec.program_id] for spec in specs]


def _line(evaluation: Evaluation) -> str:
    status: dict[str, int] = {}
    for claim in evaluation.claims:
        status[claim.verdict.status] = status.get(claim.verdict.status, 0) + 1
    missed = sum(1 for p in evaluation.problems if not p.claimed_by)
    return (
        f"{evaluation.seconds:.0f} s; claims {status or 'none'}; "
        f"problems {len(evaluation.problems)}"
        f" ({missed} unclaimed); behaviour differences {len(evaluation.differences)}"
        + (f"; errors: {'; '.join(evaluation.errors)}" if evaluation.errors else "")
    )


def _reanalyze(folder: Path) -> None:
    trace = folder / "trace"
    if not (trace / "manifest.json").exists():
        return
    done = subprocess.run(
        [sys.executable, "-m", "diag", "analyze", str(trace), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    (folder / "findings.json").write_text(done.stdout, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
