"""The UI's pure parts: filter parsing, finding -> evidence, the step plot."""

from __future__ import annotations

from diag.findings.model import Finding
from diag.tui.evidence import evidence_for
from diag.tui.filtering import matches, parse_query, quote
from diag.tui.step_plot import MARK, PlotData, render_plot

ALIASES = {"frame": "frame", "phase": "phase", "kind": "kind", "step": "step", "guard": "guard"}
ROW = {
    "frame": "wan_block_forward",
    "phase": "live",
    "kind": "tensor-size,python-value",
    "step": "10",
    "guard": "len(self.config) == 3",
}


def _matches(text: str) -> bool:
    return matches(parse_query(text, ALIASES), ROW, frozenset({"step"}))


def test_filter_terms() -> None:
    assert _matches("")
    assert _matches("frame:wan phase:live")
    assert _matches("kind:python")  # any of the row's guard kinds
    assert _matches("phase:warmup,live")  # alternatives
    assert not _matches("frame:wan phase:warmup")  # every term must match
    assert _matches("WAN")  # a bare word searches every field, case-insensitively
    assert _matches("step:10") and not _matches("step:1")  # step numbers match whole
    assert _matches('guard:"config) == 3"')  # quotes keep spaces
    assert _matches("nokey:x") is False  # an unknown key is searched as a word
    _matches('guard:"len(self')  # an unbalanced quote while typing: no error


def test_quote_round_trips_through_the_parser() -> None:
    for value in ("plain", "with space", "L['self'].x", 'say "hi"', "a,b,longest"):
        query = parse_query(f"guard:{quote(value)}", ALIASES)
        [term] = query.terms
        assert term.key == "guard" and len(term.values) == 1
        assert term.values[0] in value.lower()


def _finding(analyzer: str, **data: object) -> Finding:
    return Finding(f"{analyzer}:x", analyzer, "warning", "t", [], "f", data=dict(data))


def test_every_analyzer_with_evidence_has_a_screen() -> None:
    cases = {
        "live-compile": (
            _finding("live-compile", frame="f", request_id="r1", compile_ids=["0/2"]),
            ("compiles", "run:compiled frame:f request:r1", "id:0/2"),
        ),
        "guard-churn": (
            _finding("guard-churn", frame="f", source="self.cfg x", compile_ids=["0/1", "0/2"]),
            ("compiles", "run:compiled frame:f guard:'self.cfg x'", "id:0/1"),
        ),
        "recompile-limit": (
            _finding("recompile-limit", frame="f", compile_id="0/8"),
            ("compiles", "run:compiled frame:f", "id:0/8"),
        ),
        "step0-spike": (
            _finding("step0-spike", request_id="r1"),
            ("steps", "run:compiled request:r1", "step:0"),
        ),
        "cache-bloat": (
            _finding("cache-bloat", frame="f"),
            ("cache", "run:compiled frame:f", "frame:f"),
        ),
        "kernel-routing": (
            _finding("kernel-routing", region="wan_block_forward"),
            ("kernels", "region:wan_block_forward", "region:wan_block_forward"),
        ),
        "offload-bound": (
            _finding("offload-bound", steps=[{"request_id": "r0", "step": 2}]),
            ("offload", "run:compiled bound:yes", "request:r0 step:2"),
        ),
    }
    for finding, (tab, query, select) in cases.values():
        target = evidence_for(finding)
        assert target is not None
        assert (target.tab, target.query, target.select) == (tab, query, select)
    assert evidence_for(_finding("magi-compile")) is None  # its text is all there is


def test_plot_marks_compiles_and_buckets_long_runs() -> None:
    data = PlotData(title="t", values=[5.0, 0.1, 0.1, 0.1], marks=[True, False, False, False])
    text = render_plot(data, width=40, height=6).plain.splitlines()
    assert len(text) == 6
    assert "log scale" in text[0]  # 50x spike
    assert text[-1].strip() == MARK * 3  # one mark, under the first bar (3 cells wide)
    many = PlotData(title="t", values=[0.1] * 500, marks=[i == 250 for i in range(500)])
    lines = render_plot(many, width=60, height=5).plain.splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert lines[-1].count(MARK) == 1 and "steps per bar" in lines[0]
    assert render_plot(PlotData(title="t", notes=("no steps",)), 40, 5).plain.endswith("no steps")
