"""A filterable table with a detail panel: the shape of every screen but the plot.

Each screen turns its slice of the trace into `Row`s (literal `Text` cells plus named fields for
the `/` filter); this widget keeps them, shows those the filter keeps, and shows the highlighted
row's detail below. Screens override `detail()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import RenderableType
from rich.text import Text as RichText
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from .cells import Text
from .filtering import Query, matches, parse_query


@dataclass
class Row:
    key: str
    cells: Sequence[Text]
    fields: Mapping[str, str]
    payload: Any = None
    style: str = ""


@dataclass(frozen=True)
class Column:
    label: str
    width: int | None = None


@dataclass
class _State:
    rows: list[Row] = field(default_factory=list)
    shown: list[Row] = field(default_factory=list)
    query_text: str = ""
    query: Query = field(default_factory=Query)
    empty: str = "loading..."
    pending_select: str = ""  # a select asked for before the rows arrived


class RowTable(DataTable[RichText]):  # cells: copies of printable Text (tui/cells.py)
    """The DataTable of a TableView (a class of its own so screens can bind keys on it)."""

    def on_resize(self, event: events.Resize) -> None:
        view = next((a for a in self.ancestors if isinstance(a, TableView)), None)
        if view is not None and view.FILL is not None:
            view.refit()


class TableView(Vertical):
    """Rows, a filter over them, and the highlighted row's detail."""

    COLUMNS: Sequence[Column] = ()
    #: Filter keys (and their aliases) -> row field names.
    ALIASES: Mapping[str, str] = {}
    #: Fields matched whole (step numbers, compile ids, run labels), not as substrings.
    EXACT: frozenset[str] = frozenset({"run", "step", "id"})
    NOUN = "rows"
    DETAIL = True
    #: The column that takes the width the others leave, its cells cut with an ellipsis, so a
    #: long value (a finding's title) never hides past the right edge; None: every column as
    #: wide as its content (wide rows scroll sideways).
    FILL: str | None = None

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="table-view")
        self._state = _State()

    def make_table(self) -> RowTable:
        return RowTable(cursor_type="row", zebra_stripes=True)

    def compose_extra(self) -> ComposeResult:
        """Widgets shown above the table (a plot, a summary)."""
        yield from ()

    def compose(self) -> ComposeResult:
        yield from self.compose_extra()
        yield Static(Text(self._state.empty), classes="table-title")
        table = self.make_table()
        for column in self.COLUMNS:
            table.add_column(Text(column.label), width=column.width, key=column.label)
        yield table
        if self.DETAIL:
            with VerticalScroll(classes="detail"):
                yield Static(Text(""), classes="detail-text")

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    @property
    def rows(self) -> list[Row]:
        return self._state.rows

    @property
    def shown(self) -> list[Row]:
        return self._state.shown

    @property
    def query_text(self) -> str:
        return self._state.query_text

    def set_rows(self, rows: list[Row], empty: str = "nothing to show") -> None:
        self._state.rows = rows
        self._state.empty = empty
        self._refill()
        if self._state.pending_select and rows:
            self.select(self._state.pending_select)

    def set_empty(self, message: str) -> None:
        """No rows (yet): say why in the title line."""
        self._state.rows = []
        self._state.empty = message
        self._refill()

    def apply_filter(self, text: str) -> None:
        self._state.query_text = text.strip()
        self._state.query = parse_query(text, self.ALIASES)
        self._refill()

    def select(self, text: str) -> bool:
        """Put the cursor on the first shown row matching `text`; False if none does.

        Asked before the rows arrived (a jump to Kernels while Kineto loads), it is kept and
        done when they come."""
        self._state.pending_select = "" if self._state.rows else text
        query = parse_query(text, self.ALIASES)
        for index, row in enumerate(self._state.shown):
            if matches(query, row.fields, self.EXACT):
                self.table.move_cursor(row=index, column=0)
                self._show_detail(row)
                return True
        return False

    @property
    def current(self) -> Row | None:
        table = self.table
        shown = self._state.shown
        if not shown or not 0 <= table.cursor_row < len(shown):
            return None
        return shown[table.cursor_row]

    def refit(self) -> None:
        """The table's width changed: cut the FILL column's cells to the new width."""
        if self._state.rows:
            self._refill()

    def _fill_width(self) -> int | None:
        """Cells the FILL column may take: the table's width less the other columns, the
        cells' padding and a vertical scrollbar; None before the table has a width."""
        table = self.table
        if self.FILL is None or table.size.width <= 0:
            return None
        padding = 2 * table.cell_padding
        others = sum((c.width or 0) + padding for c in self.COLUMNS if c.label != self.FILL)
        room = table.size.width - table.styles.scrollbar_size_vertical - others - padding
        return max(8, room)

    def _refill(self) -> None:
        state = self._state
        state.shown = [row for row in state.rows if matches(state.query, row.fields, self.EXACT)]
        table = self.table
        previous = self.current.key if self.current is not None else None
        table.clear()
        fill = self._fill_width()
        index = -1
        if fill is not None and self.FILL is not None:
            index = [c.label for c in self.COLUMNS].index(self.FILL)
            column = table.columns.get(ColumnKey(self.FILL))  # keyed by label (compose)
            if column is not None:
                column.width, column.auto_width = fill, False
        for row in state.shown:
            cells = [cell.copy() for cell in row.cells]
            if row.style:
                for cell in cells:
                    cell.stylize(row.style)
            if fill is not None:
                cells[index].truncate(fill, overflow="ellipsis")
            table.add_row(*cells, key=row.key)
        self._update_title()
        keys = [row.key for row in state.shown]
        if previous in keys:
            table.move_cursor(row=keys.index(previous), scroll=True)
        self._show_detail(self.current)

    def _update_title(self) -> None:
        state = self._state
        if not state.rows:
            title = Text(state.empty)
        else:
            title = Text(f"{len(state.shown)} of {len(state.rows)} {self.NOUN}")
            if state.query_text:
                title.append("  filter: ", style="bold")
                title.append(state.query_text)
                title.append("  (/ to edit, Esc clears)", style="dim")
            if state.query.unknown_keys:
                keys = ", ".join(sorted(set(self.ALIASES)))
                title.append(
                    f"  no filter key {', '.join(state.query.unknown_keys)}: searched as text"
                    + (f"; keys: {keys}" if keys else ""),
                    style="bold yellow",
                )
        self.query_one(".table-title", Static).update(title)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail(self.current)

    def _show_detail(self, row: Row | None) -> None:
        if not self.DETAIL:
            self.highlighted(row)
            self.table.refresh_bindings()
            return
        body = self.detail(row) if row is not None else Text("")
        self.query_one(".detail-text", Static).update(body)
        self.highlighted(row)
        self.table.refresh_bindings()  # the footer says what Enter does on this row

    def detail(self, row: Row) -> RenderableType:
        """The highlighted row in full (literal Text: trace strings are never markup)."""
        return Text("")

    def highlighted(self, row: Row | None) -> None:
        """Hook for screens that react to the cursor (the step plot)."""
        return None
