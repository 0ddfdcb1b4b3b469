"""Programs whose compile fails, that fall back to eager, or that crash, recorded with
`diag record` in real subprocesses (torch 2.13 CPU, aot_eager or a backend that raises): each
gets its finding from compile-failure or crash, the program's output and exit code unchanged,
and a clean program gets none of them."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from diag.analyzers import get_analyzer
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.torchtrace import load_torch_trace

from .support import PYTHON, diag_record, events, of

# These programs' exits are the point (exit codes, signals, crashes, forks, teardown): their
# processes keep Python's whole shutdown (tests/child_site is left off their PYTHONPATH).
pytestmark = pytest.mark.full_shutdown

BACKEND_FAILS = """
import torch
import diag.api as diag

def broken_backend(gm, example_inputs):
    raise RuntimeError("broken backend")

{config}

def denoise(x):
    return torch.sin(x) * 2 + 1

step = torch.compile(denoise, backend=broken_backend)
x = torch.randn(8)
with diag.request("r0", shape=[8]):
    for i in range(4):
        with diag.step():
            x = step(x)
print("done", x.shape[0])
"""

CONSTRAINT = """
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = 16
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        return h.reshape(x.shape[0], self.tokens, 8).sum(1)

block = torch.compile(Block(), backend="aot_eager")
x = torch.randn(2, 16, 8)
torch._dynamo.mark_dynamic(x, 1)
print(block(x).shape)
"""

FULLGRAPH = """
import torch

def block(x):
    h = torch.relu(x)
    print("tokens:", h.shape[0])
    return h * 2

step = torch.compile(block, backend="aot_eager", fullgraph=True)
step(torch.randn(4))
"""

CRASHES = """
import torch
import diag.api as diag

def load_latents(shape):
    raise ValueError(f"no latents cached for shape {shape}")

step = torch.compile(lambda x: x * 2, backend="aot_eager")
with diag.request("r0", shape=[4]):
    for i in range(3):
        with diag.step():
            x = step(torch.ones(4))
            if i == 1:
                load_latents([4, 4])
"""

OWN_HOOKS = """
import sys, threading
import torch

def prefetch():
    raise OSError("weights file went away")

worker = threading.Thread(target=prefetch, name="prefetch")
worker.start()
worker.join()

def my_hook(kind, value, tb):
    print("my hook:", kind.__name__, value, file=sys.stderr)

sys.excepthook = my_hook
torch.ones(2).sum()
raise LookupError("no such request")
"""

COLLECTIVE = """
import os
from datetime import timedelta
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
x = torch.ones(4)
dist.all_reduce(x)
if dist.get_rank() == 1:
    os._exit(0)  # rank 1 leaves: rank 0's next collective fails
dist.all_reduce(x)
"""

CLEAN = """
import torch
import diag.api as diag

step = torch.compile(lambda x: torch.cos(x) + 1, backend="aot_eager")
with diag.phase("warmup"):
    with diag.request("w0", shape=[4]):
        with diag.step():
            step(torch.ones(4))
with diag.request("r0", shape=[4]):
    for i in range(2):
        with diag.step():
            step(torch.ones(4))
print("ok")
"""


def _record(tmp_path: Path, body: str) -> tuple[int, str, str, list[Finding], Path]:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(body))
    trace_dir = tmp_path / "t"
    proc = diag_record(trace_dir, PYTHON, str(app))
    trace = load_trace(trace_dir)
    found = get_analyzer("compile-failure")(trace) + get_analyzer("crash")(trace)
    return proc.returncode, proc.stdout, proc.stderr, found, app


def test_backend_that_raises(tmp_path: Path) -> None:
    code, _, stderr, found, app = _record(tmp_path, BACKEND_FAILS.format(config=""))
    assert code == 1
    assert "BackendCompilerFailed" in stderr and "RuntimeError: broken backend" in stderr
    [finding] = found  # the crash is this failure's exception: one finding, not two
    assert finding.analyzer == "compile-failure" and finding.severity == "error"
    assert finding.title == (
        "denoise failed to compile: backend 'broken_backend' raised RuntimeError: broken backend"
    )
    assert any("RuntimeError: broken backend" in line for line in finding.evidence)
    assert finding.location == f"{app}:6"  # the user backend's raise
    assert any(line.startswith("the program died of it") for line in finding.evidence)


def test_suppress_errors_runs_the_frame_eagerly(tmp_path: Path) -> None:
    body = BACKEND_FAILS.format(config="torch._dynamo.config.suppress_errors = True")
    code, stdout, _, found, _ = _record(tmp_path, body)
    assert code == 0 and stdout == "done 8\n"
    [finding] = found
    assert finding.id == "compile-failure:eager-fallback:denoise"
    assert finding.title.startswith("denoise never compiled and runs eagerly for the rest")
    assert "RuntimeError: broken backend" in finding.title
    # The failure came at step 0: its call and every later one ran eagerly (Dynamo skips the
    # frame), one a step, counted as they were made.
    assert "4 call(s) of denoise ran eagerly from the failure on (r0 steps 0-3)" in (
        " ".join(finding.evidence)
    )
    assert any(line.startswith("3 step(s) of 1 request(s)") for line in finding.evidence)
    eager = finding.claims[-1]
    assert (eager["kind"], eager["count"], eager["extent"]) == ("eager-calls", 4, "counted")


def test_constraint_violation_names_the_dim_and_the_line(tmp_path: Path) -> None:
    code, _, stderr, found, app = _record(tmp_path, CONSTRAINT)
    assert code == 1 and "ConstraintViolationError" in stderr
    [finding] = found
    assert finding.title == (
        f"forward failed to compile: L['x'].size()[1] was marked dynamic, but the code at "
        f"{app}:12 specialises it to 16"
    )
    assert finding.location == f"{app}:12"
    assert any("self.tokens" in line for line in finding.evidence)
    assert "self.xxx" in finding.fix and ".item()" in finding.fix


def test_fullgraph_break_recorded_and_from_its_torch_trace(tmp_path: Path) -> None:
    """The same failure read two ways: diag's recording, and the TORCH_TRACE log beside it."""
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(FULLGRAPH))
    proc = diag_record(tmp_path / "t", PYTHON, str(app), options=("--torch-trace",))
    assert proc.returncode == 1 and "Unsupported" in proc.stderr
    analyze = get_analyzer("compile-failure")
    recorded = analyze(load_trace(tmp_path / "t"))
    imported = analyze(load_torch_trace(tmp_path / "t"))
    for finding in (*recorded, *imported):
        assert finding.title == (
            f"block failed to compile: Dynamo cannot trace it (Failed to trace builtin "
            f"operator) at {app}:6"
        )
        assert "fullgraph=True" in finding.fix
    assert len(recorded) == len(imported) == 1
    assert any(line.startswith("the program died of it") for line in recorded[0].evidence)
    assert any("does not say whether the error reached" in e for e in imported[0].evidence)
    assert get_analyzer("crash")(load_trace(tmp_path / "t")) == []


def test_uncaught_exception_is_a_crash_with_the_user_frame(tmp_path: Path) -> None:
    code, _, stderr, found, app = _record(tmp_path, CRASHES)
    assert code == 1
    assert "Traceback" in stderr and "ValueError: no latents cached" in stderr
    [finding] = found
    assert finding.analyzer == "crash" and finding.severity == "error"
    assert finding.title == (
        f"The program crashed: ValueError: no latents cached for shape [4, 4] at {app}:6"
    )
    assert finding.location == f"{app}:6"
    assert "where the run was: live r0 step 1 (the last step started before it)" in (
        finding.evidence
    )
    assert f"user stack (outermost first): {app}:14 in <module> -> {app}:6 in load_latents" in (
        finding.evidence
    )


def test_programs_own_hooks_still_run_and_both_crashes_are_seen(tmp_path: Path) -> None:
    code, _, stderr, found, app = _record(tmp_path, OWN_HOOKS)
    assert code == 1
    assert "my hook: LookupError no such request" in stderr
    assert "OSError: weights file went away" in stderr  # threading's default hook ran
    crashes = of("crash", events(tmp_path / "t"))
    assert [c["seen_by"] for c in crashes] == ["threading.excepthook", "sys.last_value"]
    by_kind = {f.data["kind"]: f for f in found}
    assert by_kind["thread"].severity == "warning"
    assert by_kind["thread"].location == f"{app}:6"
    assert by_kind["uncaught"].title.startswith("The program crashed: LookupError")
    assert any("replaced sys.excepthook" in line for line in by_kind["uncaught"].evidence)


WORKER_CRASH = """
import multiprocessing as mp
import torch


def work(n):
    raise RuntimeError(f"decoding failed in worker {n}")


if __name__ == "__main__":
    process = mp.get_context("spawn").Process(target=work, args=(0,))
    process.start()
    process.join()
    print("worker exit code", process.exitcode)
"""


def test_a_multiprocessing_workers_crash_is_seen_and_its_output_unchanged(
    tmp_path: Path,
) -> None:
    """multiprocessing catches a child's exception itself (prints it, exits 1): no excepthook
    runs. diag still records it, and the traceback the child prints is the plain run's."""
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(WORKER_CRASH))
    plain = subprocess.run(
        [PYTHON, str(app)], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    code, stdout, stderr, found, _ = _record(tmp_path, WORKER_CRASH)
    assert code == plain.returncode == 0
    assert stdout == plain.stdout == "worker exit code 1\n"
    assert stderr.startswith(plain.stderr), stderr  # then diag's own summary
    assert "collectors" not in plain.stderr and "collectors" not in stderr[: len(plain.stderr)]
    crashes = of("crash", events(tmp_path / "t"))
    assert [c["seen_by"] for c in crashes] == ["multiprocessing.Process"]
    [finding] = [f for f in found if f.analyzer == "crash"]
    assert finding.title.startswith("The program crashed: RuntimeError: decoding failed")
    assert any("ended that process with exit code 1" in line for line in finding.evidence)


def test_crash_inside_a_collective_under_torchrun(tmp_path: Path) -> None:
    """Two gloo ranks on the CPU: rank 1 leaves, so rank 0's all_reduce fails. torchrun's own
    ChildFailedError (the launcher process imports torch too) is an echo, not a second finding."""
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(COLLECTIVE))
    torchrun = (PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
    proc = diag_record(tmp_path / "t", *torchrun, str(app))
    assert proc.returncode == 1
    crashes = of("crash", events(tmp_path / "t"))
    assert sorted(c["type"].rsplit(".", 1)[-1] for c in crashes) == [
        "ChildFailedError",
        "RuntimeError",
    ]
    [finding] = get_analyzer("crash")(load_trace(tmp_path / "t"))
    assert finding.title == f"The program crashed inside a collective: RuntimeError at {app}:12"
    assert finding.id == "crash:collective:RuntimeError@rank0"
    assert "same collectives in the same order" in finding.fix


def test_clean_program_has_none_of_these_findings(tmp_path: Path) -> None:
    code, stdout, _, found, _ = _record(tmp_path, CLEAN)
    assert (code, stdout) == (0, "ok\n")
    assert found == []
    assert of("crash", events(tmp_path / "t")) == []
