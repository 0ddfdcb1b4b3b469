"""Every malformed value in diag's own format is a skipped line or one clear error, never a
traceback (issue 22): the twelve crash sites the issue found, each on a copy of a real
recording whose analysis reached that site before the reader validated events
(tests/data/lightx2v/warm-width: a real LightX2V run with a warmup, a live request and
recompiles), through analyze, check and the TUI's loader, in this process.

Each malformed event line is skipped and counted (docs/FORMAT.md): the count reaches the
reader's warnings (analyze's `warnings`, check's stderr and its `recording` rule). A manifest
of the wrong shape is one line and exit 2, and an internal error of diag is exit 3, never
check's 1."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from diag.check import run_check
from diag.check.policy import Policy
from diag.errors import EXIT_INTERNAL, DiagError
from diag.findings.analysis import analyze
from diag.trace.inputs import input_warnings, open_input
from diag.trace.lines import MAX_LINE_BYTES, Tally, read_events
from diag.trace.load import load_trace

WARM_WIDTH = Path(__file__).resolve().parents[1] / "data" / "lightx2v" / "warm-width"


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    trace = tmp_path / "trace"
    shutil.copytree(WARM_WIDTH, trace)
    return trace, next((trace / "runs" / "compiled").glob("*/events.jsonl"))


def _set(kind: str, key: str, value: Any, live: bool = False) -> Callable[[str], str]:
    """Every `kind` event (`live`: only live ones) gets `key` = `value`."""

    def change(text: str) -> str:
        out = []
        for line in text.splitlines():
            event = json.loads(line)
            if event.get("ev") == kind and (not live or event.get("phase") == "live"):
                event[key] = value
            out.append(json.dumps(event))
        return "\n".join(out) + "\n"

    return change


def _raw(old: str, new: str) -> Callable[[str], str]:
    """Text json cannot write (`1e999`, a 5000-digit integer), put in by hand."""

    def change(text: str) -> str:
        assert old in text
        return text.replace(old, new, 1)

    return change


def _append(line: str) -> Callable[[str], str]:
    return lambda text: text + line + "\n"


DEEP = "[" * 10_000 + "]" * 10_000

#: The issue's crash sites: (what, how the events change, the lines skipped).
SITES: dict[str, tuple[Callable[[str], str], int]] = {
    # diag/trace/run.py
    'step "abc"': (_set("step_start", "step", "abc"), 5),
    "wall_s 1e999": (_raw('"wall_s":', '"wall_s":1e999,"x":'), 1),
    "step a dict": (_set("step_end", "step", {"a": 1}), 5),
    "epoch [1]": (_set("compile_end", "epoch", [1]), 2),
    'pid "x"': (_set("process_start", "pid", "x"), 1),
    "a 5000-digit int": (_raw('"step":0', '"step":' + "9" * 5000), 1),
    # diag/record/summary.py (RecursionError)
    "nested 10000 deep": (_append('{"t":1,"ev":"graph_break","reason":' + DEEP + "}"), 1),
    # diag/evidence/stats.py
    'wall_s ""': (_set("step_end", "wall_s", ""), 5),
    # analyzers/step0_spike.py
    'wall_s "12"': (_set("step_end", "wall_s", "12"), 5),
    # analyzers/live_compiles.py
    "a shape holding a string": (_set("request_start", "shape", ["x", 64, 96], live=True), 1),
    # analyzers/recompiles.py
    "start_t []": (_set("compile_end", "start_t", []), 2),
}


@pytest.mark.parametrize("site", list(SITES))
def test_a_malformed_value_is_a_skipped_line_counted_in_the_warnings(
    tmp_path: Path, site: str
) -> None:
    trace_dir, events = _copy(tmp_path)
    change, skipped = SITES[site]
    events.write_text(change(events.read_text(encoding="utf-8")), encoding="utf-8")
    trace = open_input(trace_dir)
    run = trace.compiled
    assert run is not None and run.corrupt_lines == skipped
    analyze(trace)  # every analyzer: no exception
    warnings = input_warnings(trace)
    assert len(warnings) == 1 and f"{skipped} corrupt line(s) skipped" in warnings[0], warnings
    verdict = run_check(trace_dir, Policy())
    assert verdict.warnings == warnings
    recording = next(rule for rule in verdict.rules if rule.name == "recording")
    assert any("corrupt event line" in v.message for v in recording.violations)
    from diag.tui.loader import load_events, load_kernels

    data = load_events(trace_dir)
    load_kernels(data)
    assert input_warnings(data.trace) == warnings


def test_a_clean_recording_has_no_corrupt_line(tmp_path: Path) -> None:
    trace_dir, _ = _copy(tmp_path)
    trace = load_trace(trace_dir)
    assert input_warnings(trace) == [] and trace.compiled is not None
    assert trace.compiled.corrupt_lines == 0 and len(trace.compiled.steps) == 5


MANIFESTS: dict[str, Callable[[str], str]] = {
    "nested 10000 deep": lambda text: text.rstrip().rstrip("}") + ',"deep":' + DEEP + "}",
    '"runs": "x"': lambda text: json.dumps({**json.loads(text), "runs": "x"}),
    '"options": [1]': lambda text: json.dumps({**json.loads(text), "options": [1]}),
    '"launcher_pid": "x"': lambda text: json.dumps({**json.loads(text), "launcher_pid": "x"}),
    '"version": true': lambda text: json.dumps({**json.loads(text), "version": True}),
    '"runs": [{"exit_code": "0"}]': lambda text: json.dumps(
        {**json.loads(text), "runs": [{"label": "compiled", "exit_code": "0"}]}
    ),
}


@pytest.mark.parametrize("case", list(MANIFESTS))
def test_a_manifest_of_the_wrong_shape_is_one_line(tmp_path: Path, case: str) -> None:
    trace_dir, _ = _copy(tmp_path)
    manifest = trace_dir / "manifest.json"
    manifest.write_text(MANIFESTS[case](manifest.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(DiagError) as refused:
        open_input(trace_dir)
    message = refused.value.message
    assert "\n" not in message and "manifest.json" in message, message
    with pytest.raises(DiagError) as again:
        run_check(trace_dir, Policy())
    assert again.value.message == message


def test_lines_that_are_not_events_are_skipped_a_torn_end_is_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    good = '{"t":5,"ev":"phase","phase":"warmup"}'
    path.write_bytes(
        b"\n".join(
            [
                good.encode(),
                b"[]",
                b"{",
                b'{"t":1}',  # no kind
                b'{"t":-1,"ev":"phase"}',  # a time before the clock
                b'{"t":NaN,"ev":"phase"}',
                b'{"t":2,"ev":"step_end","host_load":Infinity}',
                b'{"t":3,"ev":"a_newer_kind","x":[1]}',  # kept: a newer diag's event
                b'{"t":4,"ev":"phase","phase":"\xff\xfe"}',  # invalid UTF-8, as json reads it
                b"",
                good.encode(),
                b'{"t":6,"ev":"phase","ph',  # torn: the process was killed mid-write
            ]
        )
    )
    tally = Tally()
    events = [event for batch in read_events(path, tally) for event in batch]
    assert [type(e).__name__ for e in events] == ["PhaseChange", "Unknown", "PhaseChange"] + [
        "PhaseChange"
    ]
    assert tally.corrupt == 6 and tally.torn == 1
    assert tally.first == "line 2: not a JSON object"


def test_an_overlong_line_is_skipped_without_holding_it(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"t":1,"ev":"phase","phase":"warmup"}\n{"t":2,"ev":"phase","x":"')
        handle.write(b"x" * (MAX_LINE_BYTES + (8 << 20)))
        handle.write(b'"}\n{"t":3,"ev":"phase","phase":"live"}\n')
    tally = Tally()
    events = [event for batch in read_events(path, tally) for event in batch]
    assert [e.t for e in events] == [1, 3] and tally.corrupt == 1


def test_an_internal_error_is_exit_3_and_one_line_never_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug in diag cannot be made from a trace once the reader validates it, so one is put
    in by hand: the recording rule raises. check must not exit 1 (CI reads 1 as "policy
    violated") nor print a traceback."""
    from diag.check import rules
    from diag.cli import main

    trace_dir, _ = _copy(tmp_path)

    def broken(*args: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(rules, "recording_rule", broken)
    monkeypatch.delenv("DIAG_DEBUG", raising=False)
    assert main(["check", str(trace_dir)]) == EXIT_INTERNAL == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("diag: internal error: KeyError: 'a bug'"), err
