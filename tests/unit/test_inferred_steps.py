"""Inferred steps and requests (collectors/adapters/inferred.py) against a real recording session:
which call opens a request, and how an inferring adapter gives way to one that knows the steps.

A real `Session` writes a real event file; nothing is compiled, so none of its collectors but
the step tracker is started. Pauses are not tested here (they depend on the clock).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diag.collectors.adapters.inferred import (
    RANK_COMPILED_CALLS,
    RANK_MODEL_CALLS,
    InferredSteps,
    mark_request_boundary,
    timestep_of,
)
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


def _boundaries(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    kept = ("adapter", "request_start", "request_end", "step_start", "step_end")
    return [
        (e["ev"], e.get("name") or e.get("request_id"), e.get("step"), e.get("shape"))
        for e in evs
        if e["ev"] in kept
    ]


def test_new_shapes_and_set_timesteps_start_requests(tmp_path: Path) -> None:
    session = _session(tmp_path)
    inferred = InferredSteps(session, "model calls (inferred)", RANK_MODEL_CALLS)
    for shape in ([4, 4], [4, 4], [6, 4], "boundary", [6, 4]):
        if shape == "boundary":
            mark_request_boundary()
            continue
        assert inferred.start(list(shape))
        inferred.end()
    evs = _events(session)
    requests = [(e["request_id"], e["shape"]) for e in evs if e["ev"] == "request_start"]
    assert requests == [("r1", [4, 4]), ("r2", [6, 4]), ("r3", [6, 4])]
    steps = [(e["request_id"], e["step"]) for e in evs if e["ev"] == "step_end"]
    assert steps == [("r1", 0), ("r1", 1), ("r2", 0), ("r3", 0)]
    adapters = [(e["name"], e.get("inferred")) for e in evs if e["ev"] == "adapter"]
    assert adapters == [("model calls (inferred)", True)]


def test_a_step_someone_else_opened_is_left_alone(tmp_path: Path) -> None:
    session = _session(tmp_path)
    inferred = InferredSteps(session, "compiled-calls (inferred)", RANK_COMPILED_CALLS)
    session.steps.step_start()  # an adapter of the same or lower rank, mid-step
    assert not inferred.start([1])
    session.steps.step_end()
    # The request that step opened is not the fallback's either.
    assert not inferred.start([1])
    session.steps.request_end()
    assert inferred.start([1])
    inferred.end()
    evs = _events(session)
    assert [(e["request_id"], e["step"]) for e in evs if e["ev"] == "step_end"] == [
        ("r1", 0),
        ("r2", 0),
    ]


def test_an_adapter_that_knows_steps_replaces_the_inferring_ones(tmp_path: Path) -> None:
    session = _session(tmp_path)
    fallback = InferredSteps(session, "compiled-calls (inferred)", RANK_COMPILED_CALLS)
    models = InferredSteps(session, "model calls (inferred)", RANK_MODEL_CALLS)
    assert fallback.start([8])
    # A model call is better evidence: the fallback's open step and request are closed.
    assert models.start([2, 2])
    assert fallback.silent and not fallback.start([8])
    # diag.api (rank 2): the model calls' open step and request are closed the same way.
    session.announce_adapter("diag.api")
    assert models.silent and not models.start([2, 2])
    session.steps.request_start("mine", [3])
    session.steps.step_start()
    session.announce_adapter("diag.api")  # again, as diag.api does at each call: nothing new
    evs = _events(session)
    assert _boundaries(evs) == [
        ("adapter", "compiled-calls (inferred)", None, None),
        ("request_start", "r1", None, [8]),
        ("step_start", "r1", 0, [8]),
        ("step_end", "r1", 0, None),
        ("request_end", "r1", None, None),
        ("adapter", "model calls (inferred)", None, None),
        ("request_start", "r2", None, [2, 2]),
        ("step_start", "r2", 0, [2, 2]),
        ("step_end", "r2", 0, None),
        ("request_end", "r2", None, None),
        ("adapter", "diag.api", None, None),
        ("request_start", "mine", None, [3]),
        ("step_start", "mine", 0, [3]),
        ("step_end", "mine", 0, None),
        ("request_end", "mine", None, None),
    ]


def test_a_timestep_that_turns_back_starts_a_request(tmp_path: Path) -> None:
    """Same shape throughout: only the timesteps tell the loops apart. A second call at the same
    timestep (a guidance pass) is no new request; timesteps that rise within a loop are fine."""
    session = _session(tmp_path)
    inferred = InferredSteps(session, "model calls (inferred)", RANK_MODEL_CALLS)
    for t in (1000.0, 750.0, 500.0, 500.0, 1000.0, 500.0, 0.0, 0.25, 0.5, 0.0):
        assert inferred.start([4, 4], t)
        inferred.end()
    evs = _events(session)
    steps = [(e["request_id"], e["step"]) for e in evs if e["ev"] == "step_end"]
    assert steps == [
        ("r1", 0),
        ("r1", 1),
        ("r1", 2),
        ("r1", 3),
        ("r2", 0),
        ("r2", 1),
        ("r2", 2),
        ("r3", 0),  # 0.0 -> 0.25 after 1000 -> 500 -> 0: against the fall, a new loop
        ("r3", 1),
        ("r4", 0),  # 0.5 -> 0.0 after a rise
    ]


def test_a_step_spans_the_loop_until_the_next_call(tmp_path: Path) -> None:
    """`spans_calls`: the step stays open after the model call returns and ends at the last
    compiled call before the next step, so a helper's compile between calls is in the step."""
    session = _session(tmp_path)
    inferred = InferredSteps(session, "model calls (inferred)", RANK_MODEL_CALLS)
    inferred.spans_calls = True
    for _ in range(2):
        assert inferred.start([4, 4], None)
        inferred.call_done()
        assert inferred.stepping  # still open between calls
    evs = _events(session)
    assert [(e["request_id"], e["step"]) for e in evs if e["ev"] == "step_end"] == [
        ("r1", 0),
        ("r1", 1),
    ]


def test_timesteps_are_read_without_running_an_operator() -> None:
    import torch

    assert timestep_of(torch, {"timestep": torch.tensor([999.0, 999.0])}) == 999.0
    assert timestep_of(torch, {"timestep": torch.tensor(5)}) == 5.0
    assert timestep_of(torch, {"t": torch.tensor([1.5], dtype=torch.bfloat16)}) == 1.5
    assert timestep_of(torch, {"sigma": 0.25}) == 0.25
    assert timestep_of(torch, {"timestep": torch.arange(10.0)[3:]}) == 3.0  # a view's offset
    assert timestep_of(torch, {"timestep": True}) is None
    assert timestep_of(torch, {"timestep": torch.tensor([1.0]).to_sparse()}) is None
    assert timestep_of(torch, {"timestep": torch.empty(0)}) is None
    assert timestep_of(torch, {"latents": torch.ones(1)}) is None
    with torch.profiler.profile() as prof:
        timestep_of(torch, {"timestep": torch.ones(1)})
    names = {e.name for e in prof.events()}
    assert not names & {"aten::item", "aten::resolve_conj", "aten::_local_scalar_dense"}, names


def test_a_video_latents_frames_height_width_whichever_dim_holds_channels() -> None:
    """Wan and LTX take (B, C, F, H, W); CogVideoX (B, F, C, H, W): the model's `in_channels`
    says which (the fidelity harness saw CogVideoX requests recorded as C x H x W)."""
    from diag.collectors.adapters.diffusers_models import _latent_shape

    assert _latent_shape((1, 16, 2, 8, 12), in_channels=16) == [2, 8, 12]
    assert _latent_shape((1, 2, 4, 8, 12), in_channels=4) == [2, 8, 12]
    assert _latent_shape((1, 4, 4, 8, 12), in_channels=4) == [4, 8, 12]  # ambiguous: as before
    assert _latent_shape((1, 4, 8, 12), in_channels=4) == [8, 12]
    assert _latent_shape(None) is None
