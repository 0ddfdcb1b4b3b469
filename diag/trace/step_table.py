"""The steps of a run, stored as columns, and `Step`, a view of one of them.

A day of a service is about 900 000 steps. As one object each, with their boxed floats, shape
list and allocator dict, they took about 900 bytes a step (925 MB for `diag check` on a day);
as typed arrays they take about 100. A `Step` is a small view (a table and a row) whose
attributes read the columns, so every analyzer keeps reading `step.wall_s`; a request's views
are made once, on first use, and kept (analyzers compare steps by identity).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any, Protocol

_NONE_T = -1  # end_t not known (the step never ended)
_NONE_BYTES = -1  # an allocator figure not reported
_MEMORY_KEYS = ("allocated", "reserved", "max_allocated")
_NAN = math.nan
_NANS = array("d", [_NAN] * 4)
_NO_MEMORY = array("q", [_NONE_BYTES] * 3)

# Per row: the ints (request code, index, pid, shape code), the times (start_t, end_t), the
# floats (wall_s, gpu_s, cpu_s, host_load; NaN: not known), the flags (phase code, profiled,
# memory reported) and the allocator bytes (_MEMORY_KEYS).
_INTS, _TIMES, _FLOATS, _FLAGS, _MEMORY = 4, 2, 4, 3, 3
WALL, GPU, CPU, LOAD = 0, 1, 2, 3


class StepTable:
    """Columns of steps: one row per `step_start`, filled in by its `step_end` and `step_gpu`.

    Interleaved typed arrays: appending a row is five calls, and a row is 74 bytes."""

    def __init__(self) -> None:
        self.rows = 0
        self.request_ids: list[str] = []
        self._rid_codes: dict[str, int] = {}
        self.phases: list[str] = []
        self._phase_codes: dict[str, int] = {}
        self.shapes: list[list[int] | None] = [None]
        self._shape_codes: dict[tuple[int, ...], int] = {}
        self.ints = array("i")
        self.times = array("q")
        self.floats = array("d")
        self.flags = bytearray()
        self.memory = array("q")
        #: row -> the allocator's figures at the step's start (step 0 of a request only).
        self.memory_at_start: dict[int, dict[str, int]] = {}

    def __len__(self) -> int:
        return self.rows

    def add(
        self,
        request_id: str,
        index: int,
        phase: str,
        start_t: int,
        profiled: bool,
        shape: list[int] | None,
        pid: int,
    ) -> int:
        """A step that started; its row."""
        code = self._rid_codes.get(request_id)
        if code is None:
            code = self._rid_codes[request_id] = len(self.request_ids)
            self.request_ids.append(request_id)
        phase_code = self._phase_codes.get(phase)
        if phase_code is None:
            phase_code = self._phase_codes[phase] = len(self.phases)
            self.phases.append(phase)
        shape_code = 0
        if shape is not None:
            key = tuple(shape)
            shape_code = self._shape_codes.get(key, 0)
            if not shape_code:
                shape_code = self._shape_codes[key] = len(self.shapes)
                self.shapes.append(list(shape))
        self.ints.extend((code, index, pid, shape_code))
        self.times.extend((start_t, _NONE_T))
        self.floats.extend(_NANS)
        self.flags.extend((phase_code, 1 if profiled else 0, 0))
        self.memory.extend(_NO_MEMORY)
        self.rows += 1
        return self.rows - 1

    def end(
        self,
        row: int,
        t: int,
        wall_s: float | None,
        cpu_s: float | None,
        host_load: float | None,
        profiled: bool,
        memory: Memory | None,
    ) -> None:
        """The step ended: its time, and what its step_end measured."""
        self.times[_TIMES * row + 1] = t
        floats, base = self.floats, _FLOATS * row
        floats[base + WALL] = _NAN if wall_s is None else wall_s
        floats[base + CPU] = _NAN if cpu_s is None else cpu_s
        floats[base + LOAD] = _NAN if host_load is None else host_load
        if profiled:
            self.flags[_FLAGS * row + 1] = 1
        if memory is not None:
            self.flags[_FLAGS * row + 2] = 1
            figures, base = self.memory, _MEMORY * row
            value = memory.allocated
            figures[base] = _NONE_BYTES if value is None else value
            value = memory.reserved
            figures[base + 1] = _NONE_BYTES if value is None else value
            value = memory.max_allocated
            figures[base + 2] = _NONE_BYTES if value is None else value

    def start_memory(self, row: int, memory: Memory) -> None:
        """The allocator's figures at the step's start (a request's step 0, on CUDA)."""
        figures = {key: getattr(memory, key) for key in _MEMORY_KEYS}
        self.memory_at_start[row] = {k: v for k, v in figures.items() if v is not None}

    def find(self, rows: array[int] | None, index: int | None) -> int:
        """The newest of `rows` (a request's) holding step `index`, or -1. A step_end and
        step_gpu name the step by request and index; theirs is the last or nearly (a step_gpu
        comes a few steps late), so the search runs from the end."""
        if not rows or index is None:
            return -1
        ints = self.ints
        row = rows[-1]
        if ints[_INTS * row + 1] == index:
            return row
        for position in range(len(rows) - 2, -1, -1):
            row = rows[position]
            if ints[_INTS * row + 1] == index:
                return row
        return -1

    def set(self, row: int, column: int, value: float | None) -> None:
        """One of the floats (WALL, GPU, CPU, LOAD); None: not known."""
        self.floats[_FLOATS * row + column] = math.nan if value is None else value

    def views(self, rows: array[int]) -> list[Step]:
        return [Step._at(self, row) for row in rows]


class Memory(Protocol):
    """The allocator figures of a step_end (diag.trace.schema.Memory)."""

    allocated: int | None
    reserved: int | None
    max_allocated: int | None


@dataclass
class _Memory:
    allocated: int | None = None
    reserved: int | None = None
    max_allocated: int | None = None


class Step:
    """One step of a request: a view of its row in a StepTable.

    Built as the Run model used to build its steps (`Step(request_id, index, phase, ...)`,
    standalone, for importers that make steps themselves) or by the reader as a view."""

    __slots__ = ("_row", "_table")

    def __init__(
        self,
        request_id: str,
        index: int,
        phase: str,
        start_t: int,
        end_t: int | None,
        wall_s: float | None,
        gpu_s: float | None,
        profiled: bool,
        shape: list[int] | None,
        memory: dict[str, int] | None,
        pid: int,
        cpu_s: float | None = None,
        host_load: float | None = None,
    ) -> None:
        table = StepTable()
        row = table.add(request_id, index, phase, start_t, profiled, shape, pid)
        known = None if memory is None else _Memory(**{k: memory.get(k) for k in _MEMORY_KEYS})
        table.end(
            row, _NONE_T if end_t is None else end_t, wall_s, cpu_s, host_load, profiled, known
        )
        table.set(row, GPU, gpu_s)
        self._table, self._row = table, row

    @classmethod
    def _at(cls, table: StepTable, row: int) -> Step:
        step = cls.__new__(cls)
        step._table, step._row = table, row
        return step

    @property
    def request_id(self) -> str:
        return self._table.request_ids[self._table.ints[_INTS * self._row]]

    @property
    def index(self) -> int:
        return self._table.ints[_INTS * self._row + 1]

    @property
    def pid(self) -> int:
        return self._table.ints[_INTS * self._row + 2]

    @property
    def shape(self) -> list[int] | None:
        return self._table.shapes[self._table.ints[_INTS * self._row + 3]]

    @property
    def phase(self) -> str:
        return self._table.phases[self._table.flags[_FLAGS * self._row]]

    @property
    def profiled(self) -> bool:
        return bool(self._table.flags[_FLAGS * self._row + 1])

    @property
    def start_t(self) -> int:
        return self._table.times[_TIMES * self._row]

    @property
    def end_t(self) -> int | None:
        t = self._table.times[_TIMES * self._row + 1]
        return None if t == _NONE_T else t

    @property
    def wall_s(self) -> float | None:
        value = self._table.floats[_FLOATS * self._row + WALL]
        return None if value != value else value  # NaN: not known

    @property
    def gpu_s(self) -> float | None:
        """The step's CUDA time (CUDA events), None when not measured."""
        value = self._table.floats[_FLOATS * self._row + GPU]
        return None if value != value else value  # NaN: not known

    @property
    def cpu_s(self) -> float | None:
        """The process's CPU time in the step (all threads): wall time it did not run for was
        spent waiting (the GPU, I/O) or descheduled (a loaded host). None in older traces."""
        value = self._table.floats[_FLOATS * self._row + CPU]
        return None if value != value else value  # NaN: not known

    @property
    def host_load(self) -> float | None:
        """Runnable tasks per CPU (1-minute load average / CPUs) when the step ended; None in
        older traces. Above 1 the host was loaded: other work waited for a CPU."""
        value = self._table.floats[_FLOATS * self._row + LOAD]
        return None if value != value else value  # NaN: not known

    @property
    def memory(self) -> dict[str, int] | None:
        """The allocator's bytes at the step's end (the figures reported); None without CUDA."""
        table, row = self._table, self._row
        if not table.flags[_FLAGS * row + 2]:
            return None
        base = _MEMORY * row
        values = table.memory[base : base + _MEMORY]
        return {k: v for k, v in zip(_MEMORY_KEYS, values, strict=True) if v != _NONE_BYTES}

    @property
    def memory_start(self) -> dict[str, int] | None:
        """The allocator's bytes at the step's start (a request's step 0 only, on CUDA)."""
        return self._table.memory_at_start.get(self._row)

    def values(self) -> tuple[Any, ...]:
        """Every field, in the constructor's order."""
        return (
            self.request_id,
            self.index,
            self.phase,
            self.start_t,
            self.end_t,
            self.wall_s,
            self.gpu_s,
            self.profiled,
            self.shape,
            self.memory,
            self.pid,
            self.cpu_s,
            self.host_load,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        return self.values() == other.values()

    __hash__ = None  # type: ignore[assignment]  # as the dataclass it replaces: compared by value

    def __repr__(self) -> str:
        names = ("request_id", "index", "phase", "start_t", "end_t", "wall_s", "gpu_s")
        shown = ", ".join(
            f"{name}={value!r}" for name, value in zip(names, self.values()[:7], strict=True)
        )
        return f"Step({shown}, ...)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Step._at, (self._table, self._row))
