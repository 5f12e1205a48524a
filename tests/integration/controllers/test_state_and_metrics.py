"""The watch-fed cluster state (scheduler inputs) and the metrics registry."""

from __future__ import annotations

from typing import Any

from karpy import clock
from karpy.api import nodeclaim, quantity
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype
from karpy.cloudprovider.fake import instancetypes
from karpy.controllers import nominations, offerings, state
from karpy.kube import memory
from karpy.observability import metrics

from . import builders as b

GIB = 2**30 * quantity.MILLI


def _state() -> tuple[memory.InMemoryCluster, state.ClusterState]:
    cluster = memory.InMemoryCluster(clock.VirtualClock())
    return cluster, state.ClusterState(cluster).start()


def _claim(name: str, *, provider_id: str = "", options: tuple[str, ...] = ("fake-it-3", "fake-it-1"),
           deleting: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(options)},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1"]}],
            "nodeClassRef": dict(b.NODECLASS_REF)},
    }
    if provider_id:
        obj["status"] = {"providerID": provider_id, "capacity": {"cpu": "4", "memory": "8Gi", "pods": "40"},
                         "allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "40"}}
    if deleting:
        obj["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    return obj


def test_pending_pods_are_the_unschedulable_unbound_live_non_daemon_pods() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("wanted"))
    cluster.create(b.running_pod("bound", "node-1"))
    no_condition = b.pending_pod("fresh")
    no_condition["status"] = {"phase": "Pending"}
    cluster.create(no_condition)
    failed = b.pending_pod("failed")
    failed["status"]["phase"] = "Failed"
    cluster.create(failed)
    ds = b.pending_pod("agent")
    ds["metadata"]["ownerReferences"] = [b.daemonset_owner("agent")]
    cluster.create(ds)
    assert [p.name for p in st.pending_pods()] == ["wanted"]
    assert st.pending_pod_count() == 1


def test_each_object_is_parsed_once_per_resource_version() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("web"))
    st.pending_pods()
    st.pending_pods()
    assert st.parses == 1
    pod = cluster.get("Pod", "web", "default")
    pod["status"]["conditions"][0]["message"] = "again"
    cluster.update_status(pod)
    st.pending_pods()
    assert st.parses == 2


def test_an_unparsable_object_is_left_out_without_breaking_the_others() -> None:
    cluster, st = _state()
    cluster.create(b.nodepool_manifest("good"))
    bad = b.nodepool_manifest("bad")
    bad["spec"]["template"]["spec"]["expireAfter"] = 5
    cluster.create(bad)
    assert [p.name for p in st.nodepools()] == ["good"]


def test_in_flight_nodeclaims_are_capacity_sized_after_their_status_or_cheapest_option() -> None:
    cluster, st = _state()
    cluster.create(_claim("launching"))
    cluster.create(_claim("launched", provider_id="kwok://launched"))
    gone = cluster.create(_claim("going", provider_id="kwok://going", deleting=True))
    cluster.delete("NodeClaim", gone["metadata"]["name"])
    types = {"default": instancetypes.benchmark(8)}

    existing = {e.name: e for e in st.existing_nodes(types)}
    assert set(existing) == {"launching", "launched"}
    assert all(e.in_flight and e.schedulable for e in existing.values())
    cheapest = next(t for t in types["default"] if t.name == "fake-it-1")
    assert existing["launching"].allocatable == cheapest.allocatable
    assert existing["launching"].labels["topology.kubernetes.io/zone"] == "test-zone-1"
    assert existing["launched"].allocatable["cpu"] == 3900

    usage = st.nodepool_usage(types)["default"]
    assert usage["cpu"] == cheapest.capacity["cpu"] + 4000 + 4000  # the deleting claim still counts
    assert usage["memory"] == cheapest.capacity["memory"] + 2 * 8 * GIB
    assert usage["nodes"] == 3 * 1000  # one node per NodeClaim (milli-units)
    assert st.nodepool_usage(types) == {"default": usage}  # summed afresh at each call


def test_a_registered_node_replaces_its_nodeclaim_and_stays_in_flight_until_initialized() -> None:
    cluster, st = _state()
    cluster.create(_claim("c1", provider_id="kwok://c1"))
    cluster.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": "default"}},
                    "spec": {"providerID": "kwok://c1"},
                    "status": {"allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "40"}}})
    cluster.create(b.running_pod("app", "c1"))
    (only,) = st.existing_nodes()
    assert only.name == "c1" and only.in_flight
    assert [p.name for p in only.pods] == ["app"]
    assert st.nodeclaim_for_node("c1") is not None


def test_unavailable_offerings_are_switched_off_until_they_expire() -> None:
    vclock = clock.VirtualClock()
    cache = offerings.UnavailableOfferings(vclock, ttl=180)
    types = instancetypes.benchmark(2)
    cache.mark_unavailable([("fake-it-0", "test-zone-1", "spot")])
    applied = {t.name: t for t in cache.apply(types)}
    off = [o for o in applied["fake-it-0"].offerings if not o.available]
    assert [(o.zone, o.capacity_type) for o in off] == [("test-zone-1", "spot")]
    assert applied["fake-it-1"] is next(t for t in types if t.name == "fake-it-1")
    assert all(o.available for o in types[0].offerings)  # the input is not changed
    vclock.advance(181)
    assert all(o.available for o in cache.apply(types)[0].offerings)
    assert isinstance(applied["fake-it-0"], instancetype.InstanceType)


def test_each_metrics_object_has_its_own_registry_and_a_json_snapshot() -> None:
    first, second = metrics.Metrics(), metrics.Metrics()
    first.nodeclaims_created.labels("provisioning", "default", "false").inc()
    assert first.value("karpenter_nodeclaims_created_total", nodepool="default") == 1
    assert second.value("karpenter_nodeclaims_created_total") == 0
    first.attach(cost=lambda: 1.25)
    snap = first.snapshot()
    assert snap["karpenter_nodeclaims_created_total"] == [
        {"labels": {"reason": "provisioning", "nodepool": "default", "min_values_relaxed": "false"}, "value": 1.0}]
    assert snap["karpy_cluster_cost_per_hour"] == [{"labels": {}, "value": 1.25}]
    assert b"karpenter_nodeclaims_created_total" in first.exposition()


def test_the_cluster_gauges_follow_the_state() -> None:
    w = b.make_world(launch_latency=10.0)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(0.5)
    m = w.karpy.metrics
    assert m.value("karpenter_pods_unbound_time_seconds", name="web") == 0.5
    w.at(20.0)
    assert m.value("karpenter_cluster_state_node_count") == 1
    assert m.value("karpenter_nodepools_usage", nodepool="default", resource_type="cpu") == 1.0
    assert m.value("karpy_cluster_cost_per_hour") > 0
    assert m.value("karpenter_scheduler_scheduling_duration_seconds_count", controller="provisioner") == 1
    assert m.value("karpenter_pods_state", name="web", phase="Pending") == 1


def test_an_uninitialized_node_and_an_unlaunched_claim_count_without_their_startup_taints() -> None:
    """Karpenter's StateNode.Taints: the NodeClaim's taints, not its startup taints (issue 12 item 8)."""
    cluster, st = _state()
    startup = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    for name, pid in (("launched", "kwok://launched"), ("waiting", "")):
        claim = _claim(name, provider_id=pid)
        claim["spec"]["startupTaints"] = [startup]
        claim["spec"]["taints"] = [taint]
        cluster.create(claim)
    cluster.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "launched", "labels": {"karpenter.sh/nodepool": "default"}},
                    "spec": {"providerID": "kwok://launched", "taints": [startup, taint]},
                    "status": {"allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "40"}}})
    by_name = {e.name: e for e in st.existing_nodes()}
    for name in ("launched", "waiting"):
        assert by_name[name].in_flight
        assert [t.key for t in by_name[name].taints] == ["dedicated"], name


def test_a_status_write_re_reads_a_nodeclaim_as_a_full_parse_would() -> None:
    cluster, st = _state()
    cluster.create(_claim("c1"))
    before = st.nodeclaim("c1")
    obj = cluster.get("NodeClaim", "c1")
    obj["status"] = {"providerID": "kwok://c1", "conditions": [
        {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cluster.update_status(obj)
    cluster.patch("NodeClaim", "c1", {"metadata": {"labels": {"extra": "yes"}}})
    after = st.nodeclaim("c1")
    assert before is not None and after is not None
    assert after == nodeclaim.NodeClaim.from_manifest(cluster.get("NodeClaim", "c1"))
    assert after.spec is before.spec  # the unchanged spec was not parsed again
    assert after.status.provider_id == "kwok://c1" and after.labels["extra"] == "yes"


def test_a_node_bin_is_reused_until_its_node_or_pods_change() -> None:
    cluster, st = _state()
    cluster.create(_claim("c1", provider_id="kwok://c1"))
    cluster.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": "default"}},
                    "spec": {"providerID": "kwok://c1"},
                    "status": {"allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "40"}}})
    cluster.create(b.running_pod("app", "c1"))
    (first,) = st.existing_nodes()
    (again,) = st.existing_nodes()
    assert again is first
    cluster.create(b.running_pod("second", "c1"))
    (grown,) = st.existing_nodes()
    assert grown is not first and sorted(p.name for p in grown.pods) == ["app", "second"]
    cluster.patch("Node", "c1", {"spec": {"unschedulable": True}})
    (cordoned,) = st.existing_nodes()
    assert not cordoned.schedulable and grown.schedulable


def test_nominations_last_the_window_or_while_the_planned_pods_are_pending() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("web"))
    assert nominations.window(10.0) == 20.0 and nominations.window(1.0) == 10.0
    st.nominations.nominate(["node-a"], 100.0, 20.0)
    st.nominations.plan({"default/web": "claim-b"})
    assert st.nominated(110.0) == {"node-a", "claim-b"}
    assert st.nominated(125.0) == {"claim-b"}  # the window ended; the pod is still pending
    cluster.delete("Pod", "web", "default")
    assert st.nominated(126.0) == set()


def test_a_pod_status_write_re_reads_the_pod_as_a_full_parse_would() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("web"))
    first = st.pending_pods()[0]
    pod = cluster.get("Pod", "web", "default")
    pod["status"]["conditions"][0]["message"] = "0/3 nodes are available"
    cluster.update_status(pod)
    second = st.pending_pods()[0]
    stored = cluster.get("Pod", "web", "default")
    assert second == pod_mod.Pod.from_manifest(stored)
    assert second.metadata.resource_version == stored["metadata"]["resourceVersion"] != first.metadata.resource_version
    cluster.patch("Pod", "web", {"metadata": {"labels": {"tier": "front"}}}, "default")
    third = st.pending_pods()[0]
    assert third == pod_mod.Pod.from_manifest(cluster.get("Pod", "web", "default"))
    assert third.labels["tier"] == "front"


def _world_counting_drift_checks() -> tuple[Any, Any, list[str]]:
    """A world with one launched claim, its drift marker, and the claims the cloud is asked about from now on."""
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("app"))
    w.at(120.0)
    assert w.karpy.disruption is not None
    marker = w.karpy.disruption.drift_marker
    asked: list[str] = []
    ask = w.bridge.is_drifted

    def counting(claim: nodeclaim.NodeClaim) -> str:
        asked.append(claim.name)
        return ask(claim)

    w.bridge.is_drifted = counting  # type: ignore[method-assign]
    return w, marker, asked


def test_drift_is_asked_again_when_a_claim_s_labels_change_but_not_after_a_status_write() -> None:
    w, marker, asked = _world_counting_drift_checks()
    pools = {p.name: p for p in w.karpy.state.nodepools()}
    marker.mark(pools)
    assert asked == []  # cached since the last pass
    (listed,) = w.nodeclaims()
    name = listed["metadata"]["name"]
    claim = w.cluster.get("NodeClaim", name)
    claim["status"]["conditions"] = [*claim["status"]["conditions"], {
        "type": "ConsistentStateFound", "status": "True", "reason": "ConsistentStateFound",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    w.cluster.update_status(claim)
    marker.mark(pools)
    assert asked == []
    w.cluster.patch("NodeClaim", name, {"metadata": {"labels": {"team": "a"}}})
    marker.mark(pools)
    assert asked == [name]


def test_drift_is_not_asked_again_after_a_nodepool_status_write_and_a_deleted_claim_is_forgotten() -> None:
    w, marker, asked = _world_counting_drift_checks()
    (pool,) = w.cluster.list("NodePool")
    name = pool["metadata"]["name"]
    w.cluster.patch_status("NodePool", name, {"status": {"resources": {"cpu": "123"}}})
    assert marker.mark({p.name: p for p in w.karpy.state.nodepools()}) == {}
    assert asked == []  # the NodePool's counts are not what drift reads
    (listed,) = w.nodeclaims()
    w.cluster.patch("NodePool", name, {"spec": {"template": {"metadata": {"labels": {"team": "b"}}}}})
    drifted = marker.mark({p.name: p for p in w.karpy.state.nodepools()})
    assert drifted == {listed["metadata"]["name"]: "NodePoolDrifted"}
    w.cluster.delete("NodeClaim", listed["metadata"]["name"])
    w.cluster.patch("NodeClaim", listed["metadata"]["name"], {"metadata": {"finalizers": None}})
    marker.mark({p.name: p for p in w.karpy.state.nodepools()})
    assert marker._drift_cache == {}


def test_a_bound_pod_is_re_read_as_a_full_parse_would() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("web"))
    pending = st.pending_pods()[0]
    cluster.patch("Pod", "web", {"spec": {"nodeName": "node-1"}}, "default")
    (bound,) = st.pods_on("node-1")
    stored = cluster.get("Pod", "web", "default")
    assert bound == pod_mod.Pod.from_manifest(stored)
    assert bound.node_name == "node-1" and pending.node_name is None
    assert bound.containers is pending.containers  # the spec models are shared, not parsed again
