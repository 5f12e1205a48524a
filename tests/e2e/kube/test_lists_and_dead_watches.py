"""Lists served from the watch cache, and watches whose peer vanished (issue 19)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from karpy import clock
from karpy.kube import adapter, client, config, informer, transport
from support import apiserver, tcpproxy

from .conftest import connect


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _lists(api: apiserver.EmulatedApiServer, plural: str) -> list[dict[str, str]]:
    return [params for method, p, params in api.backend.log if method == "GET" and p == plural
            and params.get("watch") != "true"]


def test_the_first_list_asks_for_resource_version_0_served_from_the_watch_cache(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.store.create(_node("n1"))
    kube = connect(api, tmp_path)
    try:
        kube.start(["Node"])
        assert kube.wait_for_sync(10)
        (first,) = _lists(api, "nodes")
        assert first["resourceVersion"] == "0"
    finally:
        kube.close()


def test_a_server_that_refuses_resource_version_0_gets_a_quorum_list_at_once(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.store.create(_node("n1"))
    api.fail_next(410, reason="Expired", method="GET", plural="nodes")
    kube = connect(api, tmp_path)
    try:
        kube.start(["Node"])
        assert kube.wait_for_sync(10)
        first, second = _lists(api, "nodes")
        assert first["resourceVersion"] == "0"
        assert "resourceVersion" not in second  # a quorum read
        inf = kube.informer_of("Node")
        assert inf is not None and inf.lists == 1 and inf.last_error is None  # no back-off taken
    finally:
        kube.close()


def test_a_continued_page_carries_only_its_token(api: apiserver.EmulatedApiServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(5):
        api.store.create(_node(f"n{i}"))
    api.fail_next(410, reason="Expired", method="GET", plural="nodes")  # quorum lists are paginated

    class TwoPerPage(informer.Informer):  # the page size set before the informer's thread starts
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "page_size": 2})

    monkeypatch.setattr(informer, "Informer", TwoPerPage)
    kube = connect(api, tmp_path)
    try:
        inf = kube._informer("Node", wait=False)
        assert inf.page_size == 2
        assert kube.wait_for_sync(10)
        pages = _lists(api, "nodes")[1:]
        assert len(pages) == 3
        assert all("resourceVersion" not in p for p in pages[1:]) and all("continue" in p for p in pages[1:])
        assert len(inf) == 5
    finally:
        kube.close()


def test_a_black_holed_watch_is_noticed_within_its_read_timeout_and_the_kind_listed_again(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    target = urlsplit(api.url)
    with tcpproxy.TcpProxy((str(target.hostname), int(target.port or 80))) as proxy:
        path = api.write_kubeconfig(tmp_path / "kubeconfig")
        doc = yaml.safe_load(path.read_text())
        doc["clusters"][0]["cluster"]["server"] = proxy.url
        path.write_text(yaml.safe_dump(doc))
        kube_client = client.KubeClient(config.load(str(path)), qps=0, timeout=1.0, max_retries=0,
                                        backoff_base=0.01)
        kube = adapter.KubeCluster(kube_client, sync_timeout=10, watch_read_timeout=1.0)
        try:
            kube.start(["Node"])
            assert kube.wait_for_sync(10)
            inf = kube.informer_of("Node")
            assert inf is not None
            proxy.black_hole()
            cut = clock.perf_counter()
            api.store.create(_node("made-while-cut-off"))
            while inf.watch_timeouts == 0 and clock.perf_counter() - cut < 10:
                time.sleep(0.05)
            noticed = clock.perf_counter() - cut
            assert inf.watch_timeouts >= 1
            assert noticed < 1.0 + 1.5, f"noticed after {noticed:.1f}s"
            proxy.restore()
            deadline = clock.perf_counter() + 10
            while inf.get("", "made-while-cut-off") is None and clock.perf_counter() < deadline:
                time.sleep(0.05)
            assert inf.get("", "made-while-cut-off") is not None
            assert inf.lists >= 2  # listed again, from the last version seen
            relists = [p for p in _lists(api, "nodes") if p.get("resourceVersionMatch") == "NotOlderThan"]
            assert relists
        finally:
            kube.close()


def test_every_connection_has_tcp_keepalive(api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    conn = config.load(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    options = transport.build_transport(conn)._pool._socket_options
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in list(options or ())
