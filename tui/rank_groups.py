"""Rows of many ranks grouped: one row per step (or compile) for all the ranks that have it,
collapsed by default; Enter opens a group into its ranks' rows and closes it again.

At 64 ranks the Steps screen has 64 rows per step and Compiles 64 rows per compile, alike but
for the rank: the one rank that compiled live is buried. Grouped, a step is one row saying how
many ranks ran it, the slowest rank's time and which ranks compiled in it; the ranks' own rows
are one key away. A filter that names a rank (`rank:rank32`) shows the ranks' own rows.
Runs of fewer than GROUP_RANKS ranks are not grouped: two ranks read fine side by side.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.widgets import DataTable

from diag.trace.run import RunData

from .cells import Text
from .table_view import Row, RowTable, TableView

#: Runs with at least this many ranks get their rows grouped.
GROUP_RANKS = 3
CLOSED, OPEN, MEMBER = "▸ ", "▾ ", "  "


def ranks_of(run: RunData) -> dict[int, int]:
    """pid -> rank, for a run of GROUP_RANKS ranks or more (else empty: rows stay per rank)."""
    ranked = {p.pid: p.rank for p in run.processes if isinstance(p.rank, int)}
    return ranked if len(set(ranked.values())) >= GROUP_RANKS else {}


#: Builds a group's own row from its members' rows (at least two), keyed `key`.
Summarize = Callable[[str, list[Row]], Row]


class GroupedTable(RowTable):
    """Enter on a group's row opens or closes it; the footer says which (nothing on others)."""

    BINDINGS = [
        Binding("enter", "toggle_group('open')", "Show ranks"),
        Binding("enter", "toggle_group('close')", "Hide ranks"),
    ]

    def _view(self) -> RankGroupedView:
        return next(a for a in self.ancestors if isinstance(a, RankGroupedView))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action != "toggle_group":
            return True
        state = self._view().group_state()
        return state is not None and parameters == (state,)

    def action_toggle_group(self, state: str) -> None:
        view = self._view()
        row = view.current
        if row is not None and row.key.startswith("group|"):
            view.toggle_group(row.key.removeprefix("group|"))


class RankGroupedView(TableView):
    """A TableView whose rows can be grouped across ranks (screens call `set_grouped`)."""

    PROCESS_FIELD = "process"

    def make_table(self) -> RowTable:
        return GroupedTable(cursor_type="row", zebra_stripes=True)

    def group_state(self) -> str | None:
        """What Enter does on the highlighted row: `open` a closed group, `close` an open one,
        None on a row that is no group."""
        row = self.current
        if row is None or not row.key.startswith("group|"):
            return None
        return "close" if row.key.removeprefix("group|") in self._expanded else "open"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._flat: list[Row] = []
        self._group_of: list[str | None] = []
        self._summarize: Summarize | None = None
        self._expanded: set[str] = set()
        self._empty = "nothing to show"
        self._by_rank = False  # the filter names a rank: show the ranks' own rows
        self._head_of: dict[str, str] = {}  # an open group's member row key -> its head's

    def set_grouped(
        self, rows: list[Row], groups: list[str | None], summarize: Summarize, empty: str
    ) -> None:
        """`rows` one per rank and item; `groups[i]` the group of row i (None: never grouped)."""
        self._flat, self._group_of, self._summarize = rows, groups, summarize
        self._empty = empty
        self._expanded &= {key for key in groups if key is not None}
        self.set_rows(self._visible(), empty=empty)

    @property
    def grouped(self) -> bool:
        return any(key is not None for key in self._group_of)

    def head_key(self, row: Row) -> str:
        """The key of the top-level row `row` is shown under (its own when it is one)."""
        return self._head_of.get(row.key, row.key)

    def _visible(self) -> list[Row]:
        self._head_of = {}
        if self._summarize is None or self._by_rank or not self.grouped:
            return list(self._flat)
        members: dict[str, list[Row]] = {}
        for row, key in zip(self._flat, self._group_of, strict=True):
            if key is not None:
                members.setdefault(key, []).append(row)
        shown: list[Row] = []
        placed: set[str] = set()
        for row, key in zip(self._flat, self._group_of, strict=True):
            if key is None or len(members[key]) == 1:
                shown.append(_marked(row, MEMBER))  # in line with the groups' rows
                continue
            if key in placed:
                continue
            placed.add(key)
            head = self._summarize(key, members[key])
            is_open = key in self._expanded
            shown.append(_marked(head, OPEN if is_open else CLOSED))
            if is_open:
                shown.extend(_marked(member, MEMBER) for member in members[key])
                self._head_of.update((member.key, head.key) for member in members[key])
        return shown

    def apply_filter(self, text: str) -> None:
        super().apply_filter(text)
        by_rank = any(term.key == self.PROCESS_FIELD for term in self._state.query.terms)
        if by_rank != self._by_rank:
            self._by_rank = by_rank
            self.set_rows(self._visible(), empty=self._empty)

    def toggle_group(self, key: str) -> None:
        """Open a closed group (its ranks' rows below it) or close an open one."""
        self._expanded ^= {key}
        self.set_rows(self._visible(), empty=self._empty)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.current
        if row is not None and row.key.startswith("group|"):
            self.toggle_group(row.key.removeprefix("group|"))


def _marked(row: Row, mark: str) -> Row:
    """The row with `mark` before its first cell (a group's state, or a member's indent)."""
    first = Text(mark)
    first.append_text(row.cells[0])
    return Row(row.key, [first, *row.cells[1:]], row.fields, row.payload, row.style)
