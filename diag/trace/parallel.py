"""Per-process reading in parallel worker processes, for trace directories of many ranks.

A run of 64 ranks holds 64 event files and a few Kineto windows per rank, each read alone: the
work splits by file. A pool of worker processes (one per CPU this process may use) reads them
and the parent merges what comes back in file order, so the Run model is the same as a serial
read's (tests/unit/test_parallel_load.py compares them field by field).

What crosses from a worker, pickled by multiprocessing: for an event file, the partial
RunData the serial reader builds (`load._load_process` on a fresh run); for a Kineto window,
its step profiles (the window parsed and cut by diag.trace.profiles.cut_window, only the
records inside its steps: a compact summary of the file). The files are untrusted, but no
byte of them is unpickled: the worker parses them (JSON, gzip) into objects of diag's own
model, and the parent unpickles only those, from a pipe to its own child. A worker also
writes the window's Kineto cache, so the next open is fast.

Workers are forked when the reading process has one thread (`diag analyze`, `diag check`):
they start in milliseconds and run nothing again. A process with threads (the TUI loads in
one) cannot fork safely and gets fresh interpreters (`spawn`, about 0.1-0.2 s each, which
import the program's `__main__` again as multiprocessing does: diag's own commands guard it);
the TUI calls `prepare_for_threads()` before Textual takes over stdio.
Small inputs are read serially. Anything that goes wrong in the pool (a worker killed, no
semaphores in a sandbox) falls back to the serial reader, which raises the error a person
should see.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diag.trace.numerals import parse_int

#: Read event files in workers only above this many bytes in all (serial: ~100 MB/s).
EVENTS_PARALLEL_BYTES = 24 << 20
#: Parse Kineto windows in workers only above this many (gzip) bytes in all.
KINETO_PARALLEL_BYTES = 2 << 20

if TYPE_CHECKING:
    import concurrent.futures

#: What a failed pool raises: BrokenProcessPool (a RuntimeError), OSError, and ValueError from
#: spawning where stdio is not a plain descriptor (Textual's headless driver). Any exception
#: means: read serially, where a real reader error is raised again, as a person should see it.
_POOL_ERRORS = (Exception,)


#: Why the last pool failed (its exception), and how many pools did their work, in this
#: process: what tests read to tell a parallel read from the serial fallback.
last_pool_error: str | None = None
pools_completed = 0


def prepare_for_threads() -> None:
    """Start multiprocessing's resource tracker now, from a thread whose sys.stderr is still the
    process's own. A spawned pool starts the tracker on first use and hands it
    `sys.stderr.fileno()`; inside a Textual app (which replaces sys.stderr with an object
    whose descriptor is -1) that fails, `ValueError: bad value(s) in fds_to_keep`, and the
    TUI read every rank serially. Cheap when already running; a no-op where there is none."""
    try:
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001 - no tracker (a sandbox): the pool falls back as before
        return


def worker_count(tasks: int) -> int:
    """Workers for `tasks` jobs: the CPUs this process may run on, at most one per job, and
    at most DIAG_WORKERS when set (DIAG_WORKERS=1 reads serially, on a shared host)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = parse_int(os.environ.get("DIAG_WORKERS", ""))
    if limit is not None and limit > 0:
        cpus = min(cpus, limit)
    return max(1, min(cpus, tasks))


def _pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    # Imported here: `diag check` on a small trace never pays for multiprocessing.
    import concurrent.futures
    import multiprocessing
    import threading

    # fork starts a worker in milliseconds and runs nothing again; a process with threads (the
    # TUI loads in one) cannot fork safely, and gets fresh interpreters instead.
    alone = threading.active_count() == 1
    method = "fork" if alone and "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context(method)
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# --- event files ------------------------------------------------------------------------------


def should_read_events_in_parallel(paths: Sequence[Path]) -> bool:
    from diag.trace.format import process_event_files

    return (
        len(paths) >= 2
        and worker_count(len(paths)) >= 2
        and sum(_size(f) for p in paths for f in process_event_files(p)) >= EVENTS_PARALLEL_BYTES
    )


def _read_events(path: str, label: str, status: str | None, folder: str) -> Any:
    """In a worker: one process's event file, read by the serial reader into a fresh run."""
    from diag.trace import load
    from diag.trace.run import RunData

    part = RunData(label, Path(folder), status)
    with load._collector_paused():
        load._load_process(part, Path(path))
    return part


def read_event_files(run: Any, paths: Sequence[Path]) -> bool:
    """Read `paths` into `run` (a diag.trace.run.RunData) in workers, merged in path order.
    False (and `run` untouched) when the pool failed: the caller reads them serially."""
    workers = worker_count(len(paths))
    try:
        with _pool(workers) as pool:
            parts = list(
                pool.map(
                    _read_events,
                    [str(p) for p in paths],
                    [run.label] * len(paths),
                    [run.status] * len(paths),
                    [str(run.folder)] * len(paths),
                    chunksize=max(1, len(paths) // (workers * 4)),
                )
            )
    except _POOL_ERRORS as exc:
        _failed(exc)
        return False
    _completed()
    for part in parts:
        run.processes.extend(part.processes)
        run.requests.extend(part.requests)
        run.compiles.extend(part.compiles)
        run.cache_final.update(part.cache_final)
        run.cache_history.extend(part.cache_history)
        run.events.extend(part.events)
        run.collector_errors.extend(part.collector_errors)
        run.warnings.extend(part.warnings)
        run.corrupt_lines += part.corrupt_lines
    return True


# --- Kineto windows ---------------------------------------------------------------------------

#: (the process, its window's file name, the file, the profiled steps inside it, cache folder)
WindowJob = tuple[Any, str, Path, list[Any], Path | None]


def _profile_window(
    label: str, process: Any, window: str, path: str, steps: list[Any], cache_dir: str | None
) -> tuple[str, Any]:
    """In a worker: one window through the cache (parsed, cache written) and cut into its
    steps' profiles, what the parent keeps of it; ("error", message) for a file diag refuses,
    so that the parent raises the same DiagError."""
    from diag.errors import DiagError
    from diag.trace.kinetocache import load_kineto
    from diag.trace.profiles import cut_window

    try:
        trace = load_kineto(Path(path), Path(cache_dir) if cache_dir else None)
    except DiagError as exc:
        return "error", exc.message
    return "profiles", cut_window(label, process, window, trace, steps)


def _needs_parse(path: Path, cache_dir: Path | None) -> bool:
    """A guess (the cache itself decides): no cache file, or one older than the window."""
    if cache_dir is None:
        return True
    from diag.trace.kinetocache import cache_path

    cached = cache_path(path, cache_dir)
    try:
        return cached.stat().st_mtime_ns < path.stat().st_mtime_ns
    except OSError:
        return True


def profile_windows(
    label: str, jobs: Sequence[WindowJob], progress: Callable[[int], None] | None = None
) -> dict[Path, list[Any]]:
    """The windows that need a parse, parsed and cut into step profiles in workers: path ->
    its profiles (diag.trace.profiles.StepProfile). A worker returns only the records inside
    the window's steps, so the parent never holds whole parsed windows. Windows already
    cached, small inputs, refused files and a broken pool are left out: the caller opens
    those itself, serially (which raises a refused file's DiagError). `progress(bytes)` is
    called as each window is done."""
    todo = [job for job in jobs if _needs_parse(job[2], job[4])]
    if len(todo) < 2 or worker_count(len(todo)) < 2:
        return {}
    if sum(_size(job[2]) for job in todo) < KINETO_PARALLEL_BYTES:
        return {}
    import concurrent.futures

    # Biggest first: the pool ends together instead of waiting on one late large window.
    todo.sort(key=lambda job: -_size(job[2]))
    done: dict[Path, list[Any]] = {}
    try:
        with _pool(worker_count(len(todo))) as pool:
            futures = {
                pool.submit(
                    _profile_window,
                    label,
                    process,
                    window,
                    str(path),
                    steps,
                    str(cache) if cache else None,
                ): path
                for process, window, path, steps, cache in todo
            }
            for future in concurrent.futures.as_completed(futures):
                path = futures[future]
                kind, result = future.result()
                if kind == "profiles":
                    done[path] = result
                if progress is not None:
                    progress(_size(path))
    except _POOL_ERRORS as exc:
        _failed(exc)
        return done
    _completed()
    return done


def _completed() -> None:
    global pools_completed
    pools_completed += 1


def _failed(exc: BaseException) -> None:
    global last_pool_error
    last_pool_error = f"{type(exc).__name__}: {exc}"
