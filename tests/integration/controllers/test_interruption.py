"""Interruption: spot notices drain and replace the node before the instance is reclaimed."""

from __future__ import annotations

from karpy.kube import errors, interface

from . import builders as b

SPOT = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]


def _spot_world() -> tuple[b.World, str, str]:
    w = b.make_world(launch_latency=30.0)
    w.cluster.create(b.nodepool_manifest(requirements=SPOT))
    w.cluster.create(b.pending_pod("web"))
    w.at(40.0)
    (claim,) = w.nodeclaims()
    return w, interface.name_of(claim), claim["status"]["providerID"]


def _terminating_or_gone(w: b.World, name: str) -> bool:
    try:
        return interface.is_terminating(w.cluster.get("NodeClaim", name))
    except errors.NotFound:
        return True


def test_a_spot_interruption_deletes_the_nodeclaim_at_once_with_a_spot_interrupted_event() -> None:
    w, claim, pid = _spot_world()
    w.cloud.interrupt(pid, "SpotInterruption")
    w.run_for(2.0)
    assert _terminating_or_gone(w, claim)
    assert sorted(e["involvedObject"]["kind"] for e in w.events("SpotInterrupted")) == ["Node", "NodeClaim"]
    assert w.karpy.interruption.handled == [("SpotInterruption", pid, "deleted")]
    assert w.karpy.metrics.value("karpenter_interruption_received_messages_total",
                                 message_type="spot_interrupted") == 1.0
    assert w.karpy.metrics.value("karpenter_nodeclaims_disrupted_total", reason="spot_interrupted",
                                 nodepool="default", capacity_type="spot") == 1.0
    assert w.cloud.pending_interruptions() == []
    assert w.karpy.metrics.value("karpenter_interruption_message_queue_duration_seconds_count") == 1.0
    assert 0.0 <= w.karpy.metrics.value("karpenter_interruption_message_queue_duration_seconds_sum") <= 2.0


def test_a_rebalance_recommendation_only_records_an_event() -> None:
    w, claim, pid = _spot_world()
    w.cloud.interrupt(pid, "Rebalance")
    w.run_for(2.0)
    assert not _terminating_or_gone(w, claim)
    assert len(w.events("SpotRebalanceRecommendation")) == 2
    assert w.karpy.interruption.handled == [("Rebalance", pid, "event")]


def test_a_message_for_an_instance_karpy_does_not_know_is_acknowledged_and_ignored() -> None:
    w, claim, _ = _spot_world()
    other = w.cloud.add_instance("fake-it-0", "test-zone-1", "spot", tags={}, nodeclaim_name="")
    w.cloud.interrupt(other.provider_id, "SpotInterruption")
    w.run_for(2.0)
    assert not _terminating_or_gone(w, claim)
    assert [h[2] for h in w.karpy.interruption.handled] == ["ignored"]
    assert w.cloud.pending_interruptions() == []
