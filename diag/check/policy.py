"""The check policy: which rules fail the gate, their limits, and the allowlist (docs/CHECK.md).

Read from `--policy FILE`, else `diag.toml` ([check]) or `pyproject.toml` ([tool.diag.check]) in
the current directory, else the defaults. A policy is a CI contract, so a typo must not pass
silently: unknown keys, wrong types and allowlist entries without a reason are errors (exit 2),
each reported in one line that names the key and the file.
"""

from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.errors import DiagError

#: The analyzers that fail the check by default. `live-compile` is evaluated by counting live
#: compiles against `max_recompiles_after_warmup` (rules.py), the others from their findings.
#: compile-failure and crash are there so that a run whose compile failed and fell back to eager
#: (`suppress_errors`), or that crashed, never passes: at the default `fail_severity`, only their
#: errors fail (a stopped-by-hand run is info, a dead thread a warning).
#: cudagraphs fails on its errors: a CUDA graph recorded in a live request, the CUDA-graph twin
#: of a live compile (under mode="reduce-overhead" a request can stall on recordings with no
#: recompile at all).
DEFAULT_FAIL_ON = (
    "live-compile",
    "recompile-limit",
    "guard-churn",
    "compile-failure",
    "crash",
    "cudagraphs",
    "stances",
)
#: torch's default recompile limit is 8: a frame holding 8 entries runs its next variation
#: eagerly, so 7 is the most a frame may hold by default.
DEFAULT_MAX_CACHE_ENTRIES = 7
#: Step medians of one program moved by up to 18% between processes on an H200 (README):
#: a tighter default would make CI flaky.
DEFAULT_STEP_TIME_TOLERANCE = 0.25
#: `--bench`: the most a configuration may be slower than the baseline configuration (0.05 =
#: 5%), judged on the 95% interval: it fails only when the whole interval lies past this.
DEFAULT_BENCH_MAX_REGRESSION = 0.05
#: `--bench`: fewer valid trials than this leaves a configuration's interval unknown.
DEFAULT_BENCH_MIN_VALID_TRIALS = 2
SEVERITIES = ("error", "warning")
PHASES = ("warmup", "live")

_KEYS = (
    "max_recompiles_after_warmup",
    "max_cache_entries",
    "fail_on",
    "fail_severity",
    "step_time_tolerance",
    "require_live_requests",
    "bench_baseline",
    "bench_max_regression",
    "bench_min_valid_trials",
    "allow",
)
_ALLOW_KEYS = ("frame", "guard", "phase", "reason")


@dataclass(frozen=True)
class AllowEntry:
    """An accepted exception: everything it sets must match, and it must say why."""

    index: int  # from 1, in file order
    reason: str
    frame: str | None = None  # fnmatch glob on the frame name or its file:line
    guard: re.Pattern[str] | None = None  # searched in a guard's kind, source and text
    phase: str | None = None  # warmup or live

    def describe(self) -> str:
        parts = [f"frame={self.frame!r}"] if self.frame is not None else []
        if self.guard is not None:
            parts.append(f"guard={self.guard.pattern!r}")
        if self.phase is not None:
            parts.append(f"phase={self.phase!r}")
        return f"allow #{self.index} ({', '.join(parts)})"


@dataclass(frozen=True)
class Policy:
    source: str = "built-in defaults"
    max_recompiles_after_warmup: int = 0
    max_cache_entries: int = DEFAULT_MAX_CACHE_ENTRIES
    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    fail_severity: str = "error"
    step_time_tolerance: float = DEFAULT_STEP_TIME_TOLERANCE
    require_live_requests: bool = True
    #: `--bench`: the configuration the others are held against (None: the first given).
    bench_baseline: str | None = None
    bench_max_regression: float = DEFAULT_BENCH_MAX_REGRESSION
    bench_min_valid_trials: int = DEFAULT_BENCH_MIN_VALID_TRIALS
    allow: tuple[AllowEntry, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        """The resolved policy, for the JSON verdict."""
        return {
            "source": self.source,
            "max_recompiles_after_warmup": self.max_recompiles_after_warmup,
            "max_cache_entries": self.max_cache_entries,
            "fail_on": list(self.fail_on),
            "fail_severity": self.fail_severity,
            "step_time_tolerance": self.step_time_tolerance,
            "require_live_requests": self.require_live_requests,
            "bench_baseline": self.bench_baseline,
            "bench_max_regression": self.bench_max_regression,
            "bench_min_valid_trials": self.bench_min_valid_trials,
            "allow": [
                {
                    "frame": e.frame,
                    "guard": e.guard.pattern if e.guard is not None else None,
                    "phase": e.phase,
                    "reason": e.reason,
                }
                for e in self.allow
            ],
        }


def find_policy(explicit: Path | None, cwd: Path) -> Policy:
    """The policy `diag check` uses: the file given, else the first of diag.toml and
    pyproject.toml in `cwd` that holds a check table, else the defaults."""
    if explicit is not None:
        if not explicit.exists():
            raise DiagError(f"{explicit}: no such policy file")
        if not explicit.is_file():
            raise DiagError(f"{explicit}: not a file")
        table = _check_table(explicit, required=True)
        assert table is not None
        return parse_policy(table, _describe(explicit))
    for name in ("diag.toml", "pyproject.toml"):
        path = cwd / name
        if path.is_file():
            table = _check_table(path, required=False)
            if table is not None:
                return parse_policy(table, _describe(path))
    return Policy()


def _describe(path: Path) -> str:
    where = "[tool.diag.check]" if path.name == "pyproject.toml" else "[check]"
    return f"{path} {where}"


def _check_table(path: Path, required: bool) -> dict[str, Any] | None:
    """The check table of a pyproject.toml ([tool.diag.check]) or of any other file ([check])."""
    document = _read_toml(path)
    if path.name == "pyproject.toml":
        tool = document.get("tool")
        diag = tool.get("diag") if isinstance(tool, dict) else None
        table = diag.get("check") if isinstance(diag, dict) else None
        where = "[tool.diag.check]"
    else:
        for key in document:
            if key != "check":
                hint = " (put the check keys under [check])" if key in _KEYS else ""
                raise DiagError(f"{path}: unknown key {key!r}{hint}")
        table = document.get("check")
        where = "[check]"
    if table is None:
        if required:
            raise DiagError(f"{path}: no {where} table")
        return None
    if not isinstance(table, dict):
        raise DiagError(f"{path}: {where} must be a table")
    return table


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as handle:
            document: dict[str, Any] = tomllib.load(handle)
            return document
    except tomllib.TOMLDecodeError as exc:
        raise DiagError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DiagError(f"{path}: cannot read: {exc}") from None


def parse_policy(table: dict[str, Any], source: str) -> Policy:
    """A Policy from a check table, or a DiagError naming the first bad key."""
    for key in table:
        if key not in _KEYS:
            raise DiagError(f"{source}: unknown key {key!r}{_suggest(key, _KEYS)}")
    defaults = Policy()
    return Policy(
        source=source,
        max_recompiles_after_warmup=_count(
            table, "max_recompiles_after_warmup", defaults.max_recompiles_after_warmup, source
        ),
        max_cache_entries=_count(table, "max_cache_entries", defaults.max_cache_entries, source),
        fail_on=_fail_on(table.get("fail_on", list(defaults.fail_on)), source),
        fail_severity=_choice(table, "fail_severity", defaults.fail_severity, SEVERITIES, source),
        step_time_tolerance=_tolerance(table, defaults.step_time_tolerance, source),
        require_live_requests=_flag(
            table, "require_live_requests", defaults.require_live_requests, source
        ),
        bench_baseline=_name(table, "bench_baseline", source),
        bench_max_regression=_share(
            table, "bench_max_regression", defaults.bench_max_regression, source
        ),
        bench_min_valid_trials=_count(
            table, "bench_min_valid_trials", defaults.bench_min_valid_trials, source
        ),
        allow=_allow(table.get("allow", []), source),
    )


def _suggest(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"


def _count(table: dict[str, Any], key: str, default: int, source: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DiagError(f"{source}: {key} must be a whole number >= 0, not {value!r}")
    return value


def _flag(table: dict[str, Any], key: str, default: bool, source: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise DiagError(f"{source}: {key} must be true or false, not {value!r}")
    return value


def _choice(
    table: dict[str, Any], key: str, default: str, choices: tuple[str, ...], source: str
) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise DiagError(f"{source}: {key} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _tolerance(table: dict[str, Any], default: float, source: str) -> float:
    value = table.get("step_time_tolerance", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise DiagError(
            f"{source}: step_time_tolerance must be a number >= 0 (0.25 = 25% slower), "
            f"not {value!r}"
        )
    return float(value)


def _name(table: dict[str, Any], key: str, source: str) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise DiagError(f"{source}: {key} must be a configuration name, not {value!r}")
    return value


def _share(table: dict[str, Any], key: str, default: float, source: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise DiagError(f"{source}: {key} must be a number >= 0 (0.05 = 5% slower), not {value!r}")
    return float(value)


def _fail_on(value: Any, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DiagError(f"{source}: fail_on must be a list of analyzer names, not {value!r}")
    known = list(importlib.import_module("diag.analyzers").REGISTRY)
    for name in value:
        if name not in known:
            raise DiagError(
                f"{source}: fail_on names unknown analyzer {name!r} (known: {', '.join(known)})"
            )
    return tuple(dict.fromkeys(value))


def _allow(value: Any, source: str) -> tuple[AllowEntry, ...]:
    if not isinstance(value, list):
        raise DiagError(f"{source}: allow must be a list of tables ([[...allow]] entries)")
    return tuple(_allow_entry(item, i, source) for i, item in enumerate(value, start=1))


def _allow_entry(item: Any, index: int, source: str) -> AllowEntry:
    where = f"{source}: allow entry #{index}"
    if not isinstance(item, dict):
        raise DiagError(f"{where} must be a table with frame, guard, phase and reason")
    for key in item:
        if key not in _ALLOW_KEYS:
            raise DiagError(f"{where}: unknown key {key!r}{_suggest(key, _ALLOW_KEYS)}")
    for key in _ALLOW_KEYS:
        if key in item and not isinstance(item[key], str):
            raise DiagError(f"{where}: {key} must be a string, not {item[key]!r}")
    reason = str(item.get("reason", "")).strip()
    if not reason:
        raise DiagError(f"{where} has no reason: say why this exception is accepted")
    if not any(key in item for key in ("frame", "guard", "phase")):
        raise DiagError(f"{where} matches everything: give a frame, guard or phase")
    guard: re.Pattern[str] | None = None
    if "guard" in item:
        try:
            guard = re.compile(item["guard"])
        except re.error as exc:
            raise DiagError(f"{where}: guard is not a valid regular expression: {exc}") from None
    phase = item.get("phase")
    if phase is not None and phase not in PHASES:
        raise DiagError(f"{where}: phase must be warmup or live, not {phase!r}")
    return AllowEntry(index=index, reason=reason, frame=item.get("frame"), guard=guard, phase=phase)
