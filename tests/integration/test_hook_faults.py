"""A hook that raises cannot harm the program (shared/DESIGN.md, "A hook never raises").

`DIAG_FAULTS` makes diag's own hooks raise inside the recorded program on purpose (it is a
switch of diag's, not a mock of torch: no real run makes every hook fail at once). The program's
stdout, stderr and exit code must equal a plain run's; the trace must name each hook that
failed, and analyze must say what the trace lacks because of it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from .support import PYTHON, diag_record, events, of

# Dynamo's compile callbacks, a logging handler, gc.callbacks, the torch.compile wrappers, the
# excepthook (a thread that crashes), gc.collect's wrapper, reset's wrapper, diag.api's markers,
# the exit hook.
PROGRAM = """
import gc, sys, threading
import torch

f = torch.compile(lambda x: torch.sin(x) * 2, backend="aot_eager")
for n in (4, 4, 8):
    print(n, round(float(f(torch.arange(n, dtype=torch.float32)).sum()), 4))
gc.collect()
from diag import api
with api.request(shape=[4]):
    with api.step():
        print(round(float(f(torch.ones(4)).sum()), 4))
t = threading.Thread(target=lambda: 1 / 0, name="crasher")
t.start(); t.join()
torch._dynamo.reset()
print(round(float(f(torch.ones(3)).sum()), 4))
print(sorted(torch._dynamo.utils.counters["stats"].items()))
print("to stderr", file=sys.stderr)
sys.exit(7)
"""


def _env(faults: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DIAG_FAULTS", None)
    if faults is not None:
        env["DIAG_FAULTS"] = faults
    return env


def _stderr_of_program(text: str) -> str:
    """The program's own stderr: diag record's summary (after its blank line) left out."""
    return text.split("\ndiag: recorded", 1)[0].rstrip("\n")


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hooks") / "prog.py"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(scope="module")
def plain(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, str(program)], capture_output=True, text=True, timeout=240, env=_env(None)
    )


def _without_thread_traceback_paths(text: str) -> str:
    # The crashing thread's traceback names this file; both runs print it the same way.
    return re.sub(r"File \".*?\"", "File", text)


@pytest.mark.parametrize("faults", ["*", "*,!adapter.*"])
def test_every_hook_raising_leaves_the_program_as_it_is(
    tmp_path: Path, program: Path, plain: subprocess.CompletedProcess[str], faults: str
) -> None:
    assert plain.returncode == 7, plain.stderr
    trace = tmp_path / "t"
    recorded = diag_record(trace, PYTHON, str(program), env=_env(faults))
    assert recorded.returncode == plain.returncode, recorded.stderr
    assert recorded.stdout == plain.stdout
    assert _without_thread_traceback_paths(
        _stderr_of_program(recorded.stderr)
    ) == _without_thread_traceback_paths(plain.stderr.rstrip("\n"))
    errors = of("collector_error", events(trace))
    failed = {e["where"] for e in errors}
    # Each of these hooks ran in this program, raised, and was named.
    for hook in (
        "cudagraphs.start",  # Dynamo's compile-start callback
        "cudagraphs.end",
        "compiles",  # the structured-trace logging handler
        "shapes.watch",  # the torch.compile wrapper
        "hygiene.gc_collect",
        "crash.thread_excepthook",
        "compiles.reset_call",
        "api",  # diag.api's markers
    ):
        assert hook in failed, sorted(failed)
    assert all(e["error"].startswith("InjectedFault") and e["disabled"] for e in errors), errors
    # Once failed, a hook is off: each is named once.
    assert len(errors) == len(failed), [e["where"] for e in errors]
    shown = subprocess.run(
        [PYTHON, "-m", "diag", "analyze", str(trace)], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert "failed inside the program" in shown.stdout
    assert "compiles, recompiles and their guard failures" in shown.stdout


def test_the_fixture_service_is_unchanged_when_its_per_step_hooks_raise(tmp_path: Path) -> None:
    """The reference service with its adapter working, so that the per-step and per-request
    hooks (profiler windows, cache snapshots, the step tracker's) run and raise."""
    command = (
        PYTHON, "-m", "diag.fixtures", "--compile", "--backend", "aot_eager", "--warmup",
        "--requests", "2x8x8:2,2x12x8:2", "--dynamo-stats",
    )  # fmt: skip
    plain = subprocess.run(command, capture_output=True, text=True, timeout=300, env=_env(None))
    recorded = diag_record(tmp_path / "t", *command, env=_env("*,!adapter.*"), timeout=300)
    assert recorded.returncode == plain.returncode == 0, recorded.stderr

    def stable(text: str) -> str:  # the service prints its step times: not comparable
        return re.sub(r"(step0|steady)=\S+", r"\1=?", text)

    assert stable(recorded.stdout) == stable(plain.stdout)
    failed = {e["where"] for e in of("collector_error", events(tmp_path / "t"))}
    assert {"profiling.request", "profiling.after", "cache.step"} <= failed, sorted(failed)


def test_compile_callbacks_accept_every_torchs_call_shape() -> None:
    """torch 2.6 and 2.7 call Dynamo's compile callbacks with no argument, 2.8 and later with
    one `CallbackArgs`: both shapes reach the collector, neither raises."""
    from diag.collectors.hooks import Hooks

    seen: list[object] = []
    errors: list[str] = []
    hooks = Hooks(lambda name, exc: errors.append(f"{name}: {exc}"))
    callback = hooks.callback("cudagraphs.start", seen.append)
    callback()
    callback("args")
    callback("args", extra=1)
    assert seen == [None, "args", "args"]
    assert errors == []


def test_a_hook_that_raises_is_recorded_once_and_turned_off() -> None:
    from diag.collectors.hooks import Hooks

    errors: list[str] = []
    calls: list[int] = []
    hooks = Hooks(lambda name, exc: errors.append(f"{name}: {type(exc).__name__}"))

    def fails(n: int) -> int:
        calls.append(n)
        raise ValueError(n)

    assert hooks.run("h", fails, 1) is None
    assert hooks.run("h", fails, 2) is None
    assert hooks.run("other", lambda: 5) == 5
    assert calls == [1]
    assert errors == ["h: ValueError"]
    assert not hooks.is_on("h") and hooks.is_on("other")


def test_fault_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    from diag.collectors.hooks import Hooks

    monkeypatch.setenv("DIAG_FAULTS", "*,!adapter.*,install:magi")
    hooks = Hooks(lambda name, exc: None)
    assert hooks.injects("profiling.after")
    assert not hooks.injects("adapter.diffusers")
    assert not hooks.injects("install:compiles")  # installs only when named
    assert hooks.injects("install:magi")
