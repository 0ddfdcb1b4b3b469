"""The TUI reads a many-rank trace's Kineto windows in a worker pool, as `diag analyze` does.

It used to fall back to serial reading every time: the pool is spawned from the loader's
thread, after Textual replaced sys.stderr, and multiprocessing's resource tracker could not
start (`ValueError: bad value(s) in fds_to_keep`). The app now starts the tracker first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from diag.trace import parallel
from diag.tui.app import DiagApp
from tests.ranks64 import bench_ranks

from .support import drive

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"


@pytest.mark.skipif(parallel.worker_count(2) < 2, reason="one CPU: no pool is started")
def test_the_tui_reads_ranks_windows_in_a_pool(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DIAG_WORKERS", raising=False)
    folder = tmp_path / "t"
    bench_ranks().make_ranks(H200 / "record-wan-offload-unwarmed", folder, 3, set(), kineto=True)
    before = parallel.pools_completed
    monkeypatch.setattr(parallel, "last_pool_error", None)

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        assert app.error is None
        findings = [r.payload for r in app.view("overview").shown]
        [offload] = [f for f in findings if f.analyzer == "offload-bound"]
        assert offload.title.endswith("(on all 3 ranks)")

    drive(folder, script, size=(120, 40))
    assert parallel.last_pool_error is None
    assert parallel.pools_completed > before
