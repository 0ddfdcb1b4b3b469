"""Overview: what was recorded, how it ended, and the findings by severity.

Enter on a finding opens its evidence on the screen that holds it (tui/evidence.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from diag.evidence.status import assess
from diag.findings.model import SEVERITIES, Finding
from diag.trace.inputs import input_warnings
from diag.trace.paths import shown_location
from diag.trace.run import RunData, Trace
from diag.warmup.summary import COVERAGE_ID

from .cells import Text, field, lines, seconds, text
from .evidence import evidence_for
from .loader import TraceData
from .messages import OpenEvidence
from .table_view import Column, Row, RowTable, TableView

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


#: Screens a finding's evidence can open on (tui/evidence.py), as the footer names them.
EVIDENCE_TABS = ("steps", "compiles", "kernels", "offload", "cache")


class FindingsTable(RowTable):
    """Enter opens the highlighted finding's evidence; the footer says on which screen (one
    binding per screen, the one that applies shown)."""

    BINDINGS = [
        *(
            Binding("enter", f"open_evidence('{tab}')", f"Evidence: {tab.capitalize()}")
            for tab in EVIDENCE_TABS
        ),
        Binding("enter", "open_evidence('')", "Evidence: text only"),
    ]

    def _finding(self) -> Finding | None:
        view = next(a for a in self.ancestors if isinstance(a, FindingsView))
        row = view.current
        return row.payload if row is not None else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action != "open_evidence":
            return True
        finding = self._finding()
        if finding is None:
            return False
        target = evidence_for(finding)
        return parameters == ((target.tab if target is not None else ""),)

    def action_open_evidence(self, tab: str = "") -> None:
        finding = self._finding()
        if finding is not None:
            self.post_message(OpenEvidence(finding))


class FindingsView(TableView):
    COLUMNS = (Column("severity", 8), Column("analyzer", 15), Column("title"))
    ALIASES = {
        "severity": "severity",
        "sev": "severity",
        "analyzer": "analyzer",
        "title": "title",
        "id": "id",
        "run": "run",
        "evidence": "evidence",
    }
    EXACT = frozenset({"run"})
    NOUN = "findings"
    FILL = "title"

    def make_table(self) -> RowTable:
        return FindingsTable(cursor_type="row", zebra_stripes=True)

    #: The warmup plan's lines (diag/warmup/summary.py), shown with the warmup-coverage finding.
    plan: list[str] = []  # noqa: RUF012 - replaced per show(), never mutated

    def show(
        self, findings: list[Finding], all_clear: bool = True, plan: Sequence[str] = ()
    ) -> None:
        self.plan = list(plan)
        seen: dict[str, int] = {}
        rows = []
        for f in findings:
            # Keyed by id (stable when stage two adds findings), made unique if ids repeat.
            seen[f.id] = seen.get(f.id, 0) + 1
            key = f.id if seen[f.id] == 1 else f"{f.id}#{seen[f.id]}"
            rows.append(self._row(key, f))
        empty = (
            "No findings: nothing compiled after warmup and no problem."
            if all_clear
            else "No findings in what was recorded: not an all-clear (see the notices above)."
        )
        self.set_rows(rows, empty=empty)

    def _row(self, key: str, f: Finding) -> Row:
        return Row(
            key=key,
            cells=[
                text(f.severity.upper(), SEVERITY_STYLE[f.severity]),
                text(f.analyzer),
                text(_grouped_title(f)),
            ],
            fields={
                "severity": f.severity,
                "analyzer": f.analyzer,
                "title": f.title,
                "id": f.id,
                "run": f.run,
                "evidence": " ".join(f.evidence),
            },
            payload=f,
        )

    def detail(self, row: Row) -> Text:
        finding: Finding = row.payload
        out = Text(f"{finding.severity.upper()} ", style=SEVERITY_STYLE[finding.severity])
        out.append(f"[{finding.analyzer}] ")
        out.append(finding.title, style="bold")
        parts: list[Text | str] = [out]
        if finding.location:
            parts.append(field("at", shown_location(finding.location)))
        parts.extend(Text("- ").append(item) for item in finding.evidence)
        if finding.fix:  # an info finding that needs no action has no fix
            parts.append(field("fix", finding.fix))
        parts.append(field("id", finding.id))
        if finding.related:
            parts.append(field("same root cause", ", ".join(finding.related)))
        if finding.group:
            parts.append(field("part of", finding.group))
        if finding.id == COVERAGE_ID and self.plan:
            # The plan beside the coverage it would complete (diag warmup-plan): plain text.
            parts.append(Text(self.plan[0], style="bold"))
            parts.extend(Text(f"  {line}") for line in self.plan[1:])
        target = evidence_for(finding)
        if target is not None:
            parts.append(Text(f"Enter: evidence on the {target.tab.capitalize()} screen", "dim"))
        return lines(*parts)


def _grouped_title(finding: Finding) -> str:
    """A group's headline shows its count; its echoes show they are one (diag.findings.grouping)."""
    if finding.related:
        return f"[+{len(finding.related)} related] {finding.title}"
    if finding.group:
        return f"↳ {finding.title}"
    return finding.title


def _run_counts(run: RunData) -> Text:
    live = [r for r in run.requests if r.phase == "live"]
    warm = [r for r in run.requests if r.phase != "live"]
    recompiles = sum(1 for c in run.compiles if c.is_recompile)
    limits = len(run.of("recompile_limit"))
    out = Text(f"{run.label}: ", style="bold")
    out.append(
        f"{len(live)} live req ({sum(len(r.steps) for r in live)} steps), "
        f"{len(warm)} warmup ({sum(len(r.steps) for r in warm)}) · "
        f"{len(run.compiles)} compiles ({sum(1 for c in run.compiles if c.live)} live, "
        f"{recompiles} recompiles)"
        + (f" · {limits} limit hits" if limits else "")
        + f" · {sum(1 for s in run.steps if s.profiled)} profiled"
    )
    return out


def metadata(trace: Trace, findings: list[Finding] | None) -> Text:
    """The recording at a glance, most telling first (a short terminal cuts the end).

    Every value is literal: the manifest is trace data too."""
    manifest: dict[str, Any] = trace.manifest
    versions = manifest.get("versions") or {}
    command = manifest.get("command") or []
    runs = [r for r in manifest.get("runs") or [] if isinstance(r, dict)]
    head = field("trace", trace.path)
    head.append("   status: ", style="bold")
    head.append(str(manifest.get("status")))
    visibility = assess(trace)  # what diag could not see comes first (diag/evidence/status.py)
    notices: list[Text | str] = (
        [Text(f"recording: {visibility.status.detail}", style="bold red")]
        if not visibility.status.complete
        else []
    )
    for notice in visibility.notices:
        line = Text("NOTICE ", style="bold yellow")
        line.append(f"{notice.message}. How: {notice.how}")
        notices.append(line)
    # What the reader skipped (a corrupt line, a bad Kineto window), as analyze warns.
    notices.extend(Text("SKIPPED ", style="bold yellow").append(w) for w in input_warnings(trace))
    head.append(f"   started: {manifest.get('started') or '?'}")
    verdict = Text("findings: ", style="bold")
    if findings is None:
        verdict.append("analyzing...")
    else:
        for index, severity in enumerate(SEVERITIES):
            if index:
                verdict.append(" · ")
            count = sum(1 for f in findings if f.severity == severity)
            verdict.append(f"{count} {severity}", style=SEVERITY_STYLE[severity] if count else "")
    run_text = field(
        "runs",
        " · ".join(
            f"{r.get('label')} {r.get('status')} {seconds(r.get('duration_s'))}".strip()
            for r in runs
        )
        or "none",
    )
    shown_versions = [f"{k} {versions.get(k)}" for k in ("torch", "cuda", "triton", "gpu")]
    parts: list[Text | str] = [
        head,
        *notices,
        verdict,
        *(_run_counts(run) for run in trace.runs.values()),
        run_text,
        field("versions", " · ".join(v for v in shown_versions if not v.endswith(" None"))),
        field("command", " ".join(map(str, command)) if isinstance(command, list) else command),
    ]
    return lines(*parts)


def compact_metadata(trace: Trace, findings: list[Finding] | None) -> Text:
    """The header of a short terminal (80x24): one line each, cut with an ellipsis, at most
    three shown (tui/diag.tcss), so that six findings fit below. What diag could not see still
    comes right after the trace and its verdict; versions and the command wait for a taller
    terminal."""
    head = Text()
    head.append(trace.path.name or str(trace.path), style="bold")
    head.append(f" · {trace.manifest.get('status')} · ")
    if findings is None:
        head.append("analyzing...")
    for index, severity in enumerate(SEVERITIES if findings is not None else ()):
        count = sum(1 for f in findings or () if f.severity == severity)
        head.append(" · " if index else "")
        head.append(f"{count} {severity}", style=SEVERITY_STYLE[severity] if count else "")
    visibility = assess(trace)
    parts: list[Text | str] = [head]
    if not visibility.status.complete:
        parts.append(Text(f"recording: {visibility.status.detail}", style="bold red"))
    for notice in visibility.notices:
        line = Text("NOTICE ", style="bold yellow")
        line.append(notice.message)
        parts.append(line)
    parts.extend(_run_counts(run) for run in trace.runs.values())
    return lines(*parts)  # one screen line each: tui/diag.tcss cuts them with an ellipsis


class OverviewView(Vertical):
    """Run metadata and status, counts, and the findings by severity."""

    def compose(self) -> ComposeResult:
        yield Static(Text("loading..."), id="meta")
        yield Static(Text("loading..."), id="meta-short")
        yield FindingsView(id="findings")

    @property
    def findings(self) -> FindingsView:
        return self.query_one(FindingsView)

    def show(self, data: TraceData) -> None:
        self.query_one("#meta", Static).update(metadata(data.trace, data.findings))
        self.query_one("#meta-short", Static).update(compact_metadata(data.trace, data.findings))
        self.findings.show(data.findings, assess(data.trace).all_clear_possible, data.plan)
