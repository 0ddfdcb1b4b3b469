"""Findings with one root cause, grouped: one headline, the others as its evidence.

Why: one guard that churns recompiles a frame in two live requests; guard-churn names the
cause, live-compile reports each recompile, cache-bloat the entries they left behind and
step0-spike what each cost its request: six findings, one fix. Grouping keeps every finding
(ids, counts, JSON and `check` allowlists are unchanged) and marks the echoes: each related
finding's `group` is its headline's id, the headline's `related` lists them.

Which belong together: findings of the same run and process that name the same compile
(`data.compile_ids`), a step0-spike of the request whose CUDA graphs cudagraphs reports, the
step-0 reloads (step0-spike, cause offload-reload) and the copy-bound steps (offload-bound) under
warmup-hygiene's finding that diffusers' enable_model_cpu_offload() empties the cache after every
request (one switch does all three), and,
under a guard-churn or recompile-limit headline, a cache-bloat of the same frame (the entries
the churn left), and several frames' live-compile findings at one step of one request whose
causes are size guards (one new input shape: the first frame heads). A recompile that
live-compile explains by another guard than the churned one (an unwarmed width recompiles on
a size guard, and the churned config guard fails beside it) is not the churn's: it heads its
own group. The headline is the most causal analyzer present (HEADLINE_ORDER); INFO findings
are context and never grouped; a finding joins one group only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from diag.findings.model import Finding
from diag.findings.rankset import tag_ranks
from diag.trace.printable import one_line

#: Who heads a group: the cause before its consequences.
HEADLINE_ORDER = (
    "recompile-limit",
    "guard-churn",
    "live-compile",
    "cudagraphs",
    "rank-divergence",
    "cache-bloat",
    "warmup-hygiene",
    "step0-spike",
    "offload-bound",
)
#: Headlines whose frame-level echoes (the cache entries left behind) join them.
_FRAME_HEADLINES = ("guard-churn", "recompile-limit")
_FRAME_ECHOES = ("cache-bloat",)


def group_findings(findings: list[Finding]) -> list[Finding]:
    """The same findings, in the same order, with `group` and `related` set on grouped ones
    (those of an earlier grouping are recomputed: the TUI groups again when its second stage
    adds the kernel findings)."""
    findings = [
        dataclasses.replace(f, related=[], group=None) if f.related or f.group else f
        for f in findings
    ]
    candidates = [f for f in findings if f.severity != "info" and f.analyzer in HEADLINE_ORDER]
    candidates.sort(key=lambda f: (HEADLINE_ORDER.index(f.analyzer), f.id))
    taken: set[str] = set()
    groups: dict[str, list[str]] = {}
    for head in candidates:
        if head.id in taken:
            continue
        compiles = _caused(head, candidates)
        members = [
            f.id
            for f in candidates
            if f is not head
            and f.id not in taken
            and f.id not in groups
            and _echoes(head, f, compiles)
        ]
        if members:
            groups[head.id] = members
            taken.add(head.id)
            taken.update(members)
    if not groups:
        return findings
    group_of = {member: head for head, members in groups.items() for member in members}
    return [
        dataclasses.replace(f, related=list(groups[f.id]))
        if f.id in groups
        else dataclasses.replace(f, group=group_of[f.id])
        if f.id in group_of
        else f
        for f in findings
    ]


def _caused(head: Finding, findings: list[Finding]) -> set[str]:
    """The compiles `head` is the cause of. A churned guard fails in every recompile of its
    frame, beside whatever else changed: a recompile that live-compile explains by another
    guard (a width warmup never served) has a root cause of its own."""
    compiles = _compiles(head)
    source = head.data.get("source")
    if head.analyzer != "guard-churn" or not source:
        return compiles
    for other in findings:
        guards = other.data.get("guards")
        if other.analyzer != "live-compile" or not isinstance(guards, list):
            continue
        sources = {g.get("source") for g in guards if isinstance(g, dict)}
        if sources and source not in sources and _process(other) == _process(head):
            compiles -= _compiles(other)
    return compiles


def _echoes(head: Finding, other: Finding, compiles: set[str]) -> bool:
    """Whether `other` reports a consequence of what `head` reports (`compiles`: those it
    caused)."""
    if head.run != other.run or not _same_process(head, other):
        return False
    if compiles & _compiles(other):
        return True
    if head.analyzer == "warmup-hygiene" and head.data.get("cause") == "model-offload":
        # diffusers' enable_model_cpu_offload(): the cache it empties after each request, the
        # reload at the next request's step 0 and the copies that bind those steps are one
        # switch (warmup-hygiene names it).
        return (other.analyzer, other.data.get("cause")) == ("step0-spike", "offload-reload") or (
            other.analyzer == "offload-bound" and other.data.get("diffusers_offload") == "model"
        )
    if head.analyzer == "live-compile" and other.analyzer == "live-compile":
        # Several frames (two block classes) recompiling at one step of one request on a new
        # input shape: one root cause, the request's new input (data.new_input).
        mine = head.data.get("new_input")
        return mine is not None and mine == other.data.get("new_input")
    if head.analyzer == "cudagraphs" and other.analyzer == "step0-spike":
        # A request whose graphs recorded live without a compile: its step-0 spike is theirs.
        rid = head.data.get("request_id")
        return rid is not None and rid == other.data.get("request_id")
    return (
        head.analyzer in _FRAME_HEADLINES
        and other.analyzer in _FRAME_ECHOES
        and bool(head.data.get("frame"))
        and head.data.get("frame") == other.data.get("frame")
        and _same_place(head, other)
    )


def _same_place(head: Finding, other: Finding) -> bool:
    """Same-named frames told apart by file:line: the headline's frame location (guard-churn's
    `location` is the line that reads the guarded value, its frame's is `data.frame_location`)."""
    where = head.data.get("frame_location") or head.location
    return where is None or other.location is None or where == other.location


def _same_process(head: Finding, other: Finding) -> bool:
    """Same process and run, or `other` on some of the ranks `head` holds on: a problem merged
    across ranks (diag.findings.rank_merge) heads the echo one of its ranks has alone."""
    mine, theirs = _process(head), _process(other)
    if mine == theirs:
        return True
    tag, _, run = mine.partition("@")
    other_tag, _, other_run = theirs.partition("@")
    if run != other_run:
        return False
    ranks, other_ranks = tag_ranks(tag), tag_ranks(other_tag)
    return ranks is not None and other_ranks is not None and other_ranks <= ranks


def _compiles(finding: Finding) -> set[str]:
    ids = finding.data.get("compile_ids")
    return {str(i) for i in ids} if isinstance(ids, list) else set()


def _process(finding: Finding) -> str:
    """The process and run part of a finding id (`@rank1`, `@eager`; docs/FINDINGS.md): the
    trailing `@` parts, which hold no `/` or `:` (a frame label does: `forward@file.py:383`)."""
    parts = finding.id.split("@")[1:]
    tail: list[str] = []
    for part in reversed(parts):
        if "/" in part or ":" in part:
            break
        tail.insert(0, part)
    return "@".join(tail)


def related_lines(finding: Finding, findings: Iterable[Finding]) -> list[str]:
    """Text lines for a headline's related findings, indented under it."""
    if not finding.related:
        return []
    by_id = {f.id: f for f in findings}
    lines = [f"        same root cause, {len(finding.related)} related finding(s):"]
    for rid in finding.related:
        other = by_id.get(rid)
        if other is not None:
            lines.append(
                f"          {other.severity.upper():7} [{other.analyzer}] "
                f"{one_line(other.title)} (id: {one_line(other.id)})"
            )
    return lines


def group_note(findings: list[Finding]) -> str:
    """`; 6 of them in 1 group (one root cause each)` for the count line, or empty."""
    heads = [f for f in findings if f.related]
    if not heads:
        return ""
    grouped = len(heads) + sum(len(f.related) for f in heads)
    return f"; {grouped} of them in {len(heads)} group(s), one root cause each"
