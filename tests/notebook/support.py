"""The recording and the CLI output the notebook API and the Perfetto export are checked
against: the demo's plants on the reference service (aot_eager, eager baseline) with the default
profile, so the live recompile's step is profiled too; and `diag analyze --json` run as a user
runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from diag.trace.run import Trace
from tests.conftest import RecordFixture

#: The plants `diag demo` records.
DEMO_PLANTS = ("unwarmed-shape", "guard-churn", "routing")


def demo_trace(record_fixture: RecordFixture) -> Trace:
    return record_fixture(*DEMO_PLANTS, baseline=True, profile="default")


def analyze_json(*args: str | Path) -> dict[str, Any]:
    """`diag analyze ARGS --json`, in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "diag", "analyze", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def finding(document: dict[str, Any], finding_id: str) -> dict[str, Any]:
    found = [f for f in document["findings"] if f["id"] == finding_id]
    assert len(found) == 1, [f["id"] for f in document["findings"]]
    return found[0]
