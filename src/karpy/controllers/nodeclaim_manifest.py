"""The NodeClaim object the provisioner creates for one of the scheduling core's new claims, and the
NodeClass hash it is stamped with.

* :func:`nodeclaim_manifest` - a ``karpenter.sh/v1`` NodeClaim: ``generateName: <nodepool>-``, labels (a
  concrete value per custom requirement key, the template labels, ``karpenter.sh/nodepool``), the
  template annotations plus the NodePool hash and, when given, the NodeClass hash (each with its
  version), an ownerReference to the NodePool, the ``karpenter.sh/termination`` finalizer, and a spec
  from the claim and the NodePool template: requirements with the instance types cheapest first
  (at most :data:`MAX_INSTANCE_TYPES` unless ``minValues`` needs them all), resource requests without
  karpy's CSI-volume dimensions, taints, startup taints, the NodeClass reference, ``expireAfter`` and
  ``terminationGracePeriod``. The provisioner, static capacity and the disruption orchestrator's
  replacements use it, so every NodeClaim karpy creates has the same form.
* :func:`nodeclass_hash` - the ``(annotation, value)`` of a NodePool's NodeClass hash read from the
  cluster (None without a NodeClass or when it cannot be read).
"""

from __future__ import annotations

import logging
from typing import Any

from karpy.api import duration, quantity
from karpy.api import labels as wk
from karpy.api import nodeclass as nodeclass_mod
from karpy.api import nodepool as nodepool_mod
from karpy.kube import errors as kube_errors
from karpy.kube import interface
from karpy.provisioning import claims, nodelabels, results, volume_limits

log = logging.getLogger("karpy.controllers.provisioner")

MAX_INSTANCE_TYPES = claims.MAX_INSTANCE_TYPES
"""Instance types written into a NodeClaim's requirements (Karpenter's limit), cheapest first."""


def _requirement_terms(claim: results.NewNodeClaim) -> list[dict[str, Any]]:
    """``spec.requirements`` of a new claim: exact terms, instance types cheapest first (<= 60)."""
    out: list[dict[str, Any]] = []
    names = claim.instance_type_names()
    for key in sorted(claim.requirements):
        r = claim.requirements[key]
        first = True
        for k, op, values in r.to_node_selector_requirements():
            vals = list(values)
            if k == wk.INSTANCE_TYPE and op == "In":
                ordered = [n for n in names if r.has(n)]
                vals = ordered + sorted(set(vals) - set(ordered))
                if r.min_values is None:
                    vals = vals[:MAX_INSTANCE_TYPES]
            term: dict[str, Any] = {"key": k, "operator": op}
            if vals:
                term["values"] = vals
            if first and r.min_values is not None:
                term["minValues"] = r.min_values
            first = False
            out.append(term)
    return out


def nodeclaim_manifest(claim: results.NewNodeClaim, pool: nodepool_mod.NodePool, pool_obj: dict[str, Any],
                       nodeclass_hash: tuple[str, str] | None = None, pool_hash: str | None = None
                       ) -> dict[str, Any]:
    """The ``karpenter.sh/v1`` NodeClaim for one of the scheduler's new claims.

    ``generateName: <nodepool>-``; labels are a concrete value per custom requirement key
    (:func:`karpy.provisioning.nodelabels.custom_labels`), the template labels and
    ``karpenter.sh/nodepool``;
    annotations the template annotations plus ``karpenter.sh/nodepool-hash`` (and its version) and,
    when given, the NodeClass hash ``(annotation, value)`` and its version (``pool_hash``: ``pool.hash()``
    when the caller has it already); an ownerReference to the NodePool; the
    ``karpenter.sh/termination`` finalizer; spec from the claim and the NodePool template.
    """
    spec_t = pool.template.spec
    labels = nodelabels.custom_labels(claim.requirements, set().union(*(t.labels for t in claim.instance_types)))
    labels.update(pool.template.labels)
    labels.update(claim.labels)
    labels[wk.NODEPOOL] = pool.name
    annotations = dict(pool.template.annotations)
    annotations[wk.NODEPOOL_HASH] = pool.hash() if pool_hash is None else pool_hash
    annotations[wk.NODEPOOL_HASH_VERSION] = nodepool_mod.HASH_VERSION
    if nodeclass_hash is not None:
        annotations[nodeclass_hash[0]] = nodeclass_hash[1]
        annotations[nodeclass_hash[0] + wk.HASH_VERSION_SUFFIX] = nodeclass_mod.HASH_VERSION
    owner = interface.owner_reference(pool_obj, controller=False)
    owner["blockOwnerDeletion"] = True
    spec: dict[str, Any] = {"requirements": _requirement_terms(claim)}
    if claim.requests:
        spec["resources"] = {"requests": quantity.format_list(volume_limits.without(claim.requests))}
    if claim.taints:
        spec["taints"] = [t.to_dict() for t in claim.taints]
    if claim.startup_taints:
        spec["startupTaints"] = [t.to_dict() for t in claim.startup_taints]
    if spec_t.node_class_ref is not None:
        spec["nodeClassRef"] = spec_t.node_class_ref.to_dict()
    spec["expireAfter"] = duration.format_duration(spec_t.expire_after)
    if spec_t.termination_grace_period is not None:
        spec["terminationGracePeriod"] = duration.format_duration(spec_t.termination_grace_period)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "generateName": f"{pool.name}-",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
            "finalizers": [wk.FINALIZER_TERMINATION],
        },
        "spec": spec,
    }


def nodeclass_hash(cluster: interface.Cluster, pool: nodepool_mod.NodePool) -> tuple[str, str] | None:
    """The NodeClass hash annotation ``(key, value)`` of ``pool``'s NodeClass read from ``cluster``, as a
    NodeClaim of ``pool`` is stamped with it; None without a NodeClass, or one not readable."""
    ref = pool.node_class_ref
    if ref is None:
        return None
    try:
        obj = cluster.get(ref.kind, ref.name)
        if ref.kind == nodeclass_mod.EC2_KIND:
            return (wk.NODECLASS_HASH_AWS, nodeclass_mod.EC2NodeClass.from_manifest(obj).hash())
        if ref.kind == nodeclass_mod.AKS_KIND:
            return (wk.NODECLASS_HASH_AZURE, nodeclass_mod.AKSNodeClass.from_manifest(obj).hash())
    except (kube_errors.KubeError, ValueError) as exc:
        log.debug("provisioner: NodeClass %s of NodePool %s not readable: %s", ref, pool.name, exc)
    return None
