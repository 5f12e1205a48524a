"""Drift and expiration end to end in the simulator: drifted nodes are replaced, expired ones recycled."""

from __future__ import annotations

from typing import Any

from karpy.api import labels, nodepool
from karpy.disruption import drift_marking
from karpy.kube import interface

from . import test_consolidation as h


def drifted_claims(run: h.Run) -> dict[str, str]:
    out: dict[str, str] = {}
    for claim in run.sim.cluster.list("NodeClaim"):
        for c in (claim.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Drifted" and c.get("status") == "True":
                out[interface.name_of(claim)] = str(c.get("reason"))
    return out


def apply(at: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"at": at, "apply": [obj]}


def test_a_nodepool_template_label_change_drifts_and_replaces_the_node() -> None:
    pool = h.nodepool(("fake-it-3",), labels_={"team": "a"})
    changed = h.nodepool(("fake-it-3",), labels_={"team": "b"})
    run = h.Run(h.build([h.NODECLASS, pool, h.deployment("web", 2, "1000m")], [apply("5m", changed)]))
    run.run_until(290)
    (old,) = [interface.name_of(n) for n in run.nodes()]
    assert run.run_until(400, lambda r: bool(drifted_claims(r)))
    assert drifted_claims(run) == {old: "NodePoolDrifted"}
    run.run_until(1200)
    (new,) = run.nodes()
    assert interface.name_of(new) != old
    assert interface.labels_of(new)["team"] == "b"
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Drift/Replace"]
    assert run.messages("DisruptionLaunching", "NodeClaim") == ["Launching NodeClaim: Drifted"]
    assert run.decisions(decision="replace", reason="drifted", consolidation_type="") == 1
    h.expect_settled(run, {"web": 2})


def test_a_requirement_that_no_longer_admits_the_instance_type_drifts_the_node() -> None:
    pool = h.nodepool(("fake-it-3",), disruption_={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    narrowed = h.nodepool(("fake-it-4",), disruption_={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    run = h.Run(h.build([h.NODECLASS, pool, h.deployment("web", 2, "1000m")], [apply("5m", narrowed)]))
    run.run_until(290)
    (old,) = [interface.name_of(n) for n in run.nodes()]
    assert run.run_until(400, lambda r: bool(drifted_claims(r)))
    assert drifted_claims(run) == {old: "RequirementsDrifted"}
    run.run_until(1200)
    assert run.node_types() == ["fake-it-4"]
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Drift/Replace"]
    h.expect_settled(run, {"web": 2})


def test_a_widened_requirement_that_still_admits_the_node_is_not_drift() -> None:
    pool = h.nodepool(("fake-it-3",), disruption_={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    widened = h.nodepool(("fake-it-3", "fake-it-4"),
                         disruption_={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    run = h.Run(h.build([h.NODECLASS, pool, h.deployment("web", 2, "1000m")], [apply("5m", widened)]))
    run.run_until(290)
    before = [interface.name_of(n) for n in run.nodes()]
    run.run_until(900)
    assert drifted_claims(run) == {}
    assert [interface.name_of(n) for n in run.nodes()] == before
    assert run.messages("DisruptionTerminating") == []


def test_drift_waits_for_its_budget() -> None:
    budget = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never",
              "budgets": [{"nodes": "0", "reasons": ["Drifted"]}]}
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-3",), labels_={"team": "a"}, disruption_=budget),
                         h.deployment("web", 2, "1000m")],
                        [apply("5m", h.nodepool(("fake-it-3",), labels_={"team": "b"}, disruption_=budget))]))
    run.run_until(1200)
    assert len(drifted_claims(run)) == 1
    assert run.messages("DisruptionTerminating") == []
    assert run.messages("DisruptionBlocked", "NodePool") == ["No allowed disruptions due to blocking budget"]


def test_an_expired_node_is_recycled_and_its_pods_run_on_a_new_node() -> None:
    pool = h.nodepool(("fake-it-3",), disruption_={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    pool["spec"]["template"]["spec"]["expireAfter"] = "10m"
    run = h.Run(h.build([h.NODECLASS, pool, h.deployment("web", 2, "1000m")], until="30m"))
    run.run_until(300)
    (old,) = [interface.name_of(n) for n in run.nodes()]
    run.run_until(900)
    names = {interface.name_of(n) for n in run.nodes()}
    assert old not in names and len(names) == 1
    assert {p["spec"]["nodeName"] for p in run.pods("web")} == names
    assert run.ctrl.metrics is not None
    assert run.ctrl.metrics.value("karpenter_nodeclaims_disrupted_total", reason="expired") == 1
    h.expect_settled(run, {"web": 2})


def test_a_stale_hash_version_is_restamped_not_drifted() -> None:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-3",)), h.deployment("web", 1, "1000m")]))
    run.run_until(120)
    (claim,) = run.sim.cluster.list("NodeClaim")
    name = interface.name_of(claim)
    run.sim.cluster.patch("NodeClaim", name, {"metadata": {"annotations": {
        labels.NODEPOOL_HASH: "stale", labels.NODEPOOL_HASH_VERSION: "v1"}}})
    run.run_until(300)
    stamped = interface.annotations_of(run.sim.cluster.get("NodeClaim", name))
    assert stamped[labels.NODEPOOL_HASH] != "stale"
    assert stamped[labels.NODEPOOL_HASH_VERSION] == nodepool.HASH_VERSION == "karpy-v1"
    assert drifted_claims(run) == {}
    assert run.messages("DisruptionTerminating") == []


def _pdb(max_unavailable: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": "web"}}}}


def test_a_drifted_node_held_by_a_budget_is_replaced_once_the_budget_is_relaxed() -> None:
    """Found on the real control plane (tests/realcluster/test_disruption.py): a budget's status moving from 0
    to 1 disruption allowed is a change that starts a disruption pass; Karpenter polls every 10 s."""
    pool = h.nodepool(("fake-it-3",), labels_={"team": "a"})
    changed = h.nodepool(("fake-it-3",), labels_={"team": "b"})
    run = h.Run(h.build([h.NODECLASS, pool, _pdb(0), h.deployment("web", 2, "1000m")],
                        [apply("5m", changed), apply("15m", _pdb(1))]))
    run.run_until(290)
    (old,) = [interface.name_of(n) for n in run.nodes()]
    assert run.run_until(400, lambda r: bool(drifted_claims(r)))
    run.run_until(890)
    assert [interface.name_of(n) for n in run.nodes()] == [old], "the budget allows no disruption yet"
    run.run_until(960)
    names = [interface.name_of(n) for n in run.nodes()]
    assert old not in names and len(names) == 1, names


def _disrupted(run: h.Run) -> set[str]:
    """Nodes carrying the karpenter.sh/disrupted taint (a started command's candidates)."""
    return {interface.name_of(n) for n in run.nodes()
            if any(t.get("key") == "karpenter.sh/disrupted" for t in (n.get("spec") or {}).get("taints") or ())}


def test_drifted_nodes_are_replaced_side_by_side_within_the_budget_not_one_after_another() -> None:
    # six nodes (one pod each, hostname anti-affinity), a budget of two: as Karpenter's loop, which
    # does not wait for its orchestration queue, a second drifted node is replaced while the first
    # one's replacement is launching, and never more than two at once
    budget = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never", "budgets": [{"nodes": "2"}]}
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-3",), labels_={"team": "a"}, disruption_=budget),
                         h.deployment("web", 6, "1000m", spread=True)],
                        [apply("5m", h.nodepool(("fake-it-3",), labels_={"team": "b"}, disruption_=budget))]))
    run.run_until(290)
    assert len(run.nodes()) == 6
    most = 0

    def watch(r: h.Run) -> bool:
        nonlocal most
        most = max(most, len(_disrupted(r)))
        return all(interface.labels_of(n).get("team") == "b" for n in r.nodes()) and r.running("web") == 6

    assert run.run_until(3600, watch)
    assert most == 2
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Drift/Replace"] * 6
    h.expect_settled(run, {"web": 6})


def test_an_image_the_cloud_publishes_with_no_cluster_change_drifts_the_node_at_the_next_recheck_and_back() -> None:
    """The cloud's answer is asked again every DRIFT_RECHECK seconds although nothing in the cluster
    changed: a cached answer must not outlive it (nor a drift the cloud takes back)."""
    held = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never",
            "budgets": [{"nodes": "0", "reasons": ["Drifted"]}]}
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-3",), disruption_=held), h.deployment("web", 2, "1000m")],
                        until="3h"))
    run.run_until(600)
    (old,) = [interface.name_of(n) for n in run.nodes()]
    (claim,) = [interface.name_of(c) for c in run.sim.cluster.list("NodeClaim")]
    image = run.sim.cloud.instances()[0].image_id
    assert drifted_claims(run) == {}
    run.sim.cloud.publish_image("kwok-image-0123456789ab")
    run.run_until(600 + drift_marking.DRIFT_RECHECK + 120)
    assert drifted_claims(run) == {claim: "ImageDrift"}
    run.sim.cloud.publish_image(image)  # the image the node runs is the latest again
    run.run_until(600 + 2 * drift_marking.DRIFT_RECHECK + 120)
    assert drifted_claims(run) == {}
    assert [interface.name_of(n) for n in run.nodes()] == [old]
