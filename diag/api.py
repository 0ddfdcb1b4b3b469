"""Annotate your own loop for `diag record`: phases, requests and steps.

    import diag.api as diag

    with diag.phase("warmup"):
        run_warmup()
    for prompt in prompts:
        with diag.request(shape=[81, 480, 832]):
            for i in range(steps):
                with diag.step():
                    denoise(i)

Outside `diag record` every call is a cheap no-op, and this module imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any


def _tracker(per_step: bool = True) -> Any:
    """A handle on the recording's step tracker whose calls never raise into the program
    (collectors/hooks.py); None outside `diag record`, and for the per-step calls (`request`,
    `step`) while the session is paused (Session.pause). The per-step calls announce diag.api
    as the process's adapter."""
    session_module = sys.modules.get("diag.collectors.session")
    session = session_module.current_session() if session_module is not None else None
    if session is None or session.steps is None or (per_step and session.paused):
        return None
    # A phase marks no step boundary: it keeps inferred boundaries out (rank 2), but an adapter
    # that reports the requests inside it (a diffusers pipeline's, rank 3) names the process's
    # adapter, and with it the request shape's dims. request() and step() are diag.api's own.
    session.guarded("api", session.announce_adapter, "diag.api", 3 if per_step else 2)
    return _Guarded(session)


class _Guarded:
    """The step tracker's boundary calls, each through the session's hook guard: a marker the
    program placed behaves the same with diag recording or not."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        session = self._session

        def call(*args: Any, **kwargs: Any) -> Any:
            return session.guarded("api", getattr(session.steps, name), *args, **kwargs)

        return call


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Everything inside runs in phase `name` ("warmup" or "live"); live resumes after."""
    tracker = _tracker(per_step=False)
    if tracker is None:
        yield
        return
    tracker.set_phase(name)
    try:
        yield
    finally:
        tracker.request_end()
        tracker.set_phase("live")


@contextlib.contextmanager
def request(
    request_id: str | None = None,
    shape: Sequence[int] | None = None,
    label: str | None = None,
) -> Iterator[None]:
    """One request (one pipeline call): its steps follow. `label`: your own name for it (a task
    id), shown beside diag's request id."""
    tracker = _tracker()
    if tracker is None:
        yield
        return
    tracker.request_start(request_id, _shape_list(shape), label=label)
    try:
        yield
    finally:
        tracker.request_end()


def _shape_list(shape: Sequence[int] | None) -> list[int] | None:
    try:
        return list(shape) if shape is not None else None
    except TypeError:  # not a sequence: recorded without a shape, the program unaffected
        return None


@contextlib.contextmanager
def step(index: int | None = None) -> Iterator[None]:
    """One denoising step."""
    tracker = _tracker()
    if tracker is None:
        yield
        return
    tracker.step_start(index)
    try:
        yield
    finally:
        tracker.step_end()


def warmup_shapes(default: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The warmup request shapes to serve: `diag warmup-plan --verify`'s plan when it runs this
    program (DIAG_WARMUP_SHAPES), else `default`. Read it where the program lists its warmup."""
    return _shapes("DIAG_WARMUP_SHAPES", default)


def live_shapes(default: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The live request shapes to serve: the recorded ones under `diag warmup-plan --verify`
    (DIAG_LIVE_SHAPES), else `default`."""
    return _shapes("DIAG_LIVE_SHAPES", default)


def _shapes(variable: str, default: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    import json
    import os

    text = os.environ.get(variable)
    fallback = [tuple(int(v) for v in shape) for shape in default]
    if not text:
        return fallback
    try:
        value = json.loads(text)
        return [tuple(int(v) for v in shape) for shape in value]
    except (ValueError, TypeError):
        # Never fail the program for diag's sake: a malformed value means the default.
        return fallback


#: A request as `warmup_requests()` and `live_requests()` give it: its shape and the scalar call
#: arguments to send with it (`{"guidance_scale": 1.0}` for a CFG-off pipeline call).
ShapedRequest = tuple[tuple[int, ...], dict[str, Any]]


def warmup_requests(
    default: Sequence[tuple[Sequence[int], Mapping[str, Any]]],
) -> list[ShapedRequest]:
    """The warmup requests to serve, each `(shape, params)`: `diag warmup-plan --verify`'s plan
    when it runs this program (DIAG_WARMUP_CALLS), else `default`. Unlike warmup_shapes(),
    a variant whose shape repeats another request's comes with what tells it apart (the call
    arguments the recorded live request passed, e.g. CFG off): send `params` with the call."""
    return _requests("DIAG_WARMUP_CALLS", default)


def live_requests(
    default: Sequence[tuple[Sequence[int], Mapping[str, Any]]],
) -> list[ShapedRequest]:
    """The live requests to serve, each `(shape, params)`: the recorded ones under
    `diag warmup-plan --verify` (DIAG_LIVE_CALLS), else `default`."""
    return _requests("DIAG_LIVE_CALLS", default)


def _requests(
    variable: str, default: Sequence[tuple[Sequence[int], Mapping[str, Any]]]
) -> list[ShapedRequest]:
    import json
    import os

    fallback = [(tuple(int(v) for v in shape), dict(params)) for shape, params in default]
    text = os.environ.get(variable)
    if not text:
        return fallback
    try:
        value = json.loads(text)
        out: list[ShapedRequest] = []
        for item in value:
            params = item.get("params") or {}
            if not isinstance(params, dict):
                return fallback
            out.append((tuple(int(v) for v in item["shape"]), dict(params)))
        return out
    except (ValueError, TypeError, KeyError, AttributeError):
        # Never fail the program for diag's sake: a malformed value means the default.
        return fallback
