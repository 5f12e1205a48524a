"""Termination: taint, drain in Karpenter's order, budgets, do-not-disrupt, instance before finalizer."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.cloudprovider import errors as cp_errors
from karpy.controllers import drain
from karpy.kube import errors, interface

from . import builders as b


def _world_with_node(**pool: Any) -> tuple[b.World, str, str]:
    """A world with one initialized karpy node (t = 40 s); returns (world, nodeclaim, node)."""
    w = b.make_world(launch_latency=30.0)
    w.cluster.create(b.nodepool_manifest(**pool))
    w.cluster.create(b.pending_pod("seed", cpu="100m"))
    w.at(40.0)
    (claim,) = w.nodeclaims()
    assert b.condition(claim, "Initialized") == "True"
    w.cluster.delete("Pod", "seed", "default")  # nothing pending: no replacement NodeClaims
    return w, interface.name_of(claim), claim["status"]["nodeName"]


def _gone(w: b.World, kind: str, name: str, namespace: str = "") -> bool:
    try:
        w.cluster.get(kind, name, namespace)
    except errors.NotFound:
        return True
    return False


def test_deleting_a_nodeclaim_taints_the_node_and_evicts_pods_in_karpenters_order() -> None:
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    w.cluster.create(b.running_pod("critical-ds", node, owner=b.daemonset_owner("cni"),
                                   priorityClassName="system-node-critical"))
    w.cluster.create(b.running_pod("critical-app", node, priorityClassName="system-cluster-critical"))
    w.cluster.create(b.running_pod("logs-ds", node, owner=b.daemonset_owner("logs")))
    w.cluster.create(b.running_pod("app", node))
    w.cluster.create(b.running_pod("tolerant", node, tolerations=[
        {"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}]))
    done = b.running_pod("done", node)
    done["status"] = {"phase": "Succeeded"}
    w.cluster.create(done)

    w.cluster.delete("NodeClaim", claim)
    w.run_for(1.0)

    assert w.karpy.termination.evictions == ["default/app", "default/logs-ds", "default/critical-app",
                                             "default/critical-ds"]
    assert {e["involvedObject"]["name"] for e in w.events("Evicted")} == {"app", "logs-ds", "critical-app",
                                                                         "critical-ds"}
    assert "default/tolerant" not in w.karpy.termination.evictions
    assert "default/done" not in w.karpy.termination.evictions
    assert _gone(w, "Node", node) and _gone(w, "NodeClaim", claim)
    assert pid not in w.running_instances()
    m = w.karpy.metrics
    assert m.value("karpenter_nodes_terminated_total", nodepool="default") == 1
    assert m.value("karpenter_nodeclaims_terminated_total", nodepool="default") == 1


def test_the_disrupted_taint_is_put_on_the_node_before_any_eviction() -> None:
    w, claim, node = _world_with_node()
    seen: list[set[tuple[str, str]]] = []

    def on_pod(event: str, obj: dict[str, Any]) -> None:
        if event == "DELETED":
            seen.append(b.taint_keys(w.cluster.get("Node", node)))

    w.cluster.create(b.running_pod("app", node))
    w.cluster.watch("Pod", on_pod)
    w.cluster.delete("NodeClaim", claim)
    w.run_for(1.0)
    assert seen and ("karpenter.sh/disrupted", "NoSchedule") in seen[0]


def test_a_pdb_blocks_the_drain_until_it_allows_the_eviction() -> None:
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    w.cluster.create(b.running_pod("guarded", node, labels={"app": "guarded"}))
    w.cluster.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "guard", "namespace": "default"},
                      "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    w.cluster.delete("NodeClaim", claim)
    w.run_for(30.0)
    assert not _gone(w, "Pod", "guarded", "default")
    assert not _gone(w, "Node", node) and not _gone(w, "NodeClaim", claim)
    assert pid in w.running_instances()
    waiting, *why = sorted(w.events("FailedDraining", name=node), key=lambda e: str(e["message"]))
    assert waiting["message"] == "Failed to drain node, 1 pods are waiting to be evicted"
    assert waiting["count"] >= 5  # retried every ~5 s
    assert why and all(e["message"].startswith("Failed to drain node: evicting pod default/guarded violates a "
                                               "PodDisruptionBudget (") for e in why)
    assert any("default/guard needs 1 healthy pods and has 1 currently" in e["message"] for e in why)

    w.cluster.delete("PodDisruptionBudget", "guard", "default")
    w.run_for(6.0)
    assert _gone(w, "Pod", "guarded", "default")
    assert _gone(w, "Node", node) and _gone(w, "NodeClaim", claim)
    assert pid not in w.running_instances()


def test_do_not_disrupt_pods_are_waited_for_and_deleted_when_the_termination_grace_period_expires() -> None:
    w, claim, node = _world_with_node(termination_grace_period="10m")
    w.cluster.create(b.running_pod("precious", node, annotations={"karpenter.sh/do-not-disrupt": "true"},
                                   terminationGracePeriodSeconds=0))
    w.cluster.create(b.running_pod("app", node))
    deleted_at = w.clock.now()
    w.cluster.delete("NodeClaim", claim)
    w.run_for(1.0)
    assert _gone(w, "Pod", "app", "default")
    (expiring,) = w.events("TerminationGracePeriodExpiring", name=claim)
    assert expiring["message"] == f"All pods will be deleted by {clock.rfc3339(deleted_at + 600)}"
    annotations = w.cluster.get("NodeClaim", claim)["metadata"]["annotations"]
    assert annotations["karpenter.sh/nodeclaim-termination-timestamp"] == clock.rfc3339(deleted_at + 600)

    w.run_until(deleted_at + 599.0)
    assert not _gone(w, "Pod", "precious", "default")
    assert not _gone(w, "Node", node)
    w.run_until(deleted_at + 601.0)
    assert _gone(w, "Pod", "precious", "default")
    (disrupted,) = w.events("Disrupted", name="precious")
    assert "bypasses the PDB" in disrupted["message"]
    assert _gone(w, "Node", node) and _gone(w, "NodeClaim", claim)


def test_the_nodeclaim_finalizer_is_removed_only_after_the_instance_is_deleted() -> None:
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    w.bridge.delete_errors = [cp_errors.CloudProviderError("the cloud API is down", retryable=True)
                              for _ in range(3)]
    w.cluster.delete("NodeClaim", claim)
    w.run_for(15.0)
    stuck = w.cluster.get("NodeClaim", claim)
    assert stuck["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert pid in w.running_instances()
    w.run_for(60.0)
    assert pid not in w.running_instances()
    assert _gone(w, "NodeClaim", claim) and _gone(w, "Node", node)
    assert w.karpy.metrics.value("karpenter_cloudprovider_errors_total", controller="termination",
                                 method="Delete") == 3


def test_deleting_the_node_deletes_its_nodeclaim_and_terminates_the_instance() -> None:
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    w.cluster.delete("Node", node)
    w.run_for(1.0)
    assert _gone(w, "Node", node) and _gone(w, "NodeClaim", claim)
    assert pid not in w.running_instances()


@pytest.mark.parametrize(("priority_class", "daemon", "group"), [
    ("", False, drain.NON_CRITICAL_NON_DAEMON),
    ("", True, drain.NON_CRITICAL_DAEMON),
    ("system-cluster-critical", False, drain.CRITICAL_NON_DAEMON),
    ("system-node-critical", True, drain.CRITICAL_DAEMON),
])
def test_each_pod_falls_into_its_eviction_group(priority_class: str, daemon: bool, group: str) -> None:
    from karpy.api import pod

    spec: dict[str, Any] = {"priorityClassName": priority_class} if priority_class else {}
    manifest = b.running_pod("p", "n", owner=b.daemonset_owner("d") if daemon else None, **spec)
    assert drain.eviction_group(pod.Pod.from_manifest(manifest)) == group
