"""The support range, tested: one venv per torch minor release, a record-path smoke in each.

    python bench/compat.py                         # every minor from pyproject's torch>= on
    python bench/compat.py --torch 2.6,2.15 --programs loop,limit,fixture   # CI (.ci/run)
    python bench/compat.py --torch 2.6,2.13 --programs loop,fixture

For each torch minor release on the registry (the newest patch of each, from pyproject's
`torch>=` bound up), a venv under ~/.cache/diag-compat/torch-X.Y (DIAG_COMPAT_CACHE moves it) is
made once and reused: torch as pip installs it for a user (PyPI's Linux wheel with its CUDA
libraries: it imports and compiles on a CPU host), diag from this checkout (editable, no deps),
msgspec (diag's one import on the record/analyze/check paths) and diffusers. Each program then
runs plain and under `diag record` through bench/compat_probe.py, which prints Dynamo's counters
at exit, and the two runs must agree:

- loop: bench/compat_loop.py, torch.compile(lambda x: torch.sin(x) * 2) at sizes 4, 4, 8;
- limit: bench/compat_limit.py, the loop under `config.patch(cache_size_limit=2)` (the limit's
  old name) at sizes 4, 8, 1: the third call's compile is refused, and diag must name the
  lowered setting as the cause;
- fixture: the reference service, one block, with its guard-churn and unwarmed-shape plants
  (a live request at a width warmup never served recompiles);
- diffusers: bench/diffusers_tiny.py, a tiny DiTPipeline whose blocks are compiled (its second
  batch size recompiles them live).

A row passes when both runs exit 0, their checksums (read off the program's own output lines)
and Dynamo counters are equal, neither stderr holds a traceback, `diag analyze` of the recording
exits 0 and names the planted recompile, and `diag check` gives a verdict (exit 0 or 1). The
table goes to stdout (Markdown); the exit code is 1 when any row fails, 2 on bad usage. Each
run's output and trace are kept under --out. pip runs with PIP_CONFIG_FILE=/dev/null, so that a
machine-wide pip cap (this dev machine's torch<=2.14) does not hide the newest release.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = "bench/compat_probe.py"
COUNTERS_MARKER = "COMPAT-COUNTERS"
TRACEBACK = "Traceback (most recent call last)"
# What each venv gets beside torch and diag: msgspec (imported by record, analyze and check)
# and diffusers (the diffusers program; it brings numpy and huggingface_hub).
EXTRA_PACKAGES = ("msgspec", "diffusers")
# Used when the registry cannot be asked (`pip index versions torch` failed).
KNOWN_RELEASES = (
    "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0",
)  # fmt: skip


@dataclass(frozen=True)
class Program:
    name: str
    argv: tuple[str, ...]  # after `python`, relative to the repository root
    checksum: str  # regex over stdout: the matched text of every match is the checksum's input
    recompile: str | None  # regex over `diag analyze`: the planted recompile, named
    record_args: tuple[str, ...] = ()


PROGRAMS: dict[str, Program] = {
    p.name: p
    for p in (
        Program(
            "loop",
            ("bench/compat_loop.py",),
            r"(?m)^loop .*$",
            r"recompiled during live request r2 .*size mismatch at index 0\. expected 4, actual 8",
        ),
        Program(
            "limit",
            ("bench/compat_limit.py",),
            r"(?m)^limit .*$",
            # The limit lowered by config.patch(cache_size_limit=2), named as torch has it:
            # cache_size_limit on 2.6, recompile_limit (its alias's target) from 2.7 on.
            r"\[recompile-limit\] <lambda> hit the recompile limit at live r3 step 0 because the "
            r"program lowered torch\._dynamo\.config\.(cache_size|recompile)_limit to 2",
        ),
        Program(
            "fixture",
            tuple(
                "-m diag.fixtures --compile --backend aot_eager --warmup"
                " --plant guard-churn,unwarmed-shape --blocks 1".split()
            ),
            r"latents=\w+",
            # unwarmed-shape: r1's new width recompiles on every torch (guard-churn's config read
            # also recompiles r0 and r1 from torch 2.7 on; torch 2.6 guards it not at all).
            r"\[live-compile\] wan_block_forward recompiled during live request r1 at step 0",
        ),
        Program(
            "diffusers",
            ("bench/diffusers_tiny.py", "--compile", "--steps", "2"),
            r"(?m)^dit .*$",
            # The second batch size (2 class labels) recompiles the blocks in a live request.
            r"\[live-compile\] forward recompiled during live request r\d+ at step 0 .*mismatch",
            ("--warmup-requests", "1"),
        ),
    )
}


@dataclass
class Run:
    """One run of one program: exit code, what its output says, how long it took."""

    rc: int
    checksum: str  # "" when the program printed no checksum line
    counters: dict[str, dict[str, int]] | None
    traceback: bool
    seconds: float


@dataclass
class Row:
    torch: str
    program: str
    setup_s: float
    plain: Run
    recorded: Run
    analyze_rc: int = -1
    check_rc: int = -1
    recompile_named: bool | None = None  # None: the program plants none
    failures: list[str] = field(default_factory=list)


def checksum(stdout: str, pattern: str) -> str:
    """A short digest of the program's checksum lines (timings and diag's lines left out)."""
    found = [m.group(0) for m in re.finditer(pattern, stdout)]
    if not found:
        return ""
    return hashlib.sha256("\n".join(found).encode()).hexdigest()[:12]


def parse_counters(stdout: str) -> dict[str, dict[str, int]] | None:
    """The probe's counters line (the last one), or None when the program printed none."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(COUNTERS_MARKER + " ")]
    if not lines:
        return None
    try:
        table = json.loads(lines[-1][len(COUNTERS_MARKER) + 1 :])
    except ValueError:
        return None
    return table if isinstance(table, dict) else None


def judge(row: Row, analyze_out: str, recompile: str | None) -> Row:
    """Fill in the row's verdict: every way the recorded run differs from the plain one."""
    plain, rec = row.plain, row.recorded
    if plain.rc != 0:
        row.failures.append(f"plain run exit {plain.rc}")
    if rec.rc != plain.rc:
        row.failures.append(f"recorded run exit {rec.rc} (plain {plain.rc})")
    if not plain.checksum or plain.checksum != rec.checksum:
        row.failures.append(f"checksums differ: {plain.checksum or '-'} vs {rec.checksum or '-'}")
    if plain.counters is None or plain.counters != rec.counters:
        row.failures.append("Dynamo counters differ" + _counter_diff(plain.counters, rec.counters))
    if plain.traceback or rec.traceback:
        which = "plain" if plain.traceback else "recorded"
        row.failures.append(f"traceback on the {which} run's stderr")
    if row.analyze_rc != 0:
        row.failures.append(f"diag analyze exit {row.analyze_rc}")
    if row.check_rc not in (0, 1):
        row.failures.append(f"diag check exit {row.check_rc}")
    if recompile is not None:
        row.recompile_named = re.search(recompile, analyze_out) is not None
        if not row.recompile_named:
            row.failures.append("diag analyze does not name the planted recompile")
    return row


def _counter_diff(a: dict[str, dict[str, int]] | None, b: dict[str, dict[str, int]] | None) -> str:
    if a is None or b is None:
        return f" ({'plain' if a is None else 'recorded'} run printed none)"
    keys = sorted(
        f"{g}.{k}"
        for g in set(a) | set(b)
        for k in set(a.get(g, {})) | set(b.get(g, {}))
        if a.get(g, {}).get(k) != b.get(g, {}).get(k)
    )
    return (
        ": "
        + ", ".join(f"{k} {_get(a, k)} vs {_get(b, k)}" for k in keys[:4])
        + (" ..." if len(keys) > 4 else "")
    )


def _get(table: dict[str, dict[str, int]], key: str) -> object:
    group, _, name = key.partition(".")
    return table.get(group, {}).get(name, "-")


def format_table(rows: list[Row]) -> str:
    """The Markdown table docs/COMPAT.md holds."""
    head = (
        "| torch | program | plain | recorded | checksums equal | counters equal "
        "| recompile named | check | venv set-up | result |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        ok_sum = r.plain.checksum != "" and r.plain.checksum == r.recorded.checksum
        ok_cnt = r.plain.counters is not None and r.plain.counters == r.recorded.counters
        named = "-" if r.recompile_named is None else _yes(r.recompile_named)
        lines.append(
            f"| {r.torch} | {r.program} | exit {r.plain.rc}, {r.plain.seconds:.0f} s "
            f"| exit {r.recorded.rc}, {r.recorded.seconds:.0f} s "
            f"| {_yes(ok_sum)} ({r.plain.checksum or '-'}) | {_yes(ok_cnt)} | {named} "
            f"| exit {r.check_rc} | {r.setup_s:.0f} s "
            f"| {'pass' if not r.failures else 'FAIL: ' + '; '.join(r.failures)} |"
        )
    return "\n".join(lines)


def _yes(flag: bool) -> str:
    return "yes" if flag else "**no**"


# -- releases and venvs -------------------------------------------------------------------------


def lower_bound(pyproject: Path = REPO / "pyproject.toml") -> tuple[int, int]:
    """pyproject's `torch>=X.Y`: the oldest minor diag declares it supports."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    for dep in deps:
        m = re.fullmatch(r"torch\s*>=\s*(\d+)\.(\d+)(?:\.\d+)?", dep.strip())
        if m:
            return int(m.group(1)), int(m.group(2))
    raise SystemExit("compat: pyproject.toml has no torch>=X.Y dependency")


def newest_patches(versions: list[str], floor: tuple[int, int]) -> list[str]:
    """The newest final release of each minor from `floor` on, oldest minor first."""
    best: dict[tuple[int, int], tuple[int, str]] = {}
    for v in versions:
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", v.strip())
        if not m:
            continue  # local builds (+cpu) and pre-releases
        minor, patch = (int(m.group(1)), int(m.group(2))), int(m.group(3))
        if minor >= floor and (minor not in best or patch > best[minor][0]):
            best[minor] = (patch, v.strip())
    return [best[k][1] for k in sorted(best)]


def parse_index_versions(text: str) -> list[str]:
    """The versions `pip index versions torch` lists."""
    m = re.search(r"Available versions:\s*(.+)", text)
    return [v.strip() for v in m.group(1).split(",")] if m else []


def pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def registry_releases(floor: tuple[int, int]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "torch"],
        capture_output=True, text=True, env=pip_env(), timeout=300,
    )  # fmt: skip
    found = newest_patches(parse_index_versions(out.stdout), floor)
    if not found:
        say("could not list torch releases on the registry; using the releases known to work")
        return newest_patches(list(KNOWN_RELEASES), floor)
    return found


def select(releases: list[str], spec: str) -> list[str]:
    """--torch: `all`, or a comma list of `oldest`, `newest` and X.Y minors."""
    if spec == "all":
        return releases
    chosen: list[str] = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        if item == "oldest":
            pick = releases[:1]
        elif item == "newest":
            pick = releases[-1:]
        else:
            pick = [v for v in releases if v == item or v.startswith(item + ".")]
            if not pick:
                raise SystemExit(f"compat: no torch {item} among {', '.join(releases)}")
        chosen += [v for v in pick if v not in chosen]
    return chosen


def cache_root() -> Path:
    env = os.environ.get("DIAG_COMPAT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "diag-compat"


def ensure_venv(version: str, root: Path) -> tuple[Path, float, str]:
    """The venv for this torch (made when missing or stale), how long making it took, and the
    build pip chose (e.g. 2.13.0+cpu where a local CPU wheel was found)."""
    minor = ".".join(version.split(".")[:2])
    venv = root / f"torch-{minor}"
    marker = venv / ".diag-compat.json"
    state: dict[str, object] = {}
    if marker.is_file():
        try:
            state = json.loads(marker.read_text())
        except ValueError:
            state = {}
    python = venv / "bin" / "python"
    if state.get("torch") != version or not python.exists():
        if venv.exists():
            shutil.rmtree(venv)
        started = time.monotonic()
        say(f"torch {version}: creating {venv} (PyPI's wheel and its CUDA libraries: GBs)")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        pip(python, f"torch=={version}", *EXTRA_PACKAGES)
        state = {"torch": version, "setup_s": round(time.monotonic() - started, 1)}
        marker.write_text(json.dumps(state))
    if state.get("repo") != str(REPO):
        # diag from this checkout; editable, so a later commit needs no reinstall.
        pip(python, "--no-deps", "-e", str(REPO))
        state["repo"] = str(REPO)
        marker.write_text(json.dumps(state))
    if "build" not in state:
        probe = [str(python), "-c", "import torch; print(torch.__version__)"]
        state["build"] = subprocess.run(probe, capture_output=True, text=True).stdout.strip()
        marker.write_text(json.dumps(state))
    return venv, float(state.get("setup_s", 0.0)), str(state["build"] or version)  # type: ignore[arg-type]


def pip(python: Path, *args: str) -> None:
    env = {**pip_env(), "PYTHONWARNINGS": "ignore:Editable installation"}
    subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True, env=env)


# -- running ------------------------------------------------------------------------------------


def run(cmd: list[str], log: Path) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    log.parent.mkdir(parents=True, exist_ok=True)
    log.with_suffix(".out").write_text(proc.stdout)
    log.with_suffix(".err").write_text(proc.stderr)
    return proc.returncode, proc.stdout, proc.stderr, seconds


def program_run(cmd: list[str], log: Path, program: Program) -> Run:
    rc, out, err, seconds = run(cmd, log)
    return Run(rc, checksum(out, program.checksum), parse_counters(out), TRACEBACK in err, seconds)


def smoke(version: str, venv: Path, setup_s: float, program: Program, out: Path) -> Row:
    python, diag = str(venv / "bin" / "python"), str(venv / "bin" / "diag")
    base = out / f"torch-{version}" / program.name
    argv = [python, PROBE, *program.argv]
    plain = program_run(argv, base / "plain", program)
    trace = base / "trace"
    record = [diag, "record", "--force", "-o", str(trace), *program.record_args, "--", *argv]
    recorded = program_run(record, base / "recorded", program)
    row = Row(version, program.name, setup_s, plain, recorded)
    analyze_rc, analyze_out, _, _ = run([diag, "analyze", "-v", str(trace)], base / "analyze")
    row.analyze_rc = analyze_rc
    row.check_rc = run([diag, "check", str(trace)], base / "check")[0]
    return judge(row, analyze_out, program.recompile)


def prepare(releases: list[str]) -> int:
    """Make each release's venv and run nothing: 0 when all are made, 1 when one failed (the
    smoke run that follows tries it again)."""
    failed = 0
    for version in releases:
        try:
            venv, setup_s, build = ensure_venv(version, cache_root())
        except (subprocess.CalledProcessError, OSError) as err:
            say(f"torch {version}: making its venv failed ({err})")
            failed += 1
            continue
        say(f"torch {build}: {venv} ready ({setup_s:.0f} s to make)")
    return 1 if failed else 0


def say(text: str) -> None:
    print(f"compat: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--torch", default="all", help="all (default), or e.g. oldest,newest or 2.6,2.13"
    )
    parser.add_argument(
        "--programs", default=",".join(PROGRAMS), help=f"comma list of {', '.join(PROGRAMS)}"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where runs and traces go (default: a temp dir)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only make the venvs (CI runs this beside the suite: the downloads take the time)",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.programs.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown or not names:
        parser.error(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(PROGRAMS)}")
    releases = select(registry_releases(lower_bound()), args.torch)
    if args.prepare:
        return prepare(releases)
    out = args.out or Path(f"/tmp/diag-compat-{time.strftime('%Y%m%d-%H%M%S')}")
    say(f"torch {', '.join(releases)}; programs {', '.join(names)}; runs under {out}")
    rows: list[Row] = []
    broken: list[str] = []
    for version in releases:
        try:
            venv, setup_s, build = ensure_venv(version, cache_root())
        except (subprocess.CalledProcessError, OSError) as err:
            say(f"torch {version}: making its venv failed ({err}); no row for it")
            broken.append(version)
            continue
        for name in names:
            row = smoke(build, venv, setup_s, PROGRAMS[name], out)
            say(
                f"torch {version} {name}: {'pass' if not row.failures else '; '.join(row.failures)}"
            )
            rows.append(row)
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    failed = sum(1 for r in rows if r.failures)
    # Worded unlike a test runner's closing line: CI's count of tests is pytest's.
    if rows:
        say(f"{failed} of {len(rows)} row(s) failed" if failed else f"all {len(rows)} row(s) pass")
    if broken:
        say(f"no venv for torch {', '.join(broken)}")
    return 1 if failed or broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
