"""Faults injected around the cluster and the cloud, and the handling they exercise."""

from __future__ import annotations

import random
from typing import Any

import pytest

from karpy import clock, settings
from karpy.cloudprovider import errors as cloud_errors
from karpy.cloudprovider.fake import faults as cloud_faults
from karpy.controllers import repair
from karpy.kube import errors as kube_errors
from karpy.kube import faults as kube_faults
from karpy.kube import memory

from ..controllers import builders


def test_every_api_fault_raises_karpys_retryable_error_and_lost_responses_are_applied() -> None:
    w = builders.make_world()
    always = {"conflict": kube_errors.Conflict, "throttle": kube_errors.TooManyRequests,
              "server_error": kube_errors.InternalError, "timeout": kube_errors.Timeout}
    for attr, exc in always.items():
        rates: dict[str, Any] = {attr: 1.0}
        faulty = kube_faults.FaultyCluster(w.cluster, kube_faults.KubeFaults(**rates), random.Random(1), w.clock)
        with pytest.raises(exc) as caught:
            faulty.create(builders.pending_pod(f"p-{attr.replace('_', '-')}"))
        assert getattr(caught.value, "retryable", False) is True
    lost = kube_faults.FaultyCluster(w.cluster, kube_faults.KubeFaults(lost_response=1.0), random.Random(1), w.clock)
    with pytest.raises(kube_errors.Timeout):
        lost.create(builders.pending_pod("applied"))
    assert w.cluster.get("Pod", "applied", "default")  # it was applied; only the answer was lost
    assert lost.injected == {"lostResponse": 1}


def test_a_dropped_watch_event_is_recovered_by_a_relist() -> None:
    w = builders.make_world()
    faulty = kube_faults.FaultyCluster(w.cluster, kube_faults.KubeFaults(watch_drop=1.0, relist_after=5.0),
                                       random.Random(1), w.clock)
    seen: list[tuple[str, str]] = []
    faulty.watch("Pod", lambda event, obj: seen.append((event, obj["metadata"]["name"])))
    w.cluster.create(builders.pending_pod("a"))
    assert seen == [] and faulty.next_relist() == w.clock.now() + 5.0
    faulty.faults = kube_faults.KubeFaults(relist_after=5.0)
    w.clock.advance(5.0)
    assert faulty.pump() == 1
    assert seen == [("ADDED", "a")]
    faulty.close()
    w.cluster.create(builders.pending_pod("b"))
    assert seen == [("ADDED", "a")]


def test_delayed_watch_events_arrive_late_in_order_per_object_and_others_overtake() -> None:
    w = builders.make_world()
    faulty = kube_faults.FaultyCluster(w.cluster, kube_faults.KubeFaults(watch_delay=1.0, delay_seconds=3.0,
                                                                         watch_reorder=True),
                                       random.Random(1), w.clock)
    seen: list[tuple[str, str]] = []
    faulty.watch("Pod", lambda event, obj: seen.append((event, obj["metadata"]["name"])))
    w.cluster.create(builders.pending_pod("a"))
    w.cluster.patch("Pod", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
    assert seen == [] and faulty.next_relist() == w.clock.now() + 3.0
    faulty.faults = kube_faults.KubeFaults(watch_reorder=True)
    w.cluster.create(builders.pending_pod("b"))  # not delayed: overtakes a's events
    assert seen == [("ADDED", "b")]
    w.clock.advance(3.0)
    assert faulty.pump() == 2
    assert seen == [("ADDED", "b"), ("ADDED", "a"), ("MODIFIED", "a")]


def test_a_launch_whose_response_is_lost_is_found_again_and_not_launched_twice() -> None:
    w = builders.make_world()
    w.karpy.lifecycle.cloud = cloud_faults.FaultyCloud(w.bridge, cloud_faults.CloudFaults(lost_launch=1.0),
                                                       random.Random(1))
    w.cluster.create(builders.nodepool_manifest())
    w.cluster.create(builders.pending_pod("a"))
    w.at(5)
    assert len(w.running_instances()) == 1  # launched, but the lifecycle did not hear back
    w.karpy.lifecycle.cloud = w.bridge
    w.run_for(20)
    (claim,) = w.nodeclaims()
    assert claim["status"]["providerID"] in w.running_instances()
    assert len(w.running_instances()) == 1 and w.karpy.gc.collected_instances == []


def test_insufficient_capacity_found_at_launch_replans_elsewhere() -> None:
    w = builders.make_world()
    faulty = cloud_faults.FaultyCloud(w.bridge, cloud_faults.CloudFaults(ice_at_launch=1.0), random.Random(1))
    w.karpy.lifecycle.cloud = faulty
    w.cluster.create(builders.nodepool_manifest())
    w.cluster.create(builders.pending_pod("a"))
    w.at(5)
    assert faulty.injected["iceAtLaunch"] >= 1
    assert w.events("InsufficientCapacityError")
    w.karpy.lifecycle.cloud = w.bridge
    w.at(300)
    assert len(w.running_instances()) == 1 and w.nodes()


def test_interruption_messages_can_be_lost_duplicated_and_reordered() -> None:
    w = builders.make_world()
    for pid in ("a", "b", "c"):
        inst = w.cloud.add_instance("fake-it-0", "test-zone-1", tags=w.cloud.karpy_tags("p", pid))
        w.cloud.interrupt(inst.provider_id, "StateChange")
    dup = cloud_faults.FaultyCloud(w.cloud, cloud_faults.CloudFaults(duplicate_interruption=1.0), random.Random(1))
    assert len(dup.pending_interruptions()) == 6
    lost = cloud_faults.FaultyCloud(w.cloud, cloud_faults.CloudFaults(lost_interruption=1.0), random.Random(1))
    assert lost.pending_interruptions() == [] and w.cloud.pending_interruptions() == []


def test_cloud_throttling_is_a_retryable_cloud_error() -> None:
    w = builders.make_world()
    faulty = cloud_faults.FaultyCloud(w.bridge, cloud_faults.CloudFaults(throttle=1.0), random.Random(1))
    with pytest.raises(cloud_errors.CloudProviderError) as caught:
        faulty.list()
    assert caught.value.retryable and caught.value.reason == "RequestLimitExceeded"


def test_an_instance_that_never_registers_is_replaced_after_the_registration_timeout() -> None:
    w = builders.make_world(settings_=settings.Settings(cluster_name="test", registration_ttl=600.0))
    assert w.kubelet is not None
    kubelet = w.kubelet
    lost: list[str] = []
    w.karpy.lifecycle.cloud = cloud_faults.FaultyCloud(
        w.bridge, cloud_faults.CloudFaults(), random.Random(1),
        on_launched=lambda c: lost.append(c.status.provider_id) if not lost and
        kubelet.lose_registration(c.status.provider_id) else None)
    w.cluster.create(builders.nodepool_manifest())
    w.cluster.create(builders.pending_pod("a"))
    w.at(300)
    assert w.nodes() == [] and len(lost) == 1
    w.at(1500)
    assert w.events("RegistrationTimeout")
    assert lost[0] not in w.running_instances()
    assert len(w.nodes()) == 1


@pytest.mark.parametrize("gate", [True, False])
def test_a_not_ready_node_is_repaired_only_with_the_node_repair_gate(gate: bool) -> None:
    gates = (("NodeRepair", gate),)
    w = builders.make_world(settings_=settings.Settings(cluster_name="test", feature_gates=gates))
    w.cluster.create(builders.nodepool_manifest())
    w.cluster.create(builders.pending_pod("a"))
    w.at(120)
    (node,) = w.nodes()
    name = node["metadata"]["name"]
    ts = w.clock.now()
    node = w.cluster.get("Node", name)
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                     "lastTransitionTime": clock.rfc3339(ts)}]
    w.cluster.update_status(memory.copy_dict(node))
    w.run_for(29 * 60)
    assert name in [n["metadata"]["name"] for n in w.nodes()]  # tolerated for 30 minutes
    w.run_for(10 * 60)
    names = [n["metadata"]["name"] for n in w.nodes()]
    if gate:
        assert name not in names and w.events(repair.REASON_REPAIR, name) and len(names) == 1
    else:
        assert names == [name]



def test_a_repaired_node_goes_even_with_a_do_not_disrupt_pod_on_it() -> None:
    # Karpenter's health controller sets the termination timestamp to now before deleting the NodeClaim,
    # so the drain deletes what eviction would wait for forever on a node that stopped reporting
    gates = (("NodeRepair", True),)
    w = builders.make_world(settings_=settings.Settings(cluster_name="test", feature_gates=gates))
    w.cluster.create(builders.nodepool_manifest())
    pinned = builders.pending_pod("pinned")
    pinned["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    w.cluster.create(pinned)
    w.at(120)
    (node,) = w.nodes()
    name = node["metadata"]["name"]
    pod = w.cluster.get("Pod", "pinned", "default")
    pod["spec"]["nodeName"] = name  # bound and running there (this world has no kube-scheduler)
    w.cluster.update(memory.copy_dict(pod))
    pod = w.cluster.get("Pod", "pinned", "default")
    pod["status"]["phase"] = "Running"
    w.cluster.update_status(memory.copy_dict(pod))
    node = w.cluster.get("Node", name)
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                     "lastTransitionTime": clock.rfc3339(w.clock.now())}]
    w.cluster.update_status(memory.copy_dict(node))
    w.run_for(29 * 60)
    assert [n["metadata"]["name"] for n in w.nodes()] == [name]
    (claim,) = w.cluster.objects("NodeClaim")
    w.run_for(3 * 60)
    assert w.events(repair.REASON_REPAIR, name)
    assert name not in [n["metadata"]["name"] for n in w.nodes()]
    assert "pinned" not in [p["metadata"]["name"] for p in w.cluster.objects("Pod")]  # deleted outright
    assert claim["status"]["providerID"] not in w.running_instances()
