"""Recorded reference-service traces, shared by the analyzer tests (recorded once per session)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from diag.run import Trace, load_trace

RecordFixture = Callable[..., Trace]


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
