"""At the end of a run: Nodes still draining, how long, and which pods hold them.

:func:`stuck` reads the in-memory cluster: every Node being deleted whose remaining pods include a
``karpenter.sh/do-not-disrupt`` one (which Karpenter waits for when the NodeClaim has no
``terminationGracePeriod``). The engine adds one note per such Node to the result, so a drain that
never ends is never silent.
"""

from __future__ import annotations

from typing import Any

from karpy import clock as clock_mod
from karpy.api import duration
from karpy.kube import interface

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def stuck(cluster: Any, now: float) -> list[str]:
    out = []
    for node in cluster.objects("Node"):
        deleted = (node.get("metadata") or {}).get("deletionTimestamp")
        if not deleted:
            continue
        name = interface.name_of(node)
        pods = [p for p in cluster.list("Pod", field_selector=f"spec.nodeName={name}")
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and interface.annotations_of(p).get(DO_NOT_DISRUPT) == "true"]
        if not pods:
            continue
        try:
            since = now - clock_mod.parse_rfc3339(str(deleted))
        except ValueError:
            since = 0.0
        names = ", ".join(f"{interface.namespace_of(p)}/{interface.name_of(p)}" for p in pods)
        out.append(f"node {name} has been draining for {duration.format_duration(round(since))}, held by "
                   f"do-not-disrupt pod(s) {names} (no terminationGracePeriod: it waits until they go)")
    return sorted(out)
