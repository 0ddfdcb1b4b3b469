"""compile-failure and crash on hand-written traces, a third-party TORCH_TRACE log, and the crash
collector's `describe` on real exceptions raised in this process.

Hand-written events stand in for what a CPU run cannot produce: the CUDA-graphs overwritten
output (it needs `mode="reduce-overhead"` on a GPU), a collective that fails, and a compile that
runs out of GPU memory. Each is written the way collectors/crash.py and collectors/compiles.py
write them (docs/FORMAT.md); the real programs are in tests/integration/test_record_failures.py.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest
import torch

from diag.analyzers import REGISTRY, get_analyzer
from diag.analyzers.failures import user_line
from diag.collectors.crash import MAX_MESSAGE, describe
from diag.collectors.userframes import innermost_user_frame, is_user_file
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.run import Trace
from diag.trace.torchtrace import load_torch_trace

from ..h200data import h200_trace
from .support import write_trace

TLPARSE = Path(__file__).resolve().parents[1] / "data" / "third_party" / "tlparse"
FRAME = {"name": "forward", "file": "/srv/model.py", "line": 40}
CUDAGRAPH_MESSAGE = (
    "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "
    'Stack trace: File "/srv/pipeline.py", line 88, in __call__. To prevent overwriting, clone '
    "the tensor outside of torch.compile() or call torch.compiler.cudagraph_mark_step_begin() "
    "before each model invocation."
)


def _findings(trace: Trace) -> list[Finding]:
    return get_analyzer("compile-failure")(trace) + get_analyzer("crash")(trace)


def _crash(**fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "t": 50,
        "ev": "crash",
        "seen_by": "sys.excepthook",
        "compiling": [],
        "type": "RuntimeError",
        "message": "boom",
        "thread": None,
        "user_frame": {"file": "/srv/pipeline.py", "line": 88, "name": "__call__"},
        "user_stack": [
            {"file": "/srv/serve.py", "line": 12, "name": "<module>"},
            {"file": "/srv/pipeline.py", "line": 88, "name": "__call__"},
        ],
        "frames": [],
        "inside": [],
        "cause": None,
        "phase": "live",
        "request_id": "r0",
        "step": 1,
    }
    event.update(fields)
    return event


def _steps(rid: str, t0: int, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"t": t0, "ev": "request_start", "request_id": rid, "phase": "live"}
    ]
    for i in range(count):
        where = {"request_id": rid, "step": i, "phase": "live"}
        events.append({"t": t0 + 10 * i + 1, "ev": "step_start", **where, "profiled": False})
        events.append({"t": t0 + 10 * i + 9, "ev": "step_end", **where, "wall_s": 0.009})
    return events


def _failed(**fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "t": 20,
        "ev": "compile_end",
        "compile_id": "0/0",
        "epoch": 0,
        "frame": FRAME,
        "result": "failed",
        "duration_s": 0.1,
        "fail_type": "BackendCompilerFailed",
        "fail_reason": "backend='inductor' raised:\nRuntimeError: boom",
        "fail_user_frame": None,
        "suppress_errors": False,
        "phase": "live",
        "request_id": "r0",
        "step": 0,
    }
    event.update(fields)
    return event


def test_registered() -> None:
    assert REGISTRY["compile-failure"] == "failures"
    assert REGISTRY["crash"] == "crashes"


def test_cudagraph_overwritten_output_gets_its_fix(tmp_path: Path) -> None:
    """Input a CPU run cannot produce: the crash event h8's H200 run of a reduce-overhead
    diffusers pipeline gives, written by hand as collectors/crash.py writes it."""
    trace = write_trace(
        tmp_path,
        [*_steps("r0", 10, 2), _crash(message=CUDAGRAPH_MESSAGE, inside=["cudagraph"])],
    )
    [finding] = _findings(trace)
    assert finding.analyzer == "crash" and finding.severity == "error"
    assert "CUDA-graph output" in finding.title and "overwritten" in finding.title
    assert "torch.compiler.cudagraph_mark_step_begin()" in finding.fix
    assert ".clone()" in finding.fix
    assert finding.location == "/srv/pipeline.py:88"
    assert "where the run was: live r0 step 1" in finding.evidence
    assert finding.id == "crash:cudagraph-overwritten:RuntimeError"


def test_real_h200_cudagraph_overwrite_crash(tmp_path: Path) -> None:
    """tests/data/h200/record-cudagraph-overwrite: a diffusers WanPipeline compiled with
    mode="reduce-overhead", recorded on an H200 (torch 2.11), dies in its first request."""
    trace = load_trace(h200_trace("record-cudagraph-overwrite", tmp_path))
    [finding] = get_analyzer("crash")(trace)
    assert finding.id == "crash:cudagraph-overwritten:RuntimeError"
    assert "overwritten" in finding.title
    assert "cudagraph_mark_step_begin()" in finding.fix
    assert "where the run was: live r1 step 0 (the last step started before it)" in (
        finding.evidence
    )
    assert "raised inside: a CUDA-graph replay or its outputs" in finding.evidence
    assert get_analyzer("compile-failure")(trace) == []


def test_failed_magi_compile_is_magi_compiles_finding(tmp_path: Path) -> None:
    """tests/data/h200/magi-specialized-dim: magi_compile's first compile raises a
    ConstraintViolationError and the program dies of it: one headline, magi-compile's."""
    trace = load_trace(h200_trace("magi-specialized-dim", tmp_path))
    assert trace.compiled is not None
    failed = [c.fail_type for c in trace.compiled.compiles if c.result == "failed"]
    assert failed == ["ConstraintViolationError"]
    assert _findings(trace) == []
    assert any(f.severity == "error" for f in get_analyzer("magi-compile")(trace))


def test_crash_inside_a_collective(tmp_path: Path) -> None:
    """Input a CPU run cannot produce here: an NCCL failure (needs several GPUs)."""
    message = "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21"
    trace = write_trace(
        tmp_path,
        [_crash(type="torch.distributed.DistBackendError", message=message, inside=["collective"])],
    )
    [finding] = _findings(trace)
    assert finding.title.startswith("The program crashed inside a collective: DistBackendError")
    assert "same collectives in the same order" in finding.fix
    assert "raised inside: a collective (torch.distributed)" in finding.evidence


def test_torchrun_report_alone_says_the_worker_left_no_crash(tmp_path: Path) -> None:
    """Input a CPU test does not produce on purpose: a worker killed by a signal (here the OOM
    killer's -9), so only torchrun's ChildFailedError is recorded."""
    message = (
        "\n=====\n/srv/serve.py FAILED\n-----\nRoot Cause (first observed failure):\n[0]:\n"
        "  time      : 2026-12-01_10:09:28\n  host      : gpu7\n  rank      : 1 (local_rank: 1)\n"
        "  exitcode  : -9 (pid: 4242)\n  error_file: <N/A>\n"
    )
    trace = write_trace(
        tmp_path,
        [
            _crash(
                type="torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                message=message,
                user_frame=None,
                user_stack=[],
            )
        ],
    )
    [finding] = _findings(trace)
    assert (
        finding.title == "A worker process failed: rank 1 exited with code -9 (torchrun's report)"
    )
    assert "OOM killer" in finding.fix


def test_crash_inside_compiled_code(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        [
            _crash(type="IndexError", inside=["compiled_code"]),
            _crash(type="IndexError", inside=["compiled_code"], t=70),
        ],
    )
    first, second = _findings(trace)
    assert "inside compiled code" in first.title
    assert "force_eager" in first.fix
    assert (first.id, second.id) == (
        "crash:compiled-code:IndexError",
        "crash:compiled-code:IndexError:2",
    )


def test_thread_crash_is_a_warning_and_interrupt_is_info(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        [
            _crash(thread="prefetch", type="OSError"),
            _crash(t=60, type="KeyboardInterrupt", message=""),
        ],
    )
    found = _findings(trace)
    by_kind = {f.data["kind"]: f for f in found}
    assert [f.id for f in found] == ["crash:thread:OSError", "crash:interrupted:KeyboardInterrupt"]
    assert by_kind["thread"].severity == "warning"
    assert "Thread 'prefetch' died" in by_kind["thread"].title
    assert by_kind["interrupted"].severity == "info"


def test_compile_oom_while_autotuning(tmp_path: Path) -> None:
    """Input a CPU run cannot produce: inductor running out of GPU memory while autotuning."""
    reason = (
        "backend='inductor' raised:\ntorch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB\n\nWhile executing "
        "benchmark for choice triton_mm_12 (autotuning)"
    )
    trace = write_trace(tmp_path, [_failed(fail_reason=reason)])
    [finding] = _findings(trace)
    assert finding.title == "forward failed to compile: out of GPU memory while autotuning"
    assert finding.severity == "error"
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in "\n".join(finding.evidence)


def test_whole_backend_reason_and_the_crash_it_caused_are_one_finding(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        [
            _failed(),
            _crash(type="torch._dynamo.exc.BackendCompilerFailed", inside=["compiling"]),
        ],
    )
    [finding] = _findings(trace)
    assert (
        finding.title == "forward failed to compile: backend 'inductor' raised RuntimeError: boom"
    )
    assert any("RuntimeError: boom" in line for line in finding.evidence)
    assert any("the program died of it" in line for line in finding.evidence)


def test_a_later_crash_is_not_folded_into_a_suppressed_failure(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        [
            _failed(suppress_errors=True, t=5),
            _crash(type="torch._dynamo.exc.BackendCompilerFailed", t=40),
            _crash(type="torch.OutOfMemoryError", message="CUDA out of memory.", t=60),
        ],
    )
    kinds = sorted(f.data["kind"] for f in _findings(trace))
    assert kinds == ["eager-fallback", "oom", "uncaught"]


def test_suppressed_failure_counts_the_steps_after_it(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, [_failed(suppress_errors=True, t=5), *_steps("r0", 10, 3)])
    [finding] = _findings(trace)
    assert finding.id == "compile-failure:eager-fallback:forward"
    assert "runs eagerly for the rest of the run" in finding.title
    assert "diag cannot count the eager calls" in " ".join(finding.evidence)
    assert any(line.startswith("3 step(s) of 1 request(s) ran after") for line in finding.evidence)
    assert any(line.startswith("the process ran on for") for line in finding.evidence)
    assert "suppress_errors = True hid this" in finding.fix
    failure, eager = finding.claims
    assert failure["kind"] == "compile-failure" and failure["compile_id"] == "0/0"
    assert (failure["fail_type"], failure["suppress_errors"]) == ("BackendCompilerFailed", True)
    # No entry to fall back on: the failing call and every later step ran eagerly.
    assert eager["kind"] == "eager-calls" and eager["extent"] == "unknown"
    assert eager["calls"] == [{"request": "r0", "step": s} for s in range(3)]


def test_suppressed_failure_after_an_entry_leaves_that_entry_unused(tmp_path: Path) -> None:
    """torch 2.6 and 2.13 (a counting backend sees every compiled call): after a suppressed
    failure Dynamo skips the frame's code, so even a call an earlier entry would serve runs
    eagerly; the entry stays in the cache, unused. The failing call and every later step's
    calls are eager."""
    failed = _failed(suppress_errors=True, t=5, compile_id="0/1", cache_size=1)
    trace = write_trace(tmp_path, [failed, *_steps("r0", 10, 3)])
    [finding] = _findings(trace)
    assert finding.title.startswith(
        "forward runs eagerly for the rest of the run, its 1 compiled entry unused: a compile "
        "failed (backend 'inductor' raised RuntimeError: boom)"
    )
    text = "\n".join(finding.evidence)
    assert "the 1 entry compiled before the failure stay in the cache, unused" in text
    assert "every call of forward in them ran eagerly" in text
    eager = finding.claims[-1]
    assert eager["kind"] == "eager-calls" and eager["extent"] == "unknown"
    assert eager["calls"] == [{"request": "r0", "step": s} for s in range(3)]


def test_suppressed_failure_counts_the_calls_the_recorder_saw(tmp_path: Path) -> None:
    """The recorder wrapped the callable (compile_options) and counted each later call of the
    skipped frame (limit_calls with `suppressed`): the count is the failing call plus those."""
    counted = [
        {"t": 10 * i + 15, "ev": "limit_calls", "frame": FRAME, "eager": 2, "compiled": 0,
         "unchecked": 0, "served_by": None, "suppressed": True, "phase": "live",
         "request_id": "r0", "step": i}
        for i in (1, 2)
    ]  # fmt: skip
    options = {"t": 1, "ev": "compile_options", "frame": FRAME, "dynamic": None}
    failed = _failed(suppress_errors=True, t=5, compile_id="0/1", cache_size=1)
    trace = write_trace(tmp_path, [options, failed, *_steps("r0", 10, 3), *counted])
    [finding] = _findings(trace)
    text = "\n".join(finding.evidence)
    assert "5 call(s) of forward ran eagerly from the failure on (r0 steps 0-2)" in text
    eager = finding.claims[-1]
    assert (eager["count"], eager["extent"]) == (5, "counted")
    assert eager["calls"] == [{"request": "r0", "step": s} for s in range(3)]


def test_a_failure_the_program_caught_names_the_calls_that_raised(tmp_path: Path) -> None:
    """suppress_errors off and no crash: the error reached the program, which went on."""
    failures = [
        _failed(t=10 * i + 12, compile_id=f"0/{i + 1}", step=i, cache_size=1) for i in range(3)
    ]
    steps = _steps("r0", 10, 3) + [{"t": 45, "ev": "request_end", "request_id": "r0"}]
    trace = write_trace(tmp_path, [*failures, *steps])
    [finding] = _findings(trace)
    assert (
        finding.title == "forward failed to compile: backend 'inductor' raised RuntimeError: boom"
    )
    text = "\n".join(finding.evidence)
    assert "3 compiles of forward failed the same way (0/1, 0/2, 0/3: live r0 step 0;" in text
    assert (
        "the program caught it; 3 call(s) of forward raised it and ran no compiled code "
        "(r0 steps 0-2)"
    ) in text
    assert "r0 went on and ended after 3 step(s)" in text
    assert "the program died of it" not in text


def test_a_failure_with_nothing_after_it_is_not_called_caught(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, [*_steps("r0", 0, 1), _failed(t=30)])
    [finding] = _findings(trace)
    assert "caught" not in "\n".join(finding.evidence)


def test_recompile_limit_results_are_left_to_their_analyzer(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        [_failed(result="recompile_limit", fail_type="RecompileLimitExceeded")],
    )
    assert _findings(trace) == []


def test_user_line_from_torch_reasons() -> None:
    constraint = (
        "Constraints violated (L['x'].size()[1])!\n  - You marked L['x'].size()[1] as dynamic "
        "but your code specialized it to be a constant (16).\n\nUser stack:\n"
        '  File "/srv/serve.py", line 3, in <module>\n    main()\n'
        '  File "/srv/model.py", line 44, in forward\n'
        "    return h.reshape(x.shape[0], self.tokens, 8)\n           ^^^^^^\n"
    )
    line = user_line(constraint)
    assert line is not None
    assert (line.location, line.code) == (
        "/srv/model.py:44",
        "return h.reshape(x.shape[0], self.tokens, 8)",
    )
    assert user_line("backend='x' raised:\nRuntimeError: y") is None


def test_tlparse_backend_failure_log_keeps_the_whole_reason() -> None:
    """pytorch/tlparse tests/inputs/comp_failure.log (BSD-3, tests/data/third_party/README.md):
    its failure used to print "No findings" with only "backend='broken_backend' raised:"."""
    trace = load_torch_trace(TLPARSE / "comp_failure.log.gz")
    [failed] = (
        [c for c in trace.compiled.compiles if c.result == "failed"] if trace.compiled else []
    )
    assert failed.fail_type == "BackendCompilerFailed"
    assert failed.fail_reason == "backend='broken_backend' raised:\nRuntimeError: broken backend"
    [finding] = _findings(trace)
    assert finding.title == (
        "fn failed to compile: backend 'broken_backend' raised RuntimeError: broken backend"
    )
    assert any("does not say whether the error reached the program" in e for e in finding.evidence)


# -- the crash collector's judgement, on real exceptions --------------------------------------


def _raise_in_compiled_code() -> BaseException:
    def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, 0, index) * 2

    compiled = torch.compile(gather, backend="aot_eager")
    try:
        compiled(torch.randn(4), torch.tensor([7]))
    except (IndexError, RuntimeError) as exc:
        return exc
    pytest.fail("an out-of-range index did not raise")


def test_describe_sees_compiled_code_and_the_user_line() -> None:
    fields = describe(_raise_in_compiled_code(), None)
    assert "compiled_code" in fields["inside"]
    assert fields["user_frame"]["file"] == __file__
    assert fields["user_frame"]["name"] == "gather"


def test_describe_bounds_the_message_and_names_the_cause() -> None:
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise ValueError("x" * (MAX_MESSAGE * 2)) from inner
    except ValueError as exc:
        fields = describe(exc, "worker")
    assert len(fields["message"]) < MAX_MESSAGE + 100
    assert fields["cause"]["type"] == "KeyError"
    assert fields["thread"] == "worker"
    assert fields["inside"] == []
    assert fields["user_frame"]["name"] == "test_describe_bounds_the_message_and_names_the_cause"


def test_user_files_are_the_programs_own() -> None:
    assert is_user_file("/srv/app/serve.py") and is_user_file("<string>")
    assert not is_user_file(torch.__file__)
    assert not is_user_file("/tmp/torchinductor_root/md/cmdsj6dzs55.py")  # inductor's output
    assert not is_user_file("/opt/venv/lib/python3.12/site-packages/diffusers/models/x.py")
    assert not is_user_file("<eval_with_key>.1")
    assert not is_user_file(traceback.__file__)  # the standard library
    tb = (
        'Traceback (most recent call last):\n  File "/srv/serve.py", line 3, in <module>\n'
        '  File "/usr/lib/site-packages/torch/_dynamo/output_graph.py", line 9, in call\n'
        '  File "/srv/backends.py", line 41, in my_backend\n'
        '  File "/usr/lib/site-packages/torch/_ops.py", line 875, in __call__\n'
    )
    assert innermost_user_frame(tb) == "/srv/backends.py:41"
