"""collectors/profiling.py's pieces that a recording cannot reach on torch 2.13: the cycle
warning of torch 2.7-2.12 (2.13 no longer issues it for one-cycle profiles, so its real
`_warn_once` is called directly with the old message), and the export thread's join at exit
(a window whose gzip cannot finish in time is reported, never half-written)."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import torch
import torch.profiler.profiler as torch_profiler

from diag.collectors import kineto_export, profiling

OLD_MESSAGE = (
    "Warning: Profiler clears events at the end of each cycle.Only events from the current "
    "cycle will be reported.To keep events across cycles, set acc_events=True."
)


def test_the_cycle_warning_is_muted_only_while_diag_starts_its_window() -> None:
    profiling._quiet_cycle_warning(torch)
    seen = torch_profiler._WARNINGS_SHOWN
    assert isinstance(seen, profiling._SeenWarnings)
    seen.discard(OLD_MESSAGE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profiling._Quiet():
            torch_profiler._warn_once(OLD_MESSAGE)
        assert caught == []
        # Meanwhile another thread (the program's own profiler) still gets its warning.
        other: list[bool] = []
        with profiling._Quiet():
            thread = threading.Thread(target=lambda: other.append(OLD_MESSAGE in seen))
            thread.start()
            thread.join()
        assert other == [False]
        torch_profiler._warn_once(OLD_MESSAGE)  # not shown before: shown now, once
        torch_profiler._warn_once(OLD_MESSAGE)
    assert [str(w.message) for w in caught] == [OLD_MESSAGE]
    profiling._quiet_cycle_warning(torch)  # installed once
    assert torch_profiler._WARNINGS_SHOWN is seen


def test_export_join_reports_what_did_not_finish(tmp_path: Path) -> None:
    exporter = kineto_export.WindowExporter()
    release = threading.Event()
    reported: list[str] = []
    raw = tmp_path / "r1-s2-steady.json"
    raw.write_text('{"traceEvents": []}')
    blocker = tmp_path / "blocker.json"
    blocker.write_text("{}")

    def slow(packed: Path | None, error: BaseException | None, gzip_s: float) -> None:
        release.wait(10)  # the first window's report holds the thread: the second must wait

    exporter.submit(blocker, slow)
    exporter.submit(raw, lambda packed, error, s: reported.append(str(packed)))
    late = exporter.drain(0.2)
    release.set()
    assert late == [raw]  # the caller reports it; the thread never reports it too
    assert exporter.drain(5) == []
    assert reported == []
    assert (tmp_path / "blocker.json.gz").is_file()
