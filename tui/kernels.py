"""Kernels: per compiled region, the kernels of the reference run (eager baseline or
`--against`) beside the compiled run's, with the regions whose kernels diverge marked.

Reads diag.evidence.regions' RegionComparison objects (attributes only, so this module does not
import
the kernel-level code and the UI works on a diag without it).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table

from .cells import Text, field, lines, seconds, text
from .loader import KernelData
from .table_view import Column, Row, TableView

DIVERGENT = "DIVERGENT"


def _names(items: Any) -> str:
    return ",".join(str(getattr(k, "name", "")) for k in items or [])


class KernelsView(TableView):
    COLUMNS = (
        Column("region"),
        Column("device", 6),
        Column("reference", 9),
        Column("compiled", 9),
        Column("routing", 9),
        Column("missing"),
    )
    ALIASES = {
        "region": "region",
        "device": "device",
        "divergent": "divergent",
        "kernel": "kernel",
        "missing": "missing",
    }
    EXACT = frozenset({"divergent"})
    NOUN = "regions"
    _reference = "reference"

    def show(self, kernels: KernelData, reference: str | None) -> None:
        if kernels.error:
            self.set_empty(f"kernel data unavailable: {kernels.error}")
            return
        rows = [self._row(region) for region in kernels.regions]
        why = kernels.note or (
            "no reference run to compare against: record with --baseline eager, "
            "or open with --against DIR"
            if reference is None
            else "no compiled region found in the profiled steps"
        )
        self._reference = reference or "reference"
        self.set_rows(rows, empty=why)

    def _row(self, region: Any) -> Row:
        divergent = bool(getattr(region, "divergent", False))
        missing = list(getattr(region, "missing", []) or [])
        return Row(
            key=f"{region.region}|{region.device}",
            cells=[
                text(region.region),
                text(region.device),
                text(seconds(region.reference_s)),
                text(seconds(region.compiled_s)),
                text(DIVERGENT if divergent else "same", "bold red" if divergent else ""),
                text(", ".join(missing)),
            ],
            fields={
                "region": str(region.region),
                "device": str(region.device),
                "divergent": "yes" if divergent else "no",
                "missing": ",".join(missing),
                "kernel": _names(region.reference) + "," + _names(region.compiled),
            },
            payload=region,
        )

    def detail(self, row: Row) -> RenderableType:
        region = row.payload
        reference = self._reference
        head = Text(str(region.region), style="bold")
        what = "kernel time" if region.device == "gpu" else "time in the region"
        head.append(
            f"  ({region.device}) {what} per step: {reference} "
            f"{seconds(region.reference_s)}, compiled {seconds(region.compiled_s)}"
        )
        parts: list[Text | str] = [head]
        if region.divergent:
            parts.append(
                Text(f"{DIVERGENT}: the compiled run routes this region differently", "bold")
            )
        if region.missing:
            parts.append(field("missing under compile", ", ".join(map(str, region.missing))))
        if region.replacements:
            parts.append(field("in their place", ", ".join(map(str, region.replacements))))
        return Group(lines(*parts), kernel_table(region, reference))


def kernel_table(region: Any, reference: str) -> Table:
    """The region's kernels, reference and compiled side by side (every cell literal Text)."""
    table: dict[str, dict[str, Any]] = {}
    for side in ("reference", "compiled"):
        for stat in getattr(region, side, []) or []:
            entry = table.setdefault(str(stat.name), {"kind": str(stat.kind)})
            entry[side] = stat
    grid = Table(box=None, pad_edge=False, show_edge=False, expand=True)
    grid.add_column(Text("kernel"), overflow="fold", ratio=1)
    grid.add_column(Text("kind"), no_wrap=True)
    grid.add_column(Text(reference), justify="right", no_wrap=True)
    grid.add_column(Text("compiled"), justify="right", no_wrap=True)
    missing = set(map(str, getattr(region, "missing", []) or []))
    new = set(map(str, getattr(region, "replacements", []) or []))

    def cell(stat: Any) -> Text:
        if stat is None:
            return Text("-", style="dim")
        return Text(f"{stat.count}x {seconds(stat.total_s)}")

    def weight(entry: dict[str, Any]) -> float:
        return max(
            float(getattr(entry.get(s), "total_s", 0.0) or 0.0) for s in ("reference", "compiled")
        )

    for name, entry in sorted(table.items(), key=lambda item: -weight(item[1])):
        mark = " (missing)" if name in missing else (" (new)" if name in new else "")
        label = Text(name, style="bold" if mark else "")
        label.append(mark, style="bold red" if mark else "")
        grid.add_row(
            label, Text(entry["kind"]), cell(entry.get("reference")), cell(entry.get("compiled"))
        )
    return grid
