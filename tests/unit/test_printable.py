"""No control character from a trace reaches a terminal (issue 22): diag.trace.printable is the one
function every text renderer uses. The probe of the issue, a frame name holding
`\\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07` in a copy of a real recording, through `diag analyze` (text),
`diag check` (text), the error line and record's summary; the TUI's overview is
tests/tui/test_escaping.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from diag.record.summary import summarize_run
from diag.trace.printable import printable

WARM_WIDTH = Path(__file__).resolve().parents[1] / "data" / "lightx2v" / "warm-width"
ESCAPES = "\x1b[2J\x1b[H\x1b]0;PWNED\x07"
SHOWN = "\\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    assert printable("plain text, ± µs → ok") == "plain text, ± µs → ok"
    assert printable("a" + ESCAPES + "\nb") == "a" + SHOWN + "\nb"
    assert printable("c1 \x9b31m, del \x7f, bidi \u202e, tag \U000e0001") == (
        "c1 \\x9b31m, del \\x7f, bidi \\u202e, tag \\U000e0001"
    )
    assert printable("one\nline\twith\rbreaks", one_line=True) == "one line with breaks"
    assert printable("keeps\nlines\x00") == "keeps\nlines\\x00"


def _probe(tmp_path: Path) -> Path:
    trace = tmp_path / "trace"
    shutil.copytree(WARM_WIDTH, trace)
    events = next((trace / "runs" / "compiled").glob("*/events.jsonl"))
    text = events.read_text(encoding="utf-8")
    assert '"name":"lightx2v"' in text
    name = text.split('"frame":{"name":"', 1)[1].split('"', 1)[0]
    escaped = json.dumps(name + ESCAPES)[1:-1]  # as diag's writer escapes it: \u001b
    text = text.replace(f'"name":"{name}"', f'"name":"{escaped}"')
    text = text.replace('"name":"lightx2v"', '"name":"lightx2v\\u001b[2J\\u0007"')
    events.write_text(text, encoding="utf-8")
    return trace


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diag", *args], capture_output=True, text=True, timeout=300
    )


def test_analyze_and_check_text_show_escapes_escaped(tmp_path: Path) -> None:
    trace = _probe(tmp_path)
    analyzed = _diag("analyze", str(trace))
    assert analyzed.returncode == 0, analyzed.stderr
    assert SHOWN in analyzed.stdout
    checked = _diag("check", str(trace))
    assert checked.returncode in (0, 1), checked.stderr
    for proc in (analyzed, checked):
        assert not any(c in proc.stdout + proc.stderr for c in RAW), proc.stdout


def test_record_summary_and_the_error_line_are_escaped(tmp_path: Path) -> None:
    trace = _probe(tmp_path)
    lines = summarize_run(trace / "runs" / "compiled").lines()
    assert any("lightx2v\\x1b[2J\\x07" in line for line in lines), lines
    assert not any(c in line for line in lines for c in RAW)
    missing = _diag("analyze", str(tmp_path / ("no" + ESCAPES)))
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and SHOWN in missing.stderr
    assert not any(c in missing.stderr for c in RAW)


def test_a_name_cannot_forge_a_line_nor_send_escapes_through_any_face(tmp_path: Path) -> None:
    """A frame name holding a newline and a finding's head (`ERROR   [forged]`) stays inside
    its own line in analyze's text; ESC and BEL in it reach neither analyze, check's text nor
    `check --format github` raw (issue 37: the annotations passed them through)."""
    trace = tmp_path / "trace"
    shutil.copytree(WARM_WIDTH, trace)
    events = next((trace / "runs" / "compiled").glob("*/events.jsonl"))
    text = events.read_text(encoding="utf-8")
    name = text.split('"frame":{"name":"', 1)[1].split('"', 1)[0]
    forged = json.dumps(name + "\nERROR   [forged] pwned" + ESCAPES + "\ud800")[1:-1]
    events.write_text(text.replace(f'"name":"{name}"', f'"name":"{forged}"'), encoding="utf-8")
    analyzed = _diag("analyze", str(trace))
    assert analyzed.returncode == 0, analyzed.stderr
    assert "[forged] pwned" in analyzed.stdout  # the name is shown ...
    assert not any(line.startswith("ERROR   [forged]") for line in analyzed.stdout.splitlines())
    github = _diag("check", str(trace), "--format", "github")
    assert github.returncode in (0, 1), github.stderr
    assert "pwned" in github.stdout
    for proc in (analyzed, github):
        assert not any(c in proc.stdout + proc.stderr for c in RAW), proc.stdout
        assert "Traceback" not in proc.stderr
