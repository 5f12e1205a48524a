"""A launch's and a registration's writes are not made on the real-time loop, and a launch already
written is not looked up or written again while the watch has not shown it yet."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from karpy import clock, operator, settings
from karpy.cloudprovider.fake import instancetypes
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.cloudprovider.kwok import factory
from karpy.controllers import cloudcalls, lifecycle, realtime, runtime
from karpy.kube import deferred, interface, memory

from . import builders as b

WRITE_LATENCY = 0.2
KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


class SlowStatusWrites(deferred.DeferredWatches):
    """Watch handlers run on the pumping thread; every NodeClaim status write takes 200 ms."""

    def __init__(self, inner: memory.InMemoryCluster) -> None:
        super().__init__(inner)
        self.status_writes: list[str] = []

    def patch_status(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        if kind == "NodeClaim":
            time.sleep(WRITE_LATENCY)
            self.status_writes.append(threading.current_thread().name)
        return super().patch_status(kind, name, patch, namespace)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "NodeClaim":
            time.sleep(WRITE_LATENCY)
            self.status_writes.append(threading.current_thread().name)
        return super().update_status(obj)


class CountingCloud(b.Bridge):
    def __init__(self, cloud: fake_provider.SimulatedCloud) -> None:
        super().__init__(cloud, None)
        self.lists = 0

    def list(self) -> Any:
        self.lists += 1
        return super().list()


def test_ten_launches_and_registrations_whose_status_writes_take_200ms_each_do_not_hold_the_loop() -> None:
    wall = clock.WallClock()
    inner = memory.InMemoryCluster(wall, rng=random.Random(1))
    cluster = SlowStatusWrites(inner)
    box: list[realtime.Driver] = []
    pool = cloudcalls.Pool(20, wake=lambda: box[0].wake() if box else None)
    manager = runtime.Manager(cluster, wall, calls=pool)
    lifecycle_seconds: list[float] = []
    manager.observer = lambda name, _result, seconds: (
        lifecycle_seconds.append(seconds) if name == lifecycle.NAME else None)
    s = settings.Settings(cluster_name="test", batch_idle_duration=0.05, batch_max_duration=0.2)
    operator.register_all(manager, cluster, factory.build(s, wall, cluster), wall, s)  # KWOK: launches make Nodes
    driver = realtime.Driver(manager, wall, pool=pool, pump=cluster)
    box.append(driver)
    inner.create({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                  "spec": {"template": {"spec": {"nodeClassRef": dict(KWOK_CLASS), "requirements": []}}}})
    for i in range(10):  # one node per pod (hostname anti-affinity)
        pod = b.pending_pod(f"big-{i}", cpu="1")
        pod["metadata"]["labels"] = {"app": "big"}
        pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "big"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        inner.create(pod)
    loop = threading.Thread(target=driver.run, daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 30
        while sum(1 for c in inner.list("NodeClaim") if b.condition(c, "Registered") == "True") < 10:
            assert time.monotonic() < deadline, "ten registrations not written within 30 s"
            time.sleep(0.02)
    finally:
        driver.stop()
        loop.join(10)
    assert not loop.is_alive()
    on_pool = [t for t in cluster.status_writes if t.startswith("karpy-cloud")]
    assert len(on_pool) >= 20  # each launch's and each registration's status write was made on a pool thread
    # twenty status writes of 200 ms on the loop would hold it 4 s; the loop's lifecycle reconciles took far less
    assert sum(lifecycle_seconds) < 10 * WRITE_LATENCY / 2, sum(lifecycle_seconds)
    assert len({c["status"]["providerID"] for c in inner.list("NodeClaim")}) == 10


def test_a_launch_written_but_not_yet_seen_by_the_watch_is_neither_looked_up_nor_written_again() -> None:
    vclock = clock.VirtualClock()
    inner = memory.InMemoryCluster(vclock, rng=random.Random(1))
    cluster = deferred.DeferredWatches(inner)  # nothing reaches the cache until pumped
    cloud = CountingCloud(fake_provider.SimulatedCloud(vclock, random.Random(1),
                                                       catalog=instancetypes.benchmark(8), cluster_name="test"))
    manager = runtime.Manager(cluster, vclock)
    built = operator.register_all(manager, cluster, cloud, vclock, settings.Settings(cluster_name="test"))
    inner.create(b.nodeclass_manifest())
    inner.create(b.nodepool_manifest())
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": "default"},
                          "finalizers": ["karpenter.sh/termination"]},
             "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                      "requirements": [], "resources": {"requests": {"cpu": "1"}}}}
    inner.create(claim)
    cluster.pump()
    vclock.advance(5.0)  # older than launch idempotency's first-attempt window
    built.lifecycle.reconcile("c1")  # launches and writes the launch; the cache has not seen it
    assert inner.get("NodeClaim", "c1")["status"]["providerID"]
    lists, creates = cloud.lists, cloud.creates
    version = inner.get("NodeClaim", "c1")["metadata"]["resourceVersion"]
    built.lifecycle.reconcile("c1")  # e.g. requeued by the watch event of its own label patch
    assert (cloud.lists, cloud.creates) == (lists, creates)
    assert inner.get("NodeClaim", "c1")["metadata"]["resourceVersion"] == version  # nothing written again


def test_a_launch_and_a_registration_finished_on_the_pool_are_counted_even_when_the_cache_shows_them_first() -> None:
    wall = clock.WallClock()
    inner = memory.InMemoryCluster(wall, rng=random.Random(1))
    cluster = deferred.DeferredWatches(inner)
    pool = cloudcalls.Pool(2)
    manager = runtime.Manager(cluster, wall, calls=pool)
    s = settings.Settings(cluster_name="test")
    built = operator.register_all(manager, cluster, factory.build(s, wall, cluster), wall, s)
    inner.create({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                  "spec": {"template": {"spec": {"nodeClassRef": dict(KWOK_CLASS), "requirements": []}}}})
    inner.create({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                  "metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": "default"},
                               "finalizers": ["karpenter.sh/termination"]},
                  "spec": {"nodeClassRef": dict(KWOK_CLASS), "requirements": [],
                           "resources": {"requests": {"cpu": "1"}}}})

    def finish(condition: str) -> None:
        """Wait for the pool's writes, then let the cache see them before the loop takes the outcome."""
        deadline = time.monotonic() + 10
        while b.condition(inner.get("NodeClaim", "c1"), condition) != "True":
            assert time.monotonic() < deadline, f"{condition} not written"
            time.sleep(0.01)
        time.sleep(0.05)  # the completion is queued right after the write
        cluster.pump()
        pool.drain(lambda _controller, _key: None)

    cluster.pump()
    assert built.lifecycle.reconcile("c1") is None  # the launch is in flight
    finish("Launched")
    built.lifecycle.reconcile("c1")  # the cache shows the providerID; the outcome is taken all the same
    finish("Registered")
    built.lifecycle.reconcile("c1")
    assert built.metrics.nodeclaims_launched.labels("default")._value.get() == 1
    assert built.metrics.nodeclaims_registered.labels("default")._value.get() == 1
    assert not pool.pending("create/" + interface.uid_of(inner.get("NodeClaim", "c1")))
    pool.close(5)
