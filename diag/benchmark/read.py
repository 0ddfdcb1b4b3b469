"""Trials read from a bench directory, or straight from `--config NAME=TRACE_DIR,...`."""

from __future__ import annotations

from pathlib import Path

from diag.benchmark.layout import BenchManifest, read_bench
from diag.benchmark.spec import ConfigSpec
from diag.benchmark.tables import BenchTables, build_tables
from diag.benchmark.trial import Trial, load_trial


def bench_trials(manifest: BenchManifest) -> list[Trial]:
    """Every trial of the manifest that has a trace, in run order."""
    trials: list[Trial] = []
    for entry in sorted(manifest.entries, key=lambda e: e.order):
        path = manifest.trace_path(entry)
        if entry.status is None and not path.exists():
            continue  # not run yet (an interrupted bench)
        trial = load_trial(entry.config, entry.trial, path)
        if trial.usable and entry.status == "failed-to-start":
            trial.problem = "the command could not start"
        trials.append(trial)
    return trials


def bench_tables(path: Path) -> tuple[BenchManifest, BenchTables]:
    manifest = read_bench(path)
    return manifest, build_tables(manifest.config_names(), bench_trials(manifest))


def spec_tables(specs: list[ConfigSpec]) -> BenchTables:
    """Tables of recordings given on the command line, read where they are."""
    trials = [
        load_trial(spec.name, number, trace)
        for number in range(1, max(len(s.traces) for s in specs) + 1)
        for spec in specs
        if number <= len(spec.traces)
        for trace in [spec.traces[number - 1]]
    ]
    return build_tables([s.name for s in specs], trials)
