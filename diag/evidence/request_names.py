"""How a request is named wherever one is shown: diag's id, and the program's own beside it.

diag numbers requests (`r5`, `w1`): finding ids, allowlists and baselines are built from those,
so they stay the same from run to run. A server names its requests itself (LightX2V's task id,
which its log and its clients use): the adapter records it as the request's `label`, and every
text names the request as `r5 (task 7Q2M-...)`. The label comes from the trace (a client may
choose a task id): control characters are replaced and it is cut to a bounded length here,
before any renderer sees it.

A process that served requests in more than one thread (a worker pool, a server's threadpool)
names the thread too, `r5 (thread serve-worker_1)`: its requests and steps interleave, and the
thread is how the program's own logs tell them apart.
"""

from __future__ import annotations

from diag.trace.run import Request, RunData

#: Characters of a label shown (the rest is cut, marked with an ellipsis).
MAX_SHOWN = 48


def clean_label(label: object) -> str | None:
    """A label fit to print: printable characters only, bounded; None for none."""
    if not isinstance(label, str) or not label.strip():
        return None
    text = "".join(c if c.isprintable() else "?" for c in label.strip())
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


Names = dict[tuple[int, str], str]


def _names(run: RunData) -> tuple[Names, Names]:
    """(pid, request id) -> label, and -> thread where the process served requests in more than
    one thread; built once per run and size of its request list."""
    cached = _CACHE.get(id(run))
    if cached is not None and cached[0] is run and cached[1] == len(run.requests):
        return cached[2], cached[3]
    labels = {
        (r.pid, r.request_id): shown
        for r in run.requests
        if r.label is not None and (shown := clean_label(r.label)) is not None
    }
    seen: dict[int, set[str]] = {}
    for r in run.requests:
        if r.thread is not None:
            seen.setdefault(r.pid, set()).add(r.thread)
    threads = {
        (r.pid, r.request_id): shown
        for r in run.requests
        if len(seen.get(r.pid, ())) > 1 and (shown := clean_label(r.thread)) is not None
    }
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[id(run)] = (run, len(run.requests), labels, threads)
    return labels, threads


def _labels(run: RunData) -> Names:
    return _names(run)[0]


_CACHE: dict[int, tuple[RunData, int, Names, Names]] = {}


def request_label(run: RunData, pid: int | None, request_id: str | None) -> str | None:
    """The program's own name for a request, fit to print; None when it gave none."""
    if request_id is None:
        return None
    labels = _labels(run)
    if not labels:
        return None
    if pid is not None:
        return labels.get((pid, request_id))
    found = {label for (_, rid), label in labels.items() if rid == request_id}
    return found.pop() if len(found) == 1 else None


def request_thread(run: RunData, pid: int | None, request_id: str | None) -> str | None:
    """The thread that served the request, where its process served requests in several."""
    if request_id is None:
        return None
    threads = _names(run)[1]
    if not threads:
        return None
    if pid is not None:
        return threads.get((pid, request_id))
    found = {name for (_, rid), name in threads.items() if rid == request_id}
    return found.pop() if len(found) == 1 else None


def request_name(run: RunData, pid: int | None, request_id: str | None) -> str:
    """`r5`, or `r5 (task 7Q2M-...)` when the program named the request, with `thread T` where
    its process served requests in several threads."""
    if request_id is None:
        return "?"
    label = request_label(run, pid, request_id)
    thread = request_thread(run, pid, request_id)
    parts = [f"task {label}"] if label else []
    if thread:
        parts.append(f"thread {thread}")
    return f"{request_id} ({', '.join(parts)})" if parts else request_id


def name_of(run: RunData, request: Request) -> str:
    return request_name(run, request.pid, request.request_id)
