"""Which raw pods Karpenter provisions for: read straight from the stored object, on every Pod event.

A provisionable pod is one the kube-scheduler marked ``PodScheduled=False`` with reason
``Unschedulable``, without ``spec.nodeName``, not terminal, not terminating, not a mirror pod and
not owned by a DaemonSet or a Node (Karpenter's "provisionable" pods).

A caller may rely on: :func:`is_provisionable` reads only the given mapping and never raises for a
mapping with missing or empty sections.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.api import pod as pod_mod

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_NOT_PROVISIONED_OWNERS = ("DaemonSet", "Node")


def is_provisionable(obj: Mapping[str, Any]) -> bool:
    """A raw pod Karpenter would provision for (see the module docstring)."""
    spec = obj.get("spec") or {}
    if spec.get("nodeName"):  # the common case first: bound pods
        return False
    md = obj.get("metadata") or {}  # interface.is_terminating / owner_references / annotations_of, inlined
    if md.get("deletionTimestamp"):
        return False
    status = obj.get("status") or {}
    if status.get("phase") in TERMINAL_PHASES:
        return False
    for ref in md.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") in _NOT_PROVISIONED_OWNERS:
            return False
    if pod_mod.MIRROR_POD_ANNOTATION in (md.get("annotations") or {}):
        return False
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return bool(c.get("status") == "False" and c.get("reason") == "Unschedulable")
    return False
