"""offload-bound's figures agree with its title: on the committed H200 recording of a copy-bound
offloaded Wan, the most compiling could gain in a step is its compute share (24 ms), less than
the copies that dominate it (67 ms), and said as a bound, not as a promise."""

from __future__ import annotations

import re
from pathlib import Path

from diag.analyzers import get_analyzer
from diag.trace.load import load_trace
from tests.h200data import h200_trace


def test_gain_is_bounded_by_compute_below_the_copies(tmp_path: Path) -> None:
    trace = load_trace(h200_trace("record-wan-offload-unwarmed", tmp_path))
    [finding] = get_analyzer("offload-bound")(trace)
    assert finding.title.startswith("Weight copies dominate 3 profiled step(s)")
    [line] = [e for e in finding.evidence if e.startswith("compiling shrinks only the compute")]
    assert line == (
        "compiling shrinks only the compute: at most 24 ms of such a step (27% of its 91 ms), "
        "even if compute took no time; the copies alone take 67 ms"
    )
    for step in finding.data["steps"]:
        assert step["max_gain_s"] <= step["kernel_s"] < sum(step["copy_s"].values())
    assert not re.search(r"gain \d+%|could gain 6\d%", " ".join(finding.evidence))
