"""From the report and the TUI's step detail to the timeline: the line names a command that works
and the slice it names is in the file that command writes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from html import unescape
from pathlib import Path

from diag.findings.model import Finding
from diag.perfetto.hint import finding_step, step_line
from diag.report.findings_table import findings_table
from tests.h200data import h200_trace

from .tef import check, load


def _finding(analyzer: str, data: dict[str, object]) -> Finding:
    return Finding(f"{analyzer}:x", analyzer, "warning", "title", [], "fix", data=data)


def test_the_step_a_finding_names() -> None:
    assert finding_step(_finding("live-compile", {"request_id": "r1", "steps": [2]})) == ("r1", 2)
    assert finding_step(_finding("step0-spike", {"request_id": "r3"})) == ("r3", 0)
    offload = {"steps": [{"request_id": "r0", "step": 2}, {"request_id": "r0", "step": 3}]}
    assert finding_step(_finding("offload-bound", offload)) == ("r0", 2)
    assert finding_step(_finding("recompile-limit", {"request_id": "r1", "step": 4})) == ("r1", 4)
    assert finding_step(_finding("cache-bloat", {"frame": "f"})) is None
    html = findings_table([_finding("step0-spike", {"request_id": "r3"})])
    assert "timeline: search <code>r3 s0</code> in Perfetto" in html


def test_the_reports_command_writes_the_step_it_names(tmp_path: Path) -> None:
    trace = h200_trace("record-wan-offload-unwarmed", tmp_path)
    report = tmp_path / "report.html"
    subprocess.run(
        [sys.executable, "-m", "diag", "report", str(trace), "-o", str(report), "--no-hta"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    html = unescape(report.read_text(encoding="utf-8"))
    command = re.search(r"<dd>(diag export [^<]*?), then open that file in ui\.perfetto\.dev", html)
    assert command is not None
    assert "timeline: search <code>r1 s0</code> in Perfetto" in html  # the live-compile row
    argv = shlex.split(command.group(1))
    subprocess.run([sys.executable, "-m", *argv], check=True, capture_output=True, timeout=300)
    written = Path(argv[-1])
    assert written == tmp_path / "record-wan-offload-unwarmed-perfetto.json.gz"
    checked = check(load(written))
    assert any(s.name == "r1 s0" and s.cat == "diag.step" for s in checked.slices)
    # The TUI's step detail names the same command.
    assert command.group(1) in step_line(trace, "r1", 0)
