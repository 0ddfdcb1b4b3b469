"""Report test set-up: the shared recordings, a hostile copy of one, and reports built once."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from diag.findings.analysis import analyze
from diag.report.build import Report, build_report
from diag.trace.inputs import open_input
from diag.trace.run import Trace
from tests.conftest import RecordFixture

#: Planted in a copy of a real recording: frame names, request ids, guard text, the command.
FRAME_PAYLOAD = "<script>alert(1)</script>"
REQUEST_PAYLOAD = "<img src=x onerror=alert(2)>"
GUARD_PAYLOAD = ' & <b onmouseover="alert(3)">%{x}</b>'
PAYLOADS = (FRAME_PAYLOAD, REQUEST_PAYLOAD, GUARD_PAYLOAD)
FRAME = "wan_block_forward"


@pytest.fixture(scope="session")
def routing_trace(record_fixture: RecordFixture) -> Trace:
    """A CPU recording with an eager baseline and one profiled steady step (shared with other
    suites: same arguments, same recording)."""
    return record_fixture("routing", baseline=True, profile="steady:1")


def _poison(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _poison(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_poison(v, key) for v in value]
    if isinstance(value, str):
        if key == "request_id":
            return value + REQUEST_PAYLOAD
        if key in ("raw", "source"):
            value += GUARD_PAYLOAD
        return value.replace(FRAME, FRAME + FRAME_PAYLOAD)
    return value


def poison_trace(source: Path, target: Path) -> Path:
    """A copy of a real trace directory with hostile strings wherever a program controls text."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".diag-cache"))
    manifest_path = target / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["command"] = [*manifest["command"], FRAME_PAYLOAD, REQUEST_PAYLOAD]
    manifest_path.write_text(json.dumps(manifest))
    for events in target.glob("runs/*/*/events.jsonl"):
        lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
        events.write_text("".join(json.dumps(_poison(line)) + "\n" for line in lines))
    marker = f"diag.region:{FRAME}"
    for window in target.glob("runs/*/*/kineto/*.json.gz"):
        data = json.loads(gzip.decompress(window.read_bytes()))
        for event in data.get("traceEvents", []):
            name = event.get("name")
            if isinstance(name, str) and name.startswith(marker):
                event["name"] = name.replace(marker, marker + FRAME_PAYLOAD)
        window.write_bytes(gzip.compress(json.dumps(data).encode()))
    return target


@pytest.fixture(scope="session")
def hostile_dir(routing_trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return poison_trace(routing_trace.path, tmp_path_factory.mktemp("hostile") / "trace")


@pytest.fixture(scope="session")
def hostile_report(hostile_dir: Path) -> Report:
    trace = open_input(hostile_dir)
    return build_report(trace, analyze(trace))


@pytest.fixture(scope="session")
def hostile_html(hostile_report: Report, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile-report") / "report.html"
    path.write_text(hostile_report.html, encoding="utf-8")
    return path
