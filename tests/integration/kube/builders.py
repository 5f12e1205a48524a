"""Object builders and a cluster fixture for the in-memory cluster tests."""

from __future__ import annotations

from typing import Any

from karpy import clock
from karpy.kube import interface, memory


def new_cluster() -> tuple[memory.InMemoryCluster, clock.VirtualClock]:
    vclock = clock.VirtualClock()
    return memory.InMemoryCluster(vclock), vclock


def pod(
    name: str,
    namespace: str = "default",
    *,
    node: str = "",
    labels: dict[str, str] | None = None,
    phase: str | None = "Running",
    ready: bool | None = True,
    owners: list[dict[str, Any]] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owners:
        meta["ownerReferences"] = owners
    if finalizers:
        meta["finalizers"] = finalizers
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    }
    if node:
        obj["spec"]["nodeName"] = node
    if phase is not None:
        status: dict[str, Any] = {"phase": phase}
        if ready is not None:
            status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        obj["status"] = status
    return obj


def node(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
    }


def replicaset(name: str, replicas: int, namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
    }


def pdb(
    name: str,
    selector: dict[str, Any] | None,
    namespace: str = "default",
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    policy: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def owned_pods(
    cluster: memory.InMemoryCluster, owner_obj: dict[str, Any], count: int, **kwargs: Any
) -> list[dict[str, Any]]:
    """``count`` running pods labelled ``app=<owner name>`` controlled by ``owner_obj``."""
    name = owner_obj["metadata"]["name"]
    return [
        cluster.create(
            pod(f"{name}-{i}", labels={"app": name}, owners=[interface.owner_reference(owner_obj)], **kwargs)
        )
        for i in range(count)
    ]


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)
