"""Objects the real-cluster tests apply: NodePools, KWOKNodeClasses, Deployments, PDBs, and readers."""

from __future__ import annotations

from typing import Any

from support import realcluster


def node_class(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": name}}


def nodepool(name: str, *, consolidate_after: str = "0s", policy: str = "WhenEmptyOrUnderutilized",
             labels: dict[str, str] | None = None, expire_after: str = "Never",
             budgets: list[dict[str, Any]] | None = None,
             node_class_name: str = "default", cpu_limit: str = "1000") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"rc/pool": name, **(labels or {})}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": node_class_name},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    ],
                    "expireAfter": expire_after,
                },
            },
            "disruption": {"consolidationPolicy": policy, "consolidateAfter": consolidate_after,
                           "budgets": budgets or [{"nodes": "100%"}]},
            "limits": {"cpu": cpu_limit},
        },
    }


def deployment(name: str, namespace: str, replicas: int, *, cpu: str = "1", memory: str = "256Mi",
               pool: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "registry.invalid/app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        "terminationGracePeriodSeconds": 0,
    }
    if pool:
        spec["nodeSelector"] = {"rc/pool": pool}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}, "annotations": annotations or {}},
                              "spec": spec}},
    }


def pdb(name: str, namespace: str, selector: dict[str, str], max_unavailable: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": selector}}}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def pods(real: realcluster.RealCluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list(real.get_json("pods", "-n", namespace, "-l", selector)["items"])


def running(real: realcluster.RealCluster, namespace: str, selector: str, count: int) -> bool:
    items = pods(real, namespace, selector)
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return len(live) == count and all(p.get("status", {}).get("phase") == "Running" for p in live)


def pool_nodes(real: realcluster.RealCluster, pool: str) -> list[dict[str, Any]]:
    return list(real.get_json("nodes", "-l", f"karpenter.sh/nodepool={pool}")["items"])


def pool_claims(real: realcluster.RealCluster, pool: str) -> list[dict[str, Any]]:
    return list(real.get_json("nodeclaims", "-l", f"karpenter.sh/nodepool={pool}")["items"])


def condition(obj: dict[str, Any], kind: str) -> str | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return None
