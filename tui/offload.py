"""Offload: per profiled step, where the step's time went (compute, copies, syncs, idle).

A step is offload-bound when copies and syncs dominate it: compiling more cannot help there,
and `gain` is the most compiling could save (the compute share). Reads diag.evidence.offload's
StepOffload objects by attribute.
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType

from .cells import Text, field, lines, seconds, size, text
from .loader import KernelData
from .table_view import Column, Row, TableView

BAR = 12
LEGEND = (
    "bar: █ compute  ▒ copies  ░ syncs, as shares of the step's span (copies may overlap compute)"
)


def share_bar(item: Any, width: int = BAR) -> Text:
    """Compute, copies and syncs as shares of the span; scaled down when they overlap past it."""
    span = float(item.span_s or 0.0)
    parts = [
        ("█", float(item.kernel_s or 0.0), ""),
        ("▒", float(sum((item.copy_s or {}).values())), "yellow"),
        ("░", float(item.sync_s or 0.0), "red"),
    ]
    total = max(span, sum(value for _, value, _ in parts))
    out = Text(no_wrap=True)
    if total <= 0:
        return out
    used = 0
    for glyph, value, style in parts:
        cells = min(width - used, round(value / total * width))
        out.append(glyph * cells, style=style)
        used += cells
    out.append("·" * (width - used), style="dim")
    return out


class OffloadView(TableView):
    COLUMNS = (
        Column("run", 8),
        Column("request"),
        Column("step", 4),
        Column("span", 7),
        Column("compute", 7),
        Column("copies", 7),
        Column("syncs", 7),
        Column("idle", 7),
        Column("bound", 5),
        Column("gain", 7),
        Column("share", BAR),
    )
    ALIASES = {
        "run": "run",
        "request": "request",
        "req": "request",
        "step": "step",
        "bound": "bound",
    }
    EXACT = frozenset({"run", "step", "bound"})
    NOUN = "profiled steps"

    def show(self, kernels: KernelData) -> None:
        if kernels.error:
            self.set_empty(f"kernel data unavailable: {kernels.error}")
            return
        rows = [
            self._row(label, item) for label, items in kernels.offload.items() for item in items
        ]
        if kernels.note:
            empty = kernels.note
        elif kernels.profiled_steps:
            empty = (
                f"{kernels.profiled_steps} profiled step(s), none on a GPU: no copies or syncs "
                "to break down (a CPU run)"
            )
        else:
            empty = "no profiled step to break down"
        self.set_rows(rows, empty=empty)

    def _row(self, label: str, item: Any) -> Row:
        copies = float(sum((item.copy_s or {}).values()))
        return Row(
            key=f"{label}|{item.pid}|{item.request_id}|{item.step}",
            cells=[
                text(label),
                text(item.request_id),
                text(item.step),
                text(seconds(item.span_s)),
                text(seconds(item.kernel_s)),
                text(seconds(copies)),
                text(seconds(item.sync_s)),
                text(seconds(item.idle_s)),
                text("BOUND" if item.bound else "", "bold red" if item.bound else ""),
                text(seconds(item.max_gain_s)),
                share_bar(item),
            ],
            fields={
                "run": label,
                "request": str(item.request_id),
                "step": str(item.step),
                "bound": "yes" if item.bound else "no",
            },
            payload=(label, item),
        )

    def detail(self, row: Row) -> RenderableType:
        label, item = row.payload
        head = Text(f"{label} run, request {item.request_id}, step {item.step}", style="bold")
        if item.rank is not None:
            head.append(f", rank {item.rank}")
        parts: list[Text | str] = [
            head,
            field("span", seconds(item.span_s)),
            field("compute", f"{seconds(item.kernel_s)} (GPU busy with kernels)"),
        ]
        for direction, value in sorted((item.copy_s or {}).items()):
            moved = size((item.copy_bytes or {}).get(direction))
            parts.append(
                field(f"copy {direction}", f"{seconds(value)}" + (f", {moved}" if moved else ""))
            )
        parts.append(field("syncs", f"{seconds(item.sync_s)} (CPU blocked in synchronize)"))
        parts.append(field("idle", f"{seconds(item.idle_s)} (GPU doing nothing in the span)"))
        if item.bound:
            parts.append(
                Text(
                    f"offload-bound: copies and syncs dominate; compiling can save at most "
                    f"{seconds(item.max_gain_s)} here",
                    style="bold",
                )
            )
        parts.append(Text(LEGEND, style="dim"))
        return lines(*parts)
