"""Requests served in worker threads and compile stances, as services run them.

Real runs (aot_eager, a tiny block) of programs written as users write them: warmup in the main
thread, then each request served by a worker thread (a ThreadPoolExecutor, a queue-fed thread,
asyncio's run_in_executor, two workers serving two requests at once, step by step in turn). One
live request is at a size warmup missed (`plant`). The program keeps torch's own record: the id
of each compile (torch._dynamo.callback.on_compile_start), the thread that compiled, and the
request and step the program was serving there. diag must put each compile in the request, step
and thread that record shows, and a clean run must pass `diag check`.

The stance programs pin the compiled code after warmup with set_stance("fail_on_recompile") and
serve a refused request again under force_eager (a `with` block, or set_stance called twice).
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import textwrap
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from diag.trace.load import load_trace

from .support import PYTHON, diag_record, events, of

SERVE = """
# A service as users write one: warmup in the main thread, requests served by worker threads.
import asyncio, json, queue, sys, threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch._dynamo.callback

topology, record_file = sys.argv[1], sys.argv[2]
plant = len(sys.argv) > 3 and sys.argv[3] == "plant"
torch.manual_seed(0)

# Torch's record: each compile's id, the thread that compiled, the request and step it served.
where = threading.local()
record = []


def on_start(args):
    record.append({
        "compile_id": str(args.compile_id),
        "thread": threading.current_thread().name,
        "request": getattr(where, "request", None),
        "step": getattr(where, "step", None),
    })


torch._dynamo.callback.on_compile_start(on_start)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, t):
        return x + torch.tanh(self.proj(x)) * t


model = torch.compile(Block().eval(), backend="aot_eager", dynamic=False)


@torch.no_grad()
def serve(name, tokens, steps=3, barrier=None):
    where.request = name
    x = torch.randn(1, tokens, 8, generator=torch.Generator().manual_seed(tokens))
    for i in range(steps):
        where.step = i
        if barrier is not None:
            barrier.wait()
        x = x - 0.1 * model(x, t=torch.tensor([1.0 - i / steps]))
    where.request = where.step = None
    return round(float(x.double().sum()), 4)


serve("warmup-16", 16)
serve("warmup-24", 24)
live = [("live-1", 16), ("live-2", 32 if plant else 24), ("live-3", 16), ("live-4", 24)]
out = {}
if topology == "pool":
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-worker") as pool:
        for name, tokens in live:
            out[name] = pool.submit(serve, name, tokens).result()
elif topology == "queue":
    jobs, results = queue.Queue(), queue.Queue()

    def worker():
        while (job := jobs.get()) is not None:
            results.put((job[0], serve(*job)))

    thread = threading.Thread(target=worker, name="queue-worker")
    thread.start()
    for job in live:
        jobs.put(job)
        name, value = results.get()
        out[name] = value
    jobs.put(None)
    thread.join()
elif topology == "asyncio":
    async def main():
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="aio") as pool:
            for name, tokens in live:
                out[name] = await loop.run_in_executor(pool, serve, name, tokens)

    asyncio.run(main())
elif topology == "concurrent":
    # Two workers serve two requests at once, step by step in turn (their steps interleave).
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="serve-worker") as pool:
        for pair in (live[:2], live[2:]):
            barrier = threading.Barrier(2)
            futures = [pool.submit(serve, name, tokens, 3, barrier) for name, tokens in pair]
            for (name, _), future in zip(pair, futures):
                out[name] = future.result()
print(json.dumps(out, sort_keys=True), flush=True)
with open(record_file, "w") as f:
    json.dump(record, f)
"""

PINNED = """
# A service that pins its compiled code after warmup, as torch's docs advise for serving.
import json, sys, threading
from concurrent.futures import ThreadPoolExecutor

import torch

torch.manual_seed(0)
form = sys.argv[1] if len(sys.argv) > 1 else "with"


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, t):
        return x + torch.tanh(self.proj(x)) * t


model = torch.compile(Block().eval(), backend="aot_eager", dynamic=False)


@torch.no_grad()
def denoise(tokens, steps=3):
    x = torch.randn(1, tokens, 8, generator=torch.Generator().manual_seed(tokens))
    for i in range(steps):
        x = x - 0.1 * model(x, t=torch.tensor([1.0 - i / steps]))
    return round(float(x.double().sum()), 4)


def serve(tokens):
    try:
        return denoise(tokens)
    except RuntimeError as exc:  # a shape warmup missed: serve it eagerly rather than fail
        print("refused:", str(exc).splitlines()[0][:70], flush=True)
        if form == "with":
            with torch.compiler.set_stance("force_eager"):
                return denoise(tokens)
        torch.compiler.set_stance("force_eager")
        try:
            return denoise(tokens)
        finally:
            torch.compiler.set_stance("fail_on_recompile")


for tokens in (16, 24):
    denoise(tokens)
torch.compiler.set_stance("fail_on_recompile")
out = []
with ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-worker") as pool:
    for tokens in (16, 32, 24, 16):
        out.append(pool.submit(serve, tokens).result())
print(json.dumps(out), flush=True)
"""

HTTP = """
# A FastAPI service under uvicorn: sync endpoints, so each request runs in uvicorn's threadpool.
import sys

import torch
import uvicorn
from fastapi import FastAPI

port = int(sys.argv[1])
torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, t):
        return x + torch.tanh(self.proj(x)) * t


model = torch.compile(Block().eval(), backend="aot_eager", dynamic=False)


@torch.no_grad()
def denoise(tokens, steps=3):
    x = torch.randn(1, tokens, 8, generator=torch.Generator().manual_seed(tokens))
    for i in range(steps):
        x = x - 0.1 * model(x, t=torch.tensor([1.0 - i / steps]))
    return [round(v, 4) for v in x.double().sum(dim=(0, 2)).tolist()]


for tokens in (16, 24):  # warmup, in the main thread, before the server starts
    denoise(tokens)

app = FastAPI()
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))


@app.get("/health")
def health():
    return {"ok": True}


@app.get("/generate")
def generate(tokens: int):
    return {"tokens": tokens, "latent": denoise(tokens)}


@app.post("/shutdown")
def shutdown():
    server.should_exit = True
    return {"ok": True}


server.run()
"""

TOPOLOGIES = ("pool", "queue", "asyncio", "concurrent")


def _record(
    tmp: Path, source: str, *args: str
) -> tuple[Path, subprocess.CompletedProcess[str], str]:
    """A recorded run (--warmup-requests 2, no profiler) and the program's output without diag."""
    app = tmp / "app.py"
    app.write_text(textwrap.dedent(source))
    plain = subprocess.run(
        [PYTHON, str(app), *args], capture_output=True, text=True, timeout=240, check=True
    )
    trace = tmp / "trace"
    proc = diag_record(
        trace, PYTHON, str(app), *args, options=("--warmup-requests", "2", "--profile", "none")
    )
    assert proc.returncode == 0, proc.stderr
    return trace, proc, plain.stdout


def _check(trace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", "check", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module", params=TOPOLOGIES)
def planted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp(f"threads-{request.param}")
    torch_record = tmp / "torch.json"
    trace, proc, plain = _record(tmp, SERVE, request.param, str(torch_record), "plant")
    return request.param, trace, proc, plain, json.loads(torch_record.read_text())


def test_a_live_recompile_in_a_worker_is_placed_where_torch_saw_it(planted: Any) -> None:
    topology, trace, proc, plain, torch_record = planted
    assert proc.stdout.startswith(plain)  # the program's responses, unchanged
    evs = events(trace)
    assert not of("collector_error", evs)
    # torch's record: the live recompile is 0/2, in a worker thread, step 0 of "live-2".
    (live,) = [c for c in torch_record if c["request"] == "live-2"]
    assert live["compile_id"] == "0/2" and live["step"] == 0
    assert live["thread"] != "MainThread"
    compiles = {c["compile_id"]: c for c in of("compile_end", evs)}
    assert [c["thread"] for c in compiles.values()] == [c["thread"] for c in torch_record]
    placed = compiles["0/2"]
    assert (placed["phase"], placed["step"], placed["thread"]) == ("live", 0, live["thread"])
    # Its request is the worker's request of the planted size, and no other request holds it.
    starts = {e["request_id"]: e for e in of("request_start", evs)}
    assert starts[placed["request_id"]]["shape"] == [1, 32, 8]
    assert starts[placed["request_id"]]["thread"] == live["thread"]
    (run,) = load_trace(trace).subject_runs
    assert [r.phase for r in run.requests] == ["warmup"] * 2 + ["live"] * 4
    assert [r.thread for r in run.requests[:2]] == ["MainThread"] * 2
    assert "MainThread" not in {r.thread for r in run.requests[2:]}
    assert all(r.step_count == 3 for r in run.requests), [
        (r.request_id, r.step_count) for r in run.requests
    ]
    checked = _check(trace)
    assert checked.returncode == 1, checked.stdout
    assert "FAIL live-compile" in checked.stdout
    assert f"{placed['request_id']} step 0" in checked.stdout
    assert "4 live request(s), 12 live step(s)" in checked.stdout


@pytest.mark.parametrize("topology", ["asyncio", "concurrent"])
def test_a_clean_threaded_service_passes_check(tmp_path: Path, topology: str) -> None:
    trace, proc, plain = _record(tmp_path, SERVE, topology, str(tmp_path / "torch.json"))
    assert proc.stdout.startswith(plain)
    checked = _check(trace)
    assert checked.returncode == 0, checked.stdout
    assert "4 live request(s), 12 live step(s)" in checked.stdout


@pytest.fixture(scope="module", params=["with", "function"])
def pinned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp(f"pinned-{request.param}")
    trace, proc, plain = _record(tmp, PINNED, request.param)
    return trace, proc, plain


def test_set_stance_changes_are_recorded_in_the_thread_that_made_them(pinned: Any) -> None:
    trace, proc, plain = pinned
    # The program saw the same refusal and served the same responses.
    assert proc.stdout.startswith(plain)
    stances = [(e["stance"], e["prior"], e["thread"]) for e in of("stance", events(trace))]
    assert stances == [
        ("fail_on_recompile", "default", "MainThread"),
        ("force_eager", "fail_on_recompile", "serve-worker_0"),
        ("fail_on_recompile", "force_eager", "serve-worker_0"),
    ]


def test_a_refused_recompile_is_a_live_error_with_torchs_guard(pinned: Any) -> None:
    trace, _, _ = pinned
    evs = events(trace)
    assert not of("compile_end", [e for e in evs if e.get("phase") == "live"])
    (refused,) = of("recompile_refused", evs)
    assert refused["frame"]["name"] == "forward"
    assert refused["thread"] == "serve-worker_0" and refused["step"] == 0
    starts = {e["request_id"]: e for e in of("request_start", evs)}
    assert starts[refused["request_id"]]["shape"] == [1, 32, 8]
    assert any("expected 16, actual 32" in g for g in refused["guards"])
    checked = _check(trace)
    assert checked.returncode == 1
    assert "FAIL stances" in checked.stdout
    assert f"live {refused['request_id']} step 0 (thread serve-worker_0)" in checked.stdout
    # What the program did next: the same request, served again eagerly (3 steps).
    assert f"then 3 live step(s) ran eagerly under force_eager, in {refused['request_id']}" in (
        checked.stdout
    )


def test_a_pinned_service_that_warmed_every_shape_passes(tmp_path: Path) -> None:
    source = PINNED.replace("(16, 32, 24, 16)", "(16, 24, 24, 16)")
    trace, proc, plain = _record(tmp_path, source, "with")
    assert "refused" not in plain
    checked = _check(trace)
    assert checked.returncode == 0, checked.stdout
    assert [e["stance"] for e in of("stance", events(trace))] == ["fail_on_recompile"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str, timeout: float = 120) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - 127.0.0.1
        body: bytes = response.read()
        return body


def _serve_http(command: list[str], port: int, pairs: list[tuple[int, int]]) -> list[bytes]:
    """Start the server, send each pair of requests at once (two in flight), stop it; the
    response bodies in the order sent."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            try:
                _get(base + "/health", 2)
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        bodies: list[bytes] = []
        with ThreadPoolExecutor(2) as pool:
            for pair in pairs:
                bodies += pool.map(lambda n: _get(f"{base}/generate?tokens={n}"), pair)
        stop = urllib.request.Request(base + "/shutdown", method="POST")
        with urllib.request.urlopen(stop, timeout=30):  # noqa: S310 - 127.0.0.1
            pass
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return bodies
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.skipif(
    importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None,
    reason="fastapi and uvicorn are not installed (dev extra)",
)
def test_a_fastapi_server_serves_the_same_bytes_and_its_live_recompile_is_placed(
    tmp_path: Path,
) -> None:
    """uvicorn runs sync endpoints in its threadpool; two requests are in flight at once."""
    app = tmp_path / "server.py"
    app.write_text(HTTP)
    pairs = [(16, 32), (24, 16)]  # 32: a size warmup missed
    port = _free_port()
    plain = _serve_http([PYTHON, str(app), str(port)], port, pairs)
    trace = tmp_path / "trace"
    options = ["--warmup-requests", "2", "--profile", "none"]
    command = [PYTHON, "-m", "diag", "record", "-o", str(trace), *options, "--"]
    recorded = _serve_http([*command, PYTHON, str(app), str(port)], port, pairs)
    assert recorded == plain  # byte for byte
    evs = events(trace)
    assert not of("collector_error", evs)
    starts = {e["request_id"]: e for e in of("request_start", evs)}
    live = [e for e in starts.values() if e["phase"] == "live"]
    assert sorted(e["shape"][1] for e in live) == [16, 16, 24, 32]
    assert all(e["thread"] != "MainThread" for e in live)
    (late,) = [e for e in of("compile_end", evs) if e["phase"] == "live"]
    assert starts[late["request_id"]]["shape"] == [1, 32, 8]
    assert (late["step"], late["thread"]) == (0, starts[late["request_id"]]["thread"])
    checked = _check(trace)
    assert checked.returncode == 1
    assert "FAIL live-compile" in checked.stdout
    assert "4 live request(s), 12 live step(s)" in checked.stdout
