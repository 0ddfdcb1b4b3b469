"""`diag check`: the CI gate (policy, baseline comparison, verdict renderers).

Imports only the standard library, msgspec, the trace reader and the analyzers its policy
names, so that a CI step pays well under a second for it (bench/check_latency.py);
docs/CHECK.md documents the rules, the policy keys and the exit codes.
"""

from __future__ import annotations

from pathlib import Path

from diag.check.allowlist import Allowlist
from diag.check.baseline import baseline_rules
from diag.check.policy import Policy
from diag.check.rules import trace_rules
from diag.check.verdict import Verdict
from diag.errors import DiagError
from diag.trace.inputs import input_warnings
from diag.trace.load import load_trace
from diag.trace.run import Trace


def load_checked(path: Path, what: str = "trace") -> Trace:
    """A trace directory with at least one run, or a DiagError (exit 2) saying why not."""
    try:
        trace = load_trace(path)
    except OSError as exc:
        raise DiagError(f"{path}: cannot read the {what}: {exc}") from None
    if not trace.runs:
        raise DiagError(f"{path}: the {what} holds no runs (was the recording interrupted?)")
    return trace


def run_check(
    trace_dir: Path | None,
    policy: Policy,
    baseline_dir: Path | None = None,
    bench_dir: Path | None = None,
) -> Verdict:
    """The verdict on a trace (with its baseline) and/or a `diag bench` directory."""
    if trace_dir is None and bench_dir is None:
        raise DiagError("nothing to check: give TRACE_DIR, --bench DIR, or both")
    allow = Allowlist(policy.allow)
    rules = []
    warnings: list[str] = []
    if trace_dir is not None:
        trace = load_checked(trace_dir)
        baseline = load_checked(baseline_dir, "baseline") if baseline_dir is not None else None
        rules = trace_rules(trace, policy, allow)
        warnings = input_warnings(trace)
        if baseline is not None:
            rules.extend(baseline_rules(trace, baseline, policy, allow))
            warnings += [f"baseline: {w}" for w in input_warnings(baseline)]
    elif baseline_dir is not None:
        raise DiagError("--baseline compares a TRACE_DIR: give one")
    if bench_dir is not None:
        from diag.check.bench import bench_rules

        rules.extend(bench_rules(bench_dir, policy))
    return Verdict(
        trace=str(trace_dir if trace_dir is not None else bench_dir),
        policy=policy.source,
        baseline=str(baseline_dir) if baseline_dir is not None else None,
        rules=rules,
        unused_allow=allow.unused() if trace_dir is not None else [],
        warnings=warnings,
    )
