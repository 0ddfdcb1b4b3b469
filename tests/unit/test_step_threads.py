"""Requests and steps belong to threads (collectors/steps.py, adapters/inferred.py): each thread
has its own open request and step, interleaved boundaries of two threads stay apart, a position
answers for the calling thread, and the diag.api markers work from a worker thread.

A real `Session` writes a real event file; the threads run one at a time, in a fixed order
(each boundary is made in its thread and joined before the next), so the interleaving is the
same on every run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diag.collectors.adapters.inferred import RANK_MODEL_CALLS, InferredSteps, close_all
from diag.collectors.session import Session
from diag.collectors.steps import StepTracker
from diag.trace.lines import iter_events


def _session(tmp_path: Path) -> Session:
    session = Session(tmp_path, "compiled")
    session.steps = StepTracker(session)
    return session


def _events(session: Session) -> list[dict[str, Any]]:
    session.steps.close()
    session.writer.close()
    return list(iter_events(session.proc_dir / "events.jsonl"))


class Worker:
    """A named thread that runs each call it is given when asked, and answers before the next."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._out: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def __call__(self, job: Callable[[], Any]) -> Any:
        self._jobs.put(job)
        return self._out.get(timeout=30)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._out.put(job())


def test_interleaved_requests_of_two_threads_stay_apart(tmp_path: Path) -> None:
    session = _session(tmp_path)
    steps = session.steps
    a, b = Worker("worker-a"), Worker("worker-b")
    a(lambda: steps.request_start(shape=[16]))
    b(lambda: steps.request_start(shape=[32]))
    for index in range(2):
        a(lambda index=index: steps.step_start(index))
        b(lambda index=index: steps.step_start(index))
        # A compile in b's thread belongs to b's open step, whatever a has open.
        assert b(steps.position) == {
            "phase": "live",
            "request_id": "r2",
            "step": index,
            "thread": "worker-b",
        }
        a(steps.step_end)
        b(steps.step_end)
    assert steps.position()["request_id"] is None  # the main thread has none open
    a(steps.request_end)
    evs = _events(session)  # b's request is still open: ended at close
    kept = ("request_start", "request_end", "step_start", "step_end")
    seen = [(e["ev"], e["request_id"], e.get("step"), e["thread"]) for e in evs if e["ev"] in kept]
    assert seen == [
        ("request_start", "r1", None, "worker-a"),
        ("request_start", "r2", None, "worker-b"),
        ("step_start", "r1", 0, "worker-a"),
        ("step_start", "r2", 0, "worker-b"),
        ("step_end", "r1", 0, "worker-a"),
        ("step_end", "r2", 0, "worker-b"),
        ("step_start", "r1", 1, "worker-a"),
        ("step_start", "r2", 1, "worker-b"),
        ("step_end", "r1", 1, "worker-a"),
        ("step_end", "r2", 1, "worker-b"),
        ("request_end", "r1", None, "worker-a"),
        ("request_end", "r2", None, "worker-b"),
    ]


def test_warmup_requests_count_requests_in_the_order_served(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("DIAG_WARMUP_REQUESTS", "1")
    session = _session(tmp_path)
    steps = session.steps
    assert steps.warmup_requests == 1
    steps.request_start(shape=[16])  # the main thread's warmup
    steps.request_end()
    worker = Worker("serve-worker_0")
    worker(lambda: steps.request_start(shape=[32]))
    worker(steps.request_end)
    evs = _events(session)
    starts = [(e["request_id"], e["phase"], e["thread"]) for e in evs if e["ev"] == "request_start"]
    assert starts == [("w1", "warmup", "MainThread"), ("r2", "live", "serve-worker_0")]


def test_inferred_steps_follow_every_thread(tmp_path: Path) -> None:
    session = _session(tmp_path)
    inferred = InferredSteps(session, "model calls (inferred)", RANK_MODEL_CALLS)
    inferred.spans_calls = True
    main_open = inferred.start([16])  # warmup in the main thread, left open after its call
    inferred.call_done()
    worker = Worker("serve-worker_0")
    assert main_open
    assert worker(lambda: inferred.start([32]))  # the worker's first call opens its own
    worker(inferred.call_done)
    assert worker(lambda: inferred.start([32]))
    worker(inferred.call_done)
    close_all()
    evs = _events(session)
    steps = [(e["request_id"], e["step"], e["thread"]) for e in evs if e["ev"] == "step_end"]
    assert sorted(steps) == [
        ("r1", 0, "MainThread"),
        ("r2", 0, "serve-worker_0"),
        ("r2", 1, "serve-worker_0"),
    ]
