"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
no websocket, no new dependency. Messages are JSON, each ended by a NUL byte, on fds 3 (to the
browser) and 4 (from it).

`open_page()` loads a file and collects what a person would see go wrong: uncaught exceptions,
console errors, dialogs (alert/confirm/prompt), and failed or attempted network requests.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> str | None:
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageReport:
    exceptions: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # URLs other than the page itself
    screenshot: Path | None = None


class Browser:
    """One headless Chromium with one page target attached in flat mode."""

    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 1000) -> None:
        binary = chromium_path()
        if binary is None:
            raise RuntimeError("chromium is not installed (bash .ci/setup installs it)")
        to_browser_read, self._write = os.pipe()
        self._read, from_browser_write = os.pipe()

        def child_fds() -> None:
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self.log = profile_dir / "chromium.log"
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--no-first-run",
                "--no-default-browser-check",
                f"--user-data-dir={profile_dir / 'profile'}",
                f"--window-size={width},{height}",
                "--remote-debugging-pipe",
                "--enable-logging=stderr",
                "--v=0",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
            pass_fds=(3, 4),
            preexec_fn=child_fds,  # fds 3 and 4 must be the pipes
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # closing a browser that may be gone already
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)
        self._log_file.close()

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        # An upper bound, not a pace: Chromium on 2 loaded cores (the suite's other worker, a
        # harness beside it) once took over 30 s to open its first tab.
        timeout: float = 120,
        session: bool = False,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply is None:
                raise TimeoutError(f"{method}: no reply from chromium in {timeout} s")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._on_event(reply)

    def pump(self, seconds: float) -> None:
        """Read events for a while (dialogs must be answered or the page hangs)."""
        deadline = time.monotonic() + seconds
        while (message := self._receive(deadline)) is not None:
            self._on_event(message)

    def _on_event(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        if message.get("method") == "Page.javascriptDialogOpening":
            os.write(
                self._write,
                json.dumps(
                    {
                        "id": 10**9 + len(self.events),
                        "method": "Page.handleJavaScriptDialog",
                        "params": {"accept": True},
                        "sessionId": self.session,
                    }
                ).encode()
                + b"\0",
            )

    def _receive(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None when none came before `deadline`."""
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._read], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium exited; see {self.log}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def attach_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        reply = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = reply["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Network.enable", "Log.enable"):
            self.send(domain, session=True)

    def evaluate(self, expression: str) -> Any:
        reply = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"evaluate failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")


def open_page(
    page: Path, work_dir: Path, ready: str, timeout: float = 120, screenshot: bool = True
) -> tuple[PageReport, Browser]:
    """Load `page`, wait until the JS expression `ready` is true, collect what went wrong.

    The caller closes the returned browser (after any evaluate() of its own)."""
    browser = Browser(work_dir)
    report = PageReport()
    try:
        browser.attach_page()
        url = page.resolve().as_uri()
        browser.send("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            browser.pump(0.3)
            try:
                if browser.evaluate(ready):
                    break
            except RuntimeError:
                continue
        else:
            raise TimeoutError(f"page never became ready: {ready}")
        browser.pump(0.5)  # late errors, e.g. from a resize after the first draw
        if screenshot:
            metrics = browser.send("Page.getLayoutMetrics", session=True)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = browser.send(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {
                        "x": 0,
                        "y": 0,
                        "width": size["width"],
                        "height": min(size["height"], 12000),
                        "scale": 1,
                    },
                },
                session=True,
                timeout=60,
            )
            report.screenshot = work_dir / "report.png"
            report.screenshot.write_bytes(base64.b64decode(shot["data"]))
    except BaseException:
        browser.close()
        raise
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            report.exceptions.append(
                str(details.get("exception", {}).get("description") or details.get("text"))
            )
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            report.console.append(f"{params.get('type')}: {text}")
            if params.get("type") in ("error", "assert"):
                report.console_errors.append(text)
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            report.console.append(f"log {entry.get('level')}: {entry.get('text')}")
            if entry.get("level") == "error":
                report.console_errors.append(str(entry.get("text")))
        elif method == "Page.javascriptDialogOpening":
            report.dialogs.append(f"{params.get('type')}: {params.get('message')}")
        elif method == "Network.requestWillBeSent":
            request_url = params.get("request", {}).get("url", "")
            if request_url != url:
                report.requests.append(request_url)
    return report, browser
