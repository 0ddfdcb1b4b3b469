"""Compiles: every compile event with its frame, duration, result and all failing guards.

Filter keys: `frame:`, `phase:`, `kind:` (guard kind), `guard:` (guard source or text),
`request:`, `step:`, `id:`, `result:`, `run:`, `rank:` (`rank1`, or `proc0` without ranks).
With several processes the run column names the process: ranks' compiles look alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from diag.frames import label as frame_label
from diag.trace.run import Compile, RunData

from .cells import field, lines, seconds, text
from .compile_internals import compile_internals
from .loader import TraceData
from .table_view import Column, Row, TableView

RESULT_STYLE = {"ok": "", "failed": "bold red", "recompile_limit": "bold red"}


@dataclass
class CompileInfo:
    run: str
    item: Compile
    process: str = ""  # `rank1` (or `proc0`) when the run has several processes
    frame: str = "?"  # unique in the run: name, or name@dir/file.py:line (diag.frames)
    source: RunData | None = None  # the run it belongs to: its timing and dims events


def _kinds(item: Compile) -> str:
    return ",".join(dict.fromkeys(g.kind for g in item.guards))


class CompilesView(TableView):
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
        rows = [
            self._row(
                CompileInfo(
                    label, item, run.process_tag(item.pid), frame_label(run, item.frame), run
                )
            )
            for label, run in data.trace.runs.items()
            for item in run.compiles
        ]
        self.set_rows(rows, empty="no compiles: nothing was compiled (an eager run?)")

    def _row(self, info: CompileInfo) -> Row:
        item = info.item
        frame = info.frame if item.frame else "?"
        return Row(
            key=f"{info.run}|{item.pid}|{item.epoch}|{item.compile_id}",
            cells=[
                text(f"{info.run} {info.process}".strip()),
                text(item.compile_id),
                text(frame),
                text(item.phase),
                text(item.request_id or ""),
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
        item = info.item
        head = Text(f"compile {item.compile_id} of ", style="bold")
        head.append(info.frame if item.frame else "?", style="bold")
        head.append(f"  ({info.run} run, pid {item.pid}, epoch {item.epoch})")
        where = f"{item.phase}"
        if item.request_id is not None:
            where += f", request {item.request_id}"
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
