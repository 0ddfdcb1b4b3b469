"""`diag record --metrics-join`: diag's live counters on the program's own Prometheus endpoint.

A server that already exposes Prometheus metrics (LightX2V's `--metric_port`) is scraped by
its fleet as it is; its registry is where diag's counters are seen with no new scrape target.
When the program imports `prometheus_client` (diag never imports it), a collector is
registered in its default `REGISTRY`. At each scrape it reads the lines this process appended
to its own event file since the last scrape (diag/live/metrics.py: the same counters, by the
same rules, as `--metrics-port`) and yields them, names prefixed `diag_`. Any failure, at
registration or at a scrape, leaves the program's own metrics as they were: the collector then
yields nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from diag.live.metrics import METRICS, EventTail, LiveCounters
from diag.trace.format import EVENTS_FILE

if TYPE_CHECKING:
    from .protocol import Session


class DiagCollector:
    """A prometheus_client custom collector (`collect()` yields metric families)."""

    def __init__(self, session: Session, core: Any) -> None:
        self.session = session
        self.core = core
        self.path = session.proc_dir / EVENTS_FILE
        self.tail = EventTail(session.proc_dir)
        self.counters = LiveCounters()
        self.lock = threading.Lock()

    def describe(self) -> list[Any]:
        """Nothing to describe up front: the registry then never calls collect() to check names
        at registration (diag's names are its own, prefixed `diag_`)."""
        return []

    def collect(self) -> Iterator[Any]:
        try:
            families = self._families()
        except Exception as exc:  # noqa: BLE001 - the program's endpoint must keep working
            self.session.collector_error("metrics_join.collect", exc)
            return iter(())
        return iter(families)

    def _families(self) -> list[Any]:
        with self.lock:
            self.tail.read_file(self.counters, self.session.label, self.path)
            families = []
            for name, (kind, text) in METRICS.items():
                series = self.counters.series(name)
                keys = [key for key, _ in next(iter(series), ())]
                if kind == "counter":
                    family = self.core.CounterMetricFamily(
                        f"diag_{name.removesuffix('_total')}", text, labels=keys
                    )
                else:
                    family = self.core.GaugeMetricFamily(f"diag_{name}", text, labels=keys)
                for labels, value in sorted(series.items()):
                    family.add_metric([v for _, v in labels], value)
                families.append(family)
            return families


def _register(session: Session, module: ModuleType) -> None:
    # The metric families live in a module prometheus_client's own import loads: diag imports
    # nothing the program did not.
    core = sys.modules.get("prometheus_client.metrics_core")
    registry = getattr(module, "REGISTRY", None)
    if core is not None and registry is not None:
        registry.register(DiagCollector(session, core))


def install(session: Session) -> None:
    """Called by the session only under --metrics-join (ENV_METRICS_JOIN)."""
    from .importhook import on_import

    on_import(
        "prometheus_client",
        lambda module: session.install("metrics_join", _register, session, module),
    )
