"""Frames are code objects, not names: how analyzers, check, the TUI and finding ids name them.

Dynamo caches, guards and counts compiles per code object. Two functions that share a name are
two frames: LightX2V's phase offload compiles three lambdas on consecutive lines of one file
(`offload/transformer_infer.py:124`, `:125`, `:126`, kept distinct on purpose so that phases do
not share guards), and every block class has its own `forward`. A `Frame` (name, file, first
line) is that identity; grouping by it keeps them apart. A frame is *named* by its function name
when no other frame of the same run shares it, and `name@dir/file.py:line` when one does, so a
label (and a finding id built from it) is unique and stays the same from one analysis to the next.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from pathlib import PurePosixPath

from diag.trace.run import Compile, Frame, RunData

UNKNOWN = "<unknown frame>"

# id(run) -> (the run, the sizes the labels were built from, the labels); see run_labels.
_memo: dict[int, tuple[weakref.ref[RunData], tuple[int, int, int], dict[Frame | None, str]]] = {}


def short_file(path: str) -> str:
    """The file's last two path parts (`offload/transformer_infer.py`): enough to tell files
    apart in one program, and the same on every machine (no checkout or venv prefix)."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    return "/".join(parts[-2:]) if parts else path


def qualified(frame: Frame) -> str:
    """`name@dir/file.py:line`: one code object, whatever else shares its name."""
    if not frame.file:
        return frame.name
    where = short_file(frame.file)
    return (
        f"{frame.name}@{where}:{frame.line}" if frame.line is not None else f"{frame.name}@{where}"
    )


def labels(frames: Iterable[Frame | None]) -> dict[Frame | None, str]:
    """A unique label per frame: its name when no other frame has that name, else `qualified`
    (and the full path in the rare case two files share their last two parts)."""
    by_name: dict[str, set[Frame]] = {}
    result: dict[Frame | None, str] = {}
    for frame in frames:
        if frame is None:
            result[None] = UNKNOWN
        else:
            by_name.setdefault(frame.name, set()).add(frame)
    for name, group in by_name.items():
        if len(group) == 1:
            (only,) = group
            result[only] = name
            continue
        named: dict[Frame | None, str] = {frame: qualified(frame) for frame in group}
        if len(set(named.values())) < len(group):
            named = {f: f"{f.name}@{f.file}:{f.line}" if f.file else f.name for f in group}
        result.update(named)
    return result


def run_labels(run: RunData) -> dict[Frame | None, str]:
    """`labels` over every frame the run compiled or holds cache entries for (memoised: the
    analyzers ask per compile)."""
    sizes = (len(run.compiles), len(run.cache_final), len(run.cache_history))
    memo = _memo.get(id(run))
    if memo is not None and memo[0]() is run and memo[1] == sizes:
        return memo[2]
    frames: list[Frame | None] = [c.frame for c in run.compiles]
    frames.extend(frame for _, frame in run.cache_final)
    frames.extend(row[4] for row in run.cache_history)
    found = labels(frames)
    key = id(run)
    _memo[key] = (weakref.ref(run, lambda _: _memo.pop(key, None)), sizes, found)
    return found


def label(run: RunData, frame: Frame | None) -> str:
    """How findings, check and the TUI name `frame` within `run`."""
    found = run_labels(run).get(frame)
    if found is not None:
        return found
    return UNKNOWN if frame is None else frame.name


def compile_label(run: RunData, item: Compile) -> str:
    return label(run, item.frame)
