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
from karpy.kube import interface

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def is_provisionable(obj: Mapping[str, Any]) -> bool:
    """A raw pod Karpenter would provision for (see the module docstring)."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if spec.get("nodeName") or interface.is_terminating(obj):
        return False
    if status.get("phase") in TERMINAL_PHASES:
        return False
    for ref in interface.owner_references(obj):
        if ref.get("controller") and ref.get("kind") in ("DaemonSet", "Node"):
            return False
    if pod_mod.MIRROR_POD_ANNOTATION in interface.annotations_of(obj):
        return False
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return bool(c.get("status") == "False" and c.get("reason") == "Unschedulable")
    return False
