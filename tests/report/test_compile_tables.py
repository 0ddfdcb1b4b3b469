"""The report's "Inside the compiler" section: compile seconds by phase and the dims table, on a
real CPU aot_eager recording with dynamic=True; trace strings are escaped (a hand-written
source with markup, which no real compile produces)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from diag.report.compile_tables import dims_table, phase_table
from diag.report.plot import Limits
from diag.report.sections import build_sections
from diag.trace.load import load_trace
from tests.analyzers.support import write_trace
from tests.integration.support import PYTHON, diag_record

PROGRAM = textwrap.dedent(
    """
    import torch

    def block(x, w):
        return (x @ w).relu()

    compiled = torch.compile(block, backend="aot_eager", dynamic=True)
    w = torch.randn(16, 16)
    for rows in (4, 8, 8):
        compiled(torch.randn(rows, 16), w)
    """
)


def test_section_shows_phases_and_dims_of_a_real_compile(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    proc = diag_record(tmp_path / "t", PYTHON, str(program), options=("--profile", "none"))
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(tmp_path / "t")
    (section,) = [s for s in build_sections(trace, [], Limits(), hta=False) if s.key == "compiler"]
    assert section.error is None and section.notes == []
    html = section.table_html
    assert '<table class="compile-phases">' in html and "<th>Dynamo</th>" in html
    assert "<td>0/0</td><td>block</td>" in html
    assert '<table class="compile-dims">' in html
    # x's rows were made symbolic and the calls had 4 and 8 there
    assert "size()[0]</td><td>4</td><td>4, 8</td>" in html


def test_strings_are_escaped_and_an_empty_run_says_so(tmp_path: Path) -> None:
    frame = {"name": "<b>f</b>", "file": "/srv/m.py", "line": 3}
    where = {"phase": "live", "request_id": "r0", "step": 0}
    (tmp_path / "t").mkdir()
    (tmp_path / "e").mkdir()
    trace = write_trace(
        tmp_path / "t",
        [
            {"t": 2, "ev": "compile_end", "compile_id": "0/0", "epoch": 0, "frame": frame,
             "result": "ok", "duration_s": 0.5, **where},
            {"t": 3, "ev": "compile_timing", "compile_id": "0/0", "epoch": 0, "runtime": False,
             "total_s": 0.5, "dynamo_s": 0.2, **where},
            {"t": 4, "ev": "shape_symbol", "compile_id": "0/0", "epoch": 0, "symbol": "s0",
             "value": "4", "source": "L['<script>x</script>'].size()[0]",
             "user_location": "/srv/m.py:4"},
        ],
    )  # fmt: skip
    assert trace.compiled is not None
    html = phase_table(trace.compiled) + dims_table(trace.compiled)
    assert "<script>" not in html and "<b>f</b>" not in html
    assert "&lt;script&gt;" in html and "&lt;b&gt;f&lt;/b&gt;" in html
    empty = write_trace(tmp_path / "e", [])
    (section,) = [s for s in build_sections(empty, [], Limits(), hta=False) if s.key == "compiler"]
    assert section.table_html == "" and len(section.notes) == 2


def test_cudagraph_table_and_compiles_detail_on_the_h200_plant(tmp_path: Path) -> None:
    """The cudagraph-rerecord recording (tests/data/h200): one row per compile with its graphs
    in warmup and live; the TUI's Compiles detail says the same for the compile."""
    from diag.report.compile_tables import cudagraph_table
    from diag.tui.compile_internals import compile_internals
    from tests.h200data import h200_trace

    run = load_trace(h200_trace("cudagraph-rerecord", tmp_path)).compiled
    html = cudagraph_table(run)
    assert "<td>0/0</td><td>wan_block_forward</td><td>8</td><td>0</td><td>-</td>" in html
    assert "<td>0/1</td><td>wan_block_forward</td><td>8</td><td>16</td><td>r0, r2</td>" in html
    [dynamic] = [c for c in run.compiles if c.compile_id == "0/1"]
    lines = [line.plain for line in compile_internals(run, dynamic)]
    [graphs] = [line for line in lines if line.startswith("CUDA graphs: ")]
    assert graphs.startswith("CUDA graphs: 24 recorded: 8 in warmup, 16 live (r0, r2); capture ")
    assert "see the cudagraphs finding" in graphs
