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
