"""The fuzzers of tests/unit/test_fuzz_events.py and test_fuzz_layouts.py at full size: `--n`
type-confused copies of a real recording's events (tests/fuzz_corpus.py, `confused_traces`:
wrong types, odd numerals, lone surrogates) through analyze, check, the TUI's two loading
stages and the report, in this process; with `--layouts`, then every hostile layout of
tests/fuzz_layouts.py (FIFOs, sockets, folders and links in each position a reader or the
writer touches, odd numerals in file names) through analyze, check, diag.open, export and
the report, each under an alarm (a hang is counted as one). Prints the outcomes, and each
case that raised grouped by where it raised (the innermost diag frame).

    python bench/fuzz_events.py [--n 5000] [--seed 7] [--heavy-every 10] [--layouts]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz_corpus import confused_traces  # noqa: E402
from tests.fuzz_events import run_case  # noqa: E402


def _site(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/tests/" not in f.filename]
    frame = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    where = "/".join(Path(frame.filename).parts[-2:])
    return f"{where}:{frame.lineno} {type(exc).__name__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--heavy-every", type=int, default=10, help="TUI loader and report")
    parser.add_argument("--layouts", action="store_true", help="also every hostile layout")
    args = parser.parse_args()
    outcomes: Counter[str] = Counter()
    sites: Counter[str] = Counter()
    examples: dict[str, str] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="diag-fuzz-") as tmp:
        for number, item in enumerate(confused_traces(args.seed, args.n)):
            heavy = args.heavy_every > 0 and number % args.heavy_every == 0
            try:
                outcomes[run_case(item, Path(tmp) / "t", tui=heavy, report=heavy)] += 1
            except Exception as exc:  # noqa: BLE001 - counted and printed below
                outcomes["raised"] += 1
                site = _site(exc)
                sites[site] += 1
                examples.setdefault(site, f"{item.name}: {type(exc).__name__}: {exc}"[:300])
    elapsed = time.perf_counter() - started
    print(f"type-confusion fuzz of events.jsonl: seed {args.seed}, {args.n} cases, TUI loader")
    print(f"and report on every {args.heavy_every}th, {elapsed:.0f} s")
    for name in ("ok", "skipped", "refused", "raised"):
        print(f"  {name:8} {outcomes.get(name, 0)}")
    for site, count in sites.most_common():
        print(f"  raised at {site}: {count}, e.g. {examples[site]}")
    if args.layouts:
        _layouts()


def _layouts() -> None:
    from tests.fuzz_layouts import (
        Hang,
        layouts,
        run_layout,
        run_writer_layout,
        warmed_base,
        writer_layouts,
    )

    outcomes: Counter[str] = Counter()
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="diag-layouts-") as tmp:
        base = warmed_base(Path(tmp))
        cases = [
            (x.name, lambda x=x: run_layout(x, base, Path(tmp) / "c", True)) for x in layouts()
        ]
        cases += [
            (f"writer {k}@{p}", lambda p=p, k=k: str(run_writer_layout(p, k, Path(tmp) / "w")))
            for p, k in writer_layouts()
        ]
        for name, run in cases:
            try:
                outcomes[run()] += 1
            except Hang:
                outcomes["hang"] += 1
                failed.append(f"{name}: hang")
            except Exception as exc:  # noqa: BLE001 - counted and printed below
                outcomes["raised"] += 1
                failed.append(f"{name}: {_site(exc)}: {exc}"[:300])
    elapsed = time.perf_counter() - started
    print(f"hostile layouts: {len(cases)} cases (the writer stopped: True), {elapsed:.0f} s")
    for name, count in sorted(outcomes.items()):
        print(f"  {name:8} {count}")
    for line in failed:
        print(f"  {line}")


if __name__ == "__main__":
    main()
