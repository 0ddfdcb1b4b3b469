"""`--config NAME='CMD ...'` or `--config NAME=TRACE_DIR[,TRACE_DIR...]`: what a bench compares."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from diag.errors import DiagError
from diag.trace.format import MANIFEST

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


@dataclass(frozen=True)
class ConfigSpec:
    """One configuration: a command to record N times, or recordings already made."""

    name: str
    command: tuple[str, ...] | None = None
    traces: tuple[Path, ...] = ()


def parse_config(text: str) -> ConfigSpec:
    """`eager=python -m app` (a command, split as a shell would) or `eager=run1,run2` (trace
    directories: every comma-separated part holds a diag manifest)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not value.strip():
        raise DiagError(f"--config {text!r}: expected NAME='CMD ...' or NAME=TRACE_DIR,...")
    if not _NAME.match(name):
        raise DiagError(
            f"--config {text!r}: the name must be letters, digits, '.', '_', '+' or '-' "
            "(at most 64), starting with a letter or digit"
        )
    parts = [p.strip() for p in value.split(",")]
    if all(p and (Path(p) / MANIFEST).is_file() for p in parts):
        return ConfigSpec(name, traces=tuple(Path(p) for p in parts))
    try:
        command = shlex.split(value)
    except ValueError as exc:
        raise DiagError(f"--config {name}: cannot split the command: {exc}") from None
    if not command:
        raise DiagError(f"--config {name}: empty command")
    first = Path(command[0])
    if len(command) == 1 and first.is_dir():
        raise DiagError(f"--config {name}: {first} is a folder but not a diag trace directory")
    return ConfigSpec(name, command=tuple(command))


def check_specs(specs: list[ConfigSpec]) -> None:
    """Names unique; at least one configuration."""
    if not specs:
        raise DiagError("no configuration: give --config NAME='CMD ...' (twice to compare)")
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise DiagError(f"--config {spec.name}: the name is given twice")
        seen.add(spec.name)
