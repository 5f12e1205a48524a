"""Taking over a cluster Karpenter ran, and NodeClass changes: drift decisions without churn, promptly.

A NodeClaim Karpenter made carries Karpenter's hashes and hash versions (``v3`` for the NodePool,
``v4`` for the EC2NodeClass), which karpy cannot reproduce: karpy re-stamps them with its own
(``karpy-v1``) instead of taking every node for drifted. A NodeClass change is drift karpy must
see at its next pass (the disruption controller watches NodeClasses), not at the periodic re-check.
"""

from __future__ import annotations

import copy
from typing import Any

from karpy.api import labels, nodeclass, nodepool
from karpy.disruption import controller as disruption
from karpy.kube import errors as kube_errors
from karpy.kube import interface

from . import test_consolidation as h
from .test_drift_and_expiration import drifted_claims

KARPENTER_STAMPS = {
    labels.NODEPOOL_HASH: "6821555240504101244", labels.NODEPOOL_HASH_VERSION: "v3",
    labels.NODECLASS_HASH_AWS: "15616957348189460505", labels.NODECLASS_HASH_VERSION_AWS: "v4",
}
"""What Karpenter v1 writes on its NodeClaims (and, through registration, on their Nodes)."""

QUIET = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}


def started() -> tuple[h.Run, str]:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-3",), disruption_=QUIET),
                         h.deployment("web", 2, "1000m")]))
    run.run_until(290)
    (claim,) = run.sim.cluster.list("NodeClaim")
    return run, interface.name_of(claim)


def test_a_nodeclaim_and_node_karpenter_made_are_restamped_and_not_drifted() -> None:
    run, name = started()
    (node_obj,) = run.nodes()
    node_name = interface.name_of(node_obj)
    karpys = interface.annotations_of(run.sim.cluster.get("NodeClaim", name))
    run.sim.cluster.patch("NodeClaim", name, {"metadata": {"annotations": dict(KARPENTER_STAMPS)}})
    run.sim.cluster.patch("Node", node_name, {"metadata": {"annotations": dict(KARPENTER_STAMPS)}})
    run.run_until(1500)
    stamped = interface.annotations_of(run.sim.cluster.get("NodeClaim", name))
    assert stamped[labels.NODEPOOL_HASH_VERSION] == nodepool.HASH_VERSION == "karpy-v1"
    assert stamped[labels.NODECLASS_HASH_VERSION_AWS] == nodeclass.HASH_VERSION == "karpy-v1"
    assert stamped[labels.NODEPOOL_HASH] == karpys[labels.NODEPOOL_HASH] != KARPENTER_STAMPS[labels.NODEPOOL_HASH]
    assert stamped[labels.NODECLASS_HASH_AWS] == karpys[labels.NODECLASS_HASH_AWS]
    assert drifted_claims(run) == {}
    assert [interface.name_of(n) for n in run.nodes()] == [node_name]
    assert run.messages("DisruptionTerminating") == []


def test_karpys_own_claims_carry_karpys_hash_versions_from_launch() -> None:
    run, name = started()
    stamped = interface.annotations_of(run.sim.cluster.get("NodeClaim", name))
    assert stamped[labels.NODEPOOL_HASH_VERSION] == "karpy-v1"
    assert stamped[labels.NODECLASS_HASH_VERSION_AWS] == "karpy-v1"


def test_a_claim_whose_hash_changed_under_karpys_version_is_still_drifted() -> None:
    run, name = started()
    run.sim.cluster.patch("NodeClaim", name, {"metadata": {"annotations": {labels.NODEPOOL_HASH: "1"}}})
    assert run.run_until(400, lambda r: bool(drifted_claims(r)))
    assert drifted_claims(run) == {name: "NodePoolDrifted"}


def changed_nodeclass(run: h.Run) -> dict[str, Any]:
    obj = copy.deepcopy(run.sim.cluster.get(nodeclass.EC2_KIND, "default"))
    obj["spec"]["tags"] = {"team": "payments"}
    return obj


def test_a_nodeclass_change_is_seen_as_drift_within_seconds() -> None:
    run, name = started()
    run.run_until(600)  # the disruption loop is quiet: nothing it watches changes
    assert drifted_claims(run) == {}
    changed_at = run.t
    run.sim.cluster.update(changed_nodeclass(run))
    assert run.run_until(changed_at + 60, lambda r: bool(drifted_claims(r)))
    assert run.t - changed_at <= disruption.INTERVAL + 1
    assert drifted_claims(run) == {name: "NodeClassDrift"}


def test_the_disruption_controller_watches_both_nodeclass_kinds() -> None:
    run, _ = started()
    watched = {kind for kind, _ in run.ctrl.controller().watches}
    assert {nodeclass.EC2_KIND, nodeclass.AKS_KIND} <= watched


class _WithoutAKSNodeClass:
    """The cluster of an EKS install that kept Karpenter's CRDs: no AKSNodeClass kind is served."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster

    def list(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        if kind == nodeclass.AKS_KIND:
            raise kube_errors.NotFound("the server could not find the requested resource", kind=kind)
        return self._cluster.list(kind, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def test_drift_is_still_marked_when_a_nodeclass_kind_is_not_served() -> None:
    run, name = started()
    run.ctrl.cluster = _WithoutAKSNodeClass(run.ctrl.cluster)
    run.sim.cluster.patch("NodeClaim", name, {"metadata": {"annotations": {labels.NODEPOOL_HASH: "1"}}})
    assert run.run_until(400, lambda r: bool(drifted_claims(r)))
    assert drifted_claims(run) == {name: "NodePoolDrifted"}


def test_the_watched_nodeclass_kinds_can_be_narrowed_to_the_clouds_own() -> None:
    run, _ = started()
    only_aws = disruption.DisruptionController(run.sim.cluster, run.sim.clock, cluster_state=run.ctrl.state,
                                               nodeclass_kinds=(nodeclass.EC2_KIND,))
    watched = {kind for kind, _ in only_aws.controller().watches}
    assert nodeclass.EC2_KIND in watched and nodeclass.AKS_KIND not in watched
