"""Cache: Dynamo cache entries per code object, and how they grew step by step."""

from __future__ import annotations

from dataclasses import dataclass, field

from diag.evidence.frames import label as frame_label
from diag.findings.rankset import ranks_text
from diag.trace.run import Frame, RunData

from .cells import Text, lines, shape, text
from .loader import TraceData
from .rank_groups import ranks_of
from .table_view import Column, Row, TableView

#: torch's default recompile limit (entries per code object before it falls back to eager).
LIMIT = 8


@dataclass
class CacheInfo:
    run: str
    frame: Frame
    entries: int
    # (pid, request id, step, entries) at each step end where the count changed
    history: list[tuple[int, str | None, int | None, int]] = field(default_factory=list)
    shapes: list[str] = field(default_factory=list)
    name: str = ""  # unique in the run: name, or name@dir/file.py:line (diag.evidence.frames)
    #: pid -> rank when the run has many ranks (rank_groups.GROUP_RANKS): history by rank.
    ranks: dict[int, int] = field(default_factory=dict)


def _infos(label: str, run: RunData) -> list[CacheInfo]:
    infos: dict[Frame, CacheInfo] = {
        frame: CacheInfo(label, frame, entries) for frame, entries in run.cache_entries().items()
    }
    for _, pid, request_id, step, frame, entries in run.cache_history:
        info = infos.setdefault(frame, CacheInfo(label, frame, entries))
        info.history.append((pid, request_id, step, entries))
    shapes = list(dict.fromkeys(shape(r.shape) for r in run.requests if r.shape))
    ranks = ranks_of(run)
    for info in infos.values():
        info.shapes = shapes
        info.name = frame_label(run, info.frame)
        info.ranks = ranks
    return sorted(infos.values(), key=lambda i: (-i.entries, i.frame.name))


def _growth(info: CacheInfo) -> str:
    values = [entries for _, _, _, entries in info.history]
    if info.ranks:
        return _rank_growth(info)
    return _values(values)


def _rank_growth(info: CacheInfo) -> str:
    """Many ranks: one rank's counts in order, the rank that ended with the most entries, and
    the ranks whose counts went the same way (`1 2 3 (rank 32)`), not all ranks interleaved."""
    per_pid: dict[int, list[int]] = {}
    for pid, _, _, entries in info.history:
        per_pid.setdefault(pid, []).append(entries)
    if not per_pid:
        return ""
    top = max(per_pid, key=lambda pid: (per_pid[pid][-1], -info.ranks.get(pid, 0)))
    same = [info.ranks[p] for p, v in per_pid.items() if v == per_pid[top] and p in info.ranks]
    who = f" ({ranks_text(same)})" if same else ""
    return _values(per_pid[top]) + who


def _values(values: list[int]) -> str:
    if len(values) > 8:
        values = values[:3] + values[-4:]
        return " ".join(map(str, values[:3])) + " ... " + " ".join(map(str, values[3:]))
    return " ".join(map(str, values))


class CacheView(TableView):
    COLUMNS = (
        Column("run", 8),
        Column("code object"),
        Column("entries", 7),
        Column("growth"),
        Column("location"),
    )
    ALIASES = {"run": "run", "frame": "frame", "file": "file", "entries": "entries"}
    EXACT = frozenset({"run", "entries"})
    NOUN = "code objects"

    def show(self, data: TraceData) -> None:
        rows = [
            self._row(info) for label, run in data.trace.runs.items() for info in _infos(label, run)
        ]
        self.set_rows(rows, empty="no cache entries reported (nothing compiled)")

    def _row(self, info: CacheInfo) -> Row:
        style = "bold red" if info.entries >= LIMIT else ""
        return Row(
            key=f"{info.run}|{info.frame.name}|{info.frame.file}|{info.frame.line}",
            cells=[
                text(info.run),
                text(info.name),
                text(info.entries, style),
                text(_growth(info)),
                text(info.frame.location),
            ],
            fields={
                "run": info.run,
                "frame": info.name,
                "file": info.frame.location,
                "entries": str(info.entries),
            },
            payload=info,
        )

    def detail(self, row: Row) -> Text:
        info: CacheInfo = row.payload
        head = Text(info.name, style="bold")
        head.append(f"  {info.run} run, {info.entries} cache entries at the end")
        parts: list[Text | str] = [head, Text("at ").append(info.frame.location)]
        if info.entries >= LIMIT:
            parts.append(
                f"at or past torch's default recompile limit ({LIMIT}): later variations run eager"
            )
        if info.shapes:
            parts.append(
                f"{len(info.shapes)} distinct request shape(s) served: {', '.join(info.shapes)}"
            )
        if info.history:
            parts.append(Text("entries after each step where they changed:", style="bold"))
        if info.ranks:  # many ranks: each change once, with the ranks that had it
            by_change: dict[tuple[str, int], list[int]] = {}
            for pid, request_id, step, entries in info.history:
                key = (_where(request_id, step), entries)
                by_change.setdefault(key, []).append(info.ranks.get(pid, -1))
            for (where, entries), ranks in by_change.items():
                parts.append(f"  {where}: {entries}   ({ranks_text(r for r in ranks if r >= 0)})")
            return lines(*parts)
        for pid, request_id, step, entries in info.history:
            parts.append(f"  {_where(request_id, step)}: {entries}   (pid {pid})")
        return lines(*parts)


def _where(request_id: str | None, step: int | None) -> str:
    where = f"{request_id or 'outside a request'}"
    return where if step is None else f"{where} step {step}"
