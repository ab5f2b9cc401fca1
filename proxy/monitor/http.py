"""The monitoring HTTP server: /metrics, /healthz, /ready and /debug/..., nothing else.

A stdlib `ThreadingHTTPServer` on threads of its own (never the event loop's), bound before
any worker is forked so that a busy port is reported at start-up with its address. Every
answer is built when asked: /metrics is prometheus-client's `generate_latest` over a registry
holding only `exporter.Collector`; /ready is `ready.Readiness`; /healthz asks every event loop
to run a callback (`liveness`, `workers.liveness`); /debug/hotkeys,
/debug/bigkeys and /debug/slowlog are JSON. Other paths get 404.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from . import snapshot, workers
from .exporter import Collector

log = logging.getLogger("redis_guard.monitor")


class BindError(OSError):
    """A listening address that could not be bound; the message names it."""


class MonitorServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, source, readiness, liveness=None):
        """address: config.Address; source(): the merged snapshot (`snapshot.merge`); liveness():
        (every event loop turns, the reason), `liveness.check` or `workers.liveness`."""
        self.source = source
        self.readiness = readiness
        self.liveness = liveness or (lambda: (True, "ok"))
        self.draining = False
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(Collector(source))
        try:
            super().__init__((address.host, address.port), Handler)
        except OSError as exc:
            raise BindError(f"cannot serve metrics on {address}: {exc.strerror or exc}") from None

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="monitor-http", daemon=True)
        thread.start()
        return thread

    def state(self) -> dict:
        merged = self.source()
        if self.draining:
            merged["draining"] = True
        return merged


class Handler(BaseHTTPRequestHandler):
    server: MonitorServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        route = ROUTES.get(path)
        if route is None:
            self._send(404, "text/plain; charset=utf-8", b"not found: /metrics, /healthz, /ready, /debug/hotkeys, "
                       b"/debug/bigkeys, /debug/slowlog\n")
            return
        try:
            route(self)
        except Exception:  # one bad answer must not stop the server
            log.exception("monitoring endpoint %s failed", path)
            self._send(500, "text/plain; charset=utf-8", b"internal error\n")

    def log_message(self, format, *args) -> None:
        pass  # scrapes every few seconds would flood the proxy's log

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value) -> None:
        self._send(200, "application/json", json.dumps(value, indent=1).encode() + b"\n")

    def metrics(self) -> None:
        self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry))

    def healthz(self) -> None:
        ok, reason = self.server.liveness()
        self._send(200 if ok else 503, "text/plain; charset=utf-8", reason.encode() + b"\n")

    def ready(self) -> None:
        ok, reason = self.server.readiness.check(self.server.state())
        self._send(200 if ok else 503, "text/plain; charset=utf-8", reason.encode() + b"\n")

    def hotkeys(self) -> None:
        self._json(snapshot.hot_keys(self.server.source()))

    def bigkeys(self) -> None:
        self._json(snapshot.big_keys(self.server.source()))

    def slowlog(self) -> None:
        self._json(snapshot.slow_log(self.server.source()))


ROUTES = {
    "/metrics": Handler.metrics,
    "/healthz": Handler.healthz,
    "/ready": Handler.ready,
    "/debug/hotkeys": Handler.hotkeys,
    "/debug/bigkeys": Handler.bigkeys,
    "/debug/slowlog": Handler.slowlog,
}


def local_source() -> dict:
    """One process: its own snapshot."""
    return snapshot.merge([snapshot.build()])


def workers_source(directory: str):
    """Every worker's snapshot merged, counters kept across worker deaths (`workers.Counts`)."""
    return workers.Counts(directory)
