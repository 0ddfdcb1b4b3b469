"""trace-boundary on real recordings (CPU, aot_eager): a kernel loader behind
`functools.lru_cache` that stats a file and takes a threading lock, called inside a compiled
block (FlashInfer's RoPE JIT wrapper in LightX2V), against the same block with the call
registered as a `torch.library.custom_op` with `register_fake` (clean: quiet). The counts diag
reports are torch's own (`torch._dynamo.utils.counters`, printed by the program), and the
program prints the same, to stdout and stderr, with TORCH_LOGS on, with and without diag."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

from diag.analyzers.trace_boundary import analyze
from diag.trace.load import load_trace
from tests.integration.support import PYTHON, diag_record

PROGRAM = textwrap.dedent(
    """
    import datetime, functools, json, os, sys, threading
    import torch

    _LOCK = threading.Lock()

    def _library_path(name):
        return os.path.join(os.path.dirname(__file__), name + ".py")

    @functools.lru_cache(maxsize=None)
    def load_kernel(name):  # a kernel library's JIT loader: find the module, check it, lock
        path = _library_path(name)
        os.stat(path)
        with _LOCK:
            loaded_at = datetime.datetime.now()
        return (name, loaded_at)

    def rope(x):
        load_kernel("prog")
        return x * 2.0

    if sys.argv[1] == "custom-op":
        @torch.library.custom_op("diagtest::rope", mutates_args=())
        def rope(x: torch.Tensor) -> torch.Tensor:
            load_kernel("prog")
            return x * 2.0

        @rope.register_fake
        def _(x):
            return torch.empty_like(x)

    def block(x, w):
        return torch.relu(rope(x @ w))

    compiled = torch.compile(block, backend="aot_eager")
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    for _ in range(3):
        compiled(x, w)
    counters = torch._dynamo.utils.counters
    print(json.dumps({
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
    }))
    """
)


def _record(tmp_path: Path, case: str) -> tuple[Path, dict[str, int]]:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    out = tmp_path / case
    proc = diag_record(out, PYTHON, str(program), case)
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout.strip().splitlines()[-1])


def test_lru_cached_loader_inside_the_compiled_block(tmp_path: Path) -> None:
    out, torch_counts = _record(tmp_path, "jit")
    trace = load_trace(out)
    (finding,) = analyze(trace)
    assert finding.severity == "warning"
    assert finding.id == "trace-boundary:load_kernel@prog.py"
    assert finding.data["lru_cache"] is True
    assert "posixpath" in finding.data["modules"]
    assert finding.data["frames"] == ["block", "rope"]
    # torch's own counts: every graph break it counted was inside the loader; every compile
    # of the run traced it or resumed after one of its breaks (three graphs where the
    # custom op makes one; rope's own frame broke before any op).
    assert finding.data["graph_breaks"] == torch_counts["graph_breaks"] == 2
    assert trace.compiled is not None
    assert finding.data["compiles"] == len(trace.compiled.compiles) == 4
    assert torch_counts["graphs"] == 3
    assert finding.data["compile_s"] > 0
    call_line = PROGRAM.splitlines().index('    load_kernel("prog")') + 1  # in rope
    assert finding.location is not None and finding.location.endswith(f"prog.py:{call_line}")
    assert "torch.library.custom_op" in finding.fix and "register_fake" in finding.fix
    assert "rope at" in finding.fix
    text = "\n".join(finding.evidence)
    assert "rope at" in text and "-> load_kernel" in text
    assert "posixpath.join" in text and "lock" in text
    assert "torch_dynamo_resume_in_block_at_" in text
    [claim] = finding.claims
    assert claim["kind"] == "traced-into" and claim["function"] == "load_kernel"
    assert claim["graph_breaks"] == torch_counts["graph_breaks"] and claim["lru_cache"] is True
    assert set(claim["compile_ids"]) <= {c.compile_id for c in trace.compiled.compiles}


def test_the_loader_behind_a_custom_op_is_quiet(tmp_path: Path) -> None:
    out, torch_counts = _record(tmp_path, "custom-op")
    trace = load_trace(out)
    assert torch_counts == {"graphs": 1, "graph_breaks": 0}
    assert trace.compiled is not None and trace.compiled.of("traced_code") == []
    assert analyze(trace) == []


_LOG_HEADER = re.compile(r"^(?:\[rank\d+\]:)?[VIWEDC]\d{4} [\d:.]+ \d+ \S+\] ", re.MULTILINE)
#: diag's wrappers around compiled callables (shapes, profiling, step adapters) are frames of
#: the call stack, so torch's tracebacks show them; they are not output of this collector.
_DIAG_FRAME = re.compile(
    r'^(?P<p>.*)  File "[^"]*/collectors/[^"]*", line \d+, in \w+\n(?P=p)    .*\n'
    r"(?:(?P=p)\s+\^+\n)?",
    re.MULTILINE,
)


def _normalised(stderr: str) -> str:
    return _DIAG_FRAME.sub("", _LOG_HEADER.sub("", stderr))


def test_the_program_prints_the_same_with_and_without_diag(tmp_path: Path) -> None:
    """Reading Dynamo's traced code prints nothing: the program's stdout, and its stderr with
    its own TORCH_LOGS output (graph breaks, recompiles), are the same under diag, but for the
    log lines' time stamps and diag's wrapper frames in torch's stack traces."""
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "TORCH_LOGS": "graph_breaks,recompiles"}
    plain = subprocess.run(
        [PYTHON, str(program), "jit"], capture_output=True, text=True, env=env, timeout=240
    )
    recorded = diag_record(tmp_path / "t", PYTHON, str(program), "jit", env=env)
    assert plain.returncode == recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == plain.stdout
    own_stderr = recorded.stderr.split("\ndiag: recorded")[0].rstrip("\n") + "\n"
    assert "Graph break" in plain.stderr and "lru_cache" in plain.stderr
    assert _normalised(own_stderr) == _normalised(plain.stderr.rstrip("\n") + "\n")


CACHED_MATH = textwrap.dedent(
    """
    import functools, math
    import torch

    @functools.lru_cache(maxsize=None)
    def attention_scale(head_dim):  # cached arithmetic: no file, clock, lock or import
        return 1.0 / math.sqrt(head_dim)

    def block(q):
        return (q * attention_scale(q.shape[-1])).softmax(-1)

    compiled = torch.compile(block, backend="aot_eager")
    for _ in range(2):
        compiled(torch.randn(4, 16))
    """
)


def test_cached_arithmetic_is_context_not_a_warning(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(CACHED_MATH)
    proc = diag_record(tmp_path / "t", PYTHON, str(program))
    assert proc.returncode == 0, proc.stderr
    (finding,) = analyze(load_trace(tmp_path / "t"))
    assert finding.severity == "info"
    assert finding.data["lru_cache"] is True and finding.data["modules"] == []
    assert finding.data["graph_breaks"] == 0 and finding.data["compiles"] == 1
