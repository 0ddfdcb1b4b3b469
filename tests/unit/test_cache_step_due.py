"""Which step ends walk the compiled code objects' cache entries: after a compile or a reset,
and every RECHECK_STEPS-th step whatever happened (the walk is most of a boundary's cost)."""

from __future__ import annotations

from pathlib import Path

from diag.collectors.cache import RECHECK_STEPS, CacheCollector
from diag.collectors.compiles import CompileCollector
from diag.collectors.session import Session


def _due(cache: CacheCollector, steps: int) -> list[int]:
    return [i for i in range(1, steps + 1) if cache.step_due()]


def test_a_snapshot_follows_each_compile_and_reset_and_every_recheck(tmp_path: Path) -> None:
    session = Session(tmp_path, "compiled")
    session.compiles = CompileCollector(session)
    cache = CacheCollector(session)
    assert _due(cache, 2 * RECHECK_STEPS) == [1, RECHECK_STEPS, 2 * RECHECK_STEPS]
    session.compiles.compiles += 1  # a compile ended since the last step end
    assert cache.step_due() and not cache.step_due()
    session.compiles.epoch += 1  # torch._dynamo.reset()
    assert cache.step_due() and not cache.step_due()


def test_without_a_compile_collector_every_step_is_looked_at(tmp_path: Path) -> None:
    session = Session(tmp_path, "compiled")
    cache = CacheCollector(session)
    assert _due(cache, 5) == [1, 2, 3, 4, 5]
