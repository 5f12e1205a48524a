"""Consolidation end to end: karpy's controllers in the simulator (virtual time, benchmark catalog).

The benchmark catalog's ``fake-it-<i>`` has ``i+1`` vCPU (``i+1`` * 1000m - 100m allocatable) and
its price is linear in size, so only fewer or smaller nodes save money. Each test builds a
scenario (NodePool, Deployments, scale steps) and drives :class:`Run`, a thin driver over
:class:`karpy.simulator.engine.Simulation` that can stop at any moment to look or intervene.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from karpy.api import labels
from karpy.disruption import controller as disruption
from karpy.kube import interface
from karpy.simulator import engine, scenario

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-test",
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}]},
}


def nodepool(types: Sequence[str], *, disruption_: Mapping[str, Any] | None = None, name: str = "default",
             labels_: Mapping[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {"key": labels.INSTANCE_TYPE, "operator": "In", "values": list(types)},
            {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ]}}
    if labels_:
        template["metadata"] = {"labels": dict(labels_)}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": template, "disruption": dict(disruption_ or {
                "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})}}


def deployment(name: str, replicas: int, cpu: str, *, annotations: Mapping[str, str] | None = None,
               spread: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app:1",
                                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if spread:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": labels.HOSTNAME}]}}
    meta: dict[str, Any] = {"labels": {"app": name}}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": meta, "spec": spec}}}


def scale(at: str, name: str, replicas: int) -> dict[str, Any]:
    return {"at": at, "scale": {"kind": "Deployment", "namespace": "default", "name": name, "replicas": replicas}}


def build(objects: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]] = (), *,
          until: str = "60m", settings: Mapping[str, Any] | None = None, provider: str = "fake") -> scenario.Scenario:
    doc = {"apiVersion": scenario.API_VERSION, "kind": scenario.KIND, "metadata": {"name": "test"},
           "spec": {"cloud": {"provider": provider}, "until": until, "seed": 1, "launchLatency": "30s",
                    "settings": dict(settings or {}), "steps": list(steps)}}
    return scenario.load_text(yaml.safe_dump_all([doc, *objects], sort_keys=False))


class Run:
    """A simulation driven step by step (the engine's loop, with hooks)."""

    def __init__(self, scn: scenario.Scenario) -> None:
        self.sim = engine.Simulation(scn, sample_interval=3600)
        self.sim.wire()
        self.steps = list(scn.steps)
        self.start = self.sim.start
        ctrl = disruption.registered(self.sim.manager)
        assert ctrl is not None
        self.ctrl = ctrl

    @property
    def t(self) -> float:
        return self.sim.clock.now() - self.start

    def run_until(self, t: float, stop: Callable[[Run], bool] | None = None) -> bool:
        """Run to ``t`` seconds after the start; True when ``stop`` said so first."""
        end = self.start + t
        while True:
            now = self.sim.clock.now()
            nxt = end
            due = self.sim.manager.next_due()
            if due is not None:
                nxt = min(nxt, due)
            if self.steps:
                nxt = min(nxt, self.start + self.steps[0].at)
            reclaim = self.sim.bridge.next_reclaim()
            if reclaim is not None:
                nxt = min(nxt, reclaim)
            if nxt > now:
                self.sim.clock.set(nxt)
            while self.steps and self.start + self.steps[0].at <= self.sim.clock.now():
                self.sim._run_step(self.steps.pop(0))
            self.sim.bridge.settle()
            self.sim.manager.run_due()
            self.sim.bridge.settle()
            if stop is not None and stop(self):
                return True
            if self.sim.clock.now() >= end:
                return False

    # ----------------------------------------------------------------------------------- reading

    def nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.sim.cluster.list("Node") if interface.labels_of(n).get(labels.NODEPOOL)]

    def node_types(self) -> list[str]:
        return sorted(interface.labels_of(n).get(labels.INSTANCE_TYPE, "") for n in self.nodes())

    def pods(self, app: str) -> list[dict[str, Any]]:
        return [p for p in self.sim.cluster.list("Pod", "default") if interface.labels_of(p).get("app") == app]

    def running(self, app: str) -> int:
        return sum(1 for p in self.pods(app) if (p.get("status") or {}).get("phase") == "Running")

    def pending(self) -> int:
        return sum(1 for p in self.sim.cluster.list("Pod")
                   if not (p.get("spec") or {}).get("nodeName") and not interface.is_terminating(p))

    def events(self, reason: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.sim.cluster.list("Event") if e.get("reason") == reason
                and (kind is None or e["involvedObject"].get("kind") == kind)]

    def messages(self, reason: str, kind: str = "Node") -> list[str]:
        return sorted(str(e["message"]) for e in self.events(reason, kind))

    def decisions(self, **labels_: str) -> float:
        return self.ctrl.metrics.value("karpenter_voluntary_disruption_decisions_total", **labels_) \
            if self.ctrl.metrics is not None else 0.0


def expect_settled(run: Run, apps: Mapping[str, int]) -> None:
    """Every app has its replicas running and nothing is pending."""
    for app, count in apps.items():
        assert run.running(app) == count, (app, run.running(app))
    assert run.pending() == 0


TWO_TYPES = ("fake-it-1", "fake-it-3")  # 2 vCPU (1900m) and 4 vCPU (3900m)


def test_a_node_whose_pods_fit_elsewhere_is_deleted() -> None:
    run = Run(build([NODECLASS, nodepool(TWO_TYPES), deployment("a", 3, "1000m"), deployment("b", 0, "1000m")],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1)]))
    run.run_until(290)
    assert run.node_types() == ["fake-it-3", "fake-it-3"]
    run.run_until(900)
    assert run.node_types() == ["fake-it-3"]
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Consolidation/Delete"]
    assert run.decisions(decision="delete", reason="underutilized", consolidation_type="single") == 1
    expect_settled(run, {"a": 1, "b": 1})


def test_an_oversized_node_is_replaced_by_a_cheaper_one_first_then_deleted() -> None:
    run = Run(build([NODECLASS, nodepool(("fake-it-2", "fake-it-6")), deployment("web", 6, "1000m")],
                    [scale("5m", "web", 2)]))
    run.run_until(290)
    assert run.node_types() == ["fake-it-6"]
    run.run_until(900)
    assert run.node_types() == ["fake-it-2"]
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Consolidation/Replace"]
    assert run.messages("DisruptionLaunching", "NodeClaim") == ["Launching NodeClaim: Underutilized"]
    assert run.messages("DisruptionWaitingReadiness", "NodeClaim") == ["Waiting on readiness to continue disruption"]
    assert run.decisions(decision="replace", reason="underutilized") == 1
    expect_settled(run, {"web": 2})


def test_three_half_empty_nodes_are_merged_into_one() -> None:
    pool = nodepool(TWO_TYPES, disruption_={"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                            "consolidateAfter": "60s", "budgets": [{"nodes": "100%"}]})
    run = Run(build([NODECLASS, pool] + [deployment(x, 0, "900m") for x in "abc"],
                    [scale("0s", "a", 4), scale("2m", "b", 4), scale("4m", "c", 4),
                     scale("7m", "a", 1), scale("7m", "b", 1), scale("7m", "c", 1)]))
    run.run_until(410)
    assert run.node_types() == ["fake-it-3"] * 3
    run.run_until(1200)
    assert run.node_types() == ["fake-it-3"]
    assert run.decisions(consolidation_type="multi") == 1
    expect_settled(run, {"a": 1, "b": 1, "c": 1})


def test_two_nodes_are_not_merged_into_one_that_costs_the_same() -> None:
    run = Run(build([NODECLASS, nodepool(("fake-it-3", "fake-it-7")), deployment("a", 0, "2000m"),
                     deployment("b", 0, "2000m")],
                    [scale("0s", "a", 1), scale("2m", "b", 1)]))
    run.run_until(1200)
    assert run.node_types() == ["fake-it-3", "fake-it-3"]
    assert run.decisions() == 0
    assert any(m.startswith("Can't replace with a cheaper node") for m in run.messages("Unconsolidatable"))


def test_no_consolidation_leaves_a_running_pod_pending() -> None:
    run = Run(build([NODECLASS, nodepool(("fake-it-3",)), deployment("a", 3, "1200m", spread=True)],
                    [scale("5m", "a", 2)]))
    run.run_until(1200)
    assert run.node_types() == ["fake-it-3"] * 2  # one per pod: anti-affinity forbids sharing
    assert run.decisions(reason="underutilized") == 0
    expect_settled(run, {"a": 2})


def test_a_do_not_disrupt_pod_keeps_its_node() -> None:
    run = Run(build([NODECLASS, nodepool(TWO_TYPES), deployment("a", 3, "1000m"),
                     deployment("b", 0, "1000m", annotations={labels.DO_NOT_DISRUPT: "true"})],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1)]))
    run.run_until(290)
    protected = {n["metadata"]["name"] for n in run.nodes()
                 if any(p["spec"].get("nodeName") == n["metadata"]["name"] for p in run.pods("b"))}
    run.run_until(1200)
    assert protected <= {n["metadata"]["name"] for n in run.nodes()}
    assert 'pod "default/' in " ".join(run.messages("Unconsolidatable"))


def test_a_pdb_that_allows_no_eviction_blocks_consolidation() -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "a", "namespace": "default"},
           "spec": {"maxUnavailable": 0, "selector": {"matchExpressions": [
               {"key": "app", "operator": "In", "values": ["a", "b"]}]}}}
    run = Run(build([NODECLASS, nodepool(TWO_TYPES), pdb, deployment("a", 3, "1000m"), deployment("b", 0, "1000m")],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1)]))
    run.run_until(1200)
    assert len(run.nodes()) == 2
    assert run.decisions(reason="underutilized") == 0
    assert 'pdb "default/a" prevents pod evictions' in run.messages("Unconsolidatable")


def test_a_budget_of_zero_for_underutilized_blocks_consolidation_but_not_emptiness() -> None:
    pool = nodepool(TWO_TYPES, disruption_={"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                            "consolidateAfter": "0s",
                                            "budgets": [{"nodes": "0", "reasons": ["Underutilized"]}]})
    run = Run(build([NODECLASS, pool, deployment("a", 3, "1000m"), deployment("b", 0, "1000m")],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1), scale("20m", "a", 0)]))
    run.run_until(1190)
    assert len(run.nodes()) == 2
    assert run.decisions() == 0
    run.run_until(1500)
    assert len(run.nodes()) == 1
    # an empty node of a WhenEmptyOrUnderutilized pool is reported as consolidation
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Consolidation/Delete"]


def test_a_command_is_dropped_when_a_pod_lands_on_the_candidate_during_validation() -> None:
    pool = nodepool(TWO_TYPES, disruption_={"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                            "consolidateAfter": "30s"})
    run = Run(build([NODECLASS, pool, deployment("a", 3, "1000m"), deployment("b", 0, "1000m")],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1)]))
    assert run.run_until(900, lambda r: r.ctrl.pending is not None)
    candidate = run.ctrl.pending.command.candidates[0].name if run.ctrl.pending else ""
    run.sim.cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default",
                                                                             "labels": {"app": "late"}},
                            "spec": {"nodeName": candidate, "containers": [{"name": "c", "image": "c"}]},
                            "status": {"phase": "Running"}})
    run.run_until(run.t + 16)
    assert [why for _, _, why in run.ctrl.dropped] == [f"node {candidate} had a pod event within consolidateAfter"]
    assert run.messages("DisruptionTerminating") == []
    assert candidate in {n["metadata"]["name"] for n in run.nodes()}
    assert not any(t.get("key") == labels.TAINT_DISRUPTED
                   for t in run.sim.cluster.get("Node", candidate)["spec"].get("taints") or [])


def test_a_replacement_that_never_initializes_is_deleted_and_the_candidate_untainted() -> None:
    run = Run(build([NODECLASS, nodepool(("fake-it-2", "fake-it-6")), deployment("web", 6, "1000m")],
                    [scale("5m", "web", 2)]))
    run.run_until(290)
    (old,) = [n["metadata"]["name"] for n in run.nodes()]
    assert run.run_until(900, lambda r: bool(r.ctrl.orchestrator.entries))
    (entry,) = run.ctrl.orchestrator.entries
    (replacement,) = entry.replacements
    assert run.sim.cluster.get("Node", old)["spec"]["taints"][-1]["key"] == labels.TAINT_DISRUPTED
    run.sim.cluster.delete("NodeClaim", replacement)  # e.g. the launch failed
    run.run_until(run.t + 10)
    assert run.ctrl.orchestrator.entries == []
    (failure,) = run.ctrl.orchestrator.history.failed
    assert failure[1].startswith(f"replacement NodeClaim {replacement} ")
    assert not any(t.get("key") == labels.TAINT_DISRUPTED
                   for t in run.sim.cluster.get("Node", old)["spec"].get("taints") or [])
    assert run.messages("DisruptionTerminating") == []
    expect_settled(run, {"web": 2})


def test_many_to_many_repacks_when_no_single_or_multi_node_command_exists() -> None:
    # three 4-vCPU nodes, each running two 1.6-core pods: no node's pods fit elsewhere, no 4-vCPU
    # node is cheaper to replace, two or three of them fit no single allowed type; but the six pods
    # re-pack onto two 5-vCPU nodes (10 vCPU instead of 12)
    pool = nodepool(("fake-it-2", "fake-it-3", "fake-it-4"), disruption_={
        "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s", "budgets": [{"nodes": "100%"}]})
    run = Run(build([NODECLASS, pool] + [deployment(x, 0, "1600m") for x in "abc"],
                    [scale("0s", "a", 2), scale("2m", "b", 2), scale("4m", "c", 2)]))
    run.run_until(330)
    assert run.node_types() == ["fake-it-3"] * 3
    run.run_until(1200)
    assert run.node_types() == ["fake-it-4", "fake-it-4"]
    assert run.decisions(decision="replace", consolidation_type="many") == 1
    assert run.decisions(consolidation_type="multi") == run.decisions(consolidation_type="single") == 0
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Consolidation/Replace"] * 3
    expect_settled(run, {"a": 2, "b": 2, "c": 2})


def test_the_default_budget_of_ten_percent_disrupts_one_of_three_nodes_at_a_time() -> None:
    pool = nodepool(TWO_TYPES, disruption_={"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                            "consolidateAfter": "60s"})
    run = Run(build([NODECLASS, pool] + [deployment(x, 0, "900m") for x in "abc"],
                    [scale("0s", "a", 4), scale("2m", "b", 4), scale("4m", "c", 4),
                     scale("7m", "a", 1), scale("7m", "b", 1), scale("7m", "c", 1)]))
    run.run_until(1200)
    assert run.node_types() == ["fake-it-3"]
    assert run.decisions(decision="delete", consolidation_type="single") == 2
    assert run.decisions(consolidation_type="multi") == 0
    expect_settled(run, {"a": 1, "b": 1, "c": 1})


def test_consolidation_decisions_are_counted_with_karpenters_labels() -> None:
    run = Run(build([NODECLASS, nodepool(TWO_TYPES), deployment("a", 3, "1000m"), deployment("b", 0, "1000m")],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1)]))
    run.run_until(900)
    assert run.decisions(decision="delete", reason="underutilized", consolidation_type="single") == 1
    assert run.ctrl.metrics is not None
    assert run.ctrl.metrics.value("karpenter_nodeclaims_disrupted_total", reason="underutilized") == 1
    assert run.ctrl.metrics.value("karpenter_voluntary_disruption_eligible_nodes", reason="underutilized") == 1
