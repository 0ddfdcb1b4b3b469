"""The read-side probes of issue 22, run through the real CLI: what each prints.

Each probe is a copy of a real H200 recording (tests/data/h200/record-wan-routing: a compiled
run and its eager baseline, three Kineto windows each) with one thing made hostile:

- a Kineto window path in `profile_window_end` that leads outside the trace: `/dev/zero`,
  `/etc/passwd`, `../../../../outside/x.json.gz` (a real window copied outside the trace), a
  symlink inside `kineto/` to such a file, a FIFO;
- a frame name holding terminal escapes (`\\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07`);
- a known field of the wrong type, one per crash site the issue lists.

Every probe runs `diag analyze` (text), `diag check`, `diag report` (for the path probes) and
the TUI's loader (stage one and two, in a subprocess), each under a time limit. Printed per
command: the exit code (TIMEOUT past the limit), the line count of stderr, whether a
traceback was printed, whether a raw ESC/BEL reached stdout or stderr, and the first stderr
line, with control characters shown escaped.

    python bench/hostile_probes.py [--only NAME] [--timeout 20] > bench/results/...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "h200" / "record-wan-routing"
ESCAPES = "\x1b[2J\x1b[H\x1b]0;PWNED\x07"

#: What the TUI's worker does (tui/app.py `_load`): stage one (an error there is the app's
#: error screen), then stage two, whose errors become a note on the kernel screens while the
#: other screens stay up. The overview's SKIPPED lines are the reader's warnings.
TUI_LOADER = """
import sys
from pathlib import Path
from diag.errors import DiagError
from diag.tui.loader import load_events, load_kernels
try:
    data = load_events(Path(sys.argv[1]))
except DiagError as exc:
    print(f"tui loader: error screen: {exc.message!r}")
    raise SystemExit(0)
try:
    error = load_kernels(data).error
except DiagError as exc:
    error = exc.message
try:
    from diag.trace.inputs import input_warnings
    skipped = f"; {len(input_warnings(data.trace))} SKIPPED line(s) on the overview"
except ImportError:  # before issue 22: no reader warnings
    skipped = ""
print(f"tui loader: {len(data.findings)} finding(s); kernel screens' error: {error}{skipped}")
"""


def _events_path(trace: Path, label: str = "compiled") -> Path:
    return next((trace / "runs" / label).glob("*/events.jsonl"))


def _edit(trace: Path, change: Callable[[dict[str, Any]], bool], every: bool = False) -> None:
    """Rewrite the first event (`every`: each event) for which `change` returns True (it edits
    the dict)."""
    path = _events_path(trace)
    out = []
    done = False
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if (every or not done) and change(event):
            done = True
            out.append(json.dumps(event, separators=(",", ":")))
        else:
            out.append(line)
    assert done, "no event to edit"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def _window(path: str) -> Callable[[dict[str, Any]], bool]:
    def change(event: dict[str, Any]) -> bool:
        if event.get("ev") != "profile_window_end":
            return False
        event["file"] = path
        return True

    return change


def _field(kind: str, key: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    def change(event: dict[str, Any]) -> bool:
        if event.get("ev") != kind:
            return False
        event[key] = value
        return True

    return change


def _raw(trace: Path, old: str, new: str) -> None:
    """Replace text in the compiled run's event file (for values json cannot write)."""
    path = _events_path(trace)
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _outside(trace: Path) -> None:
    outside = trace.parent / "outside"
    outside.mkdir(exist_ok=True)
    window = next((_events_path(trace).parent / "kineto").glob("*.json.gz"))
    shutil.copy(window, outside / "x.json.gz")
    _edit(trace, _window("../../../../outside/x.json.gz"))


def _symlink_out(trace: Path) -> None:
    kineto = _events_path(trace).parent / "kineto"
    first = sorted(kineto.glob("*.json.gz"))[0]
    first.unlink()
    first.symlink_to("/etc/passwd")


def _fifo(trace: Path) -> None:
    kineto = _events_path(trace).parent / "kineto"
    first = sorted(kineto.glob("*.json.gz"))[0]
    first.unlink()
    os.mkfifo(first)


def _frame_name(event: dict[str, Any]) -> bool:
    if event.get("ev") != "compile_end" or not isinstance(event.get("frame"), dict):
        return False
    event["frame"]["name"] = "block" + ESCAPES
    return True


def _deep(trace: Path) -> None:
    path = _events_path(trace)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"t":1,"ev":"graph_break","reason":' + "[" * 10000 + "]" * 10000 + "}\n")


def _deep_manifest(trace: Path) -> None:
    path = trace / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    text = json.dumps(manifest)
    path.write_text(text[:-1] + ',"deep":' + "[" * 10000 + "]" * 10000 + "}", encoding="utf-8")


def _manifest_field(key: str, value: Any) -> Callable[[Path], None]:
    def change(trace: Path) -> None:
        path = trace / "manifest.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest[key] = value
        path.write_text(json.dumps(manifest), encoding="utf-8")

    return change


def _shape_string(event: dict[str, Any]) -> bool:
    if event.get("ev") != "request_start" or event.get("phase") != "live":
        return False
    event["shape"] = ["x", 48, 96]
    return True


#: name -> (what it does to the copy, whether to run the report too)
PROBES: dict[str, tuple[Callable[[Path], None], bool]] = {
    "window=/dev/zero": (lambda t: _edit(t, _window("/dev/zero")), True),
    "window=/dev/urandom": (lambda t: _edit(t, _window("/dev/urandom")), False),
    "window=/etc/passwd": (lambda t: _edit(t, _window("/etc/passwd")), True),
    "window=../outside": (_outside, True),
    "window symlink to /etc/passwd": (_symlink_out, False),
    "window is a FIFO": (_fifo, False),
    "frame name with escapes": (lambda t: _edit(t, _frame_name), False),
    '"step":"abc"': (lambda t: _edit(t, _field("step_start", "step", "abc")), False),
    "wall_s 1e999": (lambda t: _raw(t, '"wall_s":', '"wall_s":1e999,"x":'), False),
    "step a dict": (lambda t: _edit(t, _field("step_end", "step", {"a": 1})), False),
    '"epoch":[1]': (lambda t: _edit(t, _field("compile_end", "epoch", [1])), False),
    '"pid":"x"': (lambda t: _edit(t, _field("process_start", "pid", "x")), False),
    "5000-digit int": (lambda t: _raw(t, '"step":0', '"step":' + "9" * 5000), False),
    "nesting 10000 deep": (_deep, False),
    "manifest nested 10000 deep": (_deep_manifest, False),
    'manifest "runs":"x"': (_manifest_field("runs", "x"), False),
    'manifest "options":[1]': (_manifest_field("options", [1]), False),
    '"wall_s":""': (lambda t: _edit(t, _field("step_end", "wall_s", ""), every=True), False),
    '"wall_s":"12"': (lambda t: _edit(t, _field("step_end", "wall_s", "12"), every=True), False),
    "shape holding a string": (lambda t: _edit(t, _shape_string), False),
    '"start_t":[]': (lambda t: _edit(t, _field("compile_end", "start_t", [])), False),
}


def _shown(text: str) -> str:
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def _run(command: list[str], timeout: float) -> str:
    try:
        proc = subprocess.run(
            command, capture_output=True, timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return f"TIMEOUT after {timeout:.0f} s"
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    lines = err.strip().splitlines()
    raw = any(c in out + err for c in "\x1b\x07")
    first = next((line for line in lines if "Traceback" not in line), "")
    if "Traceback" in err:
        first = lines[-1] if lines else ""
    tui = next((line for line in out.splitlines() if line.startswith("tui loader:")), "")
    return (
        f"exit {proc.returncode}, stderr {len(lines)} line(s)"
        + (", TRACEBACK" if "Traceback" in err else "")
        + (", RAW ESCAPES on the terminal" if raw else "")
        + (f": {_shown(first)[:200]}" if first else "")
        + (f" | {_shown(tui)}" if tui else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run only this probe (repeatable)")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument(
        "--source", type=Path, default=SOURCE, help="the recording to copy (default: %(default)s)"
    )
    args = parser.parse_args()
    source = args.source.resolve()
    python = sys.executable
    print(f"# hostile read probes on {source} (git {_commit()})")
    for name, (make, report) in PROBES.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="diag-probe-") as tmp:
            trace = Path(tmp) / "trace"
            shutil.copytree(source, trace, ignore=shutil.ignore_patterns(".diag-cache"))
            make(trace)
            print(f"\n## {name}")
            commands = {
                "analyze": [python, "-m", "diag", "analyze", str(trace)],
                "check": [python, "-m", "diag", "check", str(trace)],
                "tui": [python, "-c", TUI_LOADER, str(trace)],
            }
            if report:
                html = Path(tmp) / "r.html"
                commands["report"] = [python, "-m", "diag", "report", str(trace), "-o", str(html)]
            for label, command in commands.items():
                print(f"  {label:8} {_run(command, args.timeout)}")
            outside = Path(tmp) / "outside"
            if outside.exists():
                print(f"  outside folder after: {sorted(p.name for p in outside.iterdir())}")
            cache = trace / ".diag-cache"
            cached = sorted(p.name for p in cache.rglob("*outside*")) if cache.exists() else []
            if cached:
                print(f"  cached from outside: {cached}")


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


if __name__ == "__main__":
    main()
