"""Compiles: every compile event with its frame, duration, result and all failing guards.

Filter keys: `frame:`, `phase:`, `kind:` (guard kind), `guard:` (guard source or text),
`request:`, `step:`, `id:`, `result:`, `run:`, `rank:` (`rank1`, or `proc0` without ranks).
With several processes the run column names the process: ranks' compiles look alike.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from diag.evidence.frames import label as frame_label
from diag.evidence.request_names import request_label, request_name
from diag.findings.rankset import ranks_text
from diag.trace.run import Compile, RunData

from .cells import Text, field, lines, seconds, text
from .compile_internals import compile_internals
from .loader import TraceData
from .rank_groups import RankGroupedView, ranks_of
from .table_view import Column, Row

RESULT_STYLE = {
    "ok": "",
    "failed": "bold red",
    "recompile_limit": "bold red",
    "cut-off": "bold red",
}


@dataclass
class CompileInfo:
    run: str
    item: Compile
    process: str = ""  # `rank1` (or `proc0`) when the run has several processes
    frame: str = "?"  # unique in the run: name, or name@dir/file.py:line (diag.evidence.frames)
    source: RunData | None = None  # the run it belongs to: its timing and dims events
    rank: int | None = None
    #: A group's row (the same compile on many ranks): the ranks' own; `item` is the slowest's.
    members: list[CompileInfo] = dataclass_field(default_factory=list)


def _request(info: CompileInfo) -> str:
    """The compile's request as every view names it (diag.evidence.request_names)."""
    item = info.item
    if item.request_id is None:
        return ""
    if info.source is None:
        return item.request_id
    return request_name(info.source, item.pid, item.request_id)


def _kinds(item: Compile) -> str:
    return ",".join(dict.fromkeys(g.kind for g in item.guards))


class CompilesView(RankGroupedView):
    COLUMNS = (
        Column("run"),
        Column("id", 6),
        Column("frame"),
        Column("phase", 6),
        Column("request"),
        Column("step", 4),
        Column("time", 7),
        Column("result"),
        Column("guard kinds"),
    )
    ALIASES = {
        "run": "run",
        "id": "id",
        "frame": "frame",
        "phase": "phase",
        "request": "request",
        "req": "request",
        "task": "task",
        "step": "step",
        "result": "result",
        "kind": "kind",
        "guard": "guard",
        "file": "file",
        "rank": "process",
        "process": "process",
    }
    NOUN = "compiles"

    def show(self, data: TraceData) -> None:
        rows: list[Row] = []
        groups: list[str | None] = []
        for label, run in data.trace.runs.items():
            ranks = ranks_of(run)
            for item in run.compiles:
                frame = frame_label(run, item.frame)
                info = CompileInfo(
                    label, item, run.process_tag(item.pid), frame, run, ranks.get(item.pid)
                )
                rows.append(self._row(info))
                # The same compile on many ranks: same id, frame, place, result and guards.
                same = (
                    label,
                    item.epoch,
                    item.compile_id,
                    frame,
                    item.phase,
                    item.request_id,
                    item.step,
                    item.result,
                    _kinds(item),
                )
                grouped = ranks and info.rank is not None
                groups.append("|".join(map(str, same)) if grouped else None)
        self.set_grouped(
            rows, groups, self._group_row, "no compiles: nothing was compiled (an eager run?)"
        )

    def _group_row(self, key: str, members: list[Row]) -> Row:
        infos: list[CompileInfo] = [m.payload for m in members]
        slowest = max(infos, key=lambda i: i.item.duration_s or 0.0)
        tag = ranks_text(i.rank for i in infos if i.rank is not None)
        info = CompileInfo(
            slowest.run, slowest.item, tag, slowest.frame, slowest.source, members=infos
        )
        row = self._row(info)
        fields = dict(row.fields)
        fields["process"] = ",".join(i.process for i in infos)
        return Row(f"group|{key}", row.cells, fields, info, row.style)

    def _row(self, info: CompileInfo) -> Row:
        item = info.item
        frame = info.frame if item.frame else "?"
        request = _request(info)
        return Row(
            key=f"{info.run}|{item.pid}|{item.epoch}|{item.compile_id}",
            cells=[
                text(f"{info.run} {info.process}".strip()),
                text(item.compile_id),
                text(frame),
                text(item.phase),
                text(request),
                text("" if item.step is None else item.step),
                text(seconds(item.duration_s)),
                text(item.result, RESULT_STYLE.get(item.result, "")),
                text(_kinds(item) or ("first compile" if not item.guards else "")),
            ],
            fields={
                "run": info.run,
                "id": item.compile_id,
                "frame": frame,
                "phase": item.phase,
                "request": item.request_id or "",
                "task": (
                    request_label(info.source, item.pid, item.request_id) or ""
                    if info.source is not None
                    else ""
                ),
                "step": "" if item.step is None else str(item.step),
                "result": item.result,
                "kind": _kinds(item),
                "guard": " ".join(f"{g.source or ''} {g.raw}" for g in item.guards),
                "file": item.frame.location if item.frame else "",
                "process": info.process,
            },
            payload=info,
            style="bold" if item.live else "",
        )

    def detail(self, row: Row) -> Text:
        info: CompileInfo = row.payload
        if not info.members:
            return self._detail(info)
        times = [(m.item.duration_s, m.rank) for m in info.members if m.item.duration_s]
        head = Text(f"the same compile on {info.process}", style="bold")
        parts: list[Text | str] = [head]
        if times:
            slow, fast = (
                max(times, key=lambda t: t[0] or 0.0),
                min(times, key=lambda t: t[0] or 0.0),
            )
            median = statistics.median(t for t, _ in times if t is not None)
            parts.append(
                field(
                    "took",
                    f"slowest rank {slow[1]} {seconds(slow[0])}, median {seconds(median)}, "
                    f"fastest rank {fast[1]} {seconds(fast[0])}",
                )
            )
        parts.append("Enter: show or hide the ranks' own rows; below, the slowest rank's compile")
        return lines(*parts, self._detail(info))

    def _detail(self, info: CompileInfo) -> Text:
        item = info.item
        head = Text(f"compile {item.compile_id} of ", style="bold")
        head.append(info.frame if item.frame else "?", style="bold")
        head.append(f"  ({info.run} run, pid {item.pid}, epoch {item.epoch})")
        where = f"{item.phase}"
        if item.request_id is not None:
            where += f", request {_request(info)}"
        if item.step is not None:
            where += f", step {item.step}"
        parts: list[Text | str] = [
            head,
            field("frame", item.frame.location if item.frame else "unknown"),
            field("when", where),
            field("took", f"{seconds(item.duration_s) or '?'}   result: {item.result}"),
        ]
        if item.fail_reason:
            parts.append(field("failure", item.fail_reason))
        if not item.guards:
            parts.append("no failing guard: the frame's first compile (or Dynamo gave none)")
        else:
            parts.append(Text(f"failing guards ({len(item.guards)}):", style="bold"))
        for index, guard in enumerate(item.guards, 1):
            line = Text(f"{index}. ")
            line.append(guard.kind, style="bold")
            if guard.source:
                line.append(" on ")
                line.append(guard.source)
            said = [
                f"{name} {value}"
                for name, value in (("expected", guard.expected), ("actual", guard.actual))
                if value is not None
            ]
            if said:
                line.append(": " + ", ".join(said))
            if guard.compile_id:
                line.append(f"  (entry {guard.compile_id})", style="dim")
            parts.append(line)
            if guard.user_location:
                parts.append(Text("   at ").append(guard.user_location))
            if guard.raw:
                parts.append(Text("   ").append(guard.raw, style="dim"))
        # After the guards, which say why it compiled: what the compile cost and made symbolic.
        parts.extend(compile_internals(info.source, item))
        return lines(*parts)
