"""Volume topology: where a pod's persistent volumes let it run, as Karpenter and kube-scheduler see it.

A pod that mounts a PersistentVolumeClaim can only run where the volume can attach:

* a PVC **bound** to a PersistentVolume (``spec.volumeName``) brings the PV's
  ``spec.nodeAffinity.required`` terms (ORed; for ``local`` / ``hostPath`` volumes the hostname
  expressions are dropped, as Karpenter does: a new node never has the old hostname);
* an **unbound** PVC whose StorageClass uses ``volumeBindingMode: WaitForFirstConsumer`` brings the
  class's ``allowedTopologies`` terms (each ``matchLabelExpressions`` entry becomes ``In``); the
  volume is provisioned where the pod lands;
* an unbound PVC of an ``Immediate`` class waits for its volume first: Karpenter ignores such pods
  and kube-scheduler reports ``pod has unbound immediate PersistentVolumeClaims``.

:func:`apply` turns each pod into one whose required node affinity also carries its volumes'
terms (the cross product of the pod's own terms and every volume's alternatives, keeping only
combinations that can intersect, like Karpenter's ``GetRequirements``), so the scheduling core
(new NodeClaims, existing nodes, the simulated kube-scheduler) needs nothing else. Pods whose
claims cannot be used (missing PVC / PV / StorageClass, deleting, lost, Immediate and unbound)
come back in ``errors`` with Karpenter's reason instead. Pods without PVCs are returned as they
are. Pure: works on plain API dicts, no I/O.

Known difference: Karpenter (v1.14) adds volume requirements to the NodeClaim's requirements and
not to the pod's node affinity, so a ``nodeAffinityPolicy: Honor`` spread counts domains without
them; karpy folds them into the pod's affinity.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.api import podspec, selectors

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
MAX_ALTERNATIVES = 16

Term = tuple[selectors.NodeSelectorRequirement, ...]


@dataclass(frozen=True)
class Volumes:
    """The cluster's PVCs (by ``(namespace, name)``), PVs and StorageClasses (by name)."""

    claims: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    volumes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, claims: Iterable[Mapping[str, Any]], volumes: Iterable[Mapping[str, Any]],
           classes: Iterable[Mapping[str, Any]]) -> Volumes:
        return cls(
            claims={(_meta(c).get("namespace") or "default", _meta(c).get("name", "")): c for c in claims},
            volumes={_meta(v).get("name", ""): v for v in volumes},
            classes={_meta(s).get("name", ""): s for s in classes},
        )


def needs_volumes(pods: Iterable[pod_mod.Pod]) -> bool:
    """Does any pod mount a PVC (so the caller must read PVCs, PVs and StorageClasses)?"""
    return any(p.pvc_names for p in pods)


def apply(pods: Sequence[pod_mod.Pod], vols: Volumes) -> tuple[list[pod_mod.Pod], dict[str, str]]:
    """Pods with their volume topology folded in, and ``{pod key: reason}`` for pods that cannot
    be scheduled because of their claims (those are left out of the first list)."""
    out: list[pod_mod.Pod] = []
    errors: dict[str, str] = {}
    for p in pods:
        if not p.pvc_names:
            out.append(p)
            continue
        alternatives = requirements(p, vols)
        if isinstance(alternatives, str):
            errors[p.key] = alternatives
            continue
        out.append(inject(p, alternatives) if alternatives else p)
    return out, errors


def requirements(p: pod_mod.Pod, vols: Volumes) -> list[Term] | str:
    """The pod's volume alternatives (ORed terms; ``[]``: no constraint), or why it cannot run."""
    alternatives: list[Term] = [()]
    for claim_name in p.pvc_names:
        per_volume = _claim_terms(p, claim_name, vols)
        if isinstance(per_volume, str):
            return per_volume
        if not per_volume:
            continue
        merged = [a + v for a, v in itertools.product(alternatives, per_volume) if _may_intersect(a + v)]
        alternatives = (merged or [a + v for a, v in itertools.product(alternatives, per_volume)])
        alternatives = alternatives[:MAX_ALTERNATIVES]
    return [] if alternatives == [()] else alternatives


def inject(p: pod_mod.Pod, alternatives: Sequence[Term]) -> pod_mod.Pod:
    """``p`` with each required node-affinity term ANDed with each volume alternative."""
    na = p.node_affinity or podspec.NodeAffinity()
    own = na.required or (selectors.NodeSelectorTerm(),)
    terms = tuple(dataclasses.replace(t, match_expressions=t.match_expressions + alt)
                  for t in own for alt in alternatives)
    return dataclasses.replace(p, node_affinity=dataclasses.replace(na, required=terms))


def _claim_terms(p: pod_mod.Pod, claim_name: str, vols: Volumes) -> list[Term] | str:
    pvc = vols.claims.get((p.namespace, claim_name))
    ref = f"persistentvolumeclaim {p.namespace}/{claim_name}"
    if pvc is None:
        return f"{ref} not found"
    if _meta(pvc).get("deletionTimestamp"):
        return f"{ref} is being deleted"
    if (pvc.get("status") or {}).get("phase") == "Lost":
        return f"{ref} bound to non-existent persistentvolume"
    spec = pvc.get("spec") or {}
    class_name = str(spec.get("storageClassName") or "")
    volume_name = str(spec.get("volumeName") or "")
    if volume_name:
        pv = vols.volumes.get(volume_name)
        if pv is None:
            return f"{ref}: persistentvolume {volume_name} not found"
        if _meta(pv).get("deletionTimestamp"):
            return f"{ref}: persistentvolume {volume_name} is being deleted"
        if BIND_COMPLETED not in (_meta(pvc).get("annotations") or {}):
            return f"{ref} is considered unbound: it does not carry the {BIND_COMPLETED} annotation"
        return _volume_terms(pv)
    if not class_name:
        return f"unbound {ref} must define a storage class"
    storage_class = vols.classes.get(class_name)
    if storage_class is None:
        return f"{ref}: storageclass {class_name} not found"
    if binding_mode(storage_class) != WAIT_FOR_FIRST_CONSUMER:
        return f"{ref} with immediate volume binding mode must be bound ({UNBOUND_IMMEDIATE})"
    return class_terms(storage_class)


def binding_mode(storage_class: Mapping[str, Any]) -> str:
    """A StorageClass's ``volumeBindingMode`` (``Immediate`` when unset, as the API server defaults)."""
    return str(storage_class.get("volumeBindingMode") or IMMEDIATE)


def class_terms(storage_class: Mapping[str, Any]) -> list[Term]:
    """A StorageClass's ``allowedTopologies`` as ORed node selector terms."""
    out: list[Term] = []
    for topo in storage_class.get("allowedTopologies") or ():
        term = tuple(selectors.NodeSelectorRequirement(
            key=str(e.get("key", "")), operator="In", values=tuple(str(v) for v in e.get("values") or ()))
            for e in (topo or {}).get("matchLabelExpressions") or ())
        if term:
            out.append(term)
    return out


def _volume_terms(pv: Mapping[str, Any]) -> list[Term]:
    spec = pv.get("spec") or {}
    required = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or ()
    local = spec.get("local") is not None or spec.get("hostPath") is not None
    out: list[Term] = []
    for raw in required:
        exprs = tuple(selectors.NodeSelectorRequirement(
            key=str(e.get("key", "")), operator=str(e.get("operator", "In")),
            values=tuple(str(v) for v in e.get("values") or ()))
            for e in (raw or {}).get("matchExpressions") or ())
        if local:
            kept = tuple(e for e in exprs if e.key != wk.HOSTNAME)
            if exprs and not kept:
                return []  # a hostname-only term: unconstrained once the hostname is ignored
            exprs = kept
        if exprs:
            out.append(exprs)
    return out


def _may_intersect(term: Term) -> bool:
    """Can one node satisfy every expression of ``term`` (checked per key on ``In`` values)?"""
    allowed: dict[str, set[str]] = {}
    for e in term:
        if e.operator != "In":
            continue
        values = set(e.values)
        allowed[e.key] = allowed[e.key] & values if e.key in allowed else values
        if not allowed[e.key]:
            return False
    return True


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta
