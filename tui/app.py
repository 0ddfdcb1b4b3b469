"""The `diag tui` app: six screens as tabs, a `/` filter, and finding-to-evidence jumps.

The app paints first and loads after: a worker thread reads the events and runs the analyzers
(stage one, shown as soon as it is done), then parses the Kineto windows for the Kernels and
Offload screens (stage two), reporting progress in the status line. The data model is built
apart from the UI (tui/loader.py); the screens only render it.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Input, ProgressBar, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from diag.errors import DiagError
from diag.trace import parallel
from diag.trace.format import RUNS_DIR
from diag.trace.printable import printable

from .cache import CacheView
from .cells import Text
from .compiles import CompilesView
from .evidence import evidence_for
from .kernels import KernelsView
from .loader import KernelData, TraceData, load_events, load_kernels
from .messages import OpenEvidence
from .offload import OffloadView
from .overview import OverviewView
from .steps import StepsView
from .table_view import TableView

#: (pane id, tab label); the digit is the key that shows the screen.
SCREENS = (
    ("overview", "1 Overview"),
    ("steps", "2 Steps"),
    ("compiles", "3 Compiles"),
    ("kernels", "4 Kernels"),
    ("offload", "5 Offload"),
    ("cache", "6 Cache"),
)


def _many_processes(path: Path) -> bool:
    """More than one recorded process (ranks): the loader may read them in a worker pool."""
    try:
        return sum(1 for run in (path / RUNS_DIR).iterdir() for _ in run.iterdir()) > 1
    except OSError:
        return False


class _Cancelled(Exception):
    """The app is closing: stop loading at the next progress report."""


class DiagApp(App[None]):
    """Read what diag found in a trace directory, and the evidence behind each finding."""

    CSS_PATH = "diag.tcss"
    TITLE = "diag"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("slash", "open_filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("b", "go_back", "Back"),
        *(
            Binding(str(index), f"show_tab('{pane}')", label.split()[1], show=False)
            for index, (pane, label) in enumerate(SCREENS, 1)
        ),
    ]

    def __init__(self, path: Path, against: Path | None = None) -> None:
        super().__init__()
        self.path = path
        self.against = against
        self.data: TraceData | None = None
        self.loaded = False
        self.error: str | None = None
        self._back_to = "overview"
        if _many_processes(path) or (against is not None and _many_processes(against)):
            parallel.prepare_for_threads()  # before Textual replaces sys.stderr

    # --- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="status"):
            yield Static(self._status("loading"), id="status-text")
            yield ProgressBar(id="progress", total=None, show_eta=False, show_percentage=False)
        with TabbedContent(id="tabs", initial="overview"):
            with TabPane(SCREENS[0][1], id="overview"):
                yield OverviewView(id="overview-view")
            with TabPane(SCREENS[1][1], id="steps"):
                yield StepsView(id="steps-view")
            with TabPane(SCREENS[2][1], id="compiles"):
                yield CompilesView(id="compiles-view")
            with TabPane(SCREENS[3][1], id="kernels"):
                yield KernelsView(id="kernels-view")
            with TabPane(SCREENS[4][1], id="offload"):
                yield OffloadView(id="offload-view")
            with TabPane(SCREENS[5][1], id="cache"):
                yield CacheView(id="cache-view")
        yield Input(
            id="filter",
            placeholder="filter: words or key:value (frame: phase: kind: ...); "
            "Enter keeps, Esc clears",
        )
        yield Footer()

    def _status(self, state: str) -> Text:
        out = Text("diag ", style="bold")
        out.append(self.path.name or str(self.path))
        if self.against is not None:
            out.append(" against ")
            out.append(self.against.name or str(self.against))
        out.append(f" · {state}")
        return out

    def view(self, pane: str) -> TableView:
        """The filterable table of a screen (the findings on the Overview)."""
        if pane == "overview":
            return self.query_one(OverviewView).findings
        return self.query_one(f"#{pane}-view", TableView)

    @property
    def active_pane(self) -> str:
        return self.query_one(TabbedContent).active or "overview"

    # --- loading -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.view("overview").table.focus()
        # Start the worker after the first paint, so its parsing never delays it.
        self.call_after_refresh(self._start_loading)

    def _start_loading(self) -> None:
        self.run_worker(self._load, thread=True, exclusive=True, group="load", name="load")

    def _load(self) -> None:
        worker = get_current_worker()

        def progress(what: str, fraction: float | None) -> None:
            if worker.is_cancelled:
                raise _Cancelled
            self.call_from_thread(self._progress, what, fraction)

        try:
            data = load_events(self.path, self.against, progress)
        except _Cancelled:
            return
        except DiagError as exc:
            self.call_from_thread(self._failed, exc.message)
            return
        except Exception as exc:  # a reader bug must not leave a traceback over the UI
            self.call_from_thread(self._failed, f"{type(exc).__name__}: {exc}")
            return
        self.call_from_thread(self._show_events, data)
        try:
            kernels = load_kernels(data, progress)
        except _Cancelled:
            return
        except DiagError as exc:
            kernels = KernelData(error=exc.message)
        except Exception as exc:  # a corrupt Kineto file: the other screens stay usable
            kernels = KernelData(error=f"{type(exc).__name__}: {exc}")
        self.call_from_thread(self._show_kernels, data, kernels)

    def _progress(self, what: str, fraction: float | None) -> None:
        self.query_one("#status-text", Static).update(self._status(f"loading: {what}"))
        bar = self.query_one(ProgressBar)
        if fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=round(fraction * 100))

    def _failed(self, message: str) -> None:
        self.error = message
        self.loaded = True
        self.query_one(ProgressBar).display = False
        self.query_one("#status-text", Static).update(self._status("could not load"))
        self.notify(printable(message), title="diag", severity="error", markup=False, timeout=30)
        for pane, _ in SCREENS:
            self.view(pane).set_empty(f"could not load: {message}")

    def _show_events(self, data: TraceData) -> None:
        self.data = data
        self.query_one(OverviewView).show(data)
        self.query_one(StepsView).show(data)
        self.query_one(CompilesView).show(data)
        self.query_one(CacheView).show(data)
        for pane in ("kernels", "offload"):
            self.view(pane).set_empty("loading Kineto windows...")
        status = self._status(f"{self._summary(data)} · loading Kineto windows")
        self.query_one("#status-text", Static).update(status)

    def _show_kernels(self, data: TraceData, kernels: KernelData) -> None:
        data.kernels = kernels
        self.query_one(OverviewView).show(data)
        self.query_one(KernelsView).show(kernels, kernels.reference)
        self.query_one(OffloadView).show(kernels)
        self.query_one(ProgressBar).display = False
        self.query_one("#status-text", Static).update(self._status(self._summary(data)))
        self.loaded = True

    def _summary(self, data: TraceData) -> str:
        runs = " + ".join(data.trace.runs)
        errors = sum(1 for f in data.findings if f.severity == "error")
        return f"{runs} · {len(data.findings)} finding(s), {errors} error(s)"

    # --- navigation --------------------------------------------------------------------------

    def action_show_tab(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        self._focus_table(pane)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._hide_filter()
        pane = event.pane.id or "overview"
        focused = self.focused
        if focused is None or pane not in {a.id for a in focused.ancestors if a.id}:
            self._focus_table(pane)

    def _focus_table(self, pane: str) -> None:
        # Focus now, not after a refresh: TabbedContent shows the pane of whatever gains
        # focus, so a late focus call would switch back to a pane the person already left.
        self.view(pane).table.focus()

    def on_open_evidence(self, message: OpenEvidence) -> None:
        finding = message.finding
        target = evidence_for(finding)
        if target is None:
            self.notify(
                f"{finding.analyzer}: the evidence is the finding's text on the Overview",
                markup=False,
            )
            return
        self._back_to = self.active_pane
        self.query_one(TabbedContent).active = target.tab
        view = self.view(target.tab)
        view.apply_filter(target.query)
        if target.select:
            view.select(target.select)
        self._focus_table(target.tab)

    def action_go_back(self) -> None:
        self.action_show_tab(self._back_to if self._back_to != self.active_pane else "overview")

    # --- the / filter ------------------------------------------------------------------------

    def action_open_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = self.view(self.active_pane).query_text
        box.add_class("-shown")
        self.call_after_refresh(box.focus)  # it can take focus once it is displayed

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter" and event.input.has_class("-shown"):
            self.view(self.active_pane).apply_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._hide_filter()
            self._focus_table(self.active_pane)

    def action_clear_filter(self) -> None:
        self.view(self.active_pane).apply_filter("")
        self._hide_filter()
        self._focus_table(self.active_pane)

    def _hide_filter(self) -> None:
        self.query("#filter").remove_class("-shown")
