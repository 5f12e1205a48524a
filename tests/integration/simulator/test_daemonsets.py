"""The simulated DaemonSet controller."""

from __future__ import annotations

from typing import Any

from karpy.kube import interface

from . import conftest

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def agent_pods(world: conftest.World, name: str = "agent") -> dict[str, dict[str, Any]]:
    """Node name -> the DaemonSet's pod on it."""
    pods = conftest.owned_by(world.cluster.list("Pod", "kube-system"), "DaemonSet", name)
    out: dict[str, dict[str, Any]] = {}
    for p in pods:
        node = p["spec"]["nodeName"]
        assert node not in out, f"two pods of {name} on {node}"
        out[node] = p
    return out


def test_a_daemonset_gets_a_pod_on_each_new_eligible_node(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    assert set(agent_pods(world)) == {"n1"}

    world.kubelet.add_node(conftest.node("n2"))
    world.kubelet.add_node(conftest.node("n3"))
    world.run_for(1)
    pods = agent_pods(world)
    assert set(pods) == {"n1", "n2", "n3"}
    assert interface.name_of(pods["n2"]).startswith("agent-")
    terms = pods["n2"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]
    status = world.cluster.get("DaemonSet", "agent", "kube-system")["status"]
    assert status["desiredNumberScheduled"] == 3


def test_daemon_pods_become_running_on_their_nodes(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(3)
    assert conftest.phase(agent_pods(world)["n1"]) == "Running"
    assert world.cluster.get("DaemonSet", "agent", "kube-system")["status"]["numberReady"] == 1


def test_a_daemonset_skips_a_node_whose_taint_it_does_not_tolerate(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("plain"))
    world.kubelet.add_node(conftest.node("gpu", taints=[GPU_TAINT]))
    world.cluster.create(conftest.daemonset("agent"))
    world.cluster.create(conftest.daemonset("gpu-plugin", tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    world.run_for(1)
    assert set(agent_pods(world)) == {"plain"}
    assert set(agent_pods(world, "gpu-plugin")) == {"plain", "gpu"}


def test_daemon_pods_tolerate_cordoned_and_not_ready_nodes(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("cordoned", taints=[
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))
    world.kubelet.add_node(conftest.node("not-ready", ready=False, taints=[
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    pods = agent_pods(world)
    assert set(pods) == {"cordoned", "not-ready"}
    keys = {t.get("key") for t in pods["cordoned"]["spec"]["tolerations"]}
    assert "node.kubernetes.io/memory-pressure" in keys


def test_a_node_being_disrupted_gets_no_new_daemon_pod_but_keeps_its_existing_one(
        world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("old"))
    world.kubelet.add_node(conftest.node("new", taints=[DISRUPTED]))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    assert set(agent_pods(world)) == {"old"}

    world.cluster.patch("Node", "old", {"spec": {"taints": [DISRUPTED]}})
    world.run_for(1)
    assert set(agent_pods(world)) == {"old"}


def test_a_node_gaining_an_untolerated_no_execute_taint_loses_its_daemon_pod(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    world.cluster.patch("Node", "n1", {"spec": {"taints": [
        {"key": "example.com/quarantine", "effect": "NoExecute"}]}})
    world.run_for(1)
    assert agent_pods(world) == {}


def test_a_daemonset_follows_its_node_selector_and_required_node_affinity(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("linux-a", labels={"topology.kubernetes.io/zone": "a"}))
    world.kubelet.add_node(conftest.node("linux-b", labels={"topology.kubernetes.io/zone": "b"}))
    world.kubelet.add_node(conftest.node("windows", labels={"kubernetes.io/os": "windows"}))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["b"]}]},
    ]}}}
    world.cluster.create(conftest.daemonset("agent", node_selector={"kubernetes.io/os": "linux"},
                                            affinity=affinity))
    world.run_for(1)
    assert set(agent_pods(world)) == {"linux-a"}


def test_a_daemon_pod_is_deleted_when_its_node_goes(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.kubelet.add_node(conftest.node("n2"))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    world.cluster.delete("Node", "n1")
    world.run_for(1)
    assert set(agent_pods(world)) == {"n2"}


def test_a_deleted_daemon_pod_is_recreated_on_its_node(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    first = interface.name_of(agent_pods(world)["n1"])
    world.cluster.delete("Pod", first, "kube-system")
    world.run_for(1)
    second = agent_pods(world)["n1"]
    assert interface.name_of(second) != first


def test_a_launched_node_gets_daemon_pods_only_once_karpy_removes_the_unregistered_taint() -> None:
    w = conftest.make_world(jitter=0.0)
    w.cluster.create(conftest.daemonset("agent"))
    name = w.kubelet.instance_launched(conftest.nodeclaim("default-abcde"), conftest.instance())
    w.run_for(61)
    assert agent_pods(w) == {}

    node = w.node(name)
    node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t["key"] != "karpenter.sh/unregistered"]
    w.cluster.update(node)  # what karpy's registration does
    w.run_for(3)
    pods = agent_pods(w)
    assert set(pods) == {name}
    assert conftest.phase(pods[name]) == "Running"


def test_a_template_change_replaces_the_daemon_pods(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.daemonset("agent"))
    world.run_for(1)
    first = interface.name_of(agent_pods(world)["n1"])
    world.cluster.patch("DaemonSet", "agent", {"spec": {"template": {"metadata": {
        "labels": {"app": "agent", "version": "2"}}}}}, "kube-system")
    world.run_for(1)
    pod = agent_pods(world)["n1"]
    assert interface.name_of(pod) != first
    assert pod["metadata"]["labels"]["version"] == "2"
