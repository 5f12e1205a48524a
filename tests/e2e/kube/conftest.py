"""Fixtures: the same Cluster contract over the in-memory cluster and over the adapter + emulator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from karpy import clock
from karpy.kube import adapter, client, config, interface, memory
from support import apiserver


@dataclass
class Harness:
    """A cluster under test, a second writer ("someone else") and a way to let events arrive."""

    name: str
    cluster: interface.Cluster
    other: interface.Cluster
    settle: Callable[[], None]
    api: apiserver.EmulatedApiServer | None = None

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Let events arrive until ``predicate()`` holds (at once on the in-memory cluster)."""
        if self.api is None:
            return predicate()
        assert isinstance(self.cluster, adapter.KubeCluster)
        deadline = clock.perf_counter() + timeout
        while not predicate():
            if clock.perf_counter() > deadline:
                return False
            self.cluster.pump(0.05)
        return True


def connect(api: apiserver.EmulatedApiServer, tmp_path: Path, **options: Any) -> adapter.KubeCluster:
    path = api.write_kubeconfig(tmp_path / "kubeconfig")
    conn = config.load(str(path))
    kube_client = client.KubeClient(conn, qps=0, burst=1, backoff_base=0.01, max_retries=3)
    options.setdefault("sync_timeout", 10.0)
    return adapter.KubeCluster(kube_client, **options)


@pytest.fixture
def api() -> Iterator[apiserver.EmulatedApiServer]:
    with apiserver.EmulatedApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def kube(api: apiserver.EmulatedApiServer, tmp_path: Path) -> Iterator[adapter.KubeCluster]:
    cluster = connect(api, tmp_path)
    yield cluster
    cluster.close()


def _pump_until_quiet(cluster: adapter.KubeCluster) -> None:
    cluster.pump(0.05)
    while cluster.pump(0.1):
        pass


@pytest.fixture(params=["memory", "adapter"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "memory":
        mem = memory.InMemoryCluster(clock.VirtualClock())
        yield Harness("memory", mem, mem, lambda: None)
        return
    with apiserver.EmulatedApiServer(bookmark_interval=0.2) as server:
        cluster = connect(server, tmp_path)
        try:
            yield Harness("adapter", cluster, server.store, lambda: _pump_until_quiet(cluster), server)
        finally:
            cluster.close()
