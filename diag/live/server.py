"""`diag record --metrics-port PORT`: the live counters (diag/live/metrics.py) over HTTP.

Served by the launcher, not the recorded program: nothing runs in the program's processes,
every process (ranks, workers, the eager baseline) is counted, and the program cannot be
affected by a port already taken (diag warns and records without it). A scrape of `/metrics`
reads the lines appended to the event files since the last scrape, so the counters are as
fresh as the last event written. Binds 127.0.0.1 unless `--metrics-host` says otherwise.

The server's threads block the signals the launcher forwards to the program (diag/record/launcher.py
waits for them with sigtimedwait in its main thread): a Ctrl-C or `kill -INT` of diag's pid
must reach that wait, not a thread of this server.

Standard library only (the prometheus_client package is not needed).
"""

from __future__ import annotations

import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from diag.live.metrics import EventTail, LiveCounters

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_BLOCKED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGCHLD")
    if hasattr(signal, name)
)


class MetricsServer:
    """A daemon HTTP server of one trace directory's live counters."""

    def __init__(self, trace_dir: Path, host: str, port: int) -> None:
        self.tail = EventTail(trace_dir)
        self.counters = LiveCounters()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self._serve, name="diag-metrics", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        """Start the server thread with the forwarded signals blocked (it inherits the mask)."""
        if not hasattr(signal, "pthread_sigmask"):
            self.thread.start()
            return
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        try:
            self.thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _serve(self) -> None:
        self.httpd.serve_forever(poll_interval=0.5)

    def exposition(self) -> bytes:
        with self.lock:
            self.tail.read(self.counters)
            return self.counters.exposition().encode("utf-8")

    def close(self) -> None:
        try:
            self.httpd.shutdown()
            self.httpd.server_close()
        except OSError:
            pass


def _handler(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?", 1)[0] not in ("/", "/metrics"):
                self.send_error(404)
                return
            try:
                body = server.exposition()
            except Exception:  # noqa: BLE001 - a scrape must never take the recording down
                self.send_error(500)
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # the program's stderr is the program's

    return Handler


def start_metrics(trace_dir: Path, host: str, port: int) -> tuple[MetricsServer | None, str]:
    """The running server and a line saying where, or None and why it could not start."""
    try:
        server = MetricsServer(trace_dir, host, port)
    except (OSError, OverflowError, ValueError) as exc:
        return None, f"metrics not served: cannot listen on {host}:{port} ({exc}); recording anyway"
    server.start()
    bound_host, bound_port = server.address
    return server, f"metrics on http://{bound_host}:{bound_port}/metrics"
