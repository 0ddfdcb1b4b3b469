"""`diag record --max-size`: a long run keeps its first and newest steps and every compile and
request boundary, and analyze, check and the summary say how many steps were rotated away."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from diag.trace.format import process_event_files
from diag.trace.load import load_trace

from .support import PYTHON, diag_record, manifest

#: 5 000 steps (50 requests of 100) after a warmup that compiles: ~1.7 MB of step events.
LONG = """
import torch
import diag.api as diag
double = torch.compile(lambda x: x * 2, backend="eager")
with diag.phase("warmup"):
    with diag.request("w0", shape=[4]):
        with diag.step():
            double(torch.ones(4))
for r in range(50):
    with diag.request(f"r{r}", shape=[4]):
        for i in range(100):
            with diag.step():
                pass
print("served", flush=True)
"""


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "diag", *args], capture_output=True, text=True)


def test_a_long_run_keeps_its_newest_steps_and_every_compile(tmp_path: Path) -> None:
    app = tmp_path / "long.py"
    app.write_text(LONG)
    trace = tmp_path / "t"
    done = diag_record(trace, PYTHON, str(app), options=("--profile", "none", "--max-size", "1M"))
    assert done.returncode == 0 and done.stdout == "served\n"
    assert "older step(s) rotated away to keep --max-size" in done.stderr

    recorded = manifest(trace)
    assert recorded["version"] == 2 and recorded["options"]["max_size"] == 1 << 20
    (events,) = trace.glob("runs/compiled/*/events.jsonl")
    files = process_event_files(events)
    assert 2 <= len(files) <= 8 and sum(f.stat().st_size for f in files) < 1.2 * (1 << 20)

    run = load_trace(trace).runs["compiled"]
    assert len(run.requests) == 51 and len(run.compiles) == 1  # every request, the compile
    steps = [(s.request_id, s.index) for s in run.steps]
    assert steps[:2] == [("w0", 0), ("r0", 0)] and steps[-1] == ("r49", 99)
    assert 1000 < len(steps) < 5001 and all(s.wall_s is not None for s in run.steps)

    analyzed = json.loads(_diag("analyze", "--json", str(trace)).stdout)
    (notice,) = [n for n in analyzed["notices"] if n["kind"] == "steps-rotated"]
    assert notice["message"].startswith(f"{5001 - len(steps)} older step(s) of ")
    checked = _diag("check", str(trace))
    assert checked.returncode == 0, checked.stdout  # rotation alone fails no rule
