"""Run one generated program twice (plain, then under `diag record`), each with the oracle on
and its own compile caches, then `diag analyze --json` on the recording.

Plain and recorded runs get the same environment apart from diag: the oracle's folder and the
Inductor/Triton cache folders differ only by name, so neither run inherits the other's
compiled artifacts.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .program import write_program
from .spec import ProgramSpec


@dataclass
class RunResult:
    label: str
    command: list[str]
    exit_code: int | None
    seconds: float
    timed_out: bool = False
    stdout_tail: str = ""
    stderr_tail: str = ""


@dataclass
class ProgramRun:
    spec: ProgramSpec
    folder: Path
    plain: RunResult | None = None
    recorded: RunResult | None = None
    analyze: RunResult | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def program(self) -> Path:
        return self.folder / "program.py"

    def save(self) -> None:
        data = {
            "spec": self.spec.to_json(),
            "plain": asdict(self.plain) if self.plain else None,
            "recorded": asdict(self.recorded) if self.recorded else None,
            "analyze": asdict(self.analyze) if self.analyze else None,
            "errors": self.errors,
        }
        (self.folder / "run.json").write_text(json.dumps(data, indent=1), encoding="utf-8")


def warmup_flag(spec: ProgramSpec) -> list[str]:
    """`--warmup-requests N` for the programs that mark warmup that way."""
    count = len(spec.warmup_requests)
    if spec.marking in ("flag", "bare") and count:
        return ["--warmup-requests", str(count)]
    return []


def _command(spec: ProgramSpec, program: Path) -> list[str]:
    if spec.layout == "ranks":
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(_free_port()),
            str(program),
        ]
    return [sys.executable, str(program)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(folder: Path, label: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("TORCH_LOGS", "TORCH_TRACE", "TORCHDYNAMO_VERBOSE", "TORCH_COMPILE_DEBUG"):
        env.pop(name, None)
    env.update(
        FIDELITY_ORACLE_DIR=str(folder / f"oracle-{label}"),
        TORCHINDUCTOR_CACHE_DIR=str(folder / f"inductor-{label}"),
        TRITON_CACHE_DIR=str(folder / f"triton-{label}"),
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",
        TQDM_DISABLE="1",
    )
    (folder / f"oracle-{label}").mkdir(parents=True, exist_ok=True)
    return env


class _Started:
    """A command running with its output going to `<label>.stdout`/`.stderr` in its folder."""

    def __init__(self, label: str, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.label, self.command, self.cwd = label, command, cwd
        self.started = time.monotonic()
        self.out = open(cwd / f"{label}.stdout", "w")  # noqa: SIM115 - closed in finish()
        self.err = open(cwd / f"{label}.stderr", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=self.out, stderr=self.err, start_new_session=True
        )

    def finish(self, timeout: float) -> RunResult:
        timed_out = False
        left = max(1.0, timeout - (time.monotonic() - self.started))
        try:
            code: int | None = self.process.wait(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(self.process.pid, 9)  # the whole group: torchrun's and spawn's children
            self.process.wait()
            code = None
        self.out.close()
        self.err.close()
        return RunResult(
            self.label,
            self.command,
            code,
            round(time.monotonic() - self.started, 2),
            timed_out,
            (self.cwd / f"{self.label}.stdout").read_text(errors="replace")[-2000:],
            (self.cwd / f"{self.label}.stderr").read_text(errors="replace")[-3000:],
        )


def run_program(
    spec: ProgramSpec,
    root: Path,
    timeout: float = 420,
    profile: str | None = None,
    concurrent: bool = True,
) -> ProgramRun:
    """Write the program, run it plain and recorded (at once when `concurrent`: each has its
    own caches and oracle folder, and nothing the comparison reads depends on timing), then
    analyze the recording."""
    folder = root / spec.program_id
    shutil.rmtree(folder, ignore_errors=True)  # a re-run starts clean (oracle files are per pid)
    program = write_program(spec, folder)
    run = ProgramRun(spec, folder)
    trace = folder / "trace"
    options = ["-o", str(trace), "--force", *warmup_flag(spec)]
    if profile is not None:
        options += ["--profile", profile]
    record = [sys.executable, "-m", "diag", "record", *options, "--", *_command(spec, program)]
    plain = _Started("plain", _command(spec, program), folder, _env(folder, "plain"))
    if not concurrent:
        run.plain = plain.finish(timeout)
    recorded = _Started("recorded", record, folder, _env(folder, "recorded"))
    if concurrent:
        run.plain = plain.finish(timeout)
    run.recorded = recorded.finish(timeout)
    if (trace / "manifest.json").exists():
        analyze = [sys.executable, "-m", "diag", "analyze", str(trace), "--json"]
        run.analyze = _Started("analyze", analyze, folder, dict(os.environ)).finish(timeout)
        (folder / "findings.json").write_text(
            (folder / "analyze.stdout").read_text(errors="replace"), encoding="utf-8"
        )
        if run.analyze.exit_code != 0:
            run.errors.append(
                f"diag analyze exited {run.analyze.exit_code}: {run.analyze.stderr_tail[-300:]}"
            )
    else:
        run.errors.append("diag record left no trace")
    for result in (run.plain, run.recorded):
        if result.timed_out:
            run.errors.append(f"{result.label} run timed out after {timeout:.0f} s")
    run.save()
    return run
