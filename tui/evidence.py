"""Where a finding's evidence lives: the screen, the filter that shows it, the row to select.

One table for every analyzer, as a pure function of the Finding, so a jump is the same filter a
person could type (and clear with Esc). Kernel-level findings carry their region or step in
`data`; missing keys degrade to a wider filter, never to an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diag.findings.model import Finding

from .filtering import quote


@dataclass(frozen=True)
class Evidence:
    tab: str  # pane id: steps, compiles, kernels, offload, cache
    query: str  # the filter to apply there
    select: str = ""  # a filter naming the row to put the cursor on, among those shown


def _term(key: str, value: Any) -> str:
    if isinstance(value, (list, tuple)):
        values = [str(v) for v in value if v is not None and str(v)]
        if not values:
            return ""
        return f"{key}:" + ",".join(quote(v) for v in values)
    if value is None or str(value) == "":
        return ""
    return f"{key}:{quote(str(value))}"


def _join(*terms: str) -> str:
    return " ".join(t for t in terms if t)


def _first(values: Any) -> Any:
    return values[0] if isinstance(values, list) and values else None


def evidence_for(finding: Finding) -> Evidence | None:
    """The evidence screen for a finding, or None when no screen holds more than its text."""
    data = finding.data
    run = _term("run", finding.run)
    name = finding.analyzer
    if name == "live-compile":
        if data.get("compile_ids"):
            return Evidence(
                "compiles",
                _join(
                    run, _term("frame", data.get("frame")), _term("request", data.get("request_id"))
                ),
                _term("id", _first(data.get("compile_ids"))),
            )
        if "compiles" in data:  # warmup compiles
            return Evidence("compiles", _join(run, "phase:warmup"))
        return Evidence("steps", _join(run, "phase:live"))  # warmup coverage: the live shapes
    if name == "guard-churn":
        return Evidence(
            "compiles",
            _join(run, _term("frame", data.get("frame")), _term("guard", data.get("source"))),
            _term("id", _first(data.get("compile_ids"))),
        )
    if name == "recompile-limit":
        return Evidence(
            "compiles",
            _join(run, _term("frame", data.get("frame"))),
            _term("id", data.get("compile_id")),
        )
    if name == "graph-breaks":
        return Evidence(
            "compiles",
            _join(run, _term("id", data.get("compile_ids"))),
            _term("id", _first(data.get("compile_ids"))),
        )
    if name == "step0-spike":
        return Evidence("steps", _join(run, _term("request", data.get("request_id"))), "step:0")
    if name == "warmup-hygiene":
        return Evidence("steps", _join(run, _term("request", data.get("requests"))))
    if name == "cache-bloat":
        frame = _term("frame", data.get("frame"))
        return Evidence("cache", _join(run, frame), frame)
    if name == "kernel-routing":
        region = _term("region", data.get("region"))
        return Evidence("kernels", region, region)
    if name == "offload-bound":
        first = _first(data.get("steps"))
        select = ""
        if isinstance(first, dict):
            select = _join(
                _term("request", first.get("request_id")), _term("step", first.get("step"))
            )
        return Evidence("offload", _join(run, "bound:yes"), select)
    return None
