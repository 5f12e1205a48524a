"""Read a live cluster's state for ``karpy whatif --kubeconfig``: list, never write.

:func:`read` connects with the Kubernetes adapter's configuration and client (kubeconfig, context, or
the in-cluster service account) and lists, once, every kind ``kubectl get nodes,pods,deployments,
replicasets,statefulsets,daemonsets,jobs,poddisruptionbudgets,nodepools,nodeclaims,ec2nodeclasses,
aksnodeclasses -A -o yaml`` would dump. A custom resource whose CRD is not installed (404) is skipped
and named in the returned warnings. Only GET requests are sent: no informer, no watch, no write.

A caller may rely on: the result is one ``(source, YAML text)`` pair holding a ``kind: List``, exactly
what :func:`karpy.simulator.whatif.run` takes from files; failures raise
:class:`karpy.kube.errors.KubeError` (with ``retryable``) naming the kind that could not be listed.
"""

from __future__ import annotations

from typing import Any

import yaml

from karpy.kube import client as client_mod
from karpy.kube import config as config_mod
from karpy.kube import errors, paths

KINDS = ("Node", "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "PodDisruptionBudget",
         "NodePool", "NodeClaim", "EC2NodeClass", "AKSNodeClass")
OPTIONAL = frozenset({"NodePool", "NodeClaim", "EC2NodeClass", "AKSNodeClass"})


def read(kubeconfig: str | None = None, context: str | None = None, *,
         client: client_mod.KubeClient | None = None) -> tuple[tuple[str, str], list[str]]:
    """The cluster's objects as one List document, and warnings (kinds whose CRD is missing)."""
    if client is None:
        client = client_mod.KubeClient(config_mod.load(kubeconfig, context))
    items: list[dict[str, Any]] = []
    warnings: list[str] = []
    server = client.connection.server
    for kind in KINDS:
        res = paths.resource_for(kind)
        try:
            data = client.request("GET", paths.path(res), what=f"LIST {kind}", kind=kind)
        except errors.NotFound:
            if kind in OPTIONAL:
                warnings.append(f"{kind}: not served by {server} (CRD not installed); none read")
                continue
            raise
        for obj in (data or {}).get("items") or ():
            obj.setdefault("apiVersion", res.api_version)
            obj.setdefault("kind", kind)
            (obj.get("metadata") or {}).pop("managedFields", None)
            items.append(obj)
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False)
    return (f"cluster {server}", text), warnings
