"""64-rank trace directories made from the real two-rank H200 recording (tests/data/h200/
record-ranks-nccl: NCCL, rank 1 recompiles live), by bench/ranks.py's replication: every rank
a copy of source rank 0, the `odd` ones copies of rank 1, with pids, ranks, times and folder
names remapped. Event files only (the committed recording has no Kineto windows), so tests
that open them stay fast."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.bench_scripts import load_bench
from tests.h200data import H200

SOURCE = H200 / "record-ranks-nccl"


def bench_ranks() -> ModuleType:
    """bench/ranks.py as a module (bench/ is scripts, not a package)."""
    return load_bench("ranks", "bench_ranks")


def make_ranks(out: Path, ranks: int = 64, odd: set[int] | None = None) -> Path:
    """A trace directory of `ranks` ranks at `out`; `odd` (default: the middle rank) copy the
    rank that recompiled live."""
    chosen = {ranks // 2} if odd is None else odd
    bench_ranks().make_ranks(SOURCE, out, ranks, chosen, kineto=False)
    return out
