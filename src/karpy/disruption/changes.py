"""Which Nodes and NodeClaims may have changed since a reader last looked, fed by watch events.

The disruption controller reads cluster state every few seconds; at 20,000 nodes a pass must cost
what changed since the last one, not a walk over every node. :class:`Changes` watches Nodes,
NodeClaims and Pods on the cluster and records, for each subscriber (:meth:`Changes.subscribe`),
the names that may have changed (a subscriber that reads only NodeClaim marks is not told about
Node names, nor about pods):

* a Node event marks the Node and the NodeClaim its ``spec.providerID`` belongs to;
* a NodeClaim event marks the NodeClaim and the Nodes it names (``status.nodeName``) or whose
  ``spec.providerID`` is its ``status.providerID``;
* a Pod event marks the Node named by its ``spec.nodeName`` (a pod's node never changes once set;
  a deletion event carries the last version).

A reader may rely on: every Node or NodeClaim whose stored object, pods, or associated NodeClaim /
Node changed since its last :meth:`Dirty.take` is in what that call returns; a fresh
subscription starts with ``everything`` set (nothing was read yet). Marks may be spurious; a
reader re-reads what is marked and compares.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from karpy.controllers import state
from karpy.kube import interface

log = logging.getLogger("karpy.disruption")


@dataclass
class Dirty:
    """One subscriber's marks (see the module docstring)."""

    nodes: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)
    everything: bool = True
    """Everything may have changed: the subscriber has read nothing yet (or asked to start over)."""

    def take(self) -> tuple[bool, set[str], set[str]]:
        """(everything, nodes, claims) marked since the last call; clears the marks."""
        out = (self.everything, self.nodes, self.claims)
        self.everything, self.nodes, self.claims = False, set(), set()
        return out


class Changes:
    """Watch-fed change marks; see the module docstring."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState) -> None:
        self.state = cluster_state
        self._subscribers: list[Dirty] = []
        self._node_readers: list[Dirty] = []
        """Subscribers that read Node marks (only they are told about pods)."""
        for kind, handler in (("Node", self._on_node), ("NodeClaim", self._on_claim), ("Pod", self._on_pod)):
            cluster.watch(kind, self._guarded(handler))

    def subscribe(self, *, nodes: bool = True) -> Dirty:
        """A new subscriber's marks (starting with ``everything``); ``nodes=False``: a subscriber
        that reads only NodeClaim marks (its ``nodes`` are left empty)."""
        dirty = Dirty()
        self._subscribers.append(dirty)
        if nodes:
            self._node_readers.append(dirty)
        return dirty

    def _guarded(self, handler: Any) -> interface.WatchHandler:
        def handle(event: str, obj: dict[str, Any]) -> None:
            try:
                handler(obj)
            except Exception:  # a bad object must never break the watch: start over
                log.exception("disruption: cannot record a %s event", obj.get("kind"))
                for dirty in self._subscribers:
                    dirty.everything = True

        return handle

    def _on_pod(self, obj: dict[str, Any]) -> None:
        node_name = (obj.get("spec") or {}).get("nodeName")
        if node_name:
            for dirty in self._node_readers:
                dirty.nodes.add(str(node_name))

    def _on_node(self, obj: dict[str, Any]) -> None:
        name = interface.name_of(obj)
        for dirty in self._node_readers:
            dirty.nodes.add(name)
        claim = self.state.nodeclaim_name_for_provider_id(str((obj.get("spec") or {}).get("providerID") or ""))
        if claim:
            for dirty in self._subscribers:
                dirty.claims.add(claim)

    def _on_claim(self, obj: dict[str, Any]) -> None:
        name = interface.name_of(obj)
        status = obj.get("status") or {}
        nodes = [str(status["nodeName"])] if status.get("nodeName") else []
        by_pid = self.state.node_name_for_provider_id(str(status.get("providerID") or ""))
        if by_pid:
            nodes.append(by_pid)
        for dirty in self._subscribers:
            dirty.claims.add(name)
        for dirty in self._node_readers:
            dirty.nodes.update(nodes)
