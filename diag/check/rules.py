"""The rules `diag check` applies to one trace directory (docs/CHECK.md).

- recording: the recording completed, its collectors worked, and it saw live traffic; otherwise
  a clean verdict would only mean that nothing was observed.
- live-compile: compiles inside live requests, counted against max_recompiles_after_warmup.
  Every compile counts, a first compile of a frame as much as a recompile: warmup exists so
  that traffic never waits for Dynamo, and a frame that warmup never reached stalls a request
  just the same. Compiles that only hit the recompile limit compile nothing: recompile-limit
  reports them.
- cache-entries: cache entries per code object against max_cache_entries.
- one rule per other analyzer in fail_on: its findings at fail_severity or above.
"""

from __future__ import annotations

import importlib
from collections import Counter

from diag.check.allowlist import Allowlist, Subject, compiles_subject, finding_subject
from diag.check.policy import Policy
from diag.check.text import (
    frame_location,
    frame_name,
    guard_line,
    run_suffix,
    seconds,
    trace_cwd,
    where,
)
from diag.check.verdict import FAIL, Allowed, RuleResult, Violation, merge_rank_violations
from diag.errors import EXIT_INTERNAL, DiagError
from diag.evidence.causes import cause_guard, cause_short, recompile_cause, unexplained_line
from diag.evidence.frames import label as frame_label
from diag.evidence.request_names import request_name
from diag.evidence.status import bootstrap_errors, teardown_notice, truncated_notice
from diag.findings.model import Finding
from diag.findings.rank_merge import merge_rank_findings, world_sizes
from diag.trace.format import STATUS_COMPLETE
from diag.trace.inflight import CUT_OFF
from diag.trace.paths import shown_location
from diag.trace.run import Compile, Frame, RunData, Trace

LIVE_COMPILE = "live-compile"
#: torch._dynamo.config.recompile_limit's default.
TORCH_RECOMPILE_LIMIT = 8
_SHOWN_COMPILES = 8
_SHOWN_REQUESTS = 4


def trace_rules(trace: Trace, policy: Policy, allow: Allowlist) -> list[RuleResult]:
    results = [recording_rule(trace, policy)]
    for name in policy.fail_on:
        if name == LIVE_COMPILE:
            results.append(live_compile_rule(trace, policy, allow))
        else:
            results.append(analyzer_rule(name, trace, policy, allow))
    results.append(cache_entries_rule(trace, policy, allow))
    return results


# --- recording ----------------------------------------------------------------------------------


def recording_rule(trace: Trace, policy: Policy) -> RuleResult:
    result = RuleResult("recording", "")
    status = trace.manifest.get("status")
    teardown = teardown_notice(trace) if status != STATUS_COMPLETE else None
    if teardown is not None:  # the program failed, but only after its work: say so
        result.violations.append(
            Violation(
                f"the recording did not complete (status {status!r}): {teardown.message}",
                [f"runs: {_run_statuses(trace)}", f"how: {teardown.how}"],
                key="recording:status",
            )
        )
    elif status != STATUS_COMPLETE:
        result.violations.append(
            Violation(
                f"the recording did not complete (status {status!r}): what happened after the "
                "program stopped was not observed",
                [f"runs: {_run_statuses(trace)}"],
                key="recording:status",
            )
        )
    for run in trace.runs.values():
        truncated = truncated_notice(trace, run)
        if truncated is not None:
            result.violations.append(
                Violation(
                    f"the recording of run {run.label} stopped before the program ended: what "
                    "happened after it was not observed",
                    [truncated.message[:400], f"how: {truncated.how}"],
                    key=f"recording:truncated:{run.label}",
                )
            )
        if run.collector_errors:
            shown = [
                f"{e.get('where', '?')}: {str(e.get('error', '?'))[:200]}"
                for e in run.collector_errors[:3]
            ]
            result.violations.append(
                Violation(
                    f"{len(run.collector_errors)} collector error(s) in run {run.label}: the trace "
                    "may miss compiles",
                    shown,
                    key=f"recording:collector-errors:{run.label}",
                )
            )
        if run.corrupt_lines:
            result.violations.append(
                Violation(
                    f"{run.corrupt_lines} corrupt event line(s) in run {run.label} were skipped: "
                    "what they recorded was not checked",
                    [w for w in run.warnings if "corrupt line" in w][:3],
                    key=f"recording:corrupt-lines:{run.label}",
                )
            )
        lines = bootstrap_errors(run)
        if lines:
            result.violations.append(
                Violation(
                    f"diag's collectors could not start in run {run.label}: nothing was recorded "
                    "in the processes listed",
                    [line[:200] for line in lines[:3]],
                    key=f"recording:bootstrap:{run.label}",
                )
            )
    live = [r for run in trace.runs.values() for r in run.requests if r.phase == "live"]
    live_steps = sum(r.step_count for r in live)
    if policy.require_live_requests and not live:
        adapters = sorted({a for run in trace.runs.values() for a in run.adapters})
        result.violations.append(
            Violation(
                "no live request was recorded, so nothing after warmup was checked",
                [
                    f"adapters that reported steps: {', '.join(adapters) or 'none'}",
                    "mark requests with diag.api or --request-fn/--warmup-fn, or set "
                    "require_live_requests = false",
                ],
                key="recording:no-live-requests",
            )
        )
    result.summary = f"status {status}, " + _live_counts(trace, len(live), live_steps)
    if result.violations:
        result.status = FAIL
    return result


def _live_counts(trace: Trace, requests: int, steps: int) -> str:
    """`2 live request(s), 8 live step(s) on each of 2 ranks`: every rank serves every request,
    so ranks (and runs) that served alike are counted once; else the totals."""
    served: set[tuple[int, int]] = set()
    ranks: set[int] = set()
    for run in trace.runs.values():
        for pid in {r.pid for r in run.requests}:
            live = [r for r in run.requests if r.pid == pid and r.phase == "live"]
            served.add((len(live), sum(r.step_count for r in live)))
            process = next((p for p in run.processes if p.pid == pid), None)
            ranks.add(process.rank if process is not None and process.rank is not None else -1)
    runs = len(trace.runs)
    ranked = len(ranks) > 1 and -1 not in ranks
    if len(served) == 1 and (ranked or (len(ranks) == 1 and runs > 1)):
        each_requests, each_steps = next(iter(served))
        return (
            f"{each_requests} live request(s), {each_steps} live step(s)"
            + (f" on each of {len(ranks)} ranks" if len(ranks) > 1 else "")
            + (f" in each of {runs} runs" if runs > 1 else "")
        )
    return f"{requests} live request(s), {steps} live step(s)" + (
        f", {runs} runs" if runs > 1 else ""
    )


def _run_statuses(trace: Trace) -> str:
    runs = trace.manifest.get("runs")
    items = [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []
    return (
        ", ".join(
            f"{r.get('label')} {r.get('status')}"
            + (f" (exit {r.get('exit_code')})" if r.get("exit_code") else "")
            + (f" ({r.get('signal')})" if r.get("signal") else "")
            for r in items
        )
        or "none recorded"
    )


# --- live-compile -------------------------------------------------------------------------------


def live_compile_rule(trace: Trace, policy: Policy, allow: Allowlist) -> RuleResult:
    cwd = trace_cwd(trace)
    result = RuleResult(LIVE_COMPILE, "")
    groups: dict[tuple[str, int, Frame | None], list[Compile]] = {}
    runs: dict[str, RunData] = {}
    failed = 0
    for run in trace.runs.values():
        for item in run.compiles:
            # A limit hit is recompile-limit's rule, a failed compile compile-failure's.
            failed += item.live and item.result == "failed"
            if not item.live or item.result in ("recompile_limit", "failed"):
                continue
            entry = (
                allow.match(compiles_subject([item], frame_location(item.frame, cwd)))
                if allow.entries
                else None
            )
            if entry is not None:
                result.allowed.append(
                    Allowed(
                        f"{frame_name(run, item)} compile {item.compile_id} at {where(item)}"
                        + run_suffix(run.label),
                        entry.reason,
                        entry.index,
                    )
                )
                continue
            groups.setdefault((run.label, item.pid, item.frame), []).append(item)
            runs[run.label] = run
    count = sum(len(items) for items in groups.values())
    limit = policy.max_recompiles_after_warmup
    result.summary = (
        f"{count} compile(s) during live requests (max {limit})"
        + (f"; {len(result.allowed)} allowed" if result.allowed else "")
        + (f"; {failed} more failed (compile-failure)" if failed else "")
    )
    if count > limit:
        result.status = FAIL
        by_run: dict[str, list[tuple[Violation, int | None]]] = {}
        for (label, pid, _), items in groups.items():
            rank = next((p.rank for p in runs[label].processes if p.pid == pid), None)
            violation = _live_violation(trace, runs[label], items, cwd)
            by_run.setdefault(label, []).append((violation, rank))
        worlds = world_sizes(trace)
        for label, ranked in by_run.items():
            # 63 ranks that recompiled alike: one violation naming them (diag.findings.rank_merge).
            result.violations.extend(merge_rank_violations(ranked, worlds.get(label)))
    return result


def _live_violation(trace: Trace, run: RunData, items: list[Compile], cwd: str | None) -> Violation:
    """One frame's compiles during live requests (of one process)."""
    first = items[0]
    frame = frame_name(run, first)
    verb = "recompiled" if any(c.is_recompile for c in items) else "compiled"
    total = sum(c.duration_s for c in items if isinstance(c.duration_s, (int, float)))
    message = (
        f"{frame} {verb} {len(items)} time(s) during live requests ({_positions(run, items)}), "
        f"{seconds(total)} of compile{run_suffix(run.label)}"
    )
    if any(c.result == CUT_OFF for c in items):
        message += "; the process ended before a compile finished"
    evidence = [_compile_line(run, c) for c in items[:_SHOWN_COMPILES]]
    if len(items) > _SHOWN_COMPILES:
        evidence.append(f"... and {len(items) - _SHOWN_COMPILES} more compile(s)")
    if len(run.processes) > 1:
        tag = run.process_tag(first.pid)
        evidence.append(f"process {tag} (pid {first.pid})" if tag else f"process pid {first.pid}")
    evidence.append(f"details: diag analyze {trace.path} --only live-compile")
    return Violation(
        message,
        evidence,
        location=frame_location(first.frame, cwd),
        key=f"{LIVE_COMPILE}:{frame}{run_suffix(run.label).strip()}",
    )


def _positions(run: RunData, items: list[Compile]) -> str:
    """`r0 step 0, r1 steps 0 and 2`: where the compiles landed, a few requests at most."""
    steps: dict[str, list[int]] = {}
    for item in items:
        found = steps.setdefault(request_name(run, item.pid, item.request_id), [])
        if item.step is not None and item.step not in found:
            found.append(item.step)
    parts = []
    for rid, indexes in list(steps.items())[:_SHOWN_REQUESTS]:
        if not indexes:
            parts.append(rid)
        elif len(indexes) == 1:
            parts.append(f"{rid} step {indexes[0]}")
        else:
            listed = ", ".join(str(i) for i in indexes[:-1])
            parts.append(f"{rid} steps {listed} and {indexes[-1]}")
    if len(steps) > _SHOWN_REQUESTS:
        parts.append(f"{len(steps) - _SHOWN_REQUESTS} more request(s)")
    return ", ".join(parts)


def _compile_line(run: RunData, item: Compile) -> str:
    line = f"{where(item)}: compile {item.compile_id} took {seconds(item.duration_s)}"
    if item.result == CUT_OFF:
        line = (
            f"{where(item)}: compile {item.compile_id} cut off: no compile_end, the process's "
            f"events stop {seconds(item.duration_s)} after it started"
        )
    elif item.result != "ok":
        line += f" (result {item.result})"
    cause = recompile_cause(run, item)
    if cause is None:
        return line + "; first compile of the frame: warmup never reached it"
    if cause.guard is None:
        return f"{line}; {cause_short(cause)}"
    line += f"; failing guard: {guard_line(cause.guard)}"
    older = len(item.guards) - 1
    if older:
        line += f" ({older} other cache entr{'y' if older == 1 else 'ies'} rejected the call too)"
    unexplained = unexplained_line(run, item)
    return f"{line}; {unexplained}" if unexplained else line


# --- cache-entries ------------------------------------------------------------------------------


def cache_entries_rule(trace: Trace, policy: Policy, allow: Allowlist) -> RuleResult:
    cwd = trace_cwd(trace)
    limit = policy.max_cache_entries
    result = RuleResult("cache-entries", "")
    largest: tuple[int, str] = (0, "")
    for run in trace.runs.values():
        counts = run.cache_entries()
        if not counts:
            continue
        by_frame: dict[Frame, list[Compile]] = {}
        for item in run.compiles:
            if item.frame is not None:
                by_frame.setdefault(item.frame, []).append(item)
        shapes = {tuple(r.shape) for r in run.requests if isinstance(r.shape, list)}
        for frame, entries in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].name)):
            name = frame_label(run, frame)
            largest = max(largest, (entries, name))
            if entries <= limit:
                continue
            compiles = by_frame.get(frame, [])
            location = frame_location(frame, cwd)
            message = f"{name} holds {entries} cache entries (max {limit})" + run_suffix(run.label)
            entry = (
                allow.match(
                    compiles_subject(compiles, location)
                    if compiles
                    else Subject(frame=frame.name, location=location)
                )
                if allow.entries
                else None
            )
            if entry is not None:
                result.allowed.append(Allowed(message, entry.reason, entry.index))
                continue
            result.violations.append(
                Violation(
                    message,
                    _cache_evidence(trace, run, entries, len(shapes), compiles),
                    location=location,
                    key=f"cache-entries:{name}{run_suffix(run.label).strip()}",
                )
            )
    result.summary = (
        f"largest: {largest[1]} with {largest[0]} entries (max {limit})"
        if largest[1]
        else f"no cache entries recorded (max {limit})"
    )
    if result.violations:
        result.status = FAIL
        result.summary = f"{len(result.violations)} code object(s) over {limit} entries; " + (
            result.summary
        )
    return result


def _cache_evidence(
    trace: Trace, run: RunData, entries: int, shapes: int, compiles: list[Compile]
) -> list[str]:
    phases = Counter(c.phase for c in compiles)
    evidence = [
        f"{entries} entries for {shapes} distinct request shape(s)",
        f"compiles of this frame: {phases.get('warmup', 0)} in warmup, "
        f"{phases.get('live', 0)} live",
    ]
    sources = Counter(
        f"{g.source or g.kind} ({g.kind})"
        for c in compiles
        if (g := cause_guard(run, c)) is not None
    )
    if sources:
        evidence.append(
            "guards whose failure added entries: "
            + "; ".join(f"{text} x{n}" for text, n in sources.most_common(5))
        )
    if entries >= TORCH_RECOMPILE_LIMIT:
        evidence.append(
            f"at torch's default recompile limit ({TORCH_RECOMPILE_LIMIT}) the next variation "
            "of this frame (a call no entry's guards accept) runs eagerly, with no further "
            "compile or message"
        )
    evidence.append(f"details: diag analyze {trace.path} --only cache-bloat")
    return evidence


# --- analyzers ----------------------------------------------------------------------------------


def analyzer_rule(name: str, trace: Trace, policy: Policy, allow: Allowlist) -> RuleResult:
    failing = ("error",) if policy.fail_severity == "error" else ("error", "warning")
    result = RuleResult(name, "")
    below = 0
    for finding in _findings(name, trace):
        if finding.severity not in failing:
            below += 1
            continue
        entry = allow.match(finding_subject(finding)) if allow.entries else None
        if entry is not None:
            result.allowed.append(Allowed(finding.title, entry.reason, entry.index))
            continue
        result.violations.append(_finding_violation(finding, trace_cwd(trace)))
    severity = " or ".join(failing)
    count = len(result.violations)
    result.summary = (
        f"{count} finding(s) at severity {severity}"
        if count
        else f"no finding at severity {severity}"
    )
    if below:
        result.summary += f" ({below} of lower severity)"
    if result.allowed:
        result.summary += f"; {len(result.allowed)} allowed"
    if count:
        result.status = FAIL
    return result


def _findings(name: str, trace: Trace) -> list[Finding]:
    analyze = importlib.import_module("diag.analyzers").get_analyzer(name)
    try:
        findings: list[Finding] = analyze(trace)
    except Exception as exc:  # an analyzer tripping on odd data must not print a traceback
        # ... nor pass for bad input (exit 2): the trace was read, the fault is diag's (exit 3,
        # never 1, which CI would read as a verdict).
        raise DiagError(
            f"{trace.path}: the {name} analyzer failed on this trace "
            f"({type(exc).__name__}: {exc}; a bug in diag)",
            exit_code=EXIT_INTERNAL,
        ) from exc
    return merge_rank_findings(findings, world_sizes(trace))


def _finding_violation(finding: Finding, cwd: str | None) -> Violation:
    suffix = run_suffix(finding.run)
    return Violation(
        finding.title + suffix,
        [*finding.evidence, *([f"fix: {finding.fix}"] if finding.fix else [])],
        location=shown_location(finding.location, cwd) if finding.location else None,
        key=finding.id,
    )
