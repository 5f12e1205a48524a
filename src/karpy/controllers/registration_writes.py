"""The writes of a NodeClaim's registration and initialization, as ops the lifecycle may run off its loop.

:mod:`karpy.controllers.lifecycle` decides on its loop thread that a NodeClaim registers (its Node
appeared and may be adopted) or initializes (its Node is ready); the writes that follow run through
the executor seam (:mod:`karpy.controllers.cloudcalls`): inline in ``karpy simulate``, in the same order
as before, on the pool in a real cluster. A caller may rely on:

* :func:`register` updates the Node once (:func:`adopted`: the NodeClaim's labels and annotations,
  ``karpenter.sh/registered=true``, the termination finalizer, an ownerReference to the NodeClaim,
  the unregistered taint replaced by the NodeClaim's taints and startup taints), redone on a fresh
  read after a Conflict, then writes the NodeClaim's ``status.nodeName`` and ``Registered=True``;
* :func:`initialize` labels the Node ``karpenter.sh/initialized=true`` when ``label`` is set, then
  writes ``Initialized=True`` (``Ready`` follows);
* both use only the cluster, the clock and the objects read on the caller's thread before the call,
  never the watch-fed cache, and return the NodeClaim as stored; errors propagate with their
  ``retryable``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.controllers import claim_status
from karpy.kube import errors as kube_errors
from karpy.kube import interface


def _same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("key") == b.get("key") and (a.get("effect") or "NoSchedule") == (b.get("effect") or "NoSchedule")


def adopted(node: dict[str, Any], claim: nodeclaim_mod.NodeClaim, claim_obj: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` (a private top level; its nested dicts are not changed) as :func:`register` writes it.

    The NodeClaim's annotations (its NodePool's template annotations, such as
    ``karpenter.sh/do-not-disrupt``, plus the hash annotations) win over the Node's, as
    Karpenter's registration assigns them."""
    node["metadata"] = meta = dict(node.get("metadata") or {})
    claim_annotations = interface.annotations_of(claim_obj)
    if claim_annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **claim_annotations}
    node_labels = dict(meta.get("labels") or {})
    node_labels.update(claim.labels)
    node_labels[wk.REGISTERED] = "true"
    meta["labels"] = node_labels
    if not interface.is_terminating(node):
        finalizers = list(meta.get("finalizers") or ())
        if wk.FINALIZER_TERMINATION not in finalizers:
            finalizers.append(wk.FINALIZER_TERMINATION)
        meta["finalizers"] = finalizers
    refs = list(meta.get("ownerReferences") or ())
    uid = interface.uid_of(claim_obj)
    if uid and not any(r.get("uid") == uid for r in refs):
        ref = interface.owner_reference(dict(claim_obj), controller=False)
        ref["blockOwnerDeletion"] = True
        refs.append(ref)
    meta["ownerReferences"] = refs
    node["spec"] = spec = dict(node.get("spec") or {})
    taints = [dict(t) for t in spec.get("taints") or ()]
    unregistered = {"key": wk.TAINT_UNREGISTERED, "effect": "NoExecute"}
    if any(_same_taint(t, unregistered) for t in taints):
        taints = [t for t in taints if not _same_taint(t, unregistered)]
        for t in (*claim.spec.taints, *claim.spec.startup_taints):
            d = t.to_dict()
            if not any(_same_taint(d, x) for x in taints):
                taints.append(d)
        spec["taints"] = taints
    return node


def register(cluster: interface.Cluster, clock: clock_mod.Clock, node: Mapping[str, Any],
             claim: nodeclaim_mod.NodeClaim, claim_obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """Adopt ``node`` for ``claim`` and mark the NodeClaim registered (see the module docstring)."""
    owner = claim_obj if claim_obj is not None else claim.to_manifest()
    try:  # the watch-fed copy first (copy the levels a write changes), a fresh read when stale
        cluster.update(adopted(dict(node), claim, owner))
    except kube_errors.Conflict:
        cluster.update(adopted(cluster.get("Node", interface.name_of(node)), claim, owner))
    node_name = interface.name_of(node)

    def mutate(status: dict[str, Any], now: float) -> None:
        status["nodeName"] = node_name
        claim_status.set_condition(status, nodeclaim_mod.REGISTERED, "True", now)

    return claim_status.write(cluster, clock, claim_obj, claim.name, mutate)


def initialize(cluster: interface.Cluster, clock: clock_mod.Clock, node_name: str, label: bool, name: str,
               claim_obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """Label Node ``node_name`` initialized (when ``label``) and mark NodeClaim ``name`` initialized."""
    if label:
        cluster.patch("Node", node_name, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
    return claim_status.write(cluster, clock, claim_obj, name,
                              lambda s, now: claim_status.set_condition(s, nodeclaim_mod.INITIALIZED, "True", now))
