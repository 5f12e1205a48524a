"""The real-time driver with the KWOK provider, cloud calls on the pool and adapter-like watch threading.

The in-memory cluster is wrapped in :class:`karpy.kube.deferred.DeferredWatches`, so watch handlers run
only when the driver pumps, as with the Kubernetes adapter, while KWOK writes Nodes from pool threads.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from karpy import clock, operator, settings
from karpy.api import labels
from karpy.cloudprovider.kwok import factory
from karpy.controllers import cloudcalls, leader, realtime, runtime
from karpy.kube import deferred, interface, memory

KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def test_a_pending_pod_gets_a_kwok_node_and_deleting_the_pod_removes_the_node() -> None:
    wall = clock.WallClock()
    inner = memory.InMemoryCluster(wall, rng=random.Random(3))
    cluster = deferred.DeferredWatches(inner)
    s = settings.Settings(cluster_name="rt", batch_idle_duration=0.1, batch_max_duration=0.5,
                          consolidation_validation_delay=0.5)
    box: list[realtime.Driver] = []
    pool = cloudcalls.Pool(8, wake=lambda: box[0].wake() if box else None)
    manager = runtime.Manager(cluster, wall, calls=pool)
    cloud = factory.build(s, wall, cluster)
    operator.register_all(manager, cluster, cloud, wall, s)
    elector = leader.LeaderElector(cluster, wall, leader.Config(namespace="kube-system", identity="only",
                                                                lease_duration=3, renew_deadline=2, retry_period=0.5))
    driver = realtime.Driver(manager, wall, pool=pool, elector=elector, pump=cluster, synced=cluster.has_synced)
    box.append(driver)
    loop = threading.Thread(target=driver.run, daemon=True)
    loop.start()
    try:
        inner.create({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                      "spec": {"template": {"spec": {"nodeClassRef": dict(KWOK_CLASS), "requirements": []}},
                               "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}}})
        inner.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                      "status": {"phase": "Pending", "conditions": [
                          {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
        wait_for(lambda: len(inner.list("Node")) == 1, 10, "a KWOK node")
        (node,) = inner.list("Node")
        name = interface.name_of(node)
        assert node["metadata"]["labels"]["kwok.x-k8s.io/node"] == "fake"
        wait_for(lambda: labels.REGISTERED in interface.labels_of(inner.get("Node", name)), 10, "registration")
        # play KWOK and the scheduler: the node turns Ready, the pod runs on it
        inner.patch_status("Node", name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        pod = inner.get("Pod", "web", "default")
        pod["spec"]["nodeName"] = name
        inner.update(pod)
        inner.patch_status("Pod", "web", {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}}, "default")
        wait_for(lambda: interface.labels_of(inner.get("Node", name)).get(labels.INITIALIZED) == "true", 10,
                 "initialization")
        inner.delete("Pod", "web", "default")
        wait_for(lambda: not inner.list("Node") and not inner.list("NodeClaim"), 30, "the empty node removed")
    finally:
        driver.stop()
        loop.join(10)
    assert not loop.is_alive()
    assert pool.calls >= 2  # the launch and the termination ran on the pool
    assert elector.state is leader.State.RELEASED
    assert inner.get("Lease", leader.LEASE_NAME, "kube-system")["spec"]["holderIdentity"] == ""
