"""The simulated kubelet: instances become nodes, bound pods run, terminated instances go away."""

from __future__ import annotations

import re

import pytest

from karpy import clock
from karpy.api import nodeclaim
from karpy.kube import errors

from . import conftest

STARTUP_TAINT = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}
POOL_TAINT = {"key": "dedicated", "value": "payments", "effect": "NoSchedule"}


def test_a_launched_instance_becomes_a_ready_node_after_a_minute_with_the_nodeclaims_labels_taints() -> None:
    w = conftest.make_world(jitter=0.0)
    name = w.kubelet.instance_launched(
        conftest.nodeclaim("default-abcde", taints=[POOL_TAINT], startup_taints=[STARTUP_TAINT]),
        conftest.instance())

    conftest.run_until(w.manager, w.clock, w.t0 + 59.9)
    with pytest.raises(errors.NotFound):
        w.node(name)
    conftest.run_until(w.manager, w.clock, w.t0 + 60)
    node = w.node(name)

    labels = node["metadata"]["labels"]
    assert labels["karpenter.sh/nodepool"] == "default"
    assert labels["example.com/owner"] == "platform"
    assert labels["team"] == "payments"  # a decided requirement
    assert labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    assert labels["kubernetes.io/hostname"] == name
    assert labels["kubernetes.io/arch"] == "amd64"
    assert labels["karpenter.k8s.aws/instance-family"] == "m5"
    assert node["spec"]["providerID"] == "aws:///us-east-1a/i-0123456789abcdef0"
    assert conftest.taint_keys(node) == {("dedicated", "NoSchedule"),
                                         ("node.cilium.io/agent-not-ready", "NoSchedule"),
                                         ("karpenter.sh/unregistered", "NoExecute")}
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "58"}
    assert node["status"]["allocatable"]["cpu"] == "3920m"
    assert conftest.condition(node, "Ready") == "True"
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.")
    assert node["metadata"]["creationTimestamp"] == clock.rfc3339(w.t0 + 60)


def test_registration_time_is_the_launch_latency_plus_seeded_jitter() -> None:
    w = conftest.make_world(seed=3)
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"), conftest.instance())
    conftest.run_until(w.manager, w.clock, w.t0 + 49.99)
    with pytest.raises(errors.NotFound):
        w.node(name)
    conftest.run_until(w.manager, w.clock, w.t0 + 70)
    created = clock.parse_rfc3339(w.node(name)["metadata"]["creationTimestamp"])
    assert w.t0 + 49 <= created <= w.t0 + 70
    assert created != w.t0 + 60  # jitter applied


def test_startup_taints_are_removed_after_the_startup_delay_and_other_taints_stay() -> None:
    w = conftest.make_world(jitter=0.0, startup_taint_delay=5.0)
    name = w.kubelet.instance_launched(
        conftest.nodeclaim("default-abcde", taints=[POOL_TAINT], startup_taints=[STARTUP_TAINT]),
        conftest.instance())
    conftest.run_until(w.manager, w.clock, w.t0 + 64.9)
    assert ("node.cilium.io/agent-not-ready", "NoSchedule") in conftest.taint_keys(w.node(name))
    conftest.run_until(w.manager, w.clock, w.t0 + 65)
    assert conftest.taint_keys(w.node(name)) == {("dedicated", "NoSchedule"),
                                                 ("karpenter.sh/unregistered", "NoExecute")}


def test_a_node_with_a_ready_delay_is_not_ready_and_tainted_until_the_delay_passes() -> None:
    w = conftest.make_world(jitter=0.0, ready_delay=30.0)
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"), conftest.instance())
    conftest.run_until(w.manager, w.clock, w.t0 + 60)
    node = w.node(name)
    assert conftest.condition(node, "Ready") == "False"
    assert ("node.kubernetes.io/not-ready", "NoSchedule") in conftest.taint_keys(node)
    conftest.run_until(w.manager, w.clock, w.t0 + 90)
    node = w.node(name)
    assert conftest.condition(node, "Ready") == "True"
    assert ("node.kubernetes.io/not-ready", "NoSchedule") not in conftest.taint_keys(node)


@pytest.mark.parametrize(("provider_id", "zone", "pattern"), [
    ("aws:///us-east-1a/i-0abc", "us-east-1a", r"^ip-10-\d{1,3}-\d{1,3}-\d{1,3}\.ec2\.internal$"),
    ("aws:///us-west-2b/i-0abc", "us-west-2b",
     r"^ip-10-\d{1,3}-\d{1,3}-\d{1,3}\.us-west-2\.compute\.internal$"),
    ("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/aks-default-abcde",
     "eastus-1", r"^aks-default-abcde$"),
    ("kwok://default-abcde", "zone-a", r"^default-abcde$"),
])
def test_nodes_are_named_the_way_each_cloud_names_them(provider_id: str, zone: str, pattern: str) -> None:
    w = conftest.make_world()
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"),
                                       conftest.instance(provider_id, zone=zone))
    assert re.match(pattern, name), name
    w.run_for(80)
    node = w.node(name)
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name


def test_the_same_seed_gives_the_same_node_names_and_timings() -> None:
    def launch(seed: int) -> list[tuple[str, str]]:
        w = conftest.make_world(seed=seed)
        names = [w.kubelet.instance_launched(conftest.nodeclaim(f"default-{i}"),
                                             conftest.instance(f"aws:///us-east-1a/i-{i}")) for i in range(3)]
        w.run_for(100)
        return [(n, w.node(n)["metadata"]["creationTimestamp"]) for n in names]

    assert launch(11) == launch(11)
    assert launch(11) != launch(12)


def test_an_instance_terminated_before_it_registers_never_becomes_a_node() -> None:
    w = conftest.make_world()
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"), conftest.instance())
    w.run_for(30)
    w.kubelet.instance_terminated(conftest.instance().provider_id)
    w.run_for(100)
    assert w.cluster.list("Node") == []
    assert name not in w.kubelet.pending_launches().values()


def test_a_pod_bound_to_a_ready_node_becomes_running_after_the_start_delay(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.pod("web", node_name="n1"))
    world.run_for(1.9)
    assert conftest.phase(world.cluster.get("Pod", "web", "default")) == "Pending"
    world.run_for(0.1)
    pod = world.cluster.get("Pod", "web", "default")
    assert conftest.phase(pod) == "Running"
    for type_ in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert conftest.condition(pod, type_) == "True"
    assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_an_unbound_pod_stays_pending(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.pod("web"))
    world.run_for(60)
    assert conftest.phase(world.cluster.get("Pod", "web", "default")) == "Pending"


def test_a_pod_bound_to_a_node_that_is_not_ready_starts_once_the_node_is_ready() -> None:
    w = conftest.make_world(jitter=0.0, ready_delay=30.0)
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"), conftest.instance())
    conftest.run_until(w.manager, w.clock, w.t0 + 61)
    w.cluster.create(conftest.pod("web", node_name=name))
    conftest.run_until(w.manager, w.clock, w.t0 + 89)
    assert conftest.phase(w.cluster.get("Pod", "web", "default")) == "Pending"
    conftest.run_until(w.manager, w.clock, w.t0 + 92)
    assert conftest.phase(w.cluster.get("Pod", "web", "default")) == "Running"


def test_a_terminated_instance_fails_its_pods_and_its_node_and_pods_go_once_finalizers_are_removed() -> None:
    w = conftest.make_world(jitter=0.0)
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"), conftest.instance())
    w.run_for(61)
    w.cluster.patch("Node", name, {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    w.cluster.create(conftest.pod("web", node_name=name))
    w.run_for(5)
    assert conftest.phase(w.cluster.get("Pod", "web", "default")) == "Running"

    w.kubelet.instance_terminated(conftest.instance().provider_id)
    w.run_for(1)
    node = w.node(name)
    assert node["metadata"].get("deletionTimestamp")  # the finalizer holds it
    assert conftest.phase(w.cluster.get("Pod", "web", "default")) == "Failed"

    w.cluster.patch("Node", name, {"metadata": {"finalizers": None}})  # karpy's termination controller
    w.run_for(1)
    assert w.cluster.list("Node") == []
    assert w.cluster.list("Pod") == []  # pod garbage collection


def test_a_pre_existing_node_is_created_exactly_as_given(world: conftest.World) -> None:
    given = conftest.node("existing", labels={"pool": "system"}, taints=[POOL_TAINT])
    world.kubelet.add_node(given)
    world.run_for(30)
    node = world.node("existing")
    assert node["metadata"]["labels"] == given["metadata"]["labels"]
    assert node["spec"] == given["spec"]


def test_a_launch_told_as_the_model_registers_the_same_node_as_one_told_as_the_manifest() -> None:
    manifest = conftest.nodeclaim("default-abcde", taints=[POOL_TAINT], startup_taints=[STARTUP_TAINT])
    nodes = []
    for claim in (manifest, nodeclaim.NodeClaim.from_manifest(manifest)):
        w = conftest.make_world(jitter=0.0)
        name = w.kubelet.instance_launched(claim, conftest.instance())
        conftest.run_until(w.manager, w.clock, w.t0 + 60)
        node = w.node(name)
        nodes.append({k: node[k] for k in ("spec", "status")} | {"labels": node["metadata"]["labels"]})
    assert nodes[0] == nodes[1]
