"""AKS Node Auto-Provisioning's own objects: the ``default`` and ``system-surge`` NodePools and their
AKSNodeClasses, as a fresh NAP cluster lists them.

:func:`default_objects` returns them (karpenter.sh/v1 NodePools, karpenter.azure.com/v1beta1
AKSNodeClasses, with AKS's descriptions and Helm ownership labels). :func:`ensure` creates each one
that is missing from a cluster and leaves every existing one alone, whatever it holds now: a user
who edited or replaced ``default`` keeps their version. Another writer creating the same object
at the same time is fine (``AlreadyExists`` counts as present).

* ``default`` NodePool: linux/amd64, on-demand, SKU family ``D``, consolidation
  ``WhenEmptyOrUnderutilized`` after 0s (the v1 form of NAP's v1beta1 ``WhenUnderutilized``),
  ``expireAfter: Never``, budget 100 %;
* ``system-surge`` NodePool: the same requirements, nodes labelled
  ``kubernetes.azure.com/mode=system`` and tainted ``CriticalAddonsOnly=true:NoSchedule``,
  consolidation ``WhenEmpty`` after 1m;
* ``default`` and ``system-surge`` AKSNodeClasses: ``imageFamily: Ubuntu2204``, ``osDiskSizeGB: 128``.
"""

from __future__ import annotations

import copy
from typing import Any

from karpy.kube import errors as kube_errors
from karpy.kube import interface

HELM_LABELS = {"app.kubernetes.io/managed-by": "Helm"}
HELM_ANNOTATIONS = {"meta.helm.sh/release-name": "aks-managed-karpenter-overlay",
                    "meta.helm.sh/release-namespace": "kube-system"}
DESCRIPTION = "kubernetes.io/description"

_REQUIREMENTS = [
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "karpenter.azure.com/sku-family", "operator": "In", "values": ["D"]},
]


def _meta(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(HELM_LABELS),
            "annotations": {**HELM_ANNOTATIONS, DESCRIPTION: description}}


def _node_class(name: str, description: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": _meta(name, description),
            "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 128}}


def _node_pool(name: str, description: str, disruption: dict[str, Any],
               template_extra: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": name},
            "expireAfter": "Never",
            "requirements": copy.deepcopy(_REQUIREMENTS),
            **template_extra,
        },
    }
    if labels:
        template["metadata"] = {"labels": labels}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": _meta(name, description),
            "spec": {"disruption": {**disruption, "budgets": [{"nodes": "100%"}]}, "template": template}}


def default_objects() -> list[dict[str, Any]]:
    """NAP's objects, AKSNodeClasses first (a fresh copy on every call)."""
    return [
        _node_class("default", "General purpose AKSNodeClass for running Ubuntu2204 nodes"),
        _node_class("system-surge", "AKSNodeClass for running Ubuntu2204 system surge nodes"),
        _node_pool("default", "General purpose NodePool for generic workloads",
                   {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}, {}, {}),
        _node_pool("system-surge", "Surge capacity pool for system pod pressure",
                   {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"},
                   {"taints": [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}]},
                   {"kubernetes.azure.com/mode": "system"}),
    ]


def ensure(cluster: interface.Cluster) -> list[str]:
    """Create NAP's objects that are missing; returns ``Kind/name`` of each one created."""
    created = []
    for obj in default_objects():
        kind, name = obj["kind"], obj["metadata"]["name"]
        try:
            cluster.get(kind, name)
            continue
        except kube_errors.NotFound:
            pass
        try:
            cluster.create(obj)
        except kube_errors.AlreadyExists:
            continue
        created.append(f"{kind}/{name}")
    return created
