"""The bench directory: `bench.json` and one diag trace directory per trial (docs/BENCH.md).

`diag bench -o DIR` writes it, `diag bench DIR`, `diag report DIR` and `diag check --bench DIR`
read it. Every trial's trace lives inside DIR (reused recordings are copied in), so the
directory is self-contained and a reader never follows a path out of it: bench.json is input
like any trace, and a path in it that leaves DIR is refused.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from diag import __version__
from diag.errors import DiagError

BENCH_FILE = "bench.json"
FORMAT_NAME = "diag-bench"
FORMAT_VERSION = 1

STATUS_RUNNING = "running"
STATUS_COMPLETE = "complete"
STATUS_INTERRUPTED = "interrupted"


@dataclass
class TrialEntry:
    """One trial: which configuration, its number (from 1), and its trace, relative to DIR."""

    config: str
    trial: int
    trace: str
    order: int  # position in the run order (A B A B ...), from 1
    status: str | None = None  # the trace manifest's status once the trial ran
    exit_code: int | None = None
    duration_s: float | None = None
    reused_from: str | None = None  # the recording a `NAME=TRACE_DIR` trial was copied from

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "trial": self.trial,
            "trace": self.trace,
            "order": self.order,
            "status": self.status,
            "exit_code": self.exit_code,
            "duration_s": self.duration_s,
            "reused_from": self.reused_from,
        }


@dataclass
class ConfigEntry:
    name: str
    command: list[str] | None  # None: the configuration reuses recordings

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "command": self.command}


@dataclass
class BenchManifest:
    path: Path  # the bench directory
    configs: list[ConfigEntry]
    trials: int
    status: str = STATUS_RUNNING
    started: str = ""
    ended: str | None = None
    entries: list[TrialEntry] = field(default_factory=list)
    diag_version: str = __version__

    def config_names(self) -> list[str]:
        return [c.name for c in self.configs]

    def trace_path(self, entry: TrialEntry) -> Path:
        return inside(self.path, entry.trace)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "diag_version": self.diag_version,
            "status": self.status,
            "started": self.started,
            "ended": self.ended,
            "trials": self.trials,
            "configs": [c.as_dict() for c in self.configs],
            "runs": [e.as_dict() for e in self.entries],
        }

    def write(self) -> None:
        """Rewritten atomically after every trial, so an interrupted bench is still readable."""
        target = self.path / BENCH_FILE
        temp = target.with_suffix(".json.tmp")
        temp.write_text(json.dumps(self.as_dict(), indent=1) + "\n", encoding="utf-8")
        os.replace(temp, target)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def is_bench_dir(path: Path) -> bool:
    return (path / BENCH_FILE).is_file()


def inside(root: Path, relative: str) -> Path:
    """`root/relative`, or a DiagError when `relative` is absolute or leaves `root`."""
    candidate = Path(relative)
    resolved_root = root.resolve()
    if candidate.is_absolute() or ".." in candidate.parts:
        raise DiagError(f"{root / BENCH_FILE}: trace path {relative!r} leaves the bench directory")
    full = (root / candidate).resolve()
    if full != resolved_root and resolved_root not in full.parents:
        raise DiagError(f"{root / BENCH_FILE}: trace path {relative!r} leaves the bench directory")
    return root / candidate


def read_bench(path: Path) -> BenchManifest:
    """A bench directory's manifest, or a DiagError (exit 2) saying why it is not usable."""
    file = path / BENCH_FILE
    if not path.is_dir():
        raise DiagError(f"{path}: no such bench directory")
    if not file.is_file():
        raise DiagError(f"{path}: not a diag bench directory (no {BENCH_FILE})")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DiagError(f"{file}: unreadable or not JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise DiagError(f"{file}: not a diag bench manifest")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise DiagError(f"{file}: no format version")
    if version > FORMAT_VERSION:
        raise DiagError(
            f"{path}: written by a newer diag (bench format {version}; this diag reads up to "
            f"{FORMAT_VERSION}); upgrade diag"
        )
    configs = [_config(item, file) for item in _list(data.get("configs"), "configs", file)]
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise DiagError(f"{file}: a configuration name appears twice")
    entries = [_entry(item, file, names) for item in _list(data.get("runs"), "runs", file)]
    manifest = BenchManifest(
        path=path,
        configs=configs,
        trials=_int(data.get("trials"), 0),
        status=_str(data.get("status")) or STATUS_RUNNING,
        started=_str(data.get("started")) or "",
        ended=_str(data.get("ended")),
        entries=entries,
        diag_version=_str(data.get("diag_version")) or "?",
    )
    for entry in entries:
        inside(path, entry.trace)  # refuse a path out of the directory before anyone reads it
    return manifest


def _list(value: Any, key: str, file: Path) -> list[Any]:
    if not isinstance(value, list):
        raise DiagError(f"{file}: {key!r} must be a list")
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _config(item: Any, file: Path) -> ConfigEntry:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise DiagError(f"{file}: a configuration without a name")
    command = item.get("command")
    if command is not None and not (
        isinstance(command, list) and all(isinstance(a, str) for a in command)
    ):
        raise DiagError(f"{file}: configuration {item['name']!r}: command must be a list")
    return ConfigEntry(item["name"], command)


def _entry(item: Any, file: Path, names: list[str]) -> TrialEntry:
    if not isinstance(item, dict):
        raise DiagError(f"{file}: a run entry is not an object")
    config, trace = item.get("config"), item.get("trace")
    if config not in names or not isinstance(trace, str):
        raise DiagError(f"{file}: a run entry names no known configuration or trace")
    duration = item.get("duration_s")
    return TrialEntry(
        config=str(config),
        trial=_int(item.get("trial"), 0),
        trace=trace,
        order=_int(item.get("order"), 0),
        status=_str(item.get("status")),
        exit_code=item.get("exit_code") if isinstance(item.get("exit_code"), int) else None,
        duration_s=float(duration) if isinstance(duration, (int, float)) else None,
        reused_from=_str(item.get("reused_from")),
    )
