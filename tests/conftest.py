"""Shared test set-up: a fresh Dynamo state per test, and recorded reference-service traces
(each distinct recording made once per session and shared by every suite)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diag.trace.load import load_trace
from diag.trace.run import Trace

# A shell's background job (`cmd &` with no job control) starts with SIGINT ignored, and every
# process it starts inherits that. diag record keeps an ignored signal ignored, as it should, so
# the tests that send SIGINT would see nothing reach the program: give the processes the tests
# start the disposition of an interactive shell (a Python handler here: SIG_DFL after exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

RecordFixture = Callable[..., Trace]

# Keep CPU tests within the 2-core budget and deterministic.
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="session")
def record_fixture(tmp_path_factory: pytest.TempPathFactory) -> RecordFixture:
    """`record_fixture("unwarmed-shape", model="wan", baseline=False)` -> the loaded Trace.

    Runs `diag record --profile none -- python -m diag.fixtures --compile --backend aot_eager
    --plant ...` once per distinct argument set in the test session.
    """
    cache: dict[tuple[object, ...], Trace] = {}

    def record(
        *plants: str,
        model: str = "wan",
        baseline: bool = False,
        profile: str = "none",
        extra: tuple[str, ...] = (),
    ) -> Trace:
        key = (plants, model, baseline, profile, extra)
        if key not in cache:
            folder = tmp_path_factory.mktemp("trace") / "t"
            options = ["--profile", profile] + (["--baseline", "eager"] if baseline else [])
            command = [
                sys.executable,
                "-m",
                "diag.fixtures",
                "--compile",
                "--backend",
                "aot_eager",
                "--model",
                model,
                "-q",
                *extra,
            ]
            for plant in plants:
                command += ["--plant", plant]
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "diag",
                    "record",
                    "-o",
                    str(folder),
                    *options,
                    "--",
                    *command,
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, proc.stderr
            cache[key] = load_trace(Path(folder))
        return cache[key]

    return record
