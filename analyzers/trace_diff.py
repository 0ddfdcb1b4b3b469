"""trace-diff: what differs between two plain profiler traces beyond their kernels' names.

Why: `diag analyze --kineto A --against B` compares two traces nobody labelled eager or
compiled; kernel-routing says which kernels one runs and the other does not, but the reasons a
pair differs are often elsewhere, and HTA's TraceDiff shows them: another GPU architecture
(kernel times do not compare across GPUs), thousands more copies of one direction, more time in
NCCL collectives. This analyzer reports those, from the profiled steps of each trace, as one
info finding; it stays quiet when the traces agree on all of them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from diag.findings.model import Finding
from diag.trace.run import RunData, Trace

from .common import format_seconds

ANALYZER = "trace-diff"

#: A count or a time differs when it moves by this share of the larger side, and at least:
SHARE = 0.10
MIN_COPIES = 100
MIN_NCCL_S = 1e-3


def analyze(trace: Trace) -> list[Finding]:
    if trace.manifest.get("format") != "kineto" or "against" not in trace.runs:
        return []
    this, other = trace.runs.get("compiled"), trace.runs["against"]
    if this is None or not this.profiles or not other.profiles:
        return []
    ours, theirs = _totals(this), _totals(other)
    names = (_file(this), _file(other))
    facts, evidence = _compare(ours, theirs, names)
    if not facts:
        return []
    return [
        Finding(
            id=f"{ANALYZER}:summary",
            analyzer=ANALYZER,
            severity="info",
            title=f"{names[0]} against {names[1]}: " + "; ".join(facts),
            evidence=evidence,
            fix="Compare like with like before reading kernel differences as a regression: the "
            "same GPU model, the same copy pattern and the same collectives; where one of these "
            "differs, the difference is its own cause of the time gap.",
            run=this.label,
            data={"this": ours, "against": theirs},
        )
    ]


def _file(run: RunData) -> str:
    profiles = run.profiles or []
    return profiles[0].window.rsplit("/", 1)[-1] if profiles else run.label


def _totals(run: RunData) -> dict[str, Any]:
    profiles = run.profiles or []
    copies: Counter[str] = Counter()
    copy_s: Counter[str] = Counter()
    kernel_s = nccl_s = 0.0
    for profile in profiles:
        for activity in profile.activities:
            if activity.kind == "memcpy":
                way = activity.direction or "other"
                copies[way] += 1
                copy_s[way] += activity.dur / 1e6
            elif activity.kind == "kernel":
                kernel_s += activity.dur / 1e6
                if "nccl" in activity.name.lower():
                    nccl_s += activity.dur / 1e6
    devices = sorted({d for p in profiles for d in p.devices})
    return {
        "steps": len(profiles),
        "devices": devices,
        "copies": dict(copies),
        "copy_s": {k: round(v, 6) for k, v in copy_s.items()},
        "kernel_s": round(kernel_s, 6),
        "nccl_s": round(nccl_s, 6),
    }


def _moved(a: float, b: float, floor: float) -> bool:
    return abs(a - b) >= max(floor, SHARE * max(abs(a), abs(b)))


def _compare(
    ours: dict[str, Any], theirs: dict[str, Any], names: tuple[str, str]
) -> tuple[list[str], list[str]]:
    facts: list[str] = []
    evidence = [
        f"profiled steps: {names[0]} {ours['steps']}, {names[1]} {theirs['steps']}; kernel time "
        f"in them {format_seconds(ours['kernel_s'])} against {format_seconds(theirs['kernel_s'])}"
    ]
    if ours["devices"] and theirs["devices"] and ours["devices"] != theirs["devices"]:
        facts.append(
            f"different GPU ({', '.join(ours['devices'])} vs {', '.join(theirs['devices'])})"
        )
        evidence.append(
            f"GPU: {names[0]} ran on {', '.join(ours['devices'])}, {names[1]} on "
            f"{', '.join(theirs['devices'])}: kernel times do not compare across architectures"
        )
    for way in sorted(set(ours["copies"]) | set(theirs["copies"])):
        a, b = ours["copies"].get(way, 0), theirs["copies"].get(way, 0)
        if _moved(a, b, MIN_COPIES):
            facts.append(f"{a - b:+,} {way} copies")
            evidence.append(
                f"{way} copies: {a:,} ({format_seconds(ours['copy_s'].get(way, 0.0))}) against "
                f"{b:,} ({format_seconds(theirs['copy_s'].get(way, 0.0))})"
            )
    if _moved(ours["nccl_s"], theirs["nccl_s"], MIN_NCCL_S):
        delta = ours["nccl_s"] - theirs["nccl_s"]
        facts.append(f"{'+' if delta > 0 else '-'}{format_seconds(abs(delta))} in NCCL kernels")
        evidence.append(
            f"NCCL kernel time: {format_seconds(ours['nccl_s'])} against "
            f"{format_seconds(theirs['nccl_s'])}"
        )
    return facts, evidence
