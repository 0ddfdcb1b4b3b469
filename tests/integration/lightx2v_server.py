"""The real LightX2V server (ModelTC/LightX2V, unmodified) under `diag record`, as an operator
runs it: `python -m lightx2v.server` on a tiny random Wan2.1 (bench/lightx2v_real.py writes it),
the CPU start-up of bench/lightx2v_cpu, HTTP requests on 127.0.0.1, a signal to stop it.

LightX2V needs its own Python (its requirements, minus the torch pins, plus triton, av and
soundfile; diag installed in it too, since the recorded process imports diag's collectors) and
a checkout: `DIAG_LIGHTX2V_PYTHON=/path/to/python DIAG_LIGHTX2V=/path/to/LightX2V`. Tests that
need it skip without them (bench/lightx2v_real.py's docstring shows the set-up).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP = REPO / "bench" / "lightx2v_cpu"
#: Warmup resolutions (height x width): the width stays 64, so a live width of 96 recompiles.
WARMUP = "64x64,96x64"
#: What the server is asked to serve: two warmed shapes, then twice a width warmup never served.
REQUESTS = ((64, 64), (96, 64), (64, 96), (64, 96))
#: Latent shapes [C, T, H, W] of those (16 channels, 5 frames -> 2, pixels / 8).
LATENTS = {(64, 64): [16, 2, 8, 8], (96, 64): [16, 2, 12, 8], (64, 96): [16, 2, 8, 12]}
CONFIG = {
    "infer_steps": 3,
    "target_video_length": 5,
    "text_len": 16,
    "target_height": 64,
    "target_width": 64,
    "self_attn_1_type": "torch_sdpa",
    "cross_attn_1_type": "torch_sdpa",
    "cross_attn_2_type": "torch_sdpa",
    "rms_norm_type": "torch",
    "modulate_type": "torch",
    "rope_type": "torch_real_rope",
    "sample_guide_scale": 5,
    "sample_shift": 5,
    "enable_cfg": False,
    "cpu_offload": True,
    "offload_granularity": "model",
    "use_compile": True,
    "dummy_model": True,
    "vae_dtype": "fp32",
    "fps": 8,
}


def lightx2v() -> tuple[str, Path]:
    """(its Python, its checkout), or skip the test."""
    python = os.environ.get("DIAG_LIGHTX2V_PYTHON", "")
    checkout = os.environ.get("DIAG_LIGHTX2V", "")
    if not python or not checkout:
        pytest.skip("the real LightX2V: set DIAG_LIGHTX2V_PYTHON and DIAG_LIGHTX2V")
    if not Path(python).exists() or not (Path(checkout) / "lightx2v" / "server").is_dir():
        pytest.skip(f"DIAG_LIGHTX2V_PYTHON={python} or DIAG_LIGHTX2V={checkout} not usable")
    return python, Path(checkout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(folder: Path, python: str) -> tuple[Path, Path]:
    """The tiny model (written by bench/lightx2v_real.py with LightX2V's Python) and config."""
    model = folder / "tiny-wan2.1"
    if not (model / "config.json").exists():
        code = (
            "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "from lightx2v_real import write_model; write_model(Path(sys.argv[2]))"
        )
        subprocess.run(
            [python, "-c", code, str(REPO / "bench"), str(model)], check=True, timeout=300
        )
    config = folder / "config.json"
    config.write_text(json.dumps(CONFIG, indent=2))
    return model, config


#: The packages installed under the diag namespace from the repository's top-level folders
#: (pyproject's package-dir).
_NAMESPACED = ("collectors", "analyzers", "tui", "fixtures")


def tree_under_test(folder: Path) -> Path:
    """A folder whose `diag` package is this repository's, collectors included, to put first on
    the recorded program's PYTHONPATH: LightX2V's Python has diag installed editable from some
    checkout, and with this repository's root on PYTHONPATH instead, `diag` would come from here
    but `diag.collectors` (a top-level folder mapped in by the editable install's finder) from
    that checkout. Symlinks only: nothing is copied."""
    overlay = folder / "diag-under-test"
    package = overlay / "diag"
    if not package.is_dir():
        package.mkdir(parents=True)
        for entry in (REPO / "diag").iterdir():
            if entry.name != "__pycache__":
                (package / entry.name).symlink_to(entry)
        for name in _NAMESPACED:
            (package / name).symlink_to(REPO / name)
    return overlay


def environment(checkout: Path, folder: Path) -> dict[str, str]:
    """The recorded LightX2V process's environment: this repository's diag, LightX2V's checkout
    and the CPU start-up on PYTHONPATH; the server's cache (its saved videos) in `folder`, not
    in the checkout (its default)."""
    paths = [tree_under_test(folder), checkout, STARTUP]
    return {
        **os.environ,
        "LIGHTX2V_CACHE_DIR": str(folder / "server_cache"),
        "PYTHONPATH": os.pathsep.join(str(p) for p in paths),
        "PLATFORM": "cpu",
        "LIGHTX2V_CPU_WARMUP": WARMUP,
        "OMP_NUM_THREADS": "2",
    }


class Server:
    """`diag record ... -- python -m lightx2v.server ...`, started in its own session; with
    `record=False`, the same server without diag. `env`: more of the server's environment."""

    def __init__(
        self,
        folder: Path,
        name: str,
        diag_options: tuple[str, ...] = (),
        record: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        python, checkout = lightx2v()
        self.model, self.config = prepare(folder, python)
        self.trace = folder / name
        self.cache = folder / "server_cache"
        self.port = free_port()
        self.metric_port = free_port()
        self.metrics_port = free_port()
        self.log_path = folder / f"{name}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        diag = [
            sys.executable, "-m", "diag", "record", "-o", str(self.trace), "--force",
            "--profile", "none", "--metrics-port", str(self.metrics_port), *diag_options, "--",
        ]  # fmt: skip
        command = [
            *(diag if record else []),
            python, "-m", "lightx2v.server",
            "--model_cls", "wan2.1", "--task", "t2v",
            "--model_path", str(self.model), "--config_json", str(self.config), "--warmup",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--metric_port", str(self.metric_port),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command,
            env={**environment(checkout, folder), **(env or {})},
            cwd=folder,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    # -- HTTP -----------------------------------------------------------------------------------

    def _call(self, method: str, url: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, f"http://127.0.0.1:{self.port}{path}", body)

    def wait_ready(self, timeout: float = 900) -> None:
        """Until the server answers (after its warmup), or fail with its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the server ended ({self.proc.returncode}):\n{self.tail()}")
            try:
                self.api("GET", "/v1/service/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(1.0)
        pytest.fail(f"the server did not answer in {timeout} s:\n{self.tail()}")

    def submit(self, height: int, width: int, **fields: Any) -> str:
        body = {"prompt": "a cat walks on the grass", "seed": 42, "target_shape": [height, width]}
        return str(self.api("POST", "/v1/tasks/video/", {**body, **fields})["task_id"])

    def wait_done(self, task_id: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.api("GET", f"/v1/tasks/{task_id}/status")
            if status.get("status") in ("completed", "failed", "cancelled"):
                assert status["status"] == "completed", status
                return dict(status)
            time.sleep(0.5)
        pytest.fail(f"task {task_id} not done in {timeout} s:\n{self.tail()}")

    def metrics(self) -> str:
        """diag's own endpoint (`diag record --metrics-port`)."""
        return str(self._call("GET", f"http://127.0.0.1:{self.metrics_port}/metrics"))

    def program_metrics(self) -> str:
        """LightX2V's own Prometheus endpoint (`--metric_port`)."""
        return str(self._call("GET", f"http://127.0.0.1:{self.metric_port}/metrics"))

    # -- events and shutdown ----------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for path in sorted((self.trace / "runs" / "compiled").glob("*/events.jsonl")):
            for line in path.read_bytes().splitlines():
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return found

    def wait_event(self, test: Any, timeout: float = 600) -> dict[str, Any]:
        """The first event for which `test(event)` holds, as soon as it is written."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((e for e in self.events() if test(e)), None)
            if found is not None:
                return found
            if self.proc.poll() is not None:
                pytest.fail(f"the server ended ({self.proc.returncode}):\n{self.tail()}")
            time.sleep(0.05)
        pytest.fail(f"no such event in {timeout} s:\n{self.tail()}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 120) -> int:
        """Signal diag's pid (it passes the signal on) and wait for the recording to end."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"the recording did not end within {timeout} s of {sig!r}:\n{self.tail()}")
        self.log.close()
        return code

    def tail(self, lines: int = 40) -> str:
        """The last lines of diag's and the server's output (read apart from the writers)."""
        text = self.log_path.read_bytes().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])
