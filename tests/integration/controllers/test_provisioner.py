"""The provisioner: batching, NodeClaims from the scheduling core, Nominated / FailedScheduling events."""

from __future__ import annotations

from typing import Any

from karpy import settings
from karpy.api import labels, nodepool
from karpy.cloudprovider.fake import instancetypes
from karpy.controllers import nodeclaim_manifest, provisioner
from karpy.disruption import controller as disruption_controller
from karpy.kube import interface
from karpy.provisioning import results
from karpy.scheduling import requirement, requirements

from . import builders as b

POOL_TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
TOLERATE_POOL = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]


def test_pending_pods_get_one_nodeclaim_built_from_the_nodepool_template_and_a_nominated_event() -> None:
    w = b.make_world(with_kubelet=False)
    pool = w.cluster.create(b.nodepool_manifest(
        labels={"team": "data"}, taints=[POOL_TAINT], startup_taints=[STARTUP_TAINT],
        termination_grace_period="10m"))
    w.cluster.create(b.pending_pod("web-1", tolerations=TOLERATE_POOL))
    w.cluster.create(b.pending_pod("web-2", tolerations=TOLERATE_POOL))
    w.at(1.0)

    (claim,) = w.nodeclaims()
    md = claim["metadata"]
    assert md["generateName"] == "default-" and md["name"].startswith("default-")
    assert md["labels"]["karpenter.sh/nodepool"] == "default"
    assert md["labels"]["team"] == "data"
    assert md["annotations"]["karpenter.sh/nodepool-hash"] == nodepool.NodePool.from_manifest(pool).hash()
    assert md["finalizers"] == ["karpenter.sh/termination"]
    assert md["ownerReferences"][0]["kind"] == "NodePool"
    assert md["ownerReferences"][0]["uid"] == pool["metadata"]["uid"]
    spec = claim["spec"]
    types = b.requirement(claim, labels.INSTANCE_TYPE)
    assert types is not None and types["operator"] == "In"
    assert types["values"][0] == "fake-it-1"  # cheapest type holding 2 x 500m, first
    assert 0 < len(types["values"]) <= 60
    assert spec["resources"]["requests"]["cpu"] == "1"
    assert spec["taints"] == [POOL_TAINT]
    assert spec["startupTaints"] == [STARTUP_TAINT]
    assert spec["nodeClassRef"] == b.NODECLASS_REF
    assert spec["expireAfter"] == "720h"
    assert spec["terminationGracePeriod"] == "10m"

    nominated = w.events("Nominated")
    assert sorted(e["involvedObject"]["name"] for e in nominated) == ["web-1", "web-2"]
    assert {e["message"] for e in nominated} == {f"Pod should schedule on: nodeclaim/{md['name']}"}
    assert w.karpy.metrics.value("karpenter_nodeclaims_created_total", reason="provisioning",
                                 nodepool="default") == 1


def test_the_batch_waits_until_no_new_pod_arrived_for_the_idle_duration() -> None:
    w = b.make_world(with_kubelet=False)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("a"))
    w.at(0.6)
    w.cluster.create(b.pending_pod("b"))
    w.at(1.5)
    assert w.nodeclaims() == []  # idle only since 0.6
    w.at(1.6)
    (claim,) = w.nodeclaims()
    assert claim["spec"]["resources"]["requests"]["pods"] == "2"  # both pods, one batch


def test_updates_of_a_pod_already_in_the_batch_do_not_extend_it() -> None:
    w = b.make_world(with_kubelet=False)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("a"))
    for i in range(1, 4):  # the kube-scheduler marks it again every 0.3 s
        w.at(i * 0.3)
        pod = w.cluster.get("Pod", "a", "default")
        pod["status"]["conditions"][0]["message"] = f"0/{i} nodes are available"
        w.cluster.update_status(pod)
    w.at(1.0)  # idle since the pod's first event, as Karpenter's batcher counts it
    (claim,) = w.nodeclaims()
    assert claim["spec"]["resources"]["requests"]["pods"] == "1"


def test_a_steady_stream_of_pods_is_scheduled_once_the_batch_max_duration_passed() -> None:
    w = b.make_world(with_kubelet=False, settings_=settings.Settings(batch_idle_duration=1.0,
                                                                      batch_max_duration=4.0))
    w.cluster.create(b.nodepool_manifest())
    for i in range(8):  # a new pod every 0.5 s: the batch never goes idle
        w.at(i * 0.5)
        assert w.nodeclaims() == [], f"scheduled too early at {i * 0.5}s"
        w.cluster.create(b.pending_pod(f"p{i}", cpu="100m"))
    w.at(4.0)
    claims = w.nodeclaims()
    assert claims
    assert w.karpy.provisioner.runs == 1
    assert sum(int(c["spec"]["resources"]["requests"]["pods"]) for c in claims) == 8


def test_a_pod_that_fits_nowhere_gets_failed_scheduling_with_the_explanation() -> None:
    w = b.make_world(with_kubelet=False)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("huge", cpu="64"))
    w.at(1.0)
    assert w.nodeclaims() == []
    (event,) = w.events("FailedScheduling", name="huge")
    assert event["type"] == "Warning"
    explanation = w.karpy.provisioner.last_results.errors["default/huge"]  # type: ignore[union-attr]
    assert explanation
    assert event["message"] == f"Failed to schedule pod, {explanation}"


def test_pods_nominated_to_an_in_flight_nodeclaim_do_not_get_a_second_one() -> None:
    w = b.make_world(launch_latency=120.0)
    w.cluster.create(b.nodepool_manifest())
    pod = w.cluster.create(b.pending_pod("web"))
    w.at(1.0)
    (claim,) = w.nodeclaims()
    assert claim["status"]["providerID"]  # launched, its node not registered yet
    # the kube-scheduler marks the pod unschedulable again: a new batch
    pod = w.cluster.get("Pod", "web", "default")
    pod["status"]["conditions"][0]["message"] = "0/0 nodes are available"
    w.cluster.update_status(pod)
    w.at(5.0)
    assert [interface.name_of(c) for c in w.nodeclaims()] == [interface.name_of(claim)]
    (event,) = w.events("Nominated", name="web")
    assert event["count"] == 2
    assert event["message"] == f"Pod should schedule on: nodeclaim/{interface.name_of(claim)}"


def test_a_pod_that_fits_on_a_registered_karpy_node_is_nominated_to_the_claim_and_the_node() -> None:
    w = b.make_world(launch_latency=10.0)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("first", cpu="100m"))
    w.at(20.0)
    (claim,) = w.nodeclaims()
    node_name = claim["status"]["nodeName"]
    w.cluster.create(b.pending_pod("second", cpu="100m"))
    w.at(22.0)
    assert len(w.nodeclaims()) == 1
    (event,) = w.events("Nominated", name="second")
    assert event["message"] == f"Pod should schedule on: nodeclaim/{interface.name_of(claim)}, node/{node_name}"


def test_nodepool_limits_stop_new_nodeclaims() -> None:
    w = b.make_world(with_kubelet=False)
    w.cluster.create(b.nodepool_manifest(limits={"cpu": "1"}))
    w.cluster.create(b.pending_pod("a", cpu="600m"))
    w.at(1.0)
    assert len(w.nodeclaims()) == 1
    w.cluster.create(b.pending_pod("b", cpu="600m"))
    w.at(3.0)
    assert len(w.nodeclaims()) == 1  # the first claim's capacity (1 cpu) used the limit up
    assert w.events("FailedScheduling", name="b")


def _new_claim(min_values: int | None) -> tuple[results.NewNodeClaim, list[str]]:
    types = sorted(instancetypes.benchmark(80), key=lambda t: (t.cheapest_price() or 0.0, t.name))
    names = [t.name for t in types]
    reqs = requirements.Requirements.of(
        requirement.Requirement.new(labels.NODEPOOL, "In", ["default"]),
        requirement.Requirement.new(labels.INSTANCE_TYPE, "In", names, min_values=min_values),
        requirement.Requirement.new("team", "NotIn", ["legacy"]))
    claim = results.NewNodeClaim(
        nodepool="default", requirements=reqs, instance_types=types, pods=[], requests={"cpu": 500},
        daemon_overhead={}, labels={labels.NODEPOOL: "default"}, taints=(), startup_taints=(),
        price=types[0].cheapest_price() or 0.0)
    return claim, names


def test_a_nodeclaim_lists_at_most_60_instance_types_cheapest_first() -> None:
    pool_obj = b.nodepool_manifest()
    pool_obj["metadata"]["uid"] = "pool-uid"
    claim, names = _new_claim(None)
    manifest = nodeclaim_manifest.nodeclaim_manifest(claim, nodepool.NodePool.from_manifest(pool_obj), pool_obj)
    types = b.requirement(manifest, labels.INSTANCE_TYPE)
    assert types is not None and types["values"] == names[:60]
    assert b.requirement(manifest, "team") == {"key": "team", "operator": "NotIn", "values": ["legacy"]}
    assert manifest["metadata"]["ownerReferences"] == [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": "pool-uid",
         "blockOwnerDeletion": True}]


def test_min_values_keeps_every_instance_type_option_and_is_written_to_the_nodeclaim() -> None:
    pool_obj = b.nodepool_manifest()
    pool_obj["metadata"]["uid"] = "pool-uid"
    claim, names = _new_claim(70)
    manifest = nodeclaim_manifest.nodeclaim_manifest(claim, nodepool.NodePool.from_manifest(pool_obj), pool_obj,
                                              ("karpenter.k8s.aws/ec2nodeclass-hash", "123"))
    types = b.requirement(manifest, labels.INSTANCE_TYPE)
    assert types is not None and types["values"] == names and types["minValues"] == 70
    assert manifest["metadata"]["annotations"]["karpenter.k8s.aws/ec2nodeclass-hash"] == "123"


def test_the_node_planned_for_a_pending_pod_is_nominated_and_not_disrupted_while_the_pod_waits() -> None:
    # no kube-scheduler in this world: the pod stays pending on the node launched for it
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(300.0)
    (claim,) = w.nodeclaims()
    name = claim["metadata"]["name"]
    assert name in w.karpy.state.nominated(w.clock.now())
    assert w.karpy.disruption is not None
    obs = w.karpy.disruption.observe(w.clock.now())
    assert obs.why_not.get(claim["status"]["nodeName"]) == disruption_controller.NOMINATED
    assert w.events("Nominated")  # and the pod was told where it goes
    w.cluster.delete("Pod", "web", "default")
    assert w.karpy.state.nominated(w.clock.now()) == set()


def test_pods_left_pending_by_a_failed_nodeclaim_create_are_provisioned_on_the_retry() -> None:
    from karpy.kube import errors as kube_errors

    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    create = w.cluster.create
    failures: list[Exception] = [kube_errors.InternalError("the API server is down")]

    def failing_create(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "NodeClaim" and failures:
            raise failures.pop()
        return create(obj)

    w.cluster.create = failing_create  # type: ignore[method-assign]
    w.cluster.create(b.pending_pod("web"))
    w.at(5.0)
    assert w.nodeclaims() == [] and not failures  # the create failed; no new pod event will come
    w.at(5.0 + provisioner.RETRY_UNSCHEDULABLE + 5.0)
    assert len(w.nodeclaims()) == 1
