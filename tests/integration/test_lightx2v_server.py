"""LightX2V's own server (`python -m lightx2v.server`, unmodified) recorded as an operator runs
it: warmup at 64x64 and 96x64, four HTTP requests (64x64, 96x64, then twice 64x96, a width
warmup never served), SIGINT at idle; and a second recording stopped by SIGTERM inside the live
recompile. Then its in-process path alone: `TorchrunInferenceWorker.process_request`, as the
server's processing thread calls it, without HTTP.

Each LightX2V process costs one to three minutes on two CPU cores (start-up, two cold Inductor
compiles in warmup): the module records each scenario once and its tests share it. It needs
LightX2V's Python and checkout (tests/integration/lightx2v_server.py says how) and skips
without them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .lightx2v_server import LATENTS, REQUESTS, Server, environment, lightx2v, prepare


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diag", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@dataclass
class Served:
    trace: Path
    tasks: list[str]  # the task ids the server gave, in request order
    metrics: str  # diag's endpoint after the four requests
    joined: str  # LightX2V's own endpoint then (--metrics-join)
    code: int  # diag record's exit code after SIGINT


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    """Four requests, the counters scraped after them, then SIGINT to diag's pid at idle."""
    server = Server(tmp_path_factory.mktemp("lightx2v"), "served", ("--metrics-join",))
    try:
        server.wait_ready()
        tasks = []
        for height, width in REQUESTS:
            task = server.submit(height, width)
            server.wait_done(task)
            tasks.append(task)
        metrics = server.metrics()
        joined = server.program_metrics()
    finally:
        code = server.stop(signal.SIGINT)
    return Served(server.trace, tasks, metrics, joined, code)


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, int]:
    """One request at the unwarmed width; SIGTERM to diag's pid once its recompile began."""
    server = Server(tmp_path_factory.mktemp("lightx2v"), "cut")
    try:
        server.wait_ready()
        task = server.submit(64, 96)
        server.wait_event(
            lambda e: e.get("ev") == "compile_start" and e.get("phase") == "live", timeout=600
        )
        metrics = server.metrics()
    finally:
        code = server.stop(signal.SIGTERM)
    return server.trace, task, metrics, code


def _findings(trace: Path) -> dict[str, Any]:
    analyzed = _diag("analyze", str(trace), "--json")
    assert analyzed.returncode == 0, analyzed.stderr
    return dict(json.loads(analyzed.stdout))


def test_each_request_has_its_own_shape_and_task_id(served: Served) -> None:
    events = _events(served.trace)
    live = [e for e in events if e["ev"] == "request_start" and e["phase"] == "live"]
    assert [(e["shape"], e.get("label")) for e in live] == [
        (LATENTS[shape], task) for shape, task in zip(REQUESTS, served.tasks, strict=True)
    ]
    assert not [e for e in events if e["ev"] == "collector_error"]


def test_one_live_recompile_at_the_unwarmed_width_named_by_task_id(served: Served) -> None:
    document = _findings(served.trace)
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert [f["id"] for f in errors] == ["live-compile:block_runner:r5"]
    finding = errors[0]
    assert finding["data"]["request_label"] == served.tasks[2]
    assert finding["data"]["shape"] == LATENTS[(64, 96)]
    assert finding["data"]["uncovered"] == ["width"]
    # Requests run on LightX2V's processing thread, warmup on the main thread: diag names it.
    thread = _thread_of(served.trace, "r5")
    assert thread.endswith("(_task_processing_loop)"), thread
    assert finding["title"].startswith(
        f"block_runner recompiled during live request r5 (task {served.tasks[2]}, thread "
        f"{thread}) at step 0 ("
    )
    assert "self.cos_sin._base.stride()[0] == 64*self.cos_sin._base.size()[1]" in finding["title"]
    evidence = "\n".join(finding["evidence"])
    assert "live r5 is 16x2x8x12: width 12 was never warmed" in evidence
    coverage = next(f for f in document["findings"] if f["id"] == "live-compile:warmup-coverage")
    assert coverage["title"] == "Warmup covered 2 of 3 live shape(s); not covered: 16x2x8x12"


def test_a_normal_shutdown_reads_as_one(served: Served) -> None:
    assert served.code == 0
    document = _findings(served.trace)
    status = document["status"]
    assert status["recording"] == "complete"
    assert (
        "stopped by its shutdown handler: SIGINT ran run_server.<locals>._signal_handler"
        in (status["detail"])
    )
    assert document["notices"] == []


def test_the_metrics_endpoints_show_the_live_compile(served: Served) -> None:
    assert 'diag_live_compiles_total{run="compiled",frame="block_runner"} 1' in served.metrics
    assert f'task="{served.tasks[2]}"' in served.metrics
    # --metrics-join: the same counters on LightX2V's own /metrics (its --metric_port).
    assert 'diag_live_compiles_total{frame="block_runner",run="compiled"} 1.0' in served.joined
    assert "lightx2v_" in served.joined  # LightX2V's own metrics are still there


def test_a_stop_inside_the_live_recompile_still_reports_it(cut: tuple[Path, str, str, int]) -> None:
    trace, task, metrics, code = cut
    assert code == 0
    assert 'diag_live_compiles_total{run="compiled",frame="block_runner"} 1' in metrics
    assert 'diag_compiles_in_progress{run="compiled"} 1' in metrics
    document = _findings(trace)
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert [f["id"] for f in errors] == ["live-compile:block_runner:r3"]
    thread = _thread_of(trace, "r3")
    assert errors[0]["title"].startswith(
        f"block_runner recompiled during live request r3 (task {task}, thread {thread}) at step "
        "0; the process ended before the compile finished"
    )
    assert "width 12 was never warmed" in "\n".join(errors[0]["evidence"])
    assert "stopped by its shutdown handler: SIGTERM" in document["status"]["detail"]
    unfinished = [n for n in document["notices"] if n["kind"] == "unfinished"]
    assert len(unfinished) == 1
    assert (
        f"during live request r3 (task {task}, thread {thread}) at step 0"
        in (unfinished[0]["message"])
    )
    checked = _diag("check", str(trace))
    assert checked.returncode == 1, checked.stdout
    assert "FAIL live-compile" in checked.stdout


@dataclass
class Served2:
    tasks: list[str]  # task ids, in request order
    videos: list[bytes]  # the videos the server saved, in request order
    record: dict[str, dict[str, Any]]  # the program's own record: task id -> its thread
    code: int
    trace: Path


#: Two requests sent at once (the second waits in LightX2V's queue): a warmed shape, then a
#: width warmup never served (a live recompile).
TWO = ((64, 64), (64, 96))


def _serve_two(folder: Path, name: str, record: bool) -> Served2:
    """The server without diag or under `diag record`, seeded alike (LIGHTX2V_CPU_SEED), with
    the CPU start-up writing which thread ran each request (LIGHTX2V_CPU_RECORD)."""
    record_file = folder / f"{name}-requests.jsonl"
    env = {"LIGHTX2V_CPU_SEED": "0", "LIGHTX2V_CPU_RECORD": str(record_file)}
    server = Server(folder, name, record=record, env=env)
    videos = [folder / f"{name}-{n}.mp4" for n in range(len(TWO))]
    try:
        server.wait_ready()
        tasks = [
            server.submit(h, w, save_result_path=str(video))
            for (h, w), video in zip(TWO, videos, strict=True)
        ]
        for task in tasks:
            server.wait_done(task)
    finally:
        code = server.stop(signal.SIGINT)
    lines = [json.loads(line) for line in record_file.read_text().splitlines()]
    return Served2(
        tasks,
        [v.read_bytes() for v in videos],
        {line["task_id"]: line for line in lines},
        code,
        server.trace,
    )


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Served2, Served2]:
    folder = tmp_path_factory.mktemp("lightx2v-twice")
    return _serve_two(folder, "plain", record=False), _serve_two(folder, "recorded", record=True)


def test_the_saved_videos_are_byte_identical_with_and_without_diag(
    twice: tuple[Served2, Served2],
) -> None:
    plain, recorded = twice
    assert (plain.code, recorded.code) == (0, 0)
    assert len(recorded.videos[0]) != len(recorded.videos[1])  # two sizes, two videos
    assert recorded.videos == plain.videos


def test_each_request_runs_on_the_thread_diag_names(twice: tuple[Served2, Served2]) -> None:
    _, recorded = twice
    events = _events(recorded.trace)
    starts = [e for e in events if e["ev"] == "request_start"]
    warmup = [e for e in starts if e["phase"] == "warmup"]
    live = [e for e in starts if e["phase"] == "live"]
    assert warmup and all(e["thread"] == "MainThread" for e in warmup)
    # The program's own record: both requests ran on LightX2V's processing thread.
    threads = [recorded.record[task]["thread"] for task in recorded.tasks]
    assert threads[0] == threads[1] and threads[0].endswith("(_task_processing_loop)")
    assert [(e.get("label"), e["thread"]) for e in live] == list(
        zip(recorded.tasks, threads, strict=True)
    )
    # The live recompile (the unwarmed width) is the second request's, on that thread.
    (late,) = [e for e in events if e["ev"] == "compile_end" and e["phase"] == "live"]
    assert (late["request_id"], late["step"], late["thread"]) == (
        live[1]["request_id"],
        0,
        threads[1],
    )
    assert not [e for e in events if e["ev"] == "collector_error"]


WORKER = """
import argparse, asyncio, json, sys

from lightx2v.server.services.inference.worker import TorchrunInferenceWorker

model, config, out = sys.argv[1:4]
args = argparse.Namespace(
    model_path=model, model_cls="wan2.1", task="t2v", config_json=config, lora_dir=None,
    warmup=False,
)
worker = TorchrunInferenceWorker()
assert worker.init(args)
for number, (height, width) in enumerate(((64, 96), (64, 64), (96, 64), (64, 96))):
    task = {
        "task_id": f"TASK-{number}", "prompt": "a cat walks on the grass", "seed": 42,
        "target_shape": [height, width], "save_result_path": f"{out}/task-{number}.mp4",
    }
    result = asyncio.run(worker.process_request(task))
    assert result["status"] == "success", result
"""


def test_process_request_gives_each_request_its_own_shape(tmp_path: Path) -> None:
    """The server's in-process path, no HTTP, no compile (its shapes are the point)."""
    python, checkout = lightx2v()
    model, config = prepare(tmp_path, python)
    config.write_text(json.dumps({**json.loads(config.read_text()), "use_compile": False}))
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    trace = tmp_path / "t"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "diag",
            "record",
            "-o",
            str(trace),
            "--profile",
            "none",
            "--",
            python,
            str(script),
            str(model),
            str(config),
            str(tmp_path),
        ],  # fmt: skip
        env=environment(checkout, tmp_path),
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    events = _events(trace)
    starts = [e for e in events if e["ev"] == "request_start"]
    shapes = [(64, 96), (64, 64), (96, 64), (64, 96)]
    assert [(e["shape"], e.get("label")) for e in starts] == [
        (LATENTS[shape], f"TASK-{n}") for n, shape in enumerate(shapes)
    ]
    steps = [(e["request_id"], e["shape"]) for e in events if e["ev"] == "step_start"]
    assert steps == [(e["request_id"], e["shape"]) for e in starts for _ in range(3)]
    assert not [e for e in events if e["ev"] == "collector_error"]


def _thread_of(trace: Path, request_id: str) -> str:
    """The thread diag recorded for a request."""
    (start,) = [
        e for e in _events(trace) if e["ev"] == "request_start" and e["request_id"] == request_id
    ]
    return str(start["thread"])


def _events(trace: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted((trace / "runs" / "compiled").glob("*/events.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return sorted(found, key=lambda e: e["t"])
