"""The type-confusion fuzzer of tests/unit/test_fuzz_events.py, for more cases: `--n` type-
confused copies of a real recording's events (tests/fuzz_corpus.py, `confused_traces`) through
analyze, check, the TUI's two loading stages and the report, in this process. Prints the
outcomes, and each case that raised grouped by where it raised (the innermost diag frame).

    python bench/fuzz_events.py [--n 5000] [--seed 7] [--heavy-every 10] > bench/results/...
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


if __name__ == "__main__":
    main()
