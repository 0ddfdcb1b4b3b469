"""Filling a StepTable from one process's step events, in bulk.

A day of a service is close to three million step events; read one at a time into a table (a
method call and a dozen array writes each) they were most of `diag check`'s time. The reader
(diag.trace.run) still decides, event by event in the order written, which row each belongs
to: a `step_start` inside a known request opens the next row; a `step_end` or `step_gpu` goes
to the newest row of its request holding its step (`find`). It only appends to lists here.
The rest is done a batch at a time: the batch's kept starts and matched ends become columns
in a few passes (a list comprehension per field, packed by struct), and at the end of the
file the ends' columns are the table's as they stand when each row ended once, in row order
(what diag records). Otherwise (steps of several threads interleaved, a step ended twice),
and always when `fast` is off, each end is applied to its row in turn, as the events say:
the tests compare the two (tests/unit/test_step_builder.py).
"""

from __future__ import annotations

import math
import operator
import struct
from array import array
from collections.abc import Callable, Hashable, Sequence
from itertools import repeat
from typing import Any

from diag.trace.schema import Memory, StepEnd, StepStart
from diag.trace.step_table import MEMORY_KEYS, NONE_BYTES, NONE_T, StepTable

_NAN = math.nan
_NO_MEMORY = Memory()


class StepBuilder:
    """One process's steps. The reader appends, per event: a kept start to `starts` and its
    step index to `index`; a matched end to `ends` and its row to `end_rows`; a measured
    step_gpu's row and seconds to `gpu_rows` and `gpu_s`. `flush` after every batch, `finish`
    at the end of the file. (Lists: an array's append converts each item through
    PyArg_Parse, several times slower.)"""

    def __init__(self, fast: bool = True) -> None:
        self.table = StepTable()
        self.fast = fast
        self.index: list[int] = []  # every row's, for `find`
        self.starts: list[StepStart] = []
        self.ends: list[StepEnd] = []
        self.end_rows: list[int] = []
        self.gpu_rows: list[int] = []
        self.gpu_s: list[float] = []
        # The ends and GPU times so far, as columns in the order they came.
        self._end_rows = array("i")
        self._end_t = array("q")
        self._wall_s = array("d")
        self._cpu_s = array("d")
        self._host_load = array("d")
        self._profiled = bytearray()
        self._has_memory = bytearray()
        self._figures = (array("q"), array("q"), array("q"))  # in MEMORY_KEYS' order
        self._gpu_rows = array("i")
        self._gpu_s = array("d")
        self._request_codes: dict[Hashable, int] = {}
        self._phase_codes: dict[Hashable, int] = {}
        self._shape_codes: dict[Hashable, int] = {None: 0}

    def find(self, rows: Sequence[int] | None, index: int | None) -> int:
        """The newest of `rows` (a request's) holding step `index`, or -1. Theirs is the last
        or nearly (a step_gpu comes a few steps late), so the search runs from the end."""
        if not rows or index is None:
            return -1
        column = self.index
        for position in range(len(rows) - 1, -1, -1):
            row = rows[position]
            if column[row] == index:
                return row
        return -1

    def start_memory(self, row: int, memory: Memory) -> None:
        """The allocator's figures at a step's start (a request's step 0, on CUDA)."""
        figures = {key: getattr(memory, key) for key in MEMORY_KEYS}
        self.table.memory_at_start[row] = {k: v for k, v in figures.items() if v is not None}

    def flush(self, pid: int) -> None:
        """What was gathered since the last flush, into columns; `pid` is the process's for
        all of those starts (the reader flushes before a process_start)."""
        if self.starts:
            self._add_starts(self.starts, pid)
            self.starts.clear()
        if self.ends:
            _add(self._end_rows, self.end_rows)
            self.end_rows.clear()
            self._add_ends(self.ends)
            self.ends.clear()
        if self.gpu_rows:
            _add(self._gpu_rows, self.gpu_rows)
            _add(self._gpu_s, self.gpu_s)
            self.gpu_rows.clear()
            self.gpu_s.clear()

    def finish(self, pid: int) -> StepTable:
        """The table, every column one value per row."""
        self.flush(pid)
        table = self.table
        rows = len(table.start_t)
        _add(table.index, self.index)
        self.index = []
        if self.fast and _in_order(self._end_rows):
            missing = rows - len(self._end_rows)  # the steps that never ended, last
            self._end_t.extend(array("q", [NONE_T]) * missing)
            for seconds in (self._wall_s, self._cpu_s, self._host_load):
                seconds.extend(array("d", [_NAN]) * missing)
            for figures in self._figures:
                figures.extend(array("q", [NONE_BYTES]) * missing)
            table.end_t, table.wall_s, table.cpu_s = self._end_t, self._wall_s, self._cpu_s
            table.host_load = self._host_load
            table.allocated, table.reserved, table.max_allocated = self._figures
            table.has_memory = self._has_memory + bytearray(missing)
            if 1 in self._profiled:
                ended = self._profiled + bytearray(missing)
                table.profiled = bytearray(map(operator.or_, table.profiled, ended))
        else:
            self._apply_ends_one_by_one(rows)
        if self.fast and _in_order(self._gpu_rows):
            self._gpu_s.extend(array("d", [_NAN]) * (rows - len(self._gpu_rows)))
            table.gpu_s = self._gpu_s
        else:
            gpu_s = table.gpu_s = array("d", [_NAN]) * rows
            for row, value in zip(self._gpu_rows, self._gpu_s, strict=True):
                gpu_s[row] = value
        return table

    def _apply_ends_one_by_one(self, rows: int) -> None:
        """Each end onto its row in the order they came: a later end of the same row replaces
        the times, keeps a profiled mark and replaces the figures only where it has some."""
        table = self.table
        end_t = table.end_t = array("q", [NONE_T]) * rows
        wall_s = table.wall_s = array("d", [_NAN]) * rows
        cpu_s = table.cpu_s = array("d", [_NAN]) * rows
        host_load = table.host_load = array("d", [_NAN]) * rows
        has_memory = table.has_memory = bytearray(rows)
        figures = [array("q", [NONE_BYTES]) * rows for _ in MEMORY_KEYS]
        table.allocated, table.reserved, table.max_allocated = figures
        profiled = table.profiled
        for at, row in enumerate(self._end_rows):
            end_t[row] = self._end_t[at]
            wall_s[row] = self._wall_s[at]
            cpu_s[row] = self._cpu_s[at]
            host_load[row] = self._host_load[at]
            if self._profiled[at]:
                profiled[row] = 1
            if self._has_memory[at]:
                has_memory[row] = 1
                for column, values in zip(figures, self._figures, strict=True):
                    column[row] = values[at]

    def _add_starts(self, starts: list[StepStart], pid: int) -> None:
        table = self.table
        _add(table.start_t, [e.t for e in starts])
        requests = [e.request_id for e in starts]
        _add(table.request, _codes(requests, self._request_codes, self._new_request))
        phases = [e.phase for e in starts]
        _add(table.phase, _codes(phases, self._phase_codes, self._new_phase))
        shapes = [e.shape for e in starts]
        _add(table.shape, _codes(shapes, self._shape_codes, self._new_shape))
        table.profiled.extend(_flags([e.profiled for e in starts]))
        table.pid.extend(array("i", [pid]) * len(starts))

    def _add_ends(self, ends: list[StepEnd]) -> None:
        _add(self._end_t, [e.t for e in ends])
        _add(self._wall_s, [e.wall_s for e in ends], _NAN)
        _add(self._cpu_s, [e.cpu_s for e in ends], _NAN)
        _add(self._host_load, [e.host_load for e in ends], _NAN)
        self._profiled.extend(_flags([e.profiled for e in ends]))
        memory: list[Any] = [e.memory for e in ends]  # Memory or None
        allocated, reserved, max_allocated = self._figures
        try:  # every end has figures (CUDA), or none has (CPU): no None is looked for
            figures = [m.allocated for m in memory]
            self._has_memory.extend(b"\x01" * len(memory))
        except AttributeError:  # a None
            if memory.count(None) == len(memory):
                self._has_memory.extend(bytes(len(memory)))
                for column in self._figures:
                    column.extend(array("q", [NONE_BYTES]) * len(memory))
                return
            self._has_memory.extend([m is not None for m in memory])
            memory = [_NO_MEMORY if m is None else m for m in memory]
            figures = [m.allocated for m in memory]
        _add(allocated, figures, NONE_BYTES)
        _add(reserved, [m.reserved for m in memory], NONE_BYTES)
        _add(max_allocated, [m.max_allocated for m in memory], NONE_BYTES)

    def _new_request(self, value: Hashable) -> int:
        return _named(self.table.request_ids, "None" if value is None else str(value))

    def _new_phase(self, value: Hashable) -> int:
        return _named(self.table.phases, str(value) if value else "live")

    def _new_shape(self, value: Hashable) -> int:
        assert isinstance(value, tuple)
        return _named(self.table.shapes, list(value))


def compact_rows(rows: Sequence[int]) -> Sequence[int]:
    """A request's rows as kept: a range when they follow each other (they nearly always do:
    a request's steps run one after another), else an array."""
    if rows and rows[-1] - rows[0] + 1 == len(rows) and _in_order(rows, rows[0]):
        return range(rows[0], rows[-1] + 1)
    packed = array("i")
    _add(packed, list(rows))
    return packed


def _in_order(rows: Sequence[int], first: int = 0) -> bool:
    """Whether `rows` are first, first + 1, ... (each once, in order); compared a block at a
    time, as packed bytes."""
    block = 1 << 16
    for at in range(0, len(rows), block):
        part = rows[at : at + block]
        packed = part.tobytes() if isinstance(part, array) else struct.pack(f"{len(part)}i", *part)
        start = first + at
        if packed != struct.pack(f"{len(part)}i", *range(start, start + len(part))):
            return False
    return True


def _named(names: list[Any], name: Any) -> int:
    """`name`, added to `names`: its code. Each value is coded once (`_codes` remembers it);
    the few that read alike (a phase None or "" is "live") may hold two codes, one name."""
    names.append(name)
    return len(names) - 1


def _codes(
    values: Sequence[Hashable], known: dict[Hashable, int], new: Callable[[Hashable], int]
) -> list[int]:
    """Each value's code: looked up in one C-level pass, the values not seen before coded by
    `new` and remembered. (-1 marks those, not None: an int list's `in` compares ints.)"""
    codes = list(map(known.get, values, repeat(-1)))
    at = _find(codes, -1, 0)
    while at >= 0:
        value = values[at]
        code = known.get(value)
        if code is None:
            code = known[value] = new(value)
        codes[at] = code
        at = _find(codes, -1, at + 1)
    return codes


def _find(values: list[int], value: int, start: int) -> int:
    try:
        return values.index(value, start)
    except ValueError:
        return -1


def _flags(values: list[bool]) -> bytes:
    """A column of flags (profiled): nearly always all off."""
    return bytes(len(values)) if True not in values else bytes(values)


def _add(column: array[Any], values: list[Any], missing: float | None = None) -> None:
    """Numbers onto a typed column, None as `missing` (a figure not measured). Packed by
    struct, which converts about twice as fast as the array's own item by item conversion."""
    form = f"{len(values)}{column.typecode}"
    try:
        packed = struct.pack(form, *values)
    except struct.error:  # a None
        packed = struct.pack(form, *[missing if value is None else value for value in values])
    column.frombytes(packed)
