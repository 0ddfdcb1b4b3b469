"""`diag analyze` on inputs the readers cannot use, or can use only in part: one line naming what
the path is, exit 2; and what the reader skipped reaches --json as well as stderr."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

THIRD_PARTY = Path(__file__).resolve().parents[1] / "data" / "third_party"
DIAG = [sys.executable, "-m", "diag", "analyze"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DIAG, *args], capture_output=True, text=True, timeout=120)


def _one_error_line(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("diag: error: "), proc.stderr
    assert needle in lines[0], lines[0]


def test_kineto_given_a_directory_or_a_device(tmp_path: Path) -> None:
    _one_error_line(_run("--kineto", str(tmp_path)), "is a directory; --kineto takes one")
    _one_error_line(_run("--kineto", "/dev/null"), "not a regular file")
    _one_error_line(_run("--kineto", str(tmp_path / "nope.json")), "no such Kineto trace file")


def test_a_corrupt_gzip_torch_trace_log_exits_2(tmp_path: Path) -> None:
    data = bytearray((THIRD_PARTY / "tlparse" / "comp_metrics.log.gz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    log = tmp_path / "damaged.log.gz"
    log.write_bytes(bytes(data))
    proc = _run("--torch-trace", str(log))
    _one_error_line(proc, "gzip")
    assert "process killed" not in proc.stderr


def test_json_carries_the_readers_warnings(tmp_path: Path) -> None:
    """A log with one line that is not a record: the warning is on stderr and in the JSON."""
    data = gzip.decompress((THIRD_PARTY / "tlparse" / "comp_metrics.log.gz").read_bytes())
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(b"some stray text\n" + data)
    proc = _run("--torch-trace", str(log), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["warnings"] == ["1 line(s) that are not trace records were skipped"]
    assert "diag: warning: 1 line(s)" in proc.stderr
    clean = json.loads(_run("--torch-trace", str(THIRD_PARTY / "tlparse" / "comp_metrics.log.gz"),
                            "--json").stdout)  # fmt: skip
    assert clean["warnings"] == []
