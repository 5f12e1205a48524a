"""Which Nodes are karpy's to adopt, drain and delete.

karpy never drains or deletes a Node it did not launch, even when a NodeClaim's ``providerID``
points at that Node's instance (a NodeClaim written by hand, restored from a backup, or naming an
instance of a node group). A caller may rely on:

* :func:`launched_by_karpenter` is True for a Node that registered the way Karpenter's nodes do (with
  the ``karpenter.sh/unregistered`` taint, still present until registration) or that registration
  already adopted (``karpenter.sh/registered`` label or the ``karpenter.sh/termination`` finalizer).
  A node group's Node has none of these.
* :func:`may_adopt` is what the lifecycle asks before registering a Node for a NodeClaim: the Node is
  karpy's (above) and, when it names a NodePool, the NodeClaim's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.api import labels as wk
from karpy.kube import interface

REASON_FOREIGN_NODE = "ForeignNode"
"""Warning event on a NodeClaim whose provider ID names a Node karpy did not launch."""


def launched_by_karpenter(node: Mapping[str, Any]) -> bool:
    """See the module docstring."""
    if interface.labels_of(node).get(wk.REGISTERED) == "true":
        return True
    if interface.has_finalizer(node, wk.FINALIZER_TERMINATION):
        return True
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(isinstance(t, Mapping) and t.get("key") == wk.TAINT_UNREGISTERED for t in taints)


def may_adopt(node: Mapping[str, Any], nodepool: str | None) -> bool:
    """Whether registration may take Node ``node`` for a NodeClaim of NodePool ``nodepool``."""
    if not launched_by_karpenter(node):
        return False
    pool = interface.labels_of(node).get(wk.NODEPOOL)
    return pool is None or not nodepool or pool == nodepool
