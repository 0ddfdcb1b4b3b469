"""The text renderer as compilers print diagnostics (issue 28): at most five evidence lines a
finding by default, every one with -v; advice several findings share printed once at the end;
the summary line last; colour on a terminal only, after the trace's strings were escaped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from diag.findings.advice import HOW_TO_MARK
from diag.findings.colors import colorize, use_color
from diag.findings.model import Finding
from diag.findings.text import MAX_EVIDENCE, findings_to_text

ESC = "\x1b"


def _finding(fid: str, evidence: int, fix: str = "warm it", severity: str = "warning") -> Finding:
    return Finding(
        fid,
        "live-compile",
        severity,
        f"{fid} compiled live",
        [f"fact {i}" for i in range(evidence)],
        fix,
        location="model.py:12",
    )


def test_evidence_is_cut_to_five_lines_with_the_count_and_v_shows_all() -> None:
    long, short = _finding("a", 9), _finding("b", 3)
    text = findings_to_text([long, short]).splitlines()
    shown = [line for line in text if line.startswith("        - fact")]
    assert len(shown) == (MAX_EVIDENCE - 1) + 3
    assert "        - ... 5 more line(s) of evidence" in text
    assert "(5 line(s) of evidence not shown: diag analyze -v shows them all)" in text
    assert text[-1] == "2 finding(s): 0 error, 2 warning, 0 info"
    verbose = findings_to_text([long, short], verbose=True).splitlines()
    assert [line for line in verbose if line.startswith("        - fact")] == [
        *(f"        - fact {i}" for i in range(9)),
        *(f"        - fact {i}" for i in range(3)),
    ]
    assert not any("not shown" in line or "more line(s)" in line for line in verbose)


def test_advice_shared_by_findings_is_printed_once_after_them() -> None:
    fix = f"If r1 was warmup, {HOW_TO_MARK}."
    findings = [_finding("a", 2, fix), _finding("b", 2, fix, "error")]
    text = findings_to_text(findings)
    assert text.count(HOW_TO_MARK) == 1
    assert text.count("see 'how to mark warmup' below") == 2
    lines = text.splitlines()
    advice = next(i for i, line in enumerate(lines) if line.startswith("how to mark warmup: "))
    assert advice > max(i for i, line in enumerate(lines) if line.startswith("        id: "))
    assert lines[-1].startswith("2 finding(s)")
    # Without the shared advice nothing is added.
    assert "how to mark warmup" not in findings_to_text([_finding("c", 1)])


def test_colour_marks_the_parts_and_never_a_traces_own_escapes() -> None:
    hostile = Finding(
        "x", "guard-churn", "error", "frame \x1b[2J\x1b]0;PWNED\x07 recompiled", ["e"], "fix it"
    )
    plain = findings_to_text([hostile])
    coloured = findings_to_text([hostile], color=True)
    assert ESC not in plain and "\\x1b[2J" in plain
    assert coloured.startswith(f"{ESC}[1;31mERROR{ESC}[0m")
    # Every escape in the coloured text is one of diag's styles: removing them gives the plain.
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    assert colorize("        at a.py:3") == f"        at {ESC}[36ma.py:3{ESC}[0m"


def test_colour_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color(Tty()) is True  # type: ignore[arg-type]
    assert use_color(sys.stdout if not sys.stdout.isatty() else open(os.devnull, "w")) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty()) is False  # type: ignore[arg-type]
    assert use_color(Tty(), "always") is True  # type: ignore[arg-type]
    monkeypatch.delenv("NO_COLOR")
    assert use_color(Tty(), "never") is False  # type: ignore[arg-type]


LOG = Path(__file__).resolve().parents[1] / "data" / "shared" / "torch_trace"


def _analyze(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "diag", "analyze", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")},
        check=True,
    )
    return done.stdout


def test_the_cli_prints_the_same_findings_shorter_by_default() -> None:
    """A real torch 2.13 TORCH_TRACE log through `diag analyze`: its per-frame finding has nine
    evidence lines; the default text shows five, -v every line the JSON has, the same summary
    line last; piped output is uncoloured unless asked."""
    import json

    source = ("--torch-trace", str(LOG / "torch213_python_state_recompiles.log"))
    default, verbose = _analyze(*source), _analyze(*source, "-v")
    document = json.loads(_analyze(*source, "--json"))
    headlines = [f for f in document["findings"] if f["group"] is None]
    assert any(len(f["evidence"]) > MAX_EVIDENCE for f in headlines)
    assert len(verbose.splitlines()) > len(default.splitlines())
    for finding in headlines:
        shown = [
            line
            for line in default.split(f"id: {finding['id']}")[0]
            .split("] " + finding["title"])[-1]
            .splitlines()
            if line.startswith("        - ")
        ]
        assert len(shown) == min(len(finding["evidence"]), MAX_EVIDENCE)
        for item in finding["evidence"]:
            assert item.replace(HOW_TO_MARK, "see 'how to mark warmup' below") in verbose
    assert "diag analyze -v shows them all" in default
    assert default.splitlines()[-1] == verbose.splitlines()[-1]
    assert default.splitlines()[-1].startswith(f"{len(document['findings'])} finding(s)")
    assert ESC not in default
    assert ESC in _analyze(*source, "--color", "always")
