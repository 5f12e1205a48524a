"""The disruption controller's incremental reading of the cluster gives, at every pass, what a
fresh walk over every Node and NodeClaim gives (the example scenarios: scale-out, spot
interruptions, commitments, AKS NAP, with consolidation, drift and expiration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpy.api import labels
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.disruption import (
    candidates,
    changes,
    consolidation,
    drift_marking,
    emptiness,
    node_rows,
    observation,
    validation,
)
from karpy.disruption import controller as disruption
from karpy.kube import interface
from karpy.simulator import engine, scenario

_CANDIDATE = candidates.candidate
EXAMPLES = sorted(p for p in (Path(__file__).parents[3] / "examples").glob("*.yaml") if "whatif" not in p.name)


def plain_check(ctl: disruption.DisruptionController, obs: observation.Observation, *, drift: bool = True) -> None:
    """Assert that ``obs`` (just read by ``ctl``) and what ``ctl`` keeps are what a fresh walk gives;
    ``drift``: also compare drift reasons with a marker without a cache (it asks the cloud again)."""
    observer, table = ctl.observer, ctl.observer.table
    fresh = node_rows.NodeRows(ctl.state, changes.Dirty())
    counted, candidates.candidate = candidates.candidate, _CANDIDATE  # a test may count the controller's calls
    try:
        fresh.refresh(obs.pools, observer._pdbs(), obs.now, observer.last_pod_event)
    finally:
        candidates.candidate = counted
    assert fresh.order == table.order == sorted(n.name for n in ctl.state.nodes())
    assert table.triples == [(r.node, r.claim, r.pods) for r in map(table.rows.__getitem__, table.order)]
    assert list(table.candidates) == sorted(table.candidates)
    # a kept candidate may hold an older object of its NodePool with the same spec (a status write
    # to the NodePool does not make its nodes' verdicts read again)
    for name, c in fresh.candidates.items():
        kept = table.candidates.get(name)
        assert kept is not None, name
        assert (c.node, c.nodeclaim, c.pods) == (kept.node, kept.nodeclaim, kept.pods), name
        assert drift_marking.pool_version(c.nodepool) == drift_marking.pool_version(kept.nodepool), name
    assert list(fresh.candidates) == list(table.candidates)
    assert fresh.why_not == table.why_not
    assert fresh.since == table.since
    assert fresh.total == table.total and fresh.disrupting == table.disrupting
    assert fresh.empty == table.empty and fresh.initializing == table.initializing
    assert {k: (r.report, r.under_after, r.disrupting) for k, r in fresh.rows.items()} == \
        {k: (r.report, r.under_after, r.disrupting) for k, r in table.rows.items()}
    assert [(n.name, c.name if c else None, [p.key for p in pods]) for n, c, pods in obs.nodes] == \
        [(r.node.name, r.claim.name if r.claim else None, [p.key for p in r.pods]) for r in fresh.rows.values()]
    assert list(obs.candidates) == sorted(obs.candidates)
    # what the controller derives from the rows
    plain_under = [c for c in obs.candidates.values()
                   if consolidation.consolidates_underutilized(c.nodepool) and observer.past_consolidate_after(c, obs)]
    assert observer.underutilized(obs) == plain_under
    held = observer.buffers.buffer_nodes() if observer.buffers is not None else set()  # CapacityBuffers' room
    plain_empty = [c for c in obs.candidates.values()
                   if emptiness.emptiness_enabled(c.nodepool) and candidates.is_empty(c.pods)
                   and c.name not in held and c.nodeclaim.name not in held]  # by node or by NodeClaim name
    assert observer.emptiable(obs) == plain_empty
    assert validation.unsettled(obs, ctl.state, ctl.orchestrator, ctl.claims, table) == plain_unsettled(ctl, obs)
    # drift: a marker without a cache computes the same reasons (and so writes nothing)
    if drift:
        _plain_drift(ctl, obs)
    # claims: expirations and launching claims as a walk over every NodeClaim finds them
    now = obs.now
    claims = ctl.state.nodeclaims()
    ats = [c.metadata.creation_timestamp + c.spec.expire_after for c in claims
           if c.spec.expire_after is not None and c.metadata.creation_timestamp is not None]
    assert ctl.claims.next_expiry(now) == min((at for at in ats if at > now), default=None)
    assert ctl.claims.launching() == [c.name for c in claims if c.metadata.deletion_timestamp is None
                                      and not ctl.state.node_name_for_provider_id(c.status.provider_id)]
    # budgets: their status as the disruption controller keeps it
    assert [(b.namespace, b.name, b.disruptions_allowed) for b in observer._pdbs()] == plain_pdbs(ctl)


def plain_unsettled(ctl: disruption.DisruptionController, obs: observation.Observation) -> str | None:
    """Why consolidation should wait, read from cluster state as the snapshot would hold it (its
    in-flight NodeClaims, its nodes' initialized/deleting), with no tracker and no rows."""
    protected = ctl.orchestrator.protected_claims()
    node_names = {n.name for n, _, _ in obs.nodes}
    for claim in ctl.state.nodeclaims():
        if claim.metadata.deletion_timestamp is not None or claim.name in node_names \
                or ctl.state.node_name_for_provider_id(claim.status.provider_id):
            continue
        if claim.name not in protected:
            return f"NodeClaim {claim.name} is launching"
    for n, node_claim, _ in obs.nodes:
        if node_claim is None or node_claim.name in protected:
            continue
        initialized = n.labels.get(labels.INITIALIZED) == "true" or node_claim.is_true(nodeclaim_mod.INITIALIZED)
        if not initialized and not (n.deleting or node_claim.metadata.deletion_timestamp is not None):
            return f"node {n.name} is initializing"
    if obs.nominated and ctl.state.pending_pod_count():
        return "pending pods are nominated to " + ", ".join(sorted(obs.nominated))
    return None


def plain_pdbs(ctl: disruption.DisruptionController) -> list[tuple[str, str, int]]:
    """Each budget with a selector and its ``status.disruptionsAllowed`` as stored (0 when unset)."""
    out: list[tuple[str, str, int]] = []
    for obj in ctl.state.raws("PodDisruptionBudget"):
        if (obj.get("spec") or {}).get("selector") is None:  # selects no pod
            continue
        allowed = int((obj.get("status") or {}).get("disruptionsAllowed") or 0)
        out.append((interface.namespace_of(obj) or "default", interface.name_of(obj), allowed))
    return out


def _plain_drift(ctl: disruption.DisruptionController, obs: observation.Observation) -> None:
    plain_marker = drift_marking.DriftMarker(ctl.cluster, ctl.clock, ctl.state, ctl.cloud, ctl.nodeclass_kinds,
                                             ctl.orchestrator.nodeclass_hash)
    by_claim = plain_marker.mark(obs.pools)
    assert obs.drifted == {name: reason for claim, reason in by_claim.items()
                           for name in ctl.observer.table.claim_nodes.get(claim, ())}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_pass_reads_what_a_fresh_walk_reads(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes = []
    original = disruption.DisruptionController.observe

    def checked(self: disruption.DisruptionController, now: float) -> Any:
        obs = original(self, now)  # checked by the conftest's fixture; drift is compared here
        _plain_drift(self, obs)
        passes.append(now)
        return obs

    monkeypatch.setattr(disruption.DisruptionController, "observe", checked)
    engine.Simulation(scenario.load_text(path.read_text(), source=str(path)), until=1200.0).run()
    assert passes


def _deployment(name: str, namespace: str, replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"deployment": name}},
                     "template": {"metadata": {"labels": {"deployment": name, **labels}},
                                  "spec": {"containers": [{"name": "c", "image": "c", "resources": {
                                      "requests": {"cpu": "700m", "memory": "512Mi"}}}]}}}}


def _pdb(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_budgets_over_pods_grouped_by_labels_allow_what_matching_every_pod_allows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Budgets of every form over two namespaces, replicas of several templates, a bare pod without labels:
    at every pass (the conftest compares them) and with some budget exhausted and some not."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "pdbs"},
         "spec": {"cloud": {"provider": "aws", "region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"]},
                  "settings": {"clusterName": "pdbs"}, "until": "20m", "seed": 3, "steps": [
                      {"at": "6m", "scale": {"kind": "Deployment", "namespace": "shop", "name": "web", "replicas": 2}},
                      {"at": "6m", "scale": {"kind": "Deployment", "namespace": "default", "name": "api",
                                             "replicas": 1}}]}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-pdbs",
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "pdbs"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "pdbs"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
         "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
                  "template": {"spec": {
                      "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                      "requirements": [
                          {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                          {"key": "node.kubernetes.io/instance-type", "operator": "In",
                           "values": ["m5.large", "m5.xlarge"]}]}}}},
        _deployment("web", "shop", 6, {"tier": "front"}),
        _deployment("worker", "shop", 4, {"tier": "back"}),
        _deployment("api", "default", 5, {"tier": "front"}),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "shop"},
         "spec": {"containers": [{"name": "c", "image": "c", "resources": {"requests": {"cpu": "100m"}}}]}},
        _pdb("web", "shop", {"maxUnavailable": 1, "selector": {"matchLabels": {"deployment": "web"}}}),
        _pdb("front", "shop", {"minAvailable": "50%", "selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]}]}}),
        _pdb("everything", "shop", {"maxUnavailable": 0, "selector": {}}),
        _pdb("nothing", "shop", {"maxUnavailable": 1}),
        _pdb("api", "default", {"minAvailable": 3, "selector": {"matchLabels": {"tier": "front"}}}),
    ]
    seen: list[list[tuple[str, str, int]]] = []
    original = disruption.DisruptionController.observe

    def recorded(self: disruption.DisruptionController, now: float) -> Any:
        obs = original(self, now)  # the conftest's fixture compares the budgets with plain_pdbs
        seen.append(plain_pdbs(self))
        return obs

    monkeypatch.setattr(disruption.DisruptionController, "observe", recorded)
    text = "\n---\n".join(json.dumps(d) for d in docs)
    engine.Simulation(scenario.load_text(text, source="pdbs")).run()
    allowed = {(ns, name, n) for budgets in seen for ns, name, n in budgets}
    assert any(n == 0 for _, _, n in allowed) and any(n > 0 for _, _, n in allowed), allowed
    # a budget without a selector selects no pod (policy/v1), so it is no budget of any pod's
    assert {name for _, name, _ in allowed} == {"web", "front", "everything", "api"}
