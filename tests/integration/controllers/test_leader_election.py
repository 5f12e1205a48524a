"""Leader election on a coordination.k8s.io/v1 Lease, on the in-memory cluster and a virtual clock."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.controllers import leader
from karpy.kube import errors as kube_errors
from karpy.kube import memory

NS = "kube-system"


def elector(cluster: memory.InMemoryCluster, vclock: clock.VirtualClock, identity: str) -> leader.LeaderElector:
    return leader.LeaderElector(cluster, vclock, leader.Config(namespace=NS, identity=identity))


def run(vclock: clock.VirtualClock, seconds: float, *electors: leader.LeaderElector, step: float = 0.5) -> None:
    end = vclock.now() + seconds
    while vclock.now() < end:
        for e in electors:
            e.tick()
        vclock.advance(step)


def lease(cluster: memory.InMemoryCluster) -> dict[str, object]:
    spec: dict[str, object] = cluster.get("Lease", leader.LEASE_NAME, NS)["spec"]
    return spec


def test_the_first_replica_acquires_the_lease_with_karpenters_name_and_timings() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a = elector(cluster, vclock, "a")
    assert a.tick() is leader.State.LEADING
    assert a.is_leader()
    spec = lease(cluster)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert str(spec["renewTime"]).endswith("Z") and "." in str(spec["renewTime"])


def test_only_one_of_two_replicas_leads_and_the_leader_keeps_renewing() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a, b = elector(cluster, vclock, "a"), elector(cluster, vclock, "b")
    renewals = []
    for _ in range(60):  # 30 s
        a.tick()
        b.tick()
        assert not (a.is_leader() and b.is_leader())
        renewals.append(lease(cluster)["renewTime"])
        vclock.advance(0.5)
    assert a.is_leader() and not b.is_leader()
    assert b.state is leader.State.FOLLOWING
    assert len(set(renewals)) >= 14  # renewed every retry period (2 s)


def test_the_other_replica_takes_over_within_the_lease_duration_when_the_leader_dies() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a, b = elector(cluster, vclock, "a"), elector(cluster, vclock, "b")
    run(vclock, 10, a, b)
    assert a.is_leader()
    died = vclock.now()
    while not b.is_leader():  # a stops ticking: the process died
        b.tick()
        vclock.advance(0.5)
        assert vclock.now() - died <= leader.LEASE_DURATION + leader.RETRY_PERIOD + 0.5
    assert vclock.now() - died >= leader.LEASE_DURATION - leader.RETRY_PERIOD
    assert lease(cluster)["holderIdentity"] == "b"
    assert lease(cluster)["leaseTransitions"] == 1
    assert not a.is_leader()  # its renew deadline passed long ago, without a tick


def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline_before_the_lease_expires() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a = elector(cluster, vclock, "a")
    a.tick()
    renewed = vclock.now()

    def broken(*_args: object, **_kwargs: object) -> dict[str, object]:
        raise kube_errors.InternalError("etcdserver: request timed out")

    cluster.update = broken  # type: ignore[method-assign]
    while a.is_leader():
        a.tick()
        vclock.advance(0.25)
    assert vclock.now() - renewed == pytest.approx(leader.RENEW_DEADLINE, abs=0.3)
    assert a.tick() is leader.State.LOST
    assert [e for _, _, e, _ in a.history][-1] is leader.Event.RENEW_DEADLINE_PASSED
    assert a.next_attempt() is None


def test_a_leader_whose_lease_was_taken_over_loses_at_its_next_attempt() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a = elector(cluster, vclock, "a")
    a.tick()
    current = cluster.get("Lease", leader.LEASE_NAME, NS)
    current["spec"]["holderIdentity"] = "intruder"
    cluster.update(current)
    vclock.advance(leader.RETRY_PERIOD)
    assert a.tick() is leader.State.LOST
    assert not a.is_leader()
    assert lease(cluster)["holderIdentity"] == "intruder"  # a lost replica writes nothing


def test_releasing_on_shutdown_lets_the_other_replica_take_over_at_its_next_attempt() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a, b = elector(cluster, vclock, "a"), elector(cluster, vclock, "b")
    run(vclock, 4, a, b)
    assert a.release() is leader.State.RELEASED
    assert lease(cluster)["holderIdentity"] == ""
    released = vclock.now()
    run(vclock, leader.RETRY_PERIOD + 0.5, b)
    assert b.is_leader()
    assert vclock.now() - released <= leader.RETRY_PERIOD + 0.5
    assert a.tick() is leader.State.RELEASED and not a.is_leader()


def test_every_transition_is_in_the_table_and_an_illegal_one_is_refused() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    a = elector(cluster, vclock, "a")
    with pytest.raises(leader.IllegalTransitionError, match="following on renewed"):
        a._move(leader.Event.RENEWED)
    assert all(target in leader.State for target in leader.TRANSITIONS.values())
    assert {s for s, _ in leader.TRANSITIONS} == set(leader.State)


def test_bad_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        leader.Config(namespace=NS, identity="a", lease_duration=5, renew_deadline=10)


class _CountingCluster(memory.InMemoryCluster):
    """Counts the Lease reads (GET) and writes the elector sends."""

    def __init__(self, vclock: clock.VirtualClock) -> None:
        super().__init__(vclock)
        self.lease_gets = 0
        self.lease_writes = 0

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        if kind == "Lease":
            self.lease_gets += 1
        return super().get(kind, name, namespace)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "Lease":
            self.lease_writes += 1
        return super().update(obj)


def test_a_leader_renews_with_one_update_and_no_read_as_client_go_does() -> None:
    """client-go's ``tryAcquireOrRenew`` fast path: the leader updates the Lease it last wrote; reading it
    before each renewal was one extra GET every 2 s (the vs-Karpenter bench counted ~600 in a run)."""
    vclock = clock.VirtualClock()
    cluster = _CountingCluster(vclock)
    a = elector(cluster, vclock, "a")
    a.tick()
    assert a.is_leader()
    gets, writes = cluster.lease_gets, cluster.lease_writes
    run(vclock, 60, a)
    assert a.is_leader()
    assert cluster.lease_gets == gets
    assert cluster.lease_writes - writes == 29  # one write per retry period: t = 2, 4, ..., 58 s
    assert lease(cluster)["holderIdentity"] == "a"


def test_a_leader_whose_lease_was_taken_notices_it_on_the_failed_update_and_stops_leading() -> None:
    """The fast update carries the resourceVersion the leader wrote: another writer's change makes it a
    conflict; the leader then reads the Lease, sees another holder and loses, never overwriting it."""
    vclock = clock.VirtualClock()
    cluster = _CountingCluster(vclock)
    a = elector(cluster, vclock, "a")
    run(vclock, 4, a)
    assert a.is_leader()
    taken: dict[str, Any] = cluster.get("Lease", leader.LEASE_NAME, NS)
    taken["spec"]["holderIdentity"] = "intruder"
    cluster.update(taken)
    run(vclock, 3, a)
    assert not a.is_leader() and a.state is leader.State.LOST
    assert lease(cluster)["holderIdentity"] == "intruder"
