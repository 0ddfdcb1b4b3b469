"""Smoke test: `diag tui` in a real terminal (tmux, 80x24, NO_COLOR), driven by key presses as a
person would, reading the screen back with capture-pane."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Terminal:
    """One detached tmux session on a private server socket (never the user's tmux)."""

    def __init__(self, socket: str, command: str, size: tuple[int, int]) -> None:
        self.base = ["tmux", "-L", socket]
        width, height = size
        self._tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=30)
        return done.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "t", key)
            time.sleep(0.2)

    def wait_for(self, *texts: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"never saw {texts} on screen:\n{screen}")

    def close(self) -> None:
        self._tmux("kill-server")


@pytest.fixture
def terminal(h200: Path, tmp_path: Path) -> Iterator[Terminal]:
    command = (
        f"cd {shlex.quote(str(h200))} && env NO_COLOR=1 TERM=xterm-256color "
        f"{shlex.quote(sys.executable)} -m diag tui record-wan-offload-unwarmed; "
        "echo diag-exited-$?; sleep 30"
    )
    term = Terminal(f"diag-tui-test-{tmp_path.name}", command, (80, 24))
    try:
        yield term
    finally:
        term.close()


def test_a_person_reads_a_finding_and_its_evidence(terminal: Terminal) -> None:
    screen = terminal.wait_for("finding(s)", "ERROR", "live-compile", "Quit")
    assert "1 Overview" in screen and "6 Cache" in screen
    terminal.keys("Enter")
    screen = terminal.wait_for("failing guards", "filter: run:compiled")
    assert "wan_block_forward" in screen and "freqs_w" in screen
    terminal.keys("Escape", "/")
    terminal.keys(*"phase:warmup")
    screen = terminal.wait_for("2 of 3 compiles")
    terminal.keys("Enter", "2")
    screen = terminal.wait_for("wall time per step", "▲")
    terminal.keys("5")
    terminal.wait_for("BOUND")
    terminal.keys("q")
    terminal.wait_for("diag-exited-0")
