"""/metrics, /healthz and /readyz over real HTTP on 127.0.0.1 (port 0)."""

from __future__ import annotations

import urllib.error
import urllib.request

from karpy.observability import metrics, serve


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def test_metrics_are_served_in_the_prometheus_text_format_with_karpenters_names() -> None:
    m = metrics.Metrics()
    m.nodeclaims_launched.labels("default").inc()
    server = serve.serve_metrics(m.registry, "127.0.0.1", 0)
    try:
        status, body = fetch(server.url + "/metrics")
    finally:
        server.stop()
    assert status == 200
    assert 'karpenter_nodeclaims_launched_total{nodepool="default"} 1.0' in body


def test_readyz_waits_for_synced_caches_and_running_controllers_and_healthz_notices_a_stalled_loop() -> None:
    health = serve.Health(synced=False, leader=False, running=False, stalled_for=0.0)
    server = serve.serve_probes(lambda: health, "127.0.0.1", 0, stall_after=30)
    try:
        assert fetch(server.url + "/readyz") == (503, "caches not synced\n")
        assert fetch(server.url + "/healthz") == (200, "ok\n")
        health = serve.Health(synced=True, leader=True, running=False, stalled_for=0.0)
        assert fetch(server.url + "/readyz") == (503, "leader but controllers not running\n")
        health = serve.Health(synced=True, leader=False, running=True, stalled_for=0.0)
        assert fetch(server.url + "/readyz") == (200, "ok\n")  # a synced follower is ready
        health = serve.Health(synced=True, leader=True, running=True, stalled_for=45.0)
        assert fetch(server.url + "/readyz") == (200, "ok\n")
        assert fetch(server.url + "/healthz") == (500, "controller loop stalled for 45s\n")
        assert fetch(server.url + "/other")[0] == 404
    finally:
        server.stop()
