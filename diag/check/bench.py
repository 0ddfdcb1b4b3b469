"""`diag check --bench DIR`: gate a `diag bench` directory (docs/CHECK.md, docs/BENCH.md).

Three rules, from the same tables `diag bench` prints (diag.benchmark.tables):

- bench-validity: every configuration keeps at least `bench_min_valid_trials` trials whose
  measured window held steady state; the left-out trials are the evidence, with why;
- bench-regression: no configuration is slower than the baseline configuration
  (`bench_baseline`, else the first) by more than `bench_max_regression`, judged on the 95%
  interval over trials: it fails only when the whole interval lies past the allowance, so noise
  alone never fails it; an interval that straddles it is reported, not failed;
- bench-variable-resolution: every configuration that served several shapes passes the
  variable-resolution test (after the first shape, no compile and step 0 within the noise).

The judged window is from step 6 when every compared configuration has valid trials there
(the later window is past lingering start-up, the posts' reason for it), else from step 3.
"""

from __future__ import annotations

from pathlib import Path

from diag.benchmark.read import bench_tables
from diag.benchmark.render import pct_interval
from diag.benchmark.tables import WINDOWS, BenchTables, PairRow, shape_name
from diag.check.policy import Policy
from diag.check.verdict import FAIL, SKIP, RuleResult, Violation
from diag.errors import DiagError
from diag.evidence.stats import reduction_interval


def bench_rules(bench_dir: Path, policy: Policy) -> list[RuleResult]:
    _, tables = bench_tables(bench_dir)
    if not tables.configs:
        raise DiagError(f"{bench_dir}: the bench has no configuration")
    baseline = policy.bench_baseline or tables.configs[0]
    if baseline not in tables.configs:
        raise DiagError(
            f"{policy.source}: bench_baseline {baseline!r} is not a configuration of "
            f"{bench_dir} ({', '.join(tables.configs)})"
        )
    start = _judged_window(tables, policy.bench_min_valid_trials)
    return [
        _validity(tables, start, policy.bench_min_valid_trials),
        _regression(tables, baseline, start, policy.bench_max_regression),
        _variable_resolution(tables),
    ]


def _judged_window(tables: BenchTables, minimum: int) -> int:
    late = WINDOWS[-1]
    if all(len(s.windows[late].trial_means) >= minimum for s in tables.shapes):
        return late
    return WINDOWS[0]


def _validity(tables: BenchTables, start: int, minimum: int) -> RuleResult:
    result = RuleResult("bench-validity", "")
    short: list[str] = []
    for stats in tables.shapes:
        window = stats.windows[start]
        kept = len(window.trial_means)
        if kept >= minimum:
            continue
        where = f"{stats.config} {shape_name(stats.shape)}"
        short.append(where)
        evidence = [f"trial {n}: [{f.kind}] {f.text}" for n, why in window.excluded for f in why]
        evidence.extend(note for note in tables.notes if note.startswith(f"{stats.config} trial "))
        if window.empty:
            evidence.append(
                f"no steps from step {start} on in trial(s) {', '.join(map(str, window.empty))}"
            )
        result.violations.append(
            Violation(
                f"{where}: {kept} valid trial(s) from step {start} on, {minimum} needed",
                evidence or ["no trial of this configuration could be used"],
                key=f"bench-validity:{stats.config}:{shape_name(stats.shape)}",
            )
        )
    left_out = sum(len(s.windows[start].excluded) for s in tables.shapes)
    result.summary = (
        f"{len(tables.shapes) - len(short)} of {len(tables.shapes)} configuration/shape(s) "
        f"keep at least {minimum} valid trial(s) from step {start} on; {left_out} trial "
        "window(s) left out as not steady state"
    )
    if result.violations:
        result.status = FAIL
    return result


def _regression(tables: BenchTables, baseline: str, start: int, allowed: float) -> RuleResult:
    result = RuleResult("bench-regression", "")
    rows: list[tuple[PairRow, float, float | None]] = []
    undecided: list[str] = []
    for other in tables.configs:
        if other == baseline:
            continue
        for base in (s for s in tables.shapes if s.config == baseline):
            mine = tables.stats(other, base.shape)
            if mine is None:
                continue
            ours, theirs = mine.windows[start].trial_means, base.windows[start].trial_means
            interval = reduction_interval(theirs, ours)
            row = PairRow(baseline, other, base.shape, start, interval, "")
            name = f"{other} {shape_name(base.shape)}"
            if interval is None or interval.low is None or interval.high is None:
                undecided.append(f"{name} ({len(ours)} and {len(theirs)} valid trial(s))")
                continue
            slower_low = -interval.high  # the least slowdown the interval allows
            rows.append((row, -interval.mean, slower_low))
            if slower_low > allowed:
                result.violations.append(
                    Violation(
                        f"{name} is {-interval.mean:.1%} slower than {baseline} (allowed "
                        f"{allowed:.0%}; 95% interval of the slowdown {-interval.high:+.1%} .. "
                        f"{-interval.low:+.1%})",
                        [
                            f"steady mean from step {start} on: {other} "
                            f"{_ms(ours)} over {len(ours)} trial(s), {baseline} "
                            f"{_ms(theirs)} over {len(theirs)} trial(s)",
                            f"reduction (baseline - other) / baseline: {pct_interval(interval)}",
                            f"clock: {tables.clock.name}",
                        ],
                        key=f"bench-regression:{other}:{shape_name(base.shape)}",
                    )
                )
    if not rows:
        result.status = SKIP
        result.summary = (
            "nothing to compare with "
            + baseline
            + (f": too few valid trials for {', '.join(undecided)}" if undecided else "")
        )
        return result
    worst = max(rows, key=lambda item: item[1])
    straddles = [
        f"{r.other} {shape_name(r.shape)}"
        for r, point, low in rows
        if low is not None and low <= allowed < point
    ]
    result.summary = (
        f"against {baseline} from step {start} on (allowed {allowed:.0%} slower, on the 95% "
        f"interval): worst {worst[0].other} {shape_name(worst[0].shape)} "
        f"{worst[1]:+.1%}"
        + (f"; past the allowance but within noise: {', '.join(straddles)}" if straddles else "")
        + (f"; not judged: {', '.join(undecided)}" if undecided else "")
    )
    if result.violations:
        result.status = FAIL
    return result


def _ms(values: list[float]) -> str:
    return f"{sum(values) / len(values) * 1e3:.2f} ms" if values else "-"


def _variable_resolution(tables: BenchTables) -> RuleResult:
    result = RuleResult("bench-variable-resolution", "")
    if not tables.variable_resolution:
        result.status = SKIP
        result.summary = "no configuration served more than one shape"
        return result
    for variable in tables.variable_resolution:
        if variable.passed is False:
            result.violations.append(
                Violation(
                    f"{variable.config}: the variable-resolution test fails ({variable.verdict})",
                    [f"phase {p.index}: {text}" for p in variable.phases for text in p.problems],
                    key=f"bench-variable-resolution:{variable.config}",
                )
            )
    verdicts = [f"{v.config}: {v.verdict.split(':')[0]}" for v in tables.variable_resolution]
    result.summary = "; ".join(verdicts)
    if result.violations:
        result.status = FAIL
    elif all(v.passed is None for v in tables.variable_resolution):
        result.status = SKIP
    return result
