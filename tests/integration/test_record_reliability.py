"""`diag record` with real child processes: exit codes, signals, output, ranks, injection."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from diag.trace.lines import iter_events

from .support import PYTHON, diag_record, events, manifest, of

# These programs' exits are the point (exit codes, signals, crashes, forks, teardown): their
# processes keep Python's whole shutdown (tests/child_site is left off their PYTHONPATH).
pytestmark = pytest.mark.full_shutdown

STEPPING = """
import os, sys, time, torch
import diag.api as diag
with diag.phase("warmup"):
    with diag.request("w0", shape=[4]):
        with diag.step():
            torch.ones(4).sum()
for r in range({requests}):
    with diag.request(f"r{{r}}", shape=[4]):
        for i in range({steps}):
            with diag.step():
                torch.ones(4).sum()
                {inside}
print("done", flush=True)
"""


def _script(tmp_path: Path, body: str, name: str = "app.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_exit_code_passes_through(tmp_path: Path) -> None:
    app = _script(tmp_path, "import torch, sys\nprint('out'); sys.exit(3)\n")
    proc = diag_record(tmp_path / "t", PYTHON, str(app))
    assert proc.returncode == 3
    assert proc.stdout == "out\n"
    m = manifest(tmp_path / "t")
    assert (m["status"], m["runs"][0]["exit_code"]) == ("crashed", 3)


def test_child_exception_keeps_its_traceback_and_trace(tmp_path: Path) -> None:
    app = _script(
        tmp_path, STEPPING.format(requests=1, steps=2, inside="raise RuntimeError('boom')")
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app))
    assert proc.returncode == 1
    assert "RuntimeError: boom" in proc.stderr and "Traceback" in proc.stderr
    assert manifest(tmp_path / "t")["status"] == "crashed"
    evs = events(tmp_path / "t")
    assert of("step_start", evs)[-1]["request_id"] == "r0"
    assert of("process_end", evs), "atexit ran: the process ended normally after the exception"


def test_sigkill_mid_run_leaves_a_readable_trace(tmp_path: Path) -> None:
    inside = "os.kill(os.getpid(), 9) if i == 2 else None"
    app = _script(tmp_path, STEPPING.format(requests=1, steps=5, inside=inside))
    proc = diag_record(tmp_path / "t", PYTHON, str(app))
    assert proc.returncode == 128 + 9
    assert "SIGKILL" in proc.stderr
    m = manifest(tmp_path / "t")
    assert (m["status"], m["runs"][0]["signal"], m["runs"][0]["exit_code"]) == (
        "killed",
        "SIGKILL",
        None,
    )
    evs = events(tmp_path / "t")
    assert [(e["request_id"], e["step"]) for e in of("step_end", evs)] == [
        ("w0", 0),
        ("r0", 0),
        ("r0", 1),
    ]
    assert not of("process_end", evs)


def test_sigint_is_forwarded_and_the_child_stops_cleanly(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        """
        import sys, time, torch
        try:
            # Inside the try: on a loaded host the SIGINT can land while print returns.
            print("ready", flush=True)
            while True:
                time.sleep(0.05)
        except KeyboardInterrupt:
            print("stopped cleanly", flush=True)
            sys.exit(130)
    """,
    )
    launcher = subprocess.Popen(
        [PYTHON, "-m", "diag", "record", "-o", str(tmp_path / "t"), "--", PYTHON, str(app)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert launcher.stdout is not None
    assert launcher.stdout.readline() == "ready\n"
    launcher.send_signal(signal.SIGINT)
    out, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 130
    assert "stopped cleanly" in out
    assert manifest(tmp_path / "t")["status"] == "crashed"


def test_program_without_torch_runs_unchanged(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        "import sys\nprint('hello'); print('warn', file=sys.stderr)\n"
        "print('torch' in sys.modules)\n",
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app))
    assert proc.returncode == 0
    assert proc.stdout == "hello\nFalse\n"
    assert proc.stderr.startswith("warn\n")
    assert not list((tmp_path / "t" / "runs" / "compiled").glob("*/events.jsonl"))


def test_output_is_byte_identical(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        """
        import sys, torch
        torch.manual_seed(0)
        f = torch.compile(lambda x: (x * 2).sin(), backend="aot_eager")
        print(f(torch.randn(3)).tolist())
        print("to stderr", file=sys.stderr)
    """,
    )
    plain = subprocess.run([PYTHON, str(app)], capture_output=True, text=True, check=True)
    recorded = diag_record(tmp_path / "t", PYTHON, str(app))
    assert recorded.stdout == plain.stdout
    assert recorded.stderr.startswith(plain.stderr)


def test_user_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    app = _script(tmp_path, "import os, torch\nprint(os.environ.get('USER_SITE_RAN'))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = diag_record(tmp_path / "t", PYTHON, str(app), env=env)
    assert proc.stdout == "yes\n", proc.stderr
    assert of("process_start", events(tmp_path / "t"))


def test_survives_dynamo_reset(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        """
        import torch
        f = torch.compile(lambda x: x + 1, backend="aot_eager")
        f(torch.ones(2)); f(torch.ones(3))
        torch._dynamo.reset()
        g = torch.compile(lambda x: x * 2, backend="aot_eager")
        g(torch.ones(2))
    """,
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app))
    assert proc.returncode == 0, proc.stderr
    ends = of("compile_end", events(tmp_path / "t"))
    assert [(e["epoch"], e["compile_id"]) for e in ends] == [(0, "0/0"), (0, "0/1"), (1, "0/0")]
    assert of("recompile", events(tmp_path / "t"))[0]["guards"][0]["kind"] == "tensor-size"


def test_generic_step_and_request_functions(tmp_path: Path) -> None:
    (tmp_path / "mylib.py").write_text(
        textwrap.dedent("""
        import torch
        def denoise(x):
            return x * 0.5
        def generate(n):
            x = torch.ones(4)
            for _ in range(n):
                x = denoise(x)
            return x
    """)
    )
    app = _script(tmp_path, "import mylib\nfor n in (3, 2):\n    mylib.generate(n)\n")
    proc = diag_record(
        tmp_path / "t",
        PYTHON,
        str(app),
        cwd=tmp_path,
        options=("--step-fn", "mylib:denoise", "--request-fn", "mylib:generate"),
    )
    assert proc.returncode == 0, proc.stderr
    evs = events(tmp_path / "t")
    assert [e["name"] for e in of("adapter", evs)] == ["generic"]
    steps = [(e["request_id"], e["step"]) for e in of("step_end", evs)]
    assert steps == [("r1", 0), ("r1", 1), ("r1", 2), ("r2", 0), ("r2", 1)]
    assert "adapter: generic" in proc.stderr


def test_two_ranks_write_side_by_side(tmp_path: Path) -> None:
    """torchrun with gloo: one event file per rank, none clobbered."""
    setup = textwrap.dedent("""
        import diag.api as diag
        import torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.ones(1); dist.all_reduce(t); assert t.item() == 2
    """)
    body = STEPPING.replace("import diag.api as diag", setup)
    # As a correct program ends: without it gloo's threads can abort the rank at interpreter
    # exit ("terminate called without an active exception", SIGABRT; pytorch #190489).
    body += "dist.destroy_process_group()\n"
    app = _script(tmp_path, body.format(requests=2, steps=3, inside="pass"))
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    proc = diag_record(
        tmp_path / "t",
        torchrun,
        "--standalone",
        "--nproc_per_node",
        "2",
        str(app),
        options=("--profile", "none"),
    )
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "t" / "runs" / "compiled"
    rank_dirs = sorted(run.glob("rank*"))
    assert sorted(p.name.split("-")[0] for p in rank_dirs) == ["rank0", "rank1"]
    for rank_dir in rank_dirs:
        evs = list(iter_events(rank_dir / "events.jsonl"))
        assert len(of("step_end", evs)) == 1 + 2 * 3
        assert of("process_start", evs)[0]["rank"] == int(rank_dir.name[4])


def test_torch_trace_is_kept(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        "import torch\ntorch.compile(lambda x: x + 1, backend='aot_eager')(torch.ones(2))\n",
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app), options=("--torch-trace",))
    assert proc.returncode == 0, proc.stderr
    logs = list((tmp_path / "t" / "runs" / "compiled" / "torch_trace").glob("*.log"))
    assert logs and any("compilation_metrics" in p.read_text() for p in logs)
    # tlparse (a dev dependency) reads it.
    tlparse = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
    out = tmp_path / "tlparse"
    parsed = subprocess.run(
        [tlparse, str(logs[0]), "-o", str(out), "--no-browser"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert parsed.returncode == 0, parsed.stderr
    assert (out / "index.html").exists() and (out / "compile_directory.json").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--profile", "sometimes"), "bad --profile item"),
        (("--step-fn", "nocolon"), "expected MODULE:QUALNAME"),
        (("--max-size", "10K"), "expected a size of 1M or more"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(
    tmp_path: Path, options: tuple[str, ...], message: str
) -> None:
    proc = diag_record(tmp_path / "t", PYTHON, "-c", "pass", options=options)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert not (tmp_path / "t").exists()


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert diag_record(tmp_path / "t", PYTHON, "-c", "pass").returncode == 0
    again = diag_record(tmp_path / "t", PYTHON, "-c", "pass")
    assert again.returncode == 2 and "--force" in again.stderr
    forced = diag_record(tmp_path / "t", PYTHON, "-c", "pass", options=("--force",))
    assert forced.returncode == 0
    other = tmp_path / "notatrace"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    refused = diag_record(other, PYTHON, "-c", "pass", options=("--force",))
    assert refused.returncode == 2 and (other / "keep.txt").exists()


def test_missing_command_and_unknown_program(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "record", "-o", str(tmp_path / "t")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "no command" in proc.stderr
    missing = diag_record(tmp_path / "u", "no-such-program-xyz")
    assert missing.returncode == 127 and "command not found" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_default_output_name(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "diag", "record", "--profile", "none", "--", PYTHON, str(tmp_path / "x.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2  # python: can't open file: passed through
    created = [p.name for p in tmp_path.iterdir()]
    assert len(created) == 1 and created[0].startswith("diag-x-")


def test_magi_compile_use_is_recorded(tmp_path: Path) -> None:
    """A stand-in `magi_compiler` package (MAGI's compiler is not installable here) with the same
    import path and decorator name; diag must note that its recompiles are invisible."""
    package = tmp_path / "magi_compiler"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import torch\n\ndef magi_compile(fn):\n    return torch.compile(fn, backend='aot_eager')\n"
    )
    app = _script(
        tmp_path,
        """
        import torch
        from magi_compiler import magi_compile

        @magi_compile
        def block(x):
            return x * 2

        print(block(torch.ones(2)).tolist())
    """,
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[2.0, 2.0]\n"
    magi = of("magi_compile", events(tmp_path / "t"))
    assert [e["target"]["name"] if e["target"] else None for e in magi] == [None, "block"]
    assert "invisible to Dynamo" in proc.stderr


def test_graph_break_with_reason_and_user_location(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        """
        import torch

        def block(x):
            y = x * 2
            torch._dynamo.graph_break()
            return y + 1

        torch.compile(block, backend="aot_eager")(torch.ones(2))
    """,
    )
    proc = diag_record(tmp_path / "t", PYTHON, str(app))
    assert proc.returncode == 0, proc.stderr
    breaks = of("graph_break", events(tmp_path / "t"))
    assert breaks, "no graph_break event"
    assert breaks[0]["user_location"].startswith(str(app))
    assert breaks[0]["reason"]
