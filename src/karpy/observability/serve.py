"""The controller's HTTP endpoints: ``/metrics`` for Prometheus, ``/healthz`` and ``/readyz`` for the kubelet.

As Karpenter: metrics on ``METRICS_PORT`` (8080), probes on ``HEALTH_PROBE_PORT`` (8081). Both are
stdlib ``ThreadingHTTPServer`` instances on daemon threads; ``/metrics`` is prometheus_client's own
handler over karpy's registry (the ``karpenter_*`` metrics of :mod:`karpy.observability.metrics`), so
no HTTP is parsed by hand. A server started on port 0 binds a free port; :attr:`Server.port` says which.

Probes, given a :class:`Probe` callable:

- ``/healthz``: 200 ``ok`` while the driver's loop made progress within ``stall_after`` seconds (or
  has not started yet), else 500 naming how long it has been stalled.
- ``/readyz``: 200 ``ok`` once the caches synced and, for the leader, the controllers run; a follower
  with synced caches is ready (it serves probes and waits for the lease). Else 503 saying what is
  missing.
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import prometheus_client
from prometheus_client import exposition

log = logging.getLogger("karpy.observability.serve")


@dataclass(frozen=True)
class Health:
    """What the probes look at (from :meth:`karpy.controllers.realtime.Driver.status`)."""

    synced: bool
    leader: bool
    running: bool
    stalled_for: float
    """Seconds since the loop last made progress (0 when it is not running yet)."""


Probe = Callable[[], Health]


class Server:
    """One HTTP server on a daemon thread; :meth:`stop` shuts it down."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], host: str, port: int) -> None:
        self.httpd = http.server.ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=f"karpy-http-{self.port}", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def serve_metrics(registry: prometheus_client.CollectorRegistry, host: str, port: int) -> Server:
    """``/metrics`` in the Prometheus text format."""
    handler: type[http.server.BaseHTTPRequestHandler] = exposition.MetricsHandler.factory(registry)
    return Server(handler, host, port)


def _probe_handler(probe: Probe, stall_after: float) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path not in ("/healthz", "/readyz"):
                self._answer(404, f"no such endpoint {path}; try /healthz or /readyz\n")
                return
            try:
                h = probe()
            except Exception as exc:
                self._answer(500, f"probe failed: {exc}\n")
                return
            if path == "/healthz":
                if h.running and h.stalled_for > stall_after:
                    self._answer(500, f"controller loop stalled for {h.stalled_for:.0f}s\n")
                else:
                    self._answer(200, "ok\n")
                return
            missing = []
            if not h.synced:
                missing.append("caches not synced")
            if h.leader and not h.running:
                missing.append("leader but controllers not running")
            self._answer(503 if missing else 200, ("; ".join(missing) or "ok") + "\n")

        def _answer(self, code: int, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("probe %s", format % args)

    return Handler


def serve_probes(probe: Probe, host: str, port: int, *, stall_after: float = 60.0) -> Server:
    """``/healthz`` and ``/readyz``; see the module docstring."""
    return Server(_probe_handler(probe, stall_after), host, port)
