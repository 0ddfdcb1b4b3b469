"""The TUI's findings at 64 ranks where 63 recompile alike (tests/ranks64.py, replicated from the
real H200 recording): one row per problem naming the ranks (diag.findings.rank_merge), not 63 rows
per
analyzer, and the merged live compile opens the compile group of those ranks; the kernel
findings of the second loading stage merge too."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import TabbedContent

from diag.tui.app import DiagApp
from tests.h200data import H200
from tests.ranks64 import bench_ranks, make_ranks

from .support import choose_finding, drive, screen_text

OTHERS = "0-31, 33-63"


def test_63_ranks_alike_are_one_finding_row_that_opens_their_compiles(tmp_path: Path) -> None:
    folder = make_ranks(tmp_path / "t", odd={r for r in range(64) if r != 32})

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        rows = app.view("overview").shown
        problems = sorted(r.payload.analyzer for r in rows if r.payload.severity != "info")
        assert problems == ["guard-churn", "live-compile", "rank-divergence", "step0-spike"]
        finding = await choose_finding(app, pilot, "live-compile", request_id="r1")
        assert finding.title.endswith(f"(on 63 of 64 ranks: {OTHERS})")
        text = screen_text(app)
        assert f"on 63 of 64 ranks: {OTHERS}; the evidence below is rank 0's" in text
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "compiles"
        current = app.view("compiles").current
        assert current is not None and current.key.startswith("group|")
        assert current.fields["id"] == finding.data["compile_ids"][0]
        assert f"the same compile on ranks {OTHERS}" in screen_text(app)

    drive(folder, script, size=(120, 40))


def test_kernel_findings_of_stage_two_merge_across_ranks_too(tmp_path: Path) -> None:
    """Three copies of the H200 offload recording with its Kineto windows: the offload-bound
    finding that stage two adds is one row `on all 3 ranks`, as stage one's are."""
    folder = tmp_path / "t"
    bench_ranks().make_ranks(H200 / "record-wan-offload-unwarmed", folder, 3, set(), kineto=True)

    async def script(app: DiagApp, pilot: Pilot[None]) -> None:
        findings = [r.payload for r in app.view("overview").shown]
        [offload] = [f for f in findings if f.analyzer == "offload-bound"]
        assert offload.id == "offload-bound:copies@ranks0-2"
        assert offload.title.endswith("(on all 3 ranks)")
        [live] = [f for f in findings if f.analyzer == "live-compile" and f.severity == "error"]
        assert live.id == "live-compile:wan_block_forward:r1@ranks0-2"

    drive(folder, script, size=(120, 40))
