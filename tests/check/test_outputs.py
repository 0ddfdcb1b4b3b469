"""The verdict's four forms: text, JSON, JUnit XML (one test case per rule) and GitHub Actions
workflow commands; trace strings are untrusted and must not break out of any of them."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from diag.check.render import annotation, escape_data, escape_property, split_location
from diag.check.verdict import RuleResult, Violation

from .support import compile_event, run_check, served_trace, size_guard, write_policy

HOSTILE = {
    "name": "evil\n::set-env name=X::1\x1b[31m 100%,",
    "file": "/srv/a,b:c.py",
    "line": 7,
}


@pytest.fixture
def defaults(tmp_path: Path) -> Path:
    return write_policy(tmp_path, "[check]\n")


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    guard = size_guard("0/0") | {"raw": "0/0: x\x00\x07 ]]> <b>&amp;\r\n::error::fake"}
    extra = [
        *compile_event(1205, "1/0", "r0", 1, frame=HOSTILE),
        *compile_event(3305, "0/1", "r1", 2, guards=[guard]),
    ]
    return served_trace(tmp_path / "t", extra=extra)


def test_escaping_rules() -> None:
    assert escape_data("100%\r\nnext: a,b") == "100%25%0D%0Anext: a,b"
    assert escape_property("a,b:c%\n") == "a%2Cb%3Ac%25%0A"
    assert split_location("src/model.py:12") == ("src/model.py", 12)
    assert split_location("C:/x/model.py") == ("C:/x/model.py", None)
    assert split_location("block_forward") == (None, None)
    assert split_location(None) == (None, None)
    rule = RuleResult("live-compile", "1 compile")
    line = annotation(rule, Violation("msg\nsecond", ["e1"], location="a,b.py:3"))
    title = "title=diag check%3A live-compile"
    assert line == f"::error file=a%2Cb.py,line=3,{title}::msg%0Asecond%0Ae1"
    assert annotation(rule, Violation("m", [])) == "::error title=diag check%3A live-compile::m"


def test_github_format(hostile: Path, defaults: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_check(capsys, hostile, "--policy", defaults, "--format", "github")
    assert code == 1
    lines = out.splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 2
    assert errors[0].startswith(
        "::error file=/srv/a%2Cb%3Ac.py,line=7,title=diag check%3A live-compile::evil%0A::set-env"
    )
    assert "100%25%2C" not in errors[0] and "100%25," in errors[0]  # data keeps commas
    assert errors[1].startswith("::error file=/srv/app/model.py,line=12,title=")
    assert "\r" not in out and "::error::fake" not in out  # guard text: its first line only
    # Everything after the annotations is fenced: the runner ignores commands until the token.
    start = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[start].removeprefix("::stop-commands::")
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert lines[-1] == f"::{token}::"
    assert lines[start + 1] == "diag check: FAIL (1 of 9 rules failed)"
    # Before the fence, only our own commands start a line.
    assert all(line.startswith("::error ") for line in lines[:start])


def test_text_has_no_control_characters(
    hostile: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_check(capsys, hostile, "--policy", defaults)
    assert code == 1
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out)
    assert "x evil ::set-env name=X::1\\x1b[31m 100%," in out
    assert not any(line.startswith("::") for line in out.splitlines())


def test_json_document(hostile: Path, defaults: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_check(capsys, hostile, "--policy", defaults, "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert (doc["format"], doc["version"], doc["passed"]) == ("diag-check", 1, False)
    assert doc["trace"] == str(hostile) and doc["baseline"] is None
    assert doc["policy"]["source"] == f"{defaults} [check]"
    assert doc["policy"]["max_recompiles_after_warmup"] == 0
    assert [r["name"] for r in doc["rules"]] == [
        "recording",
        "live-compile",
        "recompile-limit",
        "guard-churn",
        "compile-failure",
        "crash",
        "cudagraphs",
        "stances",
        "cache-entries",
    ]
    live = doc["rules"][1]
    assert live["status"] == "fail"
    assert live["violations"][0]["message"].startswith(HOSTILE["name"])  # kept verbatim
    assert set(live["violations"][0]) == {"message", "evidence", "location", "key"}


def test_junit_one_case_per_rule(
    hostile: Path, tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "junit.xml"
    base = served_trace(tmp_path / "base", walls=[0.01])  # no steady steps: step time skipped
    code, _, _ = run_check(
        capsys, hostile, "--policy", defaults, "--junit", report, "--baseline", base
    )
    assert code == 1
    root = ET.fromstring(report.read_bytes())
    suite = root.find("testsuite")
    assert suite is not None
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == [
        "recording",
        "live-compile",
        "recompile-limit",
        "guard-churn",
        "compile-failure",
        "crash",
        "cudagraphs",
        "stances",
        "cache-entries",
        "baseline-frames",
        "baseline-recompile-reasons",
        "baseline-cache-entries",
        "baseline-step-time",
    ]
    assert (suite.get("tests"), suite.get("skipped")) == ("13", "1")
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"live-compile", "baseline-frames", "baseline-recompile-reasons"}
    assert suite.get("failures") == str(len(failed))
    assert cases["baseline-step-time"].find("skipped") is not None
    failure = cases["live-compile"].find("failure")
    assert failure is not None and failure.text is not None
    assert failure.get("message") == "2 compile(s) during live requests (max 0)"
    assert "\x1b" not in failure.text and "\ufffd" in failure.text  # XML 1.0 forbids ESC
    assert "]]> <b>&amp;" in failure.text  # markup survives as text
    system_out = cases["recording"].find("system-out")
    assert system_out is not None and "2 live request(s)" in (system_out.text or "")


def test_junit_written_for_a_pass_too(
    tmp_path: Path, defaults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "junit.xml"
    code, out, _ = run_check(
        capsys, served_trace(tmp_path / "t"), "--policy", defaults, "--junit", report
    )
    assert code == 0 and out.startswith("diag check: PASS")
    suite = ET.fromstring(report.read_bytes()).find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("tests") == "9"
