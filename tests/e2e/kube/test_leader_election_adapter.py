"""Leader election over the adapter: the Lease is read with a GET, never through a cluster-wide informer."""

from __future__ import annotations

from karpy import clock
from karpy.controllers import leader
from karpy.kube import adapter
from support import apiserver


def test_two_electors_over_the_adapter_agree_on_one_leader_without_a_lease_informer(
        api: apiserver.EmulatedApiServer, kube: adapter.KubeCluster) -> None:
    wall = clock.WallClock()

    def elector(identity: str) -> leader.LeaderElector:
        return leader.LeaderElector(kube, wall, leader.Config(
            namespace="kube-system", identity=identity, lease_duration=3.0, renew_deadline=2.0, retry_period=0.5))

    a, b = elector("a"), elector("b")
    assert a.tick() is leader.State.LEADING
    assert b.tick() is leader.State.FOLLOWING
    stored = api.store.get("Lease", leader.LEASE_NAME, "kube-system")
    assert stored["spec"]["holderIdentity"] == "a"
    assert kube.informer_of("Lease") is None  # no list/watch of every Lease in the cluster
    assert a.release() is leader.State.RELEASED
    assert api.store.get("Lease", leader.LEASE_NAME, "kube-system")["spec"]["holderIdentity"] == ""


def test_a_reconcile_longer_than_the_renew_deadline_does_not_cost_the_lease(
        api: apiserver.EmulatedApiServer, kube: adapter.KubeCluster) -> None:
    """Found on the real control plane: under load a drain or consolidation pass held the driver thread past
    the 10 s renew deadline, so karpy lost its Lease and exited (Karpenter renews on a goroutine of its own).
    The Lease now renews on a thread of its own while a reconcile runs."""
    import threading
    import time

    from karpy.controllers import realtime, runtime

    wall = clock.WallClock()
    elector = leader.LeaderElector(kube, wall, leader.Config(
        namespace="kube-system", identity="slow", lease_duration=2.0, renew_deadline=1.0, retry_period=0.2))
    manager = runtime.Manager(kube, wall)
    slow: list[float] = []

    def reconcile(_key: str) -> float | None:
        slow.append(wall.now())
        time.sleep(3.0)  # three renew deadlines on the driver thread
        return None

    manager.register(runtime.Controller(name="slow", reconcile=reconcile, watches=[]))
    manager.enqueue("slow", "k")
    driver = realtime.Driver(manager, wall, elector=elector, renew_in_background=True)
    thread = threading.Thread(target=driver.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not slow and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slow, "the reconcile never ran"
    time.sleep(3.5)
    assert elector.state is leader.State.LEADING, elector.history[-3:]
    driver.stop()
    thread.join(10)
    assert api.store.get("Lease", leader.LEASE_NAME, "kube-system")["spec"]["holderIdentity"] == ""
