"""Lease renewal has its own budget and is bounded by its renew deadline; a 409 is followed by a real GET."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from karpy import clock
from karpy.controllers import leader
from karpy.kube import adapter, client, config, errors
from karpy.kube import connect as kube_connect
from support import apiserver, tcpproxy

from .conftest import connect


def _conn(api: apiserver.EmulatedApiServer, tmp_path: Path, server: str | None = None) -> config.Connection:
    path = api.write_kubeconfig(tmp_path / "kubeconfig")
    if server is not None:
        doc = yaml.safe_load(path.read_text())
        doc["clusters"][0]["cluster"]["server"] = server
        path.write_text(yaml.safe_dump(doc))
    return config.load(str(path))


def test_a_renewal_does_not_wait_for_the_controllers_rate_limit(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    conn = _conn(api, tmp_path)
    controllers = client.KubeClient(conn, qps=0.2, burst=1)  # one request every 5 s
    kube = adapter.KubeCluster(controllers, lease_client=client.KubeClient(conn, qps=5, burst=10))
    try:
        controllers.limiter.take()  # the controllers spent their budget
        elector = leader.LeaderElector(kube, clock.WallClock(), leader.Config(namespace="kube-system", identity="a"))
        started = time.perf_counter()
        assert elector.tick() is leader.State.LEADING
        assert time.perf_counter() - started < 1.0  # before: two requests behind the controllers' 5 s tokens
        assert controllers.requests == 0
    finally:
        kube.close()


def test_karpy_connect_gives_leases_a_client_of_their_own(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    kube = kube_connect.connect(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        assert kube.lease_client is not None and kube.lease_client is not kube.client
        assert kube.lease_client.limiter is not kube.client.limiter
    finally:
        kube.close()


def test_a_renewal_against_an_unreachable_server_ends_by_its_renew_deadline(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    target = urlsplit(api.url)
    with tcpproxy.TcpProxy((str(target.hostname), int(target.port or 80))) as proxy:
        # a client that would retry 5 times with a 30 s request timeout, as before
        lease = client.KubeClient(_conn(api, tmp_path, proxy.url), qps=0, timeout=30.0, max_retries=5)
        kube = adapter.KubeCluster(client.KubeClient(_conn(api, tmp_path), qps=0), lease_client=lease)
        wall = clock.WallClock()
        elector = leader.LeaderElector(kube, wall, leader.Config(
            namespace="kube-system", identity="a", lease_duration=3.0, renew_deadline=1.0, retry_period=0.3))
        try:
            assert elector.tick() is leader.State.LEADING
            proxy.black_hole()
            renewed = wall.now()
            longest = 0.0
            while not elector.final and wall.now() - renewed < 10:
                started = time.perf_counter()
                elector.tick()
                longest = max(longest, time.perf_counter() - started)
                time.sleep(0.05)
            assert elector.state is leader.State.LOST
            assert wall.now() - renewed < 1.0 + 0.6  # lost by the renew deadline, not after 5 x 30 s
            assert longest < 1.0 + 0.3
        finally:
            kube.close()


def test_after_a_conflict_the_next_get_reads_the_object_from_the_api_server(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    kube = connect(api, tmp_path)
    try:
        api.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        kube.start(["Node"])
        assert kube.wait_for_sync(10)
        mine = kube.get("Node", "n1")
        api.backend.held = True  # the watch goes quiet: the cache cannot learn of the next write
        api.store.patch("Node", "n1", {"metadata": {"labels": {"by": "other"}}})
        mine["metadata"]["labels"] = {"by": "me"}
        with pytest.raises(errors.Conflict):
            kube.update(mine)
        gets = sum(1 for m, p, params in api.backend.log if m == "GET" and p == "nodes" and "watch" not in params)
        fresh = kube.get("Node", "n1")
        assert fresh["metadata"]["labels"] == {"by": "other"}  # before the fix: the stale cached copy
        after = sum(1 for m, p, params in api.backend.log if m == "GET" and p == "nodes" and "watch" not in params)
        assert after == gets + 1
        assert kube.get("Node", "n1")["metadata"]["labels"] == {"by": "other"}  # now cached
        assert sum(1 for m, p, params in api.backend.log if m == "GET" and p == "nodes"
                   and "watch" not in params) == after
    finally:
        api.backend.held = False
        kube.close()
