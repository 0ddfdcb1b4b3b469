"""tests/conftest.py starts the suite's processes with tests/child_site first on PYTHONPATH (the
final heap walk skipped at exit), except in files marked `full_shutdown`, whose processes end
with Python's whole shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD_SITE = str(Path(__file__).parents[1] / "child_site")

# A cycle holding an object with a finaliser, left for the collector at exit.
PROGRAM = textwrap.dedent(
    """
    import gc

    class Loud:
        def __del__(self):
            print("collected at exit", flush=True)

    gc.disable()
    a, b = Loud(), Loud()
    a.other, b.other = b, a
    del a, b
    print("done", flush=True)
    """
)

usual_gc = pytest.mark.skipif(
    os.environ.get("DIAG_TEST_USUAL_GC") == "1", reason="DIAG_TEST_USUAL_GC=1: no child site"
)


def _run() -> str:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=True
    ).stdout


@usual_gc
def test_the_suites_processes_skip_the_final_heap_walk() -> None:
    assert CHILD_SITE in os.environ["PYTHONPATH"].split(os.pathsep)
    assert _run() == "done\n"  # the cycle's finalisers never ran: nothing walked the heap


@pytest.mark.full_shutdown
def test_a_full_shutdown_file_gives_its_processes_pythons_whole_shutdown() -> None:
    assert CHILD_SITE not in os.environ.get("PYTHONPATH", "").split(os.pathsep)
    assert _run() == "done\ncollected at exit\ncollected at exit\n"
