"""Runs one type-confused trace (tests/fuzz_corpus.py, `confused_traces`) through every reader
of a trace directory, in this process: analyze (findings, text, warnings), check (verdict and
its text), and optionally the TUI's two loading stages and the report. Used by
tests/unit/test_fuzz_events.py (1000 cases in CI) and bench/fuzz_events.py (more, `--n`)."""

from __future__ import annotations

import re
from pathlib import Path

from diag.check import run_check
from diag.check.policy import Policy
from diag.check.render import verdict_text
from diag.errors import EXIT_INTERNAL, DiagError
from diag.evidence.status import assess
from diag.findings.analysis import analyze
from diag.findings.text import findings_to_text
from diag.trace.inputs import input_warnings, open_input
from tests.fuzz_corpus import ConfusedTrace

PROCESS = "pid420"
_HEAD = re.compile(r"^(?:ERROR|WARNING|INFO) +\[")


def write_case(item: ConfusedTrace, folder: Path) -> None:
    process = folder / "runs" / "compiled" / PROCESS
    process.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_bytes(item.manifest)
    (process / "events.jsonl").write_bytes(item.events)


def run_case(item: ConfusedTrace, folder: Path, tui: bool = False, report: bool = False) -> str:
    """'ok', 'skipped' (read, with corrupt lines counted), or 'refused' (a one-line DiagError,
    the same from analyze and check). Any other exception is raised: the bug being hunted."""
    write_case(item, folder)
    try:
        trace = open_input(folder)
    except DiagError as exc:
        _one_line(exc.message)
        assert exc.exit_code != EXIT_INTERNAL, exc.message
        try:
            run_check(folder, Policy())
        except DiagError as again:
            assert again.message == exc.message, (exc.message, again.message)
        else:
            raise AssertionError(f"analyze refused, check read it: {exc.message}")
        return "refused"
    findings = analyze(trace)
    warnings = input_warnings(trace)
    for line in warnings:
        _one_line(line)
    text = findings_to_text(findings, assess(trace))
    assert "\x1b" not in text and "\x07" not in text, item.name
    # A title may hold a name with a newline (the model keeps what the trace said); the text
    # shows each finding on its own lines: no name forges a finding's head line.
    ids = {f.id for f in findings}
    heads = [line for line in text.splitlines() if _HEAD.match(line)]
    assert len(heads) == sum(1 for f in findings if f.group not in ids), item.name
    verdict = run_check(folder, Policy())
    assert "\x1b" not in verdict_text(verdict), item.name
    if tui:
        from diag.tui.loader import load_events, load_kernels

        data = load_events(folder)
        load_kernels(data)
        assert input_warnings(data.trace) == warnings, item.name
    if report:
        import diag

        diag.open(folder).steps  # noqa: B018 - a notebook's first frame; never a raw error
        from diag.report.build import build_report

        build_report(trace, findings, hta=False)
    corrupt = sum(run.corrupt_lines for run in trace.runs.values())
    return "skipped" if corrupt else "ok"


def _one_line(text: str) -> None:
    assert text and "\n" not in text, text
