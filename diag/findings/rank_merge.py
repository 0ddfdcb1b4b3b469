"""Findings that repeat on many ranks, merged: one per problem, naming the ranks that hold it.

Why: most analyzers report per process, so when 63 of 64 ranks recompile alike `diag analyze`
lists 63 copies of each finding (192 for three problems) and the one rank that did something
else is lost among them. After the analyzers run, findings that differ only by rank become one:
same analyzer, severity, run, location and fix, the same id apart from its `@rankN`, the same
`data` apart from its numbers, and the same title and evidence apart from their numbers. The
merged finding keeps the lowest rank's evidence (the representative), says `on 63 of 64 ranks:
0-31, 33-63` in its title and first evidence line, writes a figure that differs across ranks as
its range in the title (`took 840 ms to 861 ms`) and names the ranks at each end in evidence;
its id ends `@ranks0-31,33-63` (diag.findings.rankset.rank_tags), and `data` gains `on_ranks` and
`rank_ids` (the per-rank ids it stands for).

Anything else that differs (another guard or value, another severity, a cause one rank has and
the others lack) keeps findings apart, so a problem of one rank is never folded into the
others'; such a one-rank finding says its rank (`on rank 0 of 64`) when its id is merged on
other ranks. rank-divergence compares ranks itself and is left as it is. `diag check` merges
its live-compile violations the same way (diag.check.verdict.merge_rank_violations).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from diag.findings.model import Finding
from diag.findings.rankset import rank_list, rank_tags, ranks_text

if TYPE_CHECKING:
    from diag.trace.run import Trace

#: Analyzers whose findings already compare ranks (one finding names many ranks).
CROSS_RANK = frozenset({"rank-divergence"})
#: Most "differs across ranks" lines per merged finding.
_SHOWN_FIGURES = 6

#: A figure: a number with its unit when one follows (`725 ms`, `50.9x`, `1.20 s`, `87%`).
_FIGURE = re.compile(
    r"\d+(?:\.\d+)?(?:\s?(?:ns|us|µs|ms|s|B|KB|MB|GB|KiB|MiB|GiB|x|%)(?![A-Za-z0-9_]))?"
)
_VALUE = re.compile(r"\d+(?:\.\d+)?")
#: A number that names the process (`rank0`, `pid 200000`), not a figure of the problem.
_IDENTITY = re.compile(r"(?:\brank|\bpid)\s?$", re.IGNORECASE)
_SCALE = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "KiB": 1024.0,
    "MiB": 1024.0**2,
    "GiB": 1024.0**3,
}
#: The one-rank part of a finding id: `...@rank32` or `...@rank32@eager`.
_RANK_TAG = re.compile(r"@rank(\d+)(?=@|$)")


@dataclass(frozen=True)
class Entry:
    """One rank's report of something: what it says, and what else must match to merge."""

    rank: int | None  # None: not mergeable (no rank, or an analyzer that compares ranks)
    key: Hashable
    title: str
    evidence: list[str]


@dataclass(frozen=True)
class Merged:
    """Entries that differ only by rank (`indexes` into the input, the representative first)."""

    indexes: list[int]
    ranks: list[int]
    title: str
    evidence: list[str]


def merge_entries(entries: list[Entry], world: int | None) -> list[Merged]:
    """The entries in their order, those alike but for rank merged at the first one's place;
    an entry merged with no other comes back as it was."""
    buckets: dict[Hashable, list[int]] = {}
    for index, entry in enumerate(entries):
        bucket: Hashable = (
            ("alone", index)
            if entry.rank is None
            else (entry.key, _skeleton(entry.title), tuple(map(_skeleton, entry.evidence)))
        )
        found = buckets.get(bucket, [])
        if any(entries[i].rank == entry.rank for i in found):
            # The same rank twice: two reports of that rank, not one problem on two ranks.
            bucket = ("again", index)
        buckets.setdefault(bucket, []).append(index)
    merged = []
    for indexes in buckets.values():
        if len(indexes) == 1:
            only = entries[indexes[0]]
            ranks = [] if only.rank is None else [only.rank]
            merged.append(Merged(indexes, ranks, only.title, list(only.evidence)))
            continue
        indexes.sort(key=lambda i: entries[i].rank or 0)
        merged.append(_merge([entries[i] for i in indexes], indexes, world))
    return merged


def _merge(members: list[Entry], indexes: list[int], world: int | None) -> Merged:
    ranks = [m.rank for m in members if m.rank is not None]
    head = members[0]
    title, figures = _combine([m.title for m in members], ranks)
    for line, _ in enumerate(head.evidence):
        figures.extend(_combine([m.evidence[line] for m in members], ranks)[1])
    # One line per spread: the same figures on the same ranks are one quantity said twice
    # (a compile's time in the title, its request's line and its own).
    spreads: dict[str, str] = {}
    for context, spread in figures:
        spreads.setdefault(spread, f'"{context} ...": {spread}')
    shown = list(spreads.values())
    more = len(shown) - _SHOWN_FIGURES
    shown = shown[:_SHOWN_FIGURES] + ([f"... and {more} more figure(s)"] if more > 0 else [])
    where = on_ranks(ranks, world)
    evidence = [
        f"{where}; the evidence below is rank {ranks[0]}'s",
        *(f"across the ranks, {item}" for item in shown),
        *head.evidence,
    ]
    return Merged(indexes, ranks, f"{title} ({where})", evidence)


def on_ranks(ranks: Iterable[int], world: int | None) -> str:
    """`on 63 of 64 ranks: 0-31, 33-63`, `on all 64 ranks`, `on both ranks`, `on rank 0 of 64`."""
    values = sorted(set(ranks))
    if world and len(values) == world:
        return "on both ranks" if world == 2 else f"on all {world} ranks"
    if len(values) == 1:
        return f"on rank {values[0]}" + (f" of {world}" if world else "")
    if world:
        return f"on {len(values)} of {world} ranks: {rank_list(values)}"
    return f"on {ranks_text(values)}"


def _skeleton(text: str) -> str:
    return _FIGURE.sub("#", text)


def _combine(texts: list[str], ranks: list[int]) -> tuple[str, list[tuple[str, str]]]:
    """The first text with each figure that differs across `texts` written as its range, and
    for each such figure the words before it and its spread over the ranks (`725 ms (ranks
    0-8) to 781 ms (rank 9), median 725 ms`). The texts share a skeleton."""
    slots = [list(_FIGURE.finditer(t)) for t in texts]
    head = texts[0]
    parts: list[str] = []
    figures: list[tuple[str, str]] = []
    last = 0
    for position, match in enumerate(slots[0]):
        parts.append(head[last : match.start()])
        last = match.end()
        values = [s[position].group(0) for s in slots]
        if len(set(values)) == 1 or _IDENTITY.search(
            head[max(0, match.start() - 6) : match.start()]
        ):
            parts.append(match.group(0))
            continue
        ordered = sorted(zip(values, ranks, strict=True), key=lambda vr: _magnitude(vr[0]))
        low, high = ordered[0][0], ordered[-1][0]
        if _magnitude(low) == _magnitude(high):
            parts.append(match.group(0))
            continue
        parts.append(f"{low} to {high}")
        at_low = [r for v, r in ordered if _magnitude(v) == _magnitude(low)]
        at_high = [r for v, r in ordered if _magnitude(v) == _magnitude(high)]
        median = ordered[(len(ordered) - 1) // 2][0]
        spread = f"{low} ({ranks_text(at_low)}) to {high} ({ranks_text(at_high)}), median {median}"
        figures.append((_context(head, match.start()), spread))
    parts.append(head[last:])
    return "".join(parts), figures


def _magnitude(figure: str) -> float:
    number = _VALUE.match(figure)
    value = float(number.group(0)) if number else 0.0
    unit = figure[number.end() :].strip() if number else ""
    return value * _SCALE.get(unit, 1.0)  # seconds, bytes, counts, ratios and shares as they are


def _context(text: str, end: int) -> str:
    """A few words before a figure, to say which one it is."""
    words = [w.rstrip(",;:") for w in text[:end].split()]
    words = [w[1:] if w.startswith("(") and ")" not in w else w for w in words]
    return " ".join([w for w in words if w][-3:]) or "value"


# --- findings -----------------------------------------------------------------------------------


def world_sizes(trace: Trace) -> dict[str, int]:
    """Run label -> how many ranks its processes have (runs without ranks are left out)."""
    sizes = {}
    for label, run in trace.runs.items():
        ranks = {p.rank for p in run.processes if isinstance(p.rank, int)}
        if ranks:
            sizes[label] = len(ranks)
    return sizes


def merge_rank_findings(findings: list[Finding], worlds: Mapping[str, int]) -> list[Finding]:
    """The findings, those alike on several ranks merged into one (module docstring)."""
    entries = [_finding_entry(f) for f in findings]
    if sum(1 for e in entries if e.rank is not None) < 2:
        return findings
    placed: list[tuple[int, Finding]] = []
    renamed: dict[str, str] = {}
    families: dict[str, list[int]] = {}  # id but for the rank -> places in `placed`
    for runs in _by_run(findings):
        world = worlds.get(findings[runs[0]].run)
        for merged in merge_entries([entries[i] for i in runs], world):
            members = [findings[runs[i]] for i in merged.indexes]
            finding = members[0]
            if len(members) > 1:
                finding = _merged_finding(members, merged)
                renamed.update((m.id, finding.id) for m in members)
            if merged.ranks:
                families.setdefault(_RANK_TAG.sub("@rank*", members[0].id), []).append(len(placed))
            placed.append((min(runs[i] for i in merged.indexes), finding))
    for places in families.values():
        if len(places) < 2:
            continue
        # One problem that differs on some ranks: the one-rank findings of it name their rank
        # too, or two alike titles would not say which is which.
        for index in places:
            first, finding = placed[index]
            if "on_ranks" not in finding.data:
                placed[index] = (first, _named_rank(finding, worlds.get(finding.run)))
    ordered = [finding for _, finding in sorted(placed, key=lambda pair: pair[0])]
    return [_renaming(f, renamed) for f in ordered] if renamed else ordered


def _named_rank(finding: Finding, world: int | None) -> Finding:
    rank = int(next(_RANK_TAG.finditer(finding.id)).group(1))
    return dataclasses.replace(
        finding,
        title=f"{finding.title} ({on_ranks([rank], world)})",
        data={**finding.data, "on_ranks": [rank], "rank_ids": [finding.id]},
    )


def _renaming(finding: Finding, renamed: dict[str, str]) -> Finding:
    """`finding` with the ids it names in its text (`the compile(s) themselves are reported as
    errors (live-compile:f:r1@rank0)`) replaced by the merged findings' ids."""
    texts = [finding.title, finding.fix, *finding.evidence]
    if not any("@rank" in text for text in texts):
        return finding

    def swap(text: str) -> str:
        for old, new in renamed.items():
            if old in text:
                text = re.sub(re.escape(old) + r"(?!\d)", new.replace("\\", r"\\"), text)
        return text

    return dataclasses.replace(
        finding,
        title=swap(finding.title),
        fix=swap(finding.fix),
        evidence=[swap(line) for line in finding.evidence],
    )


def _by_run(findings: list[Finding]) -> list[list[int]]:
    groups: dict[str, list[int]] = {}
    for index, finding in enumerate(findings):
        groups.setdefault(finding.run, []).append(index)
    return list(groups.values())


def _finding_entry(finding: Finding) -> Entry:
    tags = list(_RANK_TAG.finditer(finding.id))
    if finding.analyzer in CROSS_RANK or len(tags) != 1:
        return Entry(None, None, finding.title, finding.evidence)
    tag = tags[0]
    base = finding.id[: tag.start()] + "@rank*" + finding.id[tag.end() :]
    key = (
        finding.analyzer,
        finding.severity,
        finding.run,
        base,
        finding.location,
        finding.fix,
        json.dumps(_shape(finding.data), sort_keys=True, default=str),
    )
    return Entry(int(tag.group(1)), key, finding.title, finding.evidence)


def _shape(value: Any) -> Any:
    """`data` with every number replaced by 0 (strings, lengths and keys kept): what must match."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return 0
    if isinstance(value, dict):
        return {str(k): _shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shape(v) for v in value]
    return str(value)


def _merged_finding(members: list[Finding], merged: Merged) -> Finding:
    head = members[0]
    tag = next(_RANK_TAG.finditer(head.id))
    return dataclasses.replace(
        head,
        id=head.id[: tag.start()] + "@" + rank_tags(merged.ranks) + head.id[tag.end() :],
        title=merged.title,
        evidence=merged.evidence,
        data={**head.data, "on_ranks": merged.ranks, "rank_ids": [m.id for m in members]},
        related=[],
        group=None,
        # Each rank's claims stay checkable: the merged text stands for all of them.
        claims=[c for m in members for c in m.claims],
    )
