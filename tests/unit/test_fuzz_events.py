"""A type-confusion fuzzer over every event kind's fields (tests/fuzz_corpus.py,
`confused_traces`: strings, huge and negative integers, non-finite floats, containers, deep
nesting, 5000-digit integers, whole lines that are not events, wrong-type manifest fields)
through analyze, check, the TUI's loader and the report, in this process: each case is read
(its bad lines skipped and counted) or refused with one line, never a traceback. The TUI's
loader and the report run on one case in ten (they repeat what analyze reads). A few cases
go through the real CLI, for the exit code and the one line on stderr.

bench/fuzz_events.py runs more cases (`--n`)."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from tests.fuzz_corpus import confused_traces
from tests.fuzz_events import run_case, write_case

SEED = 20261201
COUNT = 1000


@pytest.mark.slow
def test_a_thousand_type_confused_traces_are_read_or_refused_in_one_line(
    tmp_path: Path,
) -> None:
    failures: list[str] = []
    outcomes = {"ok": 0, "skipped": 0, "refused": 0}
    for number, item in enumerate(confused_traces(SEED, COUNT)):
        folder = tmp_path / f"t{number % 2}"
        heavy = number % 10 == 0
        try:
            outcomes[run_case(item, folder, tui=heavy, report=heavy)] += 1
        except Exception:  # the point of the test: report every case that raised
            failures.append(f"{item.name}: {traceback.format_exc(limit=-4)}")
    assert not failures, f"{len(failures)} case(s) raised:\n" + "\n".join(failures[:5])
    assert sum(outcomes.values()) == COUNT
    # All three occur: values the schema accepts, lines it skips, manifests it refuses.
    assert outcomes["skipped"] > 300 and outcomes["ok"] > 30 and outcomes["refused"] > 10, outcomes


def test_the_cli_exits_0_with_a_warning_or_2_with_one_line(tmp_path: Path) -> None:
    """Through `python -m diag`: a skipped line is a warning (exit 0 for analyze, the
    recording rule's failure for check), a bad manifest one error line (exit 2); never a
    traceback and never check's exit 1 for a refused trace."""
    seen: dict[str, int] = {}
    for item in confused_traces(SEED, 200):
        kind = "refused" if "manifest." in item.name else "skipped"
        if seen.get(kind, 0) >= 2:
            continue
        folder = tmp_path / item.name[:4]
        write_case(item, folder)
        for verb in ("analyze", "check"):
            proc = subprocess.run(
                [sys.executable, "-m", "diag", verb, str(folder)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert "Traceback" not in proc.stderr, (item.name, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            if proc.returncode == 2:
                assert len(lines) == 1 and lines[0].startswith("diag: error: "), proc.stderr
                seen["refused"] = seen.get("refused", 0) + (verb == "check")
            else:
                assert proc.returncode in (0, 1), (item.name, verb, proc.returncode)
                assert all(line.startswith("diag: warning: ") for line in lines), proc.stderr
                seen["skipped"] = seen.get("skipped", 0) + (verb == "check" and bool(lines))
    assert seen.get("refused", 0) >= 1 and seen.get("skipped", 0) >= 1, seen
