"""How `diag warmup-plan --verify` reaches LightX2V, in pieces that need no LightX2V (the real
runs are tests/integration/test_lightx2v_warmup_verify.py and, recorded,
test_lightx2v_warmup_plan.py): the adapter puts the plan in the runner's own warmup entry only
when `--verify` set DIAG_LIGHTX2V_WARMUP, on the instance, leaving the class alone; and
`lightx2v.infer`'s `--target_shape` becomes the recorded live request's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.collectors.adapters.lightx2v import WARMUP_ENV, _warmup_entry
from diag.collectors.session import Session
from diag.warmup.verify import _with_target_shape


class Runner:
    """The shape of LightX2V's WanRunner that the adapter reads: the class attribute its warmup
    iterates (`self._WARMUP_RESOLUTIONS`) and its config dict."""

    _WARMUP_RESOLUTIONS = ((480, 480), (720, 1280))

    def __init__(self) -> None:
        self.config = {"model_cls": "wan2.1", "task": "t2v", "vae_stride": (4, 8, 8)}


class Ltx2(Runner):
    _UPSAMPLER_WARMUP_RESOLUTIONS = ((480, 480), (1024, 1536))


def _events(tmp_path: Path, session: Session) -> list[dict[str, object]]:
    session.writer.close()
    [path] = tmp_path.glob("runs/compiled/*/events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_without_verify_the_runner_is_recorded_and_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WARMUP_ENV, raising=False)
    session = Session(tmp_path, "compiled")
    runner = Runner()
    _warmup_entry(session, runner)
    assert "_WARMUP_RESOLUTIONS" not in vars(runner)
    [event] = _events(tmp_path, session)
    assert event["ev"] == "lightx2v_runner" and event["applied"] is False
    assert event["warmup_attr"] == "_WARMUP_RESOLUTIONS"
    assert event["warmup_resolutions"] == [[480, 480], [720, 1280]]
    assert event["vae_stride"] == [4, 8, 8] and event["runner"].endswith(".Runner")


def test_under_verify_the_plan_goes_in_the_instances_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WARMUP_ENV, "[[64, 96], [128, 64]]")
    session = Session(tmp_path, "compiled")
    runner, other = Runner(), Runner()
    _warmup_entry(session, runner)
    assert runner._WARMUP_RESOLUTIONS == ((64, 96), (128, 64))
    assert other._WARMUP_RESOLUTIONS == ((480, 480), (720, 1280))  # the class is untouched
    [event] = _events(tmp_path, session)
    assert event["applied"] is True and event["warmup_resolutions"] == [[64, 96], [128, 64]]


def test_ltx2_with_its_upsampler_reads_the_other_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WARMUP_ENV, "[[64, 96]]")
    session = Session(tmp_path, "compiled")
    runner = Ltx2()
    runner.config["use_upsampler"] = True
    _warmup_entry(session, runner)
    assert runner._UPSAMPLER_WARMUP_RESOLUTIONS == ((64, 96),)
    assert runner._WARMUP_RESOLUTIONS == ((480, 480), (720, 1280))
    [event] = _events(tmp_path, session)
    assert event["warmup_attr"] == "_UPSAMPLER_WARMUP_RESOLUTIONS"


def test_a_malformed_plan_leaves_the_runner_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WARMUP_ENV, "[[64]]")
    session = Session(tmp_path, "compiled")
    runner = Runner()
    _warmup_entry(session, runner)
    assert "_WARMUP_RESOLUTIONS" not in vars(runner)
    assert _events(tmp_path, session)[0]["applied"] is False


def test_target_shape_is_replaced() -> None:
    command = ["python", "-m", "lightx2v.infer", "--target_shape", "64", "64", "--warmup"]
    assert _with_target_shape(command, 64, 96) == [
        "python", "-m", "lightx2v.infer", "--warmup", "--target_shape", "64", "96",
    ]  # fmt: skip
    assert _with_target_shape(["python", "-m", "lightx2v.infer"], 8, 16)[-3:] == [
        "--target_shape", "8", "16",
    ]  # fmt: skip
