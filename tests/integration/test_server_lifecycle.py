"""A service's life as diag records it: live traffic named by the program's own task ids, a
shutdown handler that ends in `os._exit(0)` (as LightX2V's server does), a stop that lands
inside a live recompile, a recording read while it runs, and the live counters a fleet scrapes.

The program is a small real service (a `torch.compile`d function with a backend of its own,
diag.api marking warmup, requests and steps) under the real `diag record`: the backend holds
or signals its own process during the live recompile, so the stop lands inside that compile
every time. tests/integration/test_lightx2v_server.py does the same to LightX2V's own server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from diag.live.metrics import EventTail, LiveCounters
from diag.trace.inflight import CUT_OFF
from diag.trace.load import load_trace
from diag.tui.app import DiagApp
from tests.tui.support import choose_finding, drive, screen_text

from .lightx2v_server import free_port
from .support import PYTHON, events, manifest, of

SERVICE = """
import os, signal, sys, time
import torch
import diag.api as diag

mode, release = sys.argv[1], sys.argv[2]


def on_shutdown(signum, frame):
    print("shutting down", flush=True)
    os._exit(0)


signal.signal(signal.SIGINT, on_shutdown)
signal.signal(signal.SIGTERM, on_shutdown)
compiles = []


def backend(gm, inputs):
    compiles.append(1)
    if len(compiles) == 2 and mode == "stop-in-compile":
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside this compile
        time.sleep(30)
    if len(compiles) == 2 and mode == "hold":
        while not os.path.exists(release):  # the test reads the recording meanwhile
            time.sleep(0.05)
    return gm.forward


@torch.compile(backend=backend)
def denoise(x):
    return torch.sin(x) * 2 + 1


with diag.phase("warmup"):
    with diag.request(shape=[4]):
        with diag.step():
            denoise(torch.ones(4))
for number, size in ((1, 4), (2, 6), (3, 6)):
    with diag.request(shape=[size], label=f"TASK-{number}"):
        for _ in range(3):
            with diag.step():
                denoise(torch.ones(size))
if mode == "hold" and "prometheus_client" in sys.modules:
    from prometheus_client import generate_latest

    joined = [line for line in generate_latest().decode().splitlines() if "diag_" in line]
    print("JOINED " + "|".join(joined), flush=True)
if mode == "serve":
    print("idle", flush=True)
    while True:  # serving nothing until stopped
        time.sleep(0.1)
print("done", flush=True)
"""


def _start(folder: Path, mode: str, *options: str, imports: str = "") -> subprocess.Popen[str]:
    app = folder / "service.py"
    app.write_text(imports + textwrap.dedent(SERVICE))
    return subprocess.Popen(
        [
            PYTHON,
            "-m",
            "diag",
            "record",
            "-o",
            str(folder / "t"),
            "--profile",
            "none",
            *options,
            "--",
            PYTHON,
            str(app),
            mode,
            str(folder / "release"),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=folder,
    )


def _wait_event(trace: Path, test: Any, proc: subprocess.Popen[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        found = next((e for e in _events(trace) if test(e)), None)
        if found is not None:
            return found
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the event never came")


def _events(trace: Path) -> list[dict[str, Any]]:
    found = []
    for path in (trace / "runs" / "compiled").glob("*/events.jsonl"):
        for line in path.read_bytes().splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", *args], capture_output=True, text=True, timeout=240, check=False
    )


def _live_recompile_started(event: dict[str, Any]) -> bool:
    return event.get("ev") == "compile_start" and event.get("phase") == "live"


# --- a stop inside the live recompile -----------------------------------------------------


@pytest.fixture(scope="module")
def stopped_in_compile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stopped")
    proc = _start(folder, "stop-in-compile")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err  # os._exit(0): the program's own exit code, passed on
    assert "shutting down" in out and "done" not in out
    return folder / "t"


def test_a_compile_cut_off_by_the_shutdown_is_a_live_recompile(stopped_in_compile: Path) -> None:
    trace = load_trace(stopped_in_compile)
    run = trace.compiled
    assert run is not None
    cut = [c for c in run.compiles if c.result == CUT_OFF]
    assert len(cut) == 1
    item = cut[0]
    assert (item.phase, item.request_id, item.step, item.frame and item.frame.name) == (
        "live",
        "r3",
        0,
        "denoise",
    )
    assert item.guards and item.guards[0].kind == "tensor-size"  # its recompile's guards
    assert item.duration_s is not None and item.duration_s > 0  # to the process's last event

    analyzed = _diag("analyze", str(stopped_in_compile), "--json")
    assert analyzed.returncode == 0, analyzed.stderr
    document = json.loads(analyzed.stdout)
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert [f["id"] for f in errors] == ["live-compile:denoise:r3"]
    finding = errors[0]
    assert finding["title"].startswith(
        "denoise recompiled during live request r3 (task TASK-2) at step 0; the process ended "
        "before the compile finished"
    )
    assert finding["data"]["cut_off"] == [item.compile_id]
    assert finding["data"]["request_label"] == "TASK-2"
    claim = finding["claims"][0]
    assert (claim["kind"], claim["request"], claim["step"]) == ("recompile", "r3", 0)
    assert claim["cause"]["guard_kind"] == "tensor-size"

    checked = _diag("check", str(stopped_in_compile))
    assert checked.returncode == 1, checked.stdout
    assert "FAIL live-compile: 1 compile(s) during live requests" in checked.stdout
    assert "the process ended before a compile finished" in checked.stdout
    assert "pass recording" in checked.stdout


def test_the_unfinished_request_step_and_compile_are_named(stopped_in_compile: Path) -> None:
    text = _diag("analyze", str(stopped_in_compile)).stdout
    head = text.splitlines()[0]
    assert head.startswith("recording: complete (exit code 0); process ")
    assert "stopped by its shutdown handler: SIGTERM ran on_shutdown (" in head
    assert "which called os._exit(0)" in head
    assert "ended without reaching diag's exit hook" not in text  # not "cut short"
    notice = next(line for line in text.splitlines() if "left unfinished" in line)
    assert "was stopped by its shutdown handler during live request r3 (task TASK-2) at step 0" in (
        notice
    )
    assert "the request, step 0 (open at least" in notice
    assert "recompile 0/1 (open at least" in notice
    evs = events(stopped_in_compile)
    exit_event = of("os_exit", evs)[0]
    assert (exit_event["code"], exit_event["signal"], exit_event["request_id"]) == (
        0,
        "SIGTERM",
        "r3",
    )
    assert exit_event["compiling"] == ["0/1"]


def test_live_counters_read_the_cut_off_compile(stopped_in_compile: Path) -> None:
    counters = LiveCounters()
    EventTail(stopped_in_compile).read(counters)
    text = counters.exposition()
    assert 'diag_live_compiles_total{run="compiled",frame="denoise"} 1' in text
    assert 'diag_compiles_in_progress{run="compiled"} 1' in text
    assert (
        'diag_last_live_compile_info{run="compiled",finding="live-compile:denoise:r3",'
        'request="r3",task="TASK-2"} 1'
    ) in text


# --- a normal shutdown, at idle -----------------------------------------------------------


def test_a_shutdown_at_idle_reads_as_a_normal_ending(tmp_path: Path) -> None:
    """SIGINT to diag's pid, as an operator or a supervisor stops a server: diag passes it on,
    the program's handler calls os._exit(0) with nothing in flight."""
    proc = _start(tmp_path, "serve")
    trace = tmp_path / "t"
    _wait_event(trace, lambda e: e.get("ev") == "request_end" and e.get("request_id") == "r4", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "shutting down" in out
    assert manifest(trace)["status"] == "complete"
    text = _diag("analyze", str(trace)).stdout
    source = (tmp_path / "service.py").read_text().splitlines()
    line = source.index("def on_shutdown(signum, frame):") + 1
    assert text.splitlines()[0].endswith(
        "stopped by its shutdown handler: SIGINT ran on_shutdown "
        f"({tmp_path / 'service.py'}:{line}), which called os._exit(0)"
    ), text
    assert "NOTICE" not in text, text  # nothing unseen, nothing unfinished
    assert "ERROR   [live-compile] denoise recompiled during live request r3 (task TASK-2)" in text
    run = load_trace(trace).compiled
    assert run is not None
    assert [(r.request_id, r.label) for r in run.requests] == [
        ("w1", None),
        ("r2", "TASK-1"),
        ("r3", "TASK-2"),
        ("r4", "TASK-3"),
    ]


def test_os_exit_outside_a_signal_handler_is_still_cut_short(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("import os, torch\nprint('work', flush=True)\nos._exit(0)\n")
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "record", "-o", str(tmp_path / "t"), "--", PYTHON, str(app)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    exit_event = of("os_exit", events(tmp_path / "t"))[0]
    assert (exit_event["code"], exit_event["signal"], exit_event["handler"]) == (0, None, None)
    text = _diag("analyze", str(tmp_path / "t")).stdout
    assert "ended without reaching diag's exit hook" in text
    assert "stopped by its shutdown handler" not in text


# --- read while it runs, and scraped --------------------------------------------------------


def test_a_recording_in_progress_shows_its_live_compile_and_counts_it(tmp_path: Path) -> None:
    """The live recompile is held open: analyze, check, the TUI and the metrics endpoint read
    the recording meanwhile; then the program goes on and ends normally."""
    pytest.importorskip("prometheus_client")
    port = free_port()
    proc = _start(
        tmp_path,
        "hold",
        "--metrics-port",
        str(port),
        "--metrics-join",
        imports="import prometheus_client\n",
    )
    trace = tmp_path / "t"
    _wait_event(trace, _live_recompile_started, proc)
    try:
        text = _diag("analyze", str(trace)).stdout
        assert text.startswith("recording: still running: diag record (pid "), text
        assert (
            "ERROR   [live-compile] denoise recompiled during live request r3 (task TASK-2) at "
            "step 0; not finished when the trace was read"
        ) in text
        assert "is busy during live request r3 (task TASK-2) at step 0; in progress" in text
        checked = _diag("check", str(trace))
        assert checked.returncode == 1
        assert "FAIL live-compile: 1 compile(s) during live requests" in checked.stdout

        async def script(app: DiagApp, pilot: Pilot[None]) -> None:
            screen = screen_text(app)
            assert "still running" in screen, screen
            assert "denoise recompiled during live request r3 (task TASK-2)" in screen, screen
            # The finding opens its compile, cut off so far; the steps name their task.
            await choose_finding(app, pilot, "live-compile", request_id="r3")
            await pilot.press("enter")
            compiles = app.view("compiles")
            assert [(r.fields["request"], r.fields["task"]) for r in compiles.shown] == [
                ("r3", "TASK-2")
            ]
            assert compiles.shown[0].fields["result"] == CUT_OFF
            await pilot.press("2")
            steps = app.view("steps")
            steps.apply_filter("task:task-3")
            assert {r.fields["request"] for r in steps.shown} == set()  # r4 has not started
            steps.apply_filter("task:task-2")
            assert {r.fields["request"] for r in steps.shown} == {"r3"}
            await pilot.pause()
            assert "r3 (task TASK-2)" in screen_text(app)

        drive(trace, script, size=(200, 40))

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
            assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            scraped = reply.read().decode()
        assert 'diag_live_compiles_total{run="compiled",frame="denoise"} 1' in scraped
        assert 'diag_compiles_in_progress{run="compiled"} 1' in scraped
        assert 'diag_compiles_total{run="compiled",phase="warmup",frame="denoise"} 1' in scraped
    finally:
        (tmp_path / "release").touch()
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert f"diag: metrics on http://127.0.0.1:{port}/metrics" in err
    joined = next(line for line in out.splitlines() if line.startswith("JOINED "))
    assert 'diag_live_compiles_total{frame="denoise",run="compiled"} 1.0' in joined
    finished = _diag("analyze", str(trace)).stdout
    assert finished.startswith("recording: complete (exit code 0)\n"), finished
    assert "denoise recompiled during live request r3 (task TASK-2) at step 0 (" in finished


def test_a_metrics_port_taken_leaves_the_program_alone(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = tmp_path / "app.py"
        app.write_text("import sys, torch\nprint('ran', flush=True)\nsys.exit(3)\n")
        proc = subprocess.run(
            [
                PYTHON,
                "-m",
                "diag",
                "record",
                "-o",
                str(tmp_path / "t"),
                "--metrics-port",
                str(port),
                "--",
                PYTHON,
                str(app),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert proc.returncode == 3
    assert proc.stdout == "ran\n"
    assert f"diag: metrics not served: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "recording anyway" in proc.stderr
    assert os.path.exists(tmp_path / "t" / "manifest.json")
