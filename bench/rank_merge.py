"""Findings per analyzer at many ranks, before and after diag.findings.rank_merge, and what merging
costs.

Trace directories made by bench/ranks.py's replication of the real two-rank H200 NCCL recording
(tests/data/h200/record-ranks-nccl; event files only): every rank recompiles live as source
rank 1 did except the middle one, which copies rank 0 (so rank-divergence names it). Before:
every analyzer's findings as it returns them; after: `diag analyze`'s (merged, then grouped).
The merge's own time is the median of 5 calls on the analyzers' findings, with the load average.

    python bench/rank_merge.py                    # 64 and 512 ranks
    python bench/rank_merge.py --ranks 8 64
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

from diag.findings.model import Finding

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "h200" / "record-ranks-nccl"


def _bench_ranks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ranks", ROOT / "bench" / "ranks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _counts(findings: list[Finding]) -> str:
    by = Counter(f"{f.analyzer} {f.severity}" for f in findings)
    return ", ".join(f"{k} {v}" for k, v in sorted(by.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 512])
    args = parser.parse_args()
    from diag.analyzers import run_analyzers
    from diag.findings.analysis import analyze
    from diag.findings.rank_merge import merge_rank_findings, world_sizes
    from diag.trace.load import load_trace

    print(f"source {SOURCE.relative_to(ROOT)}; load average {os.getloadavg()[0]:.2f}")
    for ranks in args.ranks:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch) / "t"
            odd = set(range(ranks)) - {ranks // 2}
            _bench_ranks().make_ranks(SOURCE, folder, ranks, odd, kineto=False)
            trace = load_trace(folder)
            raw = run_analyzers(trace)
            merged = analyze(trace)
            worlds = world_sizes(trace)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                merge_rank_findings(raw, worlds)
                times.append(time.perf_counter() - start)
        print(f"{ranks} ranks ({len(odd)} recompile alike):")
        print(f"  before: {len(raw)} finding(s): {_counts(raw)}")
        print(f"  after:  {len(merged)} finding(s): {_counts(merged)}")
        print(
            f"  merge: {statistics.median(times) * 1000:.1f} ms median of 5; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
