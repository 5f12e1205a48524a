"""A connection to the real kube-apiserver that dies without a FIN (a TCP proxy in the test black-holes it):
karpy's informers notice within their read timeout and list again, so the cache is not silently stale."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from karpy import clock
from karpy.kube import adapter, client, config
from realcluster.conftest import wait_until
from support import realcluster, tcpproxy


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"rc/conn": "true"}}}


def test_a_black_holed_watch_on_the_real_apiserver_is_noticed_and_the_kind_listed_again(
        real: realcluster.RealCluster, tmp_path: Path) -> None:
    target = urlsplit(real.server())
    with tcpproxy.TcpProxy((str(target.hostname), int(target.port or 443))) as proxy:
        doc = yaml.safe_load(real.kubeconfig.read_text())
        doc["clusters"][0]["cluster"]["server"] = f"https://{proxy.address[0]}:{proxy.address[1]}"
        path = tmp_path / "through-proxy.kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        kube_client = client.KubeClient(config.load(str(path)), qps=0, timeout=2.0, max_retries=0, backoff_base=0.05)
        kube = adapter.KubeCluster(kube_client, sync_timeout=30, watch_read_timeout=3.0)
        try:
            kube.start(["Node"])
            assert kube.wait_for_sync(30)
            inf = kube.informer_of("Node")
            assert inf is not None
            lists_before = inf.lists
            proxy.black_hole()
            cut = clock.perf_counter()
            real.apply([_node("rc-made-while-cut-off")])  # straight to the apiserver, not through the proxy
            while inf.watch_timeouts == 0 and clock.perf_counter() - cut < 20:
                time.sleep(0.1)
            noticed = clock.perf_counter() - cut
            assert inf.watch_timeouts >= 1, "the dead watch was never noticed"
            assert noticed < 3.0 + 3.0, f"noticed after {noticed:.1f}s"
            proxy.restore()
            wait_until(lambda: inf.get("", "rc-made-while-cut-off") is not None, 30,
                       "the Node created while the watch was dead to reach the cache")
            assert inf.lists > lists_before, "the kind was listed again"
        finally:
            kube.close()
            real.kubectl("delete", "node", "rc-made-while-cut-off", "--ignore-not-found")


def test_stopping_an_informer_ends_its_quiet_tls_watch_at_once(real: realcluster.RealCluster) -> None:
    """Found here: `karpy controller` did not exit within 20 s of SIGTERM, its watch threads blocked in a TLS
    read until the read timeout; closing the response does not interrupt the read, shutting the socket does."""
    kube_client = client.KubeClient(config.load(str(real.kubeconfig)), qps=0, max_retries=0, backoff_base=0.05)
    kube = adapter.KubeCluster(kube_client, sync_timeout=30, watch_read_timeout=150.0)
    try:
        kube.start(["Node"])
        assert kube.wait_for_sync(30)
        inf = kube.informer_of("Node")
        assert inf is not None
        time.sleep(1.0)  # the watch is open and quiet
        started = clock.perf_counter()
        inf.stop(timeout=10.0)
        took = clock.perf_counter() - started
        assert inf._thread is not None and not inf._thread.is_alive(), "the watch thread is still reading"
        assert took < 2.0, f"stop took {took:.1f}s"
    finally:
        kube.close()
