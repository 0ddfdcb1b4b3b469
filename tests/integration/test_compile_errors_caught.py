"""Compile errors a service swallows or catches itself, recorded for real (aot_eager, CPU).

A service warms up 16 and 24 tokens in the main thread and serves four live requests in a
ThreadPoolExecutor worker; its backend has no kernel for 32 tokens (it raises, as a vendor
backend may), and live-2 brings 32. How the program lives with that is the mode:

- `suppress`: `torch._dynamo.config.suppress_errors = True` (set in each worker too: torch 2.13
  keeps Dynamo's config per thread) and Dynamo swallows the error;
- `catch`: a try/except around the call runs the module uncompiled (`model._orig_mod`);
- `catch-stance`: the same, rerunning the call under `set_stance("force_eager")`;
- `stance`: `fail_on_recompile` after warmup, with suppress_errors on; torch raises all the
  same, and the program reruns the call under `force_eager`;
- `suppress-main`: suppress_errors set in the main thread only.

The program keeps torch's own record: each compile (torch._dynamo.callback's on_compile_start:
id, thread, request and step), each call of the model and whether it ran through a compiled
graph (the backend's callable counts it), and Dynamo's guard failures. That record, read with
a counting backend on torch 2.6 and 2.13, shows what torch does: after a suppressed failure
every later call of the frame runs eagerly, even those the warmup entries would serve (the
entries stay in the cache, unused); an error the program catches leaves the entries serving,
and each call at 32 compiles and fails again. diag must place each failure where that record
does, with the guard torch named, count the calls that did not run compiled, fail `check`, and
change nothing the program prints.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from .support import PYTHON, diag_record, events, of

PROGRAM = """
import json, sys, threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch._dynamo.callback
import torch._dynamo.utils
from torch._dynamo.backends.debugging import aot_eager

mode, record_file = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


def suppress_errors():
    torch._dynamo.config.suppress_errors = True


if mode in ("suppress", "suppress-main", "stance"):
    suppress_errors()

# Torch's record: each compile (id, thread, request, step), and each call of the model with
# whether it ran through a compiled graph (the backend's callable counts it).
where = threading.local()
compiles, calls, caught = [], [], []


def position():
    return {"thread": threading.current_thread().name,
            "request": getattr(where, "request", None), "step": getattr(where, "step", None)}


torch._dynamo.callback.on_compile_start(
    lambda args: compiles.append({"compile_id": str(args.compile_id), **position()}))


def picky(gm, example_inputs):
    if any(getattr(t, "shape", ())[1:2] == (32,) for t in example_inputs):
        raise RuntimeError("picky: no kernel for 32 tokens")
    compiled = aot_eager(gm, example_inputs)

    def run(*args):
        where.compiled = True
        return compiled(*args)

    return run


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, t):
        return x + torch.tanh(self.proj(x)) * t


model = torch.compile(Block().eval(), backend=picky, dynamic=False)


def call(x, t):
    where.compiled = False
    if mode in ("suppress", "suppress-main"):
        y = model(x, t)
    else:
        try:
            y = model(x, t)
        except RuntimeError as exc:  # BackendCompilerFailed, or the stance's refusal
            caught.append({**position(), "type": type(exc).__name__})
            where.compiled = False
            if mode == "catch":
                y = model._orig_mod(x, t)  # the same module, uncompiled
            else:
                with torch.compiler.set_stance("force_eager"):
                    y = model(x, t)
    calls.append({**position(), "compiled": where.compiled})
    return y


@torch.no_grad()
def serve(name, tokens, steps=3):
    where.request = name
    x = torch.randn(1, tokens, 8, generator=torch.Generator().manual_seed(tokens))
    for i in range(steps):
        where.step = i
        x = x - 0.1 * call(x, torch.tensor([1.0 - i / steps]))
    where.request = where.step = None
    return round(float(x.double().sum()), 4)


out = {name: serve(name, n) for name, n in (("warmup-16", 16), ("warmup-24", 24))}
if mode == "stance":
    torch.compiler.set_stance("fail_on_recompile")
init = suppress_errors if mode in ("suppress", "stance") else None
try:
    with ThreadPoolExecutor(1, thread_name_prefix="serve-worker", initializer=init) as pool:
        for name, tokens in (("live-1", 16), ("live-2", 32), ("live-3", 24), ("live-4", 16)):
            out[name] = pool.submit(serve, name, tokens).result()
finally:
    failures = [[str(r) for r in rs] for rs in torch._dynamo.utils.guard_failures.values()]
    with open(record_file, "w") as f:
        record = {"compiles": compiles, "calls": calls, "caught": caught}
        json.dump({**record, "guard_failures": failures}, f)
print(json.dumps(out, sort_keys=True), flush=True)
"""

WORKER = "serve-worker_0"


class Recorded:
    def __init__(self, tmp: Path, mode: str) -> None:
        program = tmp / "serve.py"
        program.write_text(textwrap.dedent(PROGRAM))
        self.plain = subprocess.run(
            [PYTHON, str(program), mode, str(tmp / "plain.json")],
            capture_output=True,
            text=True,
            timeout=240,
        )
        self.trace = tmp / "trace"
        self.proc = diag_record(
            self.trace,
            PYTHON,
            str(program),
            mode,
            str(tmp / "torch.json"),
            options=("--warmup-requests", "2", "--profile", "none"),
        )
        self.torch = json.loads((tmp / "torch.json").read_text())
        self.plain_torch = json.loads((tmp / "plain.json").read_text())
        self.events = events(self.trace)
        self.check = subprocess.run(
            [PYTHON, "-m", "diag", "check", str(self.trace)],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def live_ids(self) -> dict[str, str]:
        """The program's live request names -> diag's ids (one worker: in order)."""
        starts = [e for e in of("request_start", self.events) if e["phase"] == "live"]
        names = ["live-1", "live-2", "live-3", "live-4"]
        assert len(starts) == len(names)
        return dict(zip(names, [e["request_id"] for e in starts], strict=True))

    def not_compiled(self) -> list[tuple[str, int]]:
        """Torch's record: the calls that ran no compiled graph, as (request, step)."""
        return [(c["request"], c["step"]) for c in self.torch["calls"] if not c["compiled"]]


@pytest.fixture(scope="module", params=["suppress", "catch", "catch-stance", "stance"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return request.param, Recorded(tmp_path_factory.mktemp(request.param), request.param)


def test_the_program_runs_as_it_does_without_diag(recorded: Any) -> None:
    _, run = recorded
    assert run.plain.returncode == 0, run.plain.stderr[-3000:]
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.proc.stdout.startswith(run.plain.stdout)
    assert run.torch["compiles"] == run.plain_torch["compiles"]
    assert run.torch["calls"] == run.plain_torch["calls"]
    assert not of("collector_error", run.events)


def _spots(run: Recorded, pairs: list[tuple[str, int]]) -> str:
    """`r4 steps 0-2; r5 steps 0-2` for torch's (request, step) pairs, in diag's ids."""
    ids = run.live_ids()
    steps: dict[str, list[int]] = {}
    for name, step in pairs:
        steps.setdefault(ids[name], []).append(step)
    assert all(s == list(range(len(s))) for s in steps.values())
    return "; ".join(f"{rid} steps 0-{len(s) - 1}" for rid, s in steps.items())


def test_the_failure_is_placed_where_torch_saw_it(recorded: Any) -> None:
    mode, run = recorded
    live2 = run.live_ids()["live-2"]
    out = run.check.stdout
    assert run.check.returncode == 1, out
    assert "4 live request(s), 12 live step(s)" in out
    if mode == "stance":
        # torch: no compile at 32 at all (the stance refused it), suppress_errors or not.
        assert all(c["request"].startswith("warmup") for c in run.torch["compiles"])
        # The program caught the stance's RuntimeError at each step of live-2.
        caught = [(c["request"], c["step"], c["thread"], c["type"]) for c in run.torch["caught"]]
        assert caught == [("live-2", s, WORKER, "RuntimeError") for s in range(3)]
        refused = of("recompile_refused", run.events)
        assert [(e["request_id"], e["step"], e["thread"]) for e in refused] == [
            (live2, s, WORKER) for s in range(3)
        ]
        assert "FAIL stances" in out and f"live {live2} step 0 (thread {WORKER})" in out
        return
    failed = [c for c in run.torch["compiles"] if c["request"] == "live-2"]
    # torch's record: suppressed, one failed compile; caught, one per step of live-2.
    assert [c["step"] for c in failed] == ([0] if mode == "suppress" else [0, 1, 2])
    assert {c["thread"] for c in failed} == {WORKER}
    placed = {e["compile_id"]: e for e in of("compile_end", run.events)}
    for c in failed:
        end = placed[c["compile_id"]]
        assert end["result"] == "failed" and end["suppress_errors"] is (mode == "suppress")
        assert (end["request_id"], end["step"], end["thread"]) == (live2, c["step"], WORKER)
    if mode != "suppress":  # each failure the program caught
        assert [(c["request"], c["step"], c["type"]) for c in run.torch["caught"]] == [
            ("live-2", c["step"], "BackendCompilerFailed") for c in failed
        ]
    assert "FAIL compile-failure" in out
    assert f"compile {failed[0]['compile_id']} of forward failed at live {live2} (thread" in out
    # The guard torch named for that recompile, as diag quotes it.
    reasons = [r for rs in run.torch["guard_failures"] for r in rs]
    assert "0/0: tensor 'x' size mismatch at index 1. expected 16, actual 32" in reasons
    assert (
        "a live recompile: failing guard: tensor-size on x: tensor 'x' size mismatch at index 1. "
        "expected 16, actual 32"
    ) in out


def test_the_calls_that_ran_no_compiled_code_are_counted(recorded: Any) -> None:
    mode, run = recorded
    out = run.check.stdout
    eager = run.not_compiled()
    if mode == "suppress":
        # torch: every call from the failure on ran eagerly, the warmed sizes too.
        assert eager == [(r, s) for r in ("live-2", "live-3", "live-4") for s in range(3)]
        assert "its 2 compiled entries unused" in out
        assert f"9 call(s) of forward ran eagerly from the failure on ({_spots(run, eager)})" in (
            out
        )
        return
    # torch: only live-2's calls; the entries kept serving 16 and 24.
    assert eager == [("live-2", s) for s in range(3)]
    if mode == "stance":
        # Refused at each step of live-2 (each call at 32 raised), each call rerun eagerly.
        assert "3 recompiles refused under fail_on_recompile" in out
        assert (
            f"then 3 call(s) of forward ran eagerly under force_eager ({_spots(run, eager)})"
        ) in out
        return
    assert f"3 call(s) of forward raised it and ran no compiled code ({_spots(run, eager)})" in out
    if mode == "catch-stance":
        assert (
            f"then 3 call(s) of forward ran under set_stance('force_eager') ({_spots(run, eager)})"
        ) in out


def _config_per_thread() -> bool:
    """Whether this torch keeps Dynamo's config per thread (2.13 does, 2.6 did not)."""
    seen: list[bool] = []
    prior = torch._dynamo.config.suppress_errors
    with torch._dynamo.config.patch(suppress_errors=not prior):
        thread = threading.Thread(target=lambda: seen.append(torch._dynamo.config.suppress_errors))
        thread.start()
        thread.join()
    return seen == [prior]


@pytest.mark.skipif(not _config_per_thread(), reason="this torch's Dynamo config is global")
def test_suppress_errors_set_in_the_main_thread_does_not_reach_a_worker(tmp_path: Path) -> None:
    """torch 2.13: the worker compiles with suppress_errors off, and the error kills the
    program (through the future's result); diag says so, and that suppress_errors was off."""
    run = Recorded(tmp_path, "suppress-main")
    assert run.plain.returncode == 1 and "BackendCompilerFailed" in run.plain.stderr
    assert run.proc.returncode == 1
    (failed,) = [e for e in of("compile_end", run.events) if e["result"] == "failed"]
    assert failed["suppress_errors"] is False and failed["thread"] == WORKER
    assert "the program died of it: uncaught torch._dynamo.exc.BackendCompilerFailed" in (
        run.check.stdout
    )
