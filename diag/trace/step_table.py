"""The steps of a run, stored as columns, and `Step`, a view of one of them.

A day of a service is about 900 000 steps. As one object each, with their boxed floats, shape
list and allocator dict, they took about 900 bytes a step (925 MB for `diag check` on a day);
as typed arrays, one per column, they take about 90. A `Step` is a small view (a table and a
row) whose attributes read the columns, so every analyzer keeps reading `step.wall_s`; a
request's views are made once, on first use, and kept (analyzers compare steps by identity).
The reader fills a table in bulk (diag.trace.step_builder).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Any

NONE_T = -1  # end_t not known (the step never ended)
NONE_BYTES = -1  # an allocator figure not reported
MEMORY_KEYS = ("allocated", "reserved", "max_allocated")


class StepTable:
    """Columns of steps: one row per kept `step_start`, filled in by its `step_end` and
    `step_gpu`. Strings (request ids, phases) and shapes are stored once and coded."""

    def __init__(self) -> None:
        self.request_ids: list[str] = []
        self.phases: list[str] = []
        #: Code 0 is "no shape".
        self.shapes: list[list[int] | None] = [None]
        # Codes into the lists above, and the step's numbers.
        self.request = array("i")
        self.index = array("i")
        self.pid = array("i")
        self.shape = array("i")
        self.phase = array("i")
        self.start_t = array("q")
        self.end_t = array("q")  # NONE_T: never ended
        # NaN: not known.
        self.wall_s = array("d")
        self.gpu_s = array("d")
        self.cpu_s = array("d")
        self.host_load = array("d")
        self.profiled = bytearray()
        self.has_memory = bytearray()  # 1: the step_end reported allocator figures
        self.allocated = array("q")  # NONE_BYTES: not reported
        self.reserved = array("q")
        self.max_allocated = array("q")
        #: row -> the allocator's figures at the step's start (step 0 of a request only).
        self.memory_at_start: dict[int, dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.start_t)

    def views(self, rows: Sequence[int]) -> list[Step]:
        return [Step._at(self, row) for row in rows]


def _known(value: float) -> float | None:
    return None if value != value else value  # NaN: not known


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
        table.request_ids.append(request_id)
        table.phases.append(phase)
        if shape is not None:
            table.shapes.append(list(shape))
        nan = math.nan
        table.request.append(0)
        table.index.append(index)
        table.pid.append(pid)
        table.shape.append(0 if shape is None else 1)
        table.phase.append(0)
        table.start_t.append(start_t)
        table.end_t.append(NONE_T if end_t is None else end_t)
        table.wall_s.append(nan if wall_s is None else wall_s)
        table.gpu_s.append(nan if gpu_s is None else gpu_s)
        table.cpu_s.append(nan if cpu_s is None else cpu_s)
        table.host_load.append(nan if host_load is None else host_load)
        table.profiled.append(1 if profiled else 0)
        table.has_memory.append(0 if memory is None else 1)
        columns = (table.allocated, table.reserved, table.max_allocated)
        for column, key in zip(columns, MEMORY_KEYS, strict=True):
            value = None if memory is None else memory.get(key)
            column.append(NONE_BYTES if value is None else value)
        self._table, self._row = table, 0

    @classmethod
    def _at(cls, table: StepTable, row: int) -> Step:
        step = cls.__new__(cls)
        step._table, step._row = table, row
        return step

    @property
    def request_id(self) -> str:
        return self._table.request_ids[self._table.request[self._row]]

    @property
    def index(self) -> int:
        return self._table.index[self._row]

    @property
    def pid(self) -> int:
        return self._table.pid[self._row]

    @property
    def shape(self) -> list[int] | None:
        return self._table.shapes[self._table.shape[self._row]]

    @property
    def phase(self) -> str:
        return self._table.phases[self._table.phase[self._row]]

    @property
    def profiled(self) -> bool:
        return bool(self._table.profiled[self._row])

    @property
    def start_t(self) -> int:
        return self._table.start_t[self._row]

    @property
    def end_t(self) -> int | None:
        t = self._table.end_t[self._row]
        return None if t == NONE_T else t

    @property
    def wall_s(self) -> float | None:
        return _known(self._table.wall_s[self._row])

    @property
    def gpu_s(self) -> float | None:
        """The step's CUDA time (CUDA events), None when not measured."""
        return _known(self._table.gpu_s[self._row])

    @property
    def cpu_s(self) -> float | None:
        """The process's CPU time in the step (all threads): wall time it did not run for was
        spent waiting (the GPU, I/O) or descheduled (a loaded host). None in older traces."""
        return _known(self._table.cpu_s[self._row])

    @property
    def host_load(self) -> float | None:
        """Runnable tasks per CPU (1-minute load average / CPUs) when the step ended; None in
        older traces. Above 1 the host was loaded: other work waited for a CPU."""
        return _known(self._table.host_load[self._row])

    @property
    def memory(self) -> dict[str, int] | None:
        """The allocator's bytes at the step's end (the figures reported); None without CUDA."""
        table, row = self._table, self._row
        if not table.has_memory[row]:
            return None
        values = (table.allocated[row], table.reserved[row], table.max_allocated[row])
        return {k: v for k, v in zip(MEMORY_KEYS, values, strict=True) if v != NONE_BYTES}

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
