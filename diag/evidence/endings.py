"""How processes ended when they skipped diag's exit hook, and what they left unfinished.

A server's shutdown handler that ends in `os._exit(0)` (LightX2V's, on SIGINT or SIGTERM, after
uvicorn's graceful shutdown) is that program's normal ending: the collectors' `os_exit` event
says which signal's handler called it, and such a process is "stopped by its shutdown handler",
not cut short. Whatever a process began and never ended (diag.trace.inflight: a request, a
step, a compile, a profiler window, a CUDA-graph recording) is named in one notice per process.

diag.evidence.status calls these; standard library only (`diag check` imports it).
"""

from __future__ import annotations

from typing import Any

from diag.evidence.request_names import request_name
from diag.trace.run import Event, RunData

UNFINISHED = "unfinished"


def handler_exits(run: RunData) -> dict[int, Event]:
    """pid -> its `os_exit` event, for processes that a Python handler of a shutdown signal
    ended with os._exit (and that did not also reach diag's exit hook)."""
    ended = {p.pid for p in run.processes if p.ended}
    return {
        e.pid: e
        for e in run.of("os_exit")
        if isinstance(e.data.get("signal"), str) and e.pid not in ended
    }


def _printable(value: Any, limit: int = 120) -> str:
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text[:limit]


def _handler_text(event: Event) -> str:
    handler = event.data.get("handler")
    handler = handler if isinstance(handler, dict) else {}
    name = _printable(handler.get("name") or "its handler")
    file, line = handler.get("file"), handler.get("line")
    where = f" ({_printable(file, 200)}:{line})" if isinstance(file, str) else ""
    code = event.data.get("code")
    return (
        f"{_printable(event.data.get('signal'))} ran {name}{where}, which called "
        f"os._exit({code if isinstance(code, int) else '?'})"
    )


def shutdown_detail(run: RunData) -> str | None:
    """`process 4242 stopped by its shutdown handler: SIGINT ran _signal_handler (...), which
    called os._exit(0)`, for each process of `run` that ended that way."""
    stops = handler_exits(run)
    if not stops:
        return None
    parts = [
        f"process {pid} stopped by its shutdown handler: {_handler_text(event)}"
        for pid, event in list(stops.items())[:4]
    ]
    more = f"; and {len(stops) - 4} more" if len(stops) > 4 else ""
    return "; ".join(parts) + more


def unfinished_messages(run: RunData, running: bool) -> list[str]:
    """One sentence per process of `run` that left something unfinished."""
    by_pid: dict[int, list[Any]] = {}
    for item in run.unfinished:
        by_pid.setdefault(item.pid, []).append(item)
    stops = handler_exits(run)
    messages = []
    for pid, items in by_pid.items():
        request = next((u for u in items if u.kind == "request"), None)
        step = next((u for u in items if u.kind == "step"), None)
        where = ""
        if request is not None:
            where = f" during {request.phase} request {request_name(run, pid, request.request_id)}"
            where += f" at step {step.step}" if step is not None else ""
        if running:
            head = f"process {pid} of run {run.label} is busy{where}; in progress when read"
        elif pid in stops:
            head = f"process {pid} of run {run.label} was stopped by its shutdown handler{where}"
            head += "; left unfinished"
        else:
            head = f"process {pid} of run {run.label} ended{where}; left unfinished"
        named = [_named(run, u) for u in items]
        messages.append(f"{head}: {_join(named)}")
    return messages


def _named(run: RunData, item: Any) -> str:
    since = f"open at least {item.open_s:.2f} s"
    if item.kind == "request":
        return "the request"
    if item.kind == "step":
        return f"step {item.step} ({since})"
    if item.kind == "compile":
        what = "recompile" if item.recompile else "compile"
        return f"{what} {_printable(item.name)} ({since}; see live-compile)"
    if item.kind == "profile-window":
        return f"profiler window {_printable(item.name)} (no Kineto trace written)"
    if item.kind == "cudagraph-record":
        return f"the CUDA-graph recording of compile {_printable(item.name)} ({since})"
    return f"{_printable(item.kind)} {_printable(item.name)}"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
