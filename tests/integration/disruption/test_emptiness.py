"""The disruption controller on an in-memory cluster with virtual time: emptiness and expiration."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock as clock_mod
from karpy.api import labels
from karpy.controllers import runtime
from karpy.disruption import candidates
from karpy.disruption import controller as disruption
from karpy.kube import memory


class World:
    def __init__(self, disruption_spec: dict[str, Any] | None = None, expire_after: str = "720h") -> None:
        self.clock = clock_mod.VirtualClock()
        self.cluster = memory.InMemoryCluster(self.clock)
        self.manager = runtime.Manager(self.cluster, self.clock)
        spec = disruption_spec if disruption_spec is not None else {
            "consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}
        self.cluster.create({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"disruption": spec, "template": {"spec": {
                "expireAfter": expire_after, "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}},
        })
        self.controller = disruption.new(self.cluster, self.clock)
        disruption.register(self.manager, self.controller)

    def add_nodepool(self, name: str, disruption_spec: dict[str, Any]) -> None:
        self.cluster.create({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"disruption": disruption_spec, "template": {"spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}},
        })

    def add_node(self, name: str, expire_after: str = "720h", pool: str = "default") -> None:
        self.cluster.create({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {labels.NODEPOOL: pool},
                         "finalizers": [labels.FINALIZER_TERMINATION]},
            "spec": {"expireAfter": expire_after, "requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"nodeName": name, "providerID": f"fake://{name}"},
        })
        self.cluster.create({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {labels.NODEPOOL: pool, labels.INITIALIZED: "true"}},
            "spec": {"providerID": f"fake://{name}"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        })

    def add_pod(self, name: str, node: str, *, annotations: dict[str, str] | None = None,
                owner_kind: str | None = None) -> None:
        md: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations or {}}
        if owner_kind is not None:
            md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner",
                                      "uid": "owner-uid", "controller": True}]
        self.cluster.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "startTime": clock_mod.rfc3339(self.clock.now())},  # the kubelet's
        })

    def run_for(self, seconds: float) -> None:
        end = self.clock.now() + seconds
        while True:
            due = self.manager.next_due()
            if due is None or due > end:
                break
            self.clock.set(max(due, self.clock.now()))
            self.manager.run_due()
        self.clock.set(end)

    def deleting_claims(self) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.cluster.list("NodeClaim")
                      if o["metadata"].get("deletionTimestamp"))

    def finish_termination(self) -> None:
        """What the termination controller would do: drop finalizers, remove the Node."""
        for name in self.deleting_claims():
            self.cluster.patch("NodeClaim", name, {"metadata": {"finalizers": None}})
            self.cluster.delete("Node", name)

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.cluster.list("Event") if e.get("reason") == reason]


def test_an_empty_node_is_disrupted_only_after_consolidate_after() -> None:
    w = World()
    w.add_node("n1")
    w.run_for(25)
    assert w.deleting_claims() == []
    w.run_for(20)
    assert w.deleting_claims() == ["n1"]
    node = w.cluster.get("Node", "n1")
    assert {"key": labels.TAINT_DISRUPTED, "effect": "NoSchedule"} in node["spec"]["taints"]
    messages = {(e["involvedObject"]["kind"], e["message"]) for e in w.events("DisruptionTerminating")}
    assert messages == {("Node", "Disrupting Node: Empty/Delete"), ("NodeClaim", "Disrupting Node: Empty/Delete")}


def test_no_node_is_disrupted_while_a_nodeclaim_is_still_launching() -> None:
    w = World()
    w.add_node("n1")
    w.cluster.create({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "launching", "labels": {labels.NODEPOOL: "default"}},
        "spec": {"requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
    })
    assert not w.controller.state.synced()
    w.run_for(120)
    assert w.deleting_claims() == []  # Karpenter waits for cluster state to sync
    w.cluster.patch_status("NodeClaim", "launching", {"status": {"providerID": "fake://launching"}})
    assert w.controller.state.synced()
    w.run_for(2)
    assert w.deleting_claims() == ["n1"]  # looked at again within a second, n1 empty for long


def test_emptiness_is_timed_from_the_last_pod_leaving_the_node() -> None:
    w = World()
    w.add_node("n1")
    w.add_pod("app", "n1")
    w.run_for(100)
    assert w.deleting_claims() == []
    w.cluster.delete("Pod", "app", "default")
    w.run_for(25)
    assert w.deleting_claims() == []
    w.run_for(15)
    assert w.deleting_claims() == ["n1"]


def test_a_node_with_only_a_daemonset_pod_counts_as_empty() -> None:
    w = World()
    w.add_node("n1")
    w.add_pod("ds", "n1", owner_kind="DaemonSet")
    w.run_for(45)
    assert w.deleting_claims() == ["n1"]


def test_a_node_with_a_do_not_disrupt_pod_is_not_disrupted() -> None:
    w = World()
    w.add_node("n1")
    w.add_pod("job", "n1", annotations={labels.DO_NOT_DISRUPT: "true"})
    w.run_for(300)
    assert w.deleting_claims() == []
    assert [e["message"] for e in w.events("Unconsolidatable") if e["involvedObject"]["kind"] == "Node"] == [
        'pod "default/job" has "karpenter.sh/do-not-disrupt" annotation']


def test_a_node_annotated_do_not_disrupt_is_not_disrupted() -> None:
    w = World()
    w.add_node("n1")
    w.cluster.patch("Node", "n1", {"metadata": {"annotations": {labels.DO_NOT_DISRUPT: "true"}}})
    w.run_for(300)
    assert w.deleting_claims() == []


def test_consolidate_after_never_disables_emptiness() -> None:
    w = World({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    w.add_node("n1")
    w.run_for(3600)
    assert w.deleting_claims() == []


def test_a_budget_of_three_lets_three_of_six_empty_nodes_go_at_once() -> None:
    w = World({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
               "budgets": [{"nodes": "3"}]})
    for i in range(6):
        w.add_node(f"n{i}")
    w.run_for(60)
    first = w.deleting_claims()
    assert len(first) == 3
    assert w.events("DisruptionBlocked")
    w.finish_termination()
    w.run_for(15)
    second = w.deleting_claims()
    assert len(second) == 3
    assert not set(first) & set(second)


def test_a_scheduled_budget_blocks_only_inside_its_window() -> None:
    w = World({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s",
               "budgets": [{"nodes": "0", "schedule": "@daily", "duration": "1h"}]})
    w.add_node("n1")  # the virtual clock starts at midnight UTC: inside the window
    w.run_for(3500)
    assert w.deleting_claims() == []
    w.run_for(200)
    assert w.deleting_claims() == ["n1"]


def test_an_expired_nodeclaim_is_deleted_even_when_it_is_not_empty() -> None:
    w = World({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    w.add_node("old", expire_after="1h")
    w.add_node("young")
    w.add_pod("job", "old", annotations={labels.DO_NOT_DISRUPT: "true"})
    w.run_for(3590)
    assert w.deleting_claims() == []
    w.run_for(20)
    assert w.deleting_claims() == ["old"]


def test_budgets_are_per_nodepool_a_frozen_pool_keeps_its_empty_nodes_while_another_pool_drains() -> None:
    w = World()
    w.add_nodepool("frozen", {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
                              "budgets": [{"nodes": "0"}]})
    for i in range(3):
        w.add_node(f"d{i}")
        w.add_node(f"f{i}", pool="frozen")
    for _ in range(6):
        w.run_for(15)
        w.finish_termination()
    remaining = sorted(o["metadata"]["name"] for o in w.cluster.list("NodeClaim"))
    assert remaining == ["f0", "f1", "f2"]
    assert any(e["involvedObject"]["name"] == "frozen" for e in w.events("DisruptionBlocked"))


def test_a_candidate_verdict_is_computed_again_only_for_the_node_whose_pods_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = World()
    for name in ("n1", "n2"):
        w.add_node(name)
    asked: list[str] = []
    real = candidates.candidate

    def counting(n: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(n.name)
        return real(n, *args, **kwargs)

    monkeypatch.setattr(candidates, "candidate", counting)
    w.controller.observe(w.clock.now())
    assert asked == ["n1", "n2"]
    w.controller.observe(w.clock.now())
    assert asked == ["n1", "n2"]  # nothing changed: the verdicts hold
    w.add_pod("job", "n2", annotations={labels.DO_NOT_DISRUPT: "true"})
    obs = w.controller.observe(w.clock.now())
    assert asked == ["n1", "n2", "n2"]
    assert sorted(obs.candidates) == ["n1"]
    assert obs.why_not["n2"] == 'pod "default/job" has "karpenter.sh/do-not-disrupt" annotation'


def test_a_do_not_disrupt_duration_is_looked_at_again_every_pass() -> None:
    w = World()
    w.add_node("n1")
    w.add_pod("job", "n1", annotations={labels.DO_NOT_DISRUPT: "1m"})
    assert "n1" not in w.controller.observe(w.clock.now()).candidates
    w.clock.set(w.clock.now() + 61)
    assert "n1" in w.controller.observe(w.clock.now()).candidates  # nothing changed but the time


def test_consolidation_waits_for_a_launching_nodeclaim_without_building_its_snapshot() -> None:
    w = World({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    w.add_node("n1")
    w.add_pod("web", "n1")
    w.cluster.create({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "c2", "labels": {labels.NODEPOOL: "default"}},
        "spec": {"requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": "fake://c2"},  # launched, its Node not registered yet
    })
    obs = w.controller.observe(w.clock.now())
    assert "n1" in obs.candidates
    assert w.controller.unsettled(obs) == "NodeClaim c2 is launching"
    assert w.controller.consolidate(obs) is None
    assert obs.snapshot is None  # decided from cluster state
    w.cluster.create({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "c2", "labels": {labels.NODEPOOL: "default"}},
        "spec": {"providerID": "fake://c2"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })
    assert w.controller.unsettled(w.controller.observe(w.clock.now())) == "node c2 is initializing"


def test_a_balanced_pools_empty_node_is_deleted_by_emptiness_as_for_every_policy() -> None:
    """Karpenter's disruption controller: "Delete empty nodes across all consolidation policies
    (WhenEmpty, WhenEmptyOrUnderutilized, Balanced)"; the busy node's pod has nowhere else to go."""
    w = World({"consolidationPolicy": "Balanced", "consolidateAfter": "30s"})
    w.add_node("empty")
    w.add_node("busy")
    w.add_pod("app", "busy", owner_kind="ReplicaSet")
    w.run_for(120)
    assert w.deleting_claims() == ["empty"]
