"""A LightX2V request's shape and name come from the request itself.

LightX2V's server (`TorchrunInferenceWorker.process_request`) keeps one `input_info` for every
request: it updates it from the task (`update_input_info_from_dict`), puts the task in the
runner's config (`runner.set_config(task_data)`, the task id with it) and calls
`run_pipeline(self.input_info)`. Until the runner computes this request's latent shape,
`input_info.latent_shape` still holds the previous request's. Here that loop runs on the
stand-in LightX2V of test_record_lightx2v.py (its structure, real tensors and aot_eager
compiles); tests/integration/test_lightx2v_server.py runs it on the real LightX2V.

The shape check itself (a shape that disagrees with the first step's latents) is driven through
the adapter's own function with a real session and step tracker.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from diag.collectors.adapters.lightx2v import check_request_shape
from diag.collectors.session import Session
from diag.collectors.steps import StepTracker
from diag.trace.lines import iter_events
from diag.trace.load import load_trace

from .support import PYTHON, diag_record, events, of
from .test_record_lightx2v import BASE_CONFIG, write_standin

SERVE = """
import argparse, sys

from lightx2v.infer import init_runner
from lightx2v.utils.input_info import init_empty_input_info, update_input_info_from_dict
from lightx2v.utils.set_config import set_config

args = argparse.Namespace(
    model_cls="wan2.1", task="t2v", model_path=sys.argv[1], config_json=sys.argv[2],
    warmup=True, prompt="", negative_prompt="", seed=42, target_shape=[],
    save_result_path=None, support_tasks=[],
)
config = set_config(args)
runner = init_runner(config)
input_info = init_empty_input_info("t2v")  # one for every request, as the server keeps it
for task_id, target in (("TASK-A", [32, 48]), ("TASK-B", [32, 32]), ("TASK-C", [32, 48])):
    task = {"task_id": task_id, "prompt": "a cat", "target_shape": target}
    update_input_info_from_dict(input_info, task)
    runner.config.update(task)  # the runner's set_config(task_data)
    runner.run_pipeline(input_info)
"""


def test_each_request_of_a_reused_input_info_has_its_own_shape_and_task_id(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    write_standin(src)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**BASE_CONFIG, "infer_steps": 2}))
    serve = tmp_path / "serve.py"
    serve.write_text(textwrap.dedent(SERVE))
    trace = tmp_path / "trace"
    proc = diag_record(
        trace,
        PYTHON,
        str(serve),
        str(tmp_path / "weights"),
        str(config),
        options=("--profile", "none"),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(src)},
    )
    assert proc.returncode == 0, proc.stderr
    # What LightX2V itself denoised: [4, 2, 4, 6], then [4, 2, 4, 4], then [4, 2, 4, 6] again.
    done = [line for line in proc.stdout.splitlines() if line.startswith("pipeline done")]
    assert done == [
        "pipeline done: [4, 2, 4, 6]",
        "pipeline done: [4, 2, 4, 4]",
        "pipeline done: [4, 2, 4, 6]",
    ]
    evs = events(trace)
    live = [e for e in of("request_start", evs) if e["phase"] == "live"]
    assert [(e["request_id"], e["shape"], e.get("label")) for e in live] == [
        ("r3", [4, 2, 4, 6], "TASK-A"),
        ("r4", [4, 2, 4, 4], "TASK-B"),
        ("r5", [4, 2, 4, 6], "TASK-C"),
    ]
    steps = [(e["request_id"], e["shape"]) for e in of("step_start", evs) if e["phase"] == "live"]
    assert steps == [(e["request_id"], e["shape"]) for e in live for _ in range(2)]
    assert not of("collector_error", evs), of("collector_error", evs)

    analyzed = load_trace(trace).compiled
    assert analyzed is not None
    assert [(r.request_id, r.label) for r in analyzed.requests if r.phase == "live"] == [
        ("r3", "TASK-A"),
        ("r4", "TASK-B"),
        ("r5", "TASK-C"),
    ]


def test_a_shape_the_first_step_contradicts_is_a_collector_error_and_corrected(
    tmp_path: Path,
) -> None:
    session = Session(tmp_path, "compiled")
    session.steps = StepTracker(session)
    steps = session.steps
    steps.request_start(None, [16, 2, 8, 8], 3, label="TASK-1")
    check_request_shape(session, steps, [16, 2, 8, 12])
    steps.step_start(0, [16, 2, 8, 12])
    steps.step_end()
    steps.request_end()
    steps.request_start(None, [16, 2, 8, 8], 3)
    check_request_shape(session, steps, [16, 2, 8, 8])  # agrees: nothing written
    steps.request_end()
    session.writer.close()
    evs = list(iter_events(session.proc_dir / "events.jsonl"))
    errors = of("collector_error", evs)
    assert len(errors) == 1
    error = errors[0]
    assert error["where"] == "adapter.request_shape"
    assert (error["request_id"], error["reported"], error["shape"]) == (
        "r1",
        [16, 2, 8, 8],
        [16, 2, 8, 12],
    )
    assert (
        "opened with shape 16x2x8x8, but its first step's latents are 16x2x8x12" in (error["error"])
    )
    assert of("step_start", evs)[0]["shape"] == [16, 2, 8, 12]
    # The reader takes the steps' shape for the request (diag.trace.settle).
    (tmp_path / "manifest.json").write_text(
        json.dumps({"format": "diag-trace", "version": 1, "status": "complete", "runs": []})
    )
    run = load_trace(tmp_path).compiled
    assert run is not None
    assert [(r.request_id, r.shape, r.label) for r in run.requests] == [
        ("r1", [16, 2, 8, 12], "TASK-1"),
        ("r2", [16, 2, 8, 8], None),
    ]
    assert len(run.collector_errors) == 1
