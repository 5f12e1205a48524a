"""At the end of a run: Nodes still draining, how long, and which pods hold them.

:func:`stuck` reads the in-memory cluster: every Node being deleted whose remaining pods include
one protected by ``karpenter.sh/do-not-disrupt`` (``"true"``, or a duration not yet passed since
the pod started). Karpenter waits for such pods for good when the NodeClaim has no
``terminationGracePeriod``; with one, until the NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp``,
when the pods are deleted. The engine adds one note per such Node to the result, so a drain that
never ends is never silent, and the note says which of the two waits it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import duration, errors
from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import pod as pod_mod
from karpy.kube import interface


def _protected(p: Mapping[str, Any], now: float) -> bool:
    if not interface.annotations_of(p).get(wk.DO_NOT_DISRUPT):
        return False
    try:
        return pod_mod.Pod.from_manifest(p).protected(now)
    except (errors.ValidationError, ValueError):
        return False


def _claim_of(cluster: Any, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    pid = str((node.get("spec") or {}).get("providerID") or "")
    name = interface.name_of(node)
    for c in cluster.objects("NodeClaim"):
        status = c.get("status") or {}
        if (pid and status.get("providerID") == pid) or status.get("nodeName") == name:
            return c  # type: ignore[no-any-return]
    return None


def _wait(claim: Mapping[str, Any] | None) -> str:
    """How the drain ends: never by itself, or at the NodeClaim's termination timestamp."""
    if claim is None:
        return "no terminationGracePeriod: it waits until they go"
    try:
        grace = nodeclaim_mod.NodeClaim.from_manifest(claim).spec.termination_grace_period
    except (errors.ValidationError, ValueError):
        grace = None
    if grace is None:
        return "no terminationGracePeriod: it waits until they go"
    stamp = interface.annotations_of(claim).get(wk.NODECLAIM_TERMINATION_TIMESTAMP)
    until = f" at {stamp}" if stamp else " once it has passed"
    return f"terminationGracePeriod {duration.format_duration(round(grace))}: they are deleted{until}"


def stuck(cluster: Any, now: float) -> list[str]:
    out = []
    for node in cluster.objects("Node"):
        deleted = (node.get("metadata") or {}).get("deletionTimestamp")
        if not deleted:
            continue
        name = interface.name_of(node)
        pods = [p for p in cluster.list("Pod", field_selector=f"spec.nodeName={name}")
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and _protected(p, now)]
        if not pods:
            continue
        try:
            since = now - clock_mod.parse_rfc3339(str(deleted))
        except ValueError:
            since = 0.0
        names = ", ".join(f"{interface.namespace_of(p)}/{interface.name_of(p)}" for p in pods)
        out.append(f"node {name} has been draining for {duration.format_duration(round(since))}, held by "
                   f"do-not-disrupt pod(s) {names} ({_wait(_claim_of(cluster, node))})")
    return sorted(out)
