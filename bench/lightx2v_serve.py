"""Serve requests to LightX2V's own server (`python -m lightx2v.server`, unmodified), then stop it:
one command that `diag record` records and `diag warmup-plan --verify` replays.

    python bench/lightx2v_serve.py --requests 64x64,96x64,64x96 -- \\
        --model_cls wan2.1 --task t2v --model_path M --config_json C --warmup

starts the server with the arguments after `--` (and `--host 127.0.0.1`, free ports), waits until
it answers (after its warmup), sends each request (`POST /v1/tasks/video/` with
`target_shape: [height, width]`) and waits for it to complete, one at a time, then sends the
server SIGINT (uvicorn's graceful shutdown; LightX2V then calls `os._exit(0)`). Exit 0 when
every request completed.

Under `diag warmup-plan --verify` the requests are the recorded live ones, from
`DIAG_LIGHTX2V_LIVE` (`[[height, width], ...]` in pixels); the plan reaches the server's warmup
through diag's adapter, which puts it in the runner's `_WARMUP_RESOLUTIONS`. Standard library
only: it runs under LightX2V's Python and imports neither torch nor diag.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

LIVE_ENV = "DIAG_LIGHTX2V_LIVE"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _call(method: str, url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
    return json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()


def _requests(text: str) -> list[tuple[int, int]]:
    """`64x64,96x64`, or the recorded live resolutions under --verify."""
    recorded = os.environ.get(LIVE_ENV)
    if recorded:
        return [(int(h), int(w)) for h, w in json.loads(recorded)]
    pairs = []
    for item in text.split(","):
        height, _, width = item.strip().partition("x")
        pairs.append((int(height), int(width)))
    return pairs


def _wait_ready(server: subprocess.Popen[bytes], base: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"lightx2v_serve: the server ended ({server.returncode})")
        try:
            _call("GET", f"{base}/v1/service/status")
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            time.sleep(1.0)
    raise SystemExit(f"lightx2v_serve: the server did not answer in {timeout} s")


def _serve(base: str, height: int, width: int, timeout: float) -> str:
    body = {"prompt": "a cat walks on the grass", "seed": 42, "target_shape": [height, width]}
    task = str(_call("POST", f"{base}/v1/tasks/video/", body)["task_id"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = _call("GET", f"{base}/v1/tasks/{task}/status").get("status")
        if status in ("completed", "failed", "cancelled"):
            return str(status)
        time.sleep(0.5)
    return "timed out"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--requests", default="64x64", help="HxW,... (default: 64x64)")
    parser.add_argument("--ready-timeout", type=float, default=1800.0)
    parser.add_argument("--request-timeout", type=float, default=900.0)
    parser.add_argument("server_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    server_args = args.server_args[1:] if args.server_args[:1] == ["--"] else args.server_args
    port = _free_port()
    command = [
        sys.executable, "-m", "lightx2v.server", *server_args,
        "--host", "127.0.0.1", "--port", str(port), "--metric_port", str(_free_port()),
    ]  # fmt: skip
    server = subprocess.Popen(command)
    base = f"http://127.0.0.1:{port}"
    failed = 0
    try:
        _wait_ready(server, base, args.ready_timeout)
        for height, width in _requests(args.requests):
            status = _serve(base, height, width, args.request_timeout)
            print(f"lightx2v_serve: {height}x{width} {status}", flush=True)
            failed += status != "completed"
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
