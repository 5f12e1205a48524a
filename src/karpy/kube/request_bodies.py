"""The bodies of the API requests that are not objects: DeleteOptions, an Eviction and a Binding.

:class:`karpy.kube.adapter.KubeCluster` sends them; they are plain dicts in the API's wire form:

* :func:`delete_options` - background propagation (dependents are collected by the garbage collector),
  the ``uid`` precondition (the API server answers 409 when the object of that name is another one) and
  a grace period (clamped at 0), for a DELETE (:func:`delete_body`) or inside an Eviction;
* :func:`eviction` - a ``policy/v1`` Eviction of a pod, the body of a POST to its ``eviction``
  subresource (429 while a PodDisruptionBudget allows no disruption);
* :func:`binding` - a ``v1`` Binding of a pod to a node, the body of a POST to its ``binding``
  subresource (what kube-scheduler sends).
"""

from __future__ import annotations

from typing import Any


def delete_options(*, uid: str | None = None, grace_period_seconds: int | None = None) -> dict[str, Any]:
    """The DeleteOptions fields of a DELETE or an Eviction."""
    out: dict[str, Any] = {"propagationPolicy": "Background"}
    if uid:
        out["preconditions"] = {"uid": uid}
    if grace_period_seconds is not None:
        out["gracePeriodSeconds"] = max(0, int(grace_period_seconds))
    return out


def delete_body(*, uid: str | None = None, grace_period_seconds: int | None = None) -> dict[str, Any]:
    """The body of a DELETE: a ``v1`` DeleteOptions."""
    return {"apiVersion": "v1", "kind": "DeleteOptions",
            **delete_options(uid=uid, grace_period_seconds=grace_period_seconds)}


def eviction(name: str, namespace: str, *, uid: str | None = None) -> dict[str, Any]:
    """The body of a POST to pod ``namespace/name``'s ``eviction`` subresource."""
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": delete_options(uid=uid)}


def binding(name: str, namespace: str, node_name: str) -> dict[str, Any]:
    """The body of a POST to pod ``namespace/name``'s ``binding`` subresource."""
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
