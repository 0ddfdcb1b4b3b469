"""How a recording ended, and what diag could not see in it, head every output.

Real child processes throughout: a program that exits non-zero, one killed by SIGKILL, one
still running while it is analyzed (and one whose launcher was killed under it), a command
that does not exist, a program that never reports steps, a user sitecustomize that imports
torch, and SIGINT sent to diag's own pid while diag owns a terminal (a pty).
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

from .support import PYTHON, diag_record, events, manifest, of

SLEEPER = """
import time, torch
print("ready", flush=True)
for _ in range({loops}):
    time.sleep(0.05)
print("ran to the end", flush=True)
"""

RECOMPILING = """
import torch
f = torch.compile(lambda x: x * 2, backend="aot_eager", dynamic=False)
for n in (2, 3, 4):
    f(torch.ones(n))
print("ok", flush=True)
"""


def _script(tmp_path: Path, body: str, name: str = "app.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "diag", *args], capture_output=True, text=True, timeout=120
    )


def _analyze_json(trace: Path) -> dict[str, Any]:
    proc = _diag("analyze", str(trace), "--json")
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _wait_for_line(stream: Any, text: str) -> None:
    line = stream.readline()
    assert line == text, line


# --- incomplete recordings ----------------------------------------------------------------------


def test_failed_launch_leaves_a_finished_trace_that_says_nothing_ran(tmp_path: Path) -> None:
    trace = tmp_path / "t"
    proc = diag_record(trace, "no-such-program-xyz", "--flag")
    assert proc.returncode == 127
    assert "command not found: no-such-program-xyz" in proc.stderr
    assert "Traceback" not in proc.stderr
    m = manifest(trace)
    assert m["status"] == "failed-to-start"
    assert m["ended"]
    assert (m["runs"][0]["status"], m["runs"][0]["exit_code"]) == ("failed-to-start", 127)
    assert m["runs"][0]["error"] == "command not found: no-such-program-xyz"

    text = _diag("analyze", str(trace))
    assert text.returncode == 0, text.stderr
    first = text.stdout.splitlines()[0]
    assert first.startswith("recording: failed to start: command not found"), text.stdout
    assert "nothing compiled after warmup" not in text.stdout
    assert "not an all-clear" in text.stdout
    document = _analyze_json(trace)
    assert document["status"]["recording"] == "failed-to-start"
    assert document["status"]["complete"] is False
    assert document["notices"][0]["kind"] == "recording-incomplete"

    check = _diag("check", str(trace))
    assert check.returncode == 1
    assert "failed-to-start" in check.stdout


def test_a_program_that_exits_3_is_reported_crashed_first(tmp_path: Path) -> None:
    app = _script(tmp_path, RECOMPILING.replace('print("ok", flush=True)', "raise SystemExit(3)"))
    trace = tmp_path / "t"
    assert diag_record(trace, PYTHON, str(app)).returncode == 3
    text = _diag("analyze", str(trace)).stdout
    lines = text.splitlines()
    assert lines[0] == "recording: crashed: the program exited with code 3", text
    assert lines[1].startswith("NOTICE  the recording is incomplete"), text
    assert "nothing compiled after warmup" not in text
    document = _analyze_json(trace)
    assert (document["status"]["recording"], document["status"]["exit_code"]) == ("crashed", 3)
    assert document["notices"][0]["kind"] == "recording-incomplete"


def test_a_killed_program_is_reported_with_its_signal(tmp_path: Path) -> None:
    app = _script(tmp_path, "import os, torch\nos.kill(os.getpid(), 9)\n")
    trace = tmp_path / "t"
    assert diag_record(trace, PYTHON, str(app)).returncode == 128 + 9
    text = _diag("analyze", str(trace)).stdout
    assert text.splitlines()[0] == "recording: killed: the program was ended by SIGKILL", text
    assert _analyze_json(trace)["status"]["signal"] == "SIGKILL"


def test_a_recording_still_running_and_one_whose_launcher_died(tmp_path: Path) -> None:
    app = _script(tmp_path, SLEEPER.format(loops=2400))
    trace = tmp_path / "t"
    launcher = subprocess.Popen(
        [PYTHON, "-m", "diag", "record", "-o", str(trace), "--", PYTHON, str(app)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    child_pid = None
    try:
        assert launcher.stdout is not None
        _wait_for_line(launcher.stdout, "ready\n")
        text = _diag("analyze", str(trace)).stdout
        assert text.startswith(f"recording: still running: diag record (pid {launcher.pid})"), text
        assert "nothing compiled after warmup" not in text

        # The launcher dies; its child, the program, carries on (orphaned).
        launcher.kill()
        launcher.wait(timeout=30)
        child_pid = of("process_start", events(trace))[0]["pid"]
        text = _diag("analyze", str(trace)).stdout
        assert text.startswith(f"recording: still running: recorded process(es) {child_pid}"), text

        os.kill(child_pid, signal.SIGKILL)
        for _ in range(200):  # reaped by init: gone once kill(pid, 0) fails
            try:
                os.kill(child_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        text = _diag("analyze", str(trace)).stdout
        assert text.startswith("recording: never finished: the manifest was left `running`"), text
        assert _analyze_json(trace)["status"]["recording"] == "running"
        assert _diag("check", str(trace)).returncode == 1
    finally:
        if launcher.poll() is None:
            launcher.kill()
        if child_pid is not None:
            try:
                os.kill(child_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# --- what diag could not see ------------------------------------------------------------------


def test_no_steps_known_no_all_clear_and_no_after_warmup(tmp_path: Path) -> None:
    """A program that imports diag.api but annotates nothing yet: no adapter reports a step
    (the compiled-calls fallback yields to diag.api)."""
    app = _script(tmp_path, "import diag.api\n" + RECOMPILING)
    trace = tmp_path / "t"
    proc = diag_record(trace, PYTHON, str(app))
    assert proc.returncode == 0
    assert "after warmup" not in proc.stderr
    assert "no steps or requests identified" in proc.stderr
    text = _diag("analyze", str(trace), "--only", "live-compile").stdout
    assert text.splitlines()[0] == "recording: complete (exit code 0)"
    assert "NOTICE  no steps or requests identified in run compiled" in text
    assert "--step-fn" in text and "diag.api" in text
    # --only says its silence is no all-clear, and what the recording could not show.
    assert "No findings from live-compile (--only" in text and "no all-clear" in text
    assert "not seen: no steps or requests were identified" in text
    assert "nothing compiled after warmup" not in text
    assert _diag("check", str(trace)).returncode == 1


def test_program_without_torch_is_a_notice_not_an_all_clear(tmp_path: Path) -> None:
    app = _script(tmp_path, "print('hello')\n")
    trace = tmp_path / "t"
    proc = diag_record(trace, PYTHON, str(app))
    assert proc.returncode == 0
    assert "NOT RECORDED" in proc.stderr
    document = _analyze_json(trace)
    assert [n["kind"] for n in document["notices"]] == ["no-process"]


def test_user_sitecustomize_that_imports_torch_keeps_diag_recording(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import torch\ntorch.set_num_threads(1)\n")
    app = _script(tmp_path, RECOMPILING)
    trace = tmp_path / "t"
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = diag_record(trace, PYTHON, str(app), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    evs = events(trace)
    assert len(of("process_start", evs)) == 1
    assert len(of("compile_end", evs)) == 3
    assert len(of("recompile", evs)) == 2
    assert not (trace / "runs" / "compiled" / "bootstrap-errors.txt").exists()


def test_torch_without_collectors_is_said_loudly(tmp_path: Path) -> None:
    """The bootstrap's torch hook is taken off sys.meta_path by the program before it imports
    torch (as an import-system rewrite could): torch runs, no collector starts, and the trace
    and every output say so."""
    app = _script(
        tmp_path,
        """
        import sys
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_TorchImportHook"]
        import torch
        torch.compile(lambda x: x + 1, backend="aot_eager")(torch.ones(2))
        print("ran")
        """,
    )
    trace = tmp_path / "t"
    proc = diag_record(trace, PYTHON, str(app))
    assert proc.returncode == 0 and proc.stdout == "ran\n"
    assert "NOT RECORDED: torch ran without diag's collectors" in proc.stderr
    errors = (trace / "runs" / "compiled" / "bootstrap-errors.txt").read_text()
    assert "torch was imported but diag's collectors never started" in errors
    text = _diag("analyze", str(trace)).stdout
    assert "NOTICE  1 process(es) ran torch without diag's collectors" in text, text
    assert "not an all-clear" in text


# --- signals --------------------------------------------------------------------------------------


def _record_in_a_terminal(trace: Path, app: Path) -> tuple[int, int]:
    """`diag record` as the foreground job of its own terminal (a pty), as from a shell."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once
        os.execv(PYTHON, [PYTHON, "-m", "diag", "record", "-o", str(trace), "--", PYTHON, str(app)])
    return pid, fd


def _read_until(fd: int, text: bytes, seen: bytes = b"", limit_s: float = 120) -> bytes:
    deadline = time.monotonic() + limit_s
    while text not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal closed: every process on it ended
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _finish(pid: int, fd: int, seen: bytes) -> tuple[int, str]:
    seen = _read_until(fd, b"\0never\0", seen)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def test_sigint_to_diags_pid_is_forwarded_even_from_a_terminal(tmp_path: Path) -> None:
    app = _script(tmp_path, SLEEPER.format(loops=1200))
    trace = tmp_path / "t"
    pid, fd = _record_in_a_terminal(trace, app)
    seen = _read_until(fd, b"ready")
    assert b"ready" in seen
    os.kill(pid, signal.SIGINT)  # `timeout -s INT`, a supervisor: diag's pid alone
    code, output = _finish(pid, fd, seen)
    assert code == 130, output
    assert "ran to the end" not in output
    assert "KeyboardInterrupt" in output
    m = manifest(trace)
    assert (m["status"], m["runs"][0]["signal"]) == ("killed", "SIGINT")
    assert f"diag: recorded {PYTHON} {app} -> " in output.replace("\r\n", "\n")
    text = _diag("analyze", str(trace)).stdout
    assert text.startswith("recording: killed: the program was ended by SIGINT")


def test_ctrl_c_in_the_terminal_reaches_the_child_once(tmp_path: Path) -> None:
    app = _script(
        tmp_path,
        """
        import time, torch
        try:
            print("ready", flush=True)
            for _ in range(1200):
                time.sleep(0.05)
        except KeyboardInterrupt:
            print("interrupted once", flush=True)
            time.sleep(2)  # a second SIGINT (diag forwarding the terminal's) would land here
            print("cleaned up", flush=True)
            raise SystemExit(130)
        """,
    )
    trace = tmp_path / "t"
    pid, fd = _record_in_a_terminal(trace, app)
    seen = _read_until(fd, b"ready")
    os.write(fd, b"\x03")  # Ctrl-C: the terminal signals its whole foreground group
    code, output = _finish(pid, fd, seen)
    assert code == 130, output
    assert "interrupted once" in output and "cleaned up" in output, output
    assert "Traceback" not in output
    assert manifest(trace)["status"] == "crashed"


def test_the_recorded_command_is_echoed_with_its_quoting(tmp_path: Path) -> None:
    app = _script(tmp_path, "import sys\nprint(sys.argv[1:])\n", name="my app.py")
    proc = diag_record(tmp_path / "t", PYTHON, str(app), "two words", "it's")
    assert proc.stdout == "['two words', \"it's\"]\n"
    assert f"diag: recorded {PYTHON} '{app}' 'two words' 'it'\"'\"'s' -> " in proc.stderr
