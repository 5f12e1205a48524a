"""The Nodes of :class:`karpy.controllers.state.ClusterState` as the scheduling core's bins, kept from call to call.

:meth:`NodeBins.nodes` is the Node part of ``ClusterState.existing_nodes``: every parsable Node, by name,
as a :class:`karpy.provisioning.results.ExistingNode` with its non-terminal pods, and the NodeClaims
those Nodes belong to. The provisioner asks for it at every pass and the disruption controller at
every consolidation; the cluster state tells :meth:`NodeBins.touch` which Nodes a watch event may have
changed (the Node itself, a pod bound to it or leaving it, a NodeClaim with its provider ID), so a call
reads again only those, and walks every Node only when one was added or removed.

A caller may rely on: :meth:`NodeBins.nodes` returns what a walk over every Node would build now
(the same bins, in the same order), and a Node's bin is the same object while the Node, its
NodeClaim and its pods are.
"""

from __future__ import annotations

from typing import Any, Protocol

from karpy.api import labels as wk
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import pod as pod_mod
from karpy.provisioning import results


class State(Protocol):
    """What :class:`NodeBins` reads of the cluster state (``ClusterState``'s methods of these names)."""

    def node_keys(self) -> list[str]: ...
    def nodes(self) -> list[node_mod.Node]: ...
    def node(self, name: str) -> node_mod.Node | None: ...
    def nodeclaim(self, name: str) -> nodeclaim_mod.NodeClaim | None: ...
    def raw(self, kind: str, key: str) -> dict[str, Any] | None: ...
    def node_pods(self, node_name: str) -> tuple[list[pod_mod.Pod], int]: ...
    def nodeclaim_name_for_provider_id(self, provider_id: str) -> str | None: ...
    def node_count(self) -> int: ...


class NodeBins:
    """See the module docstring."""

    def __init__(self, cluster_state: State) -> None:
        self.state = cluster_state
        self._bins: dict[str, tuple[Any, Any, Any, results.ExistingNode]] = {}
        """Node name -> (node object, NodeClaim object, pods list, its bin), reused while all three hold."""
        self._part: dict[str, tuple[results.ExistingNode, str | None]] | None = None
        """Node name -> (its bin, its NodeClaim's name), by name, as the last call left it."""
        self._keys: list[str] | None = None
        """The state's sorted Node keys ``_part`` was built from (a new list whenever a Node comes or goes)."""
        self._dirty: set[str] = set()
        """Nodes touched since the last call."""
        self._out: tuple[list[results.ExistingNode], set[str]] | None = None

    def touch(self, node_name: str) -> None:
        """A watch event may have changed node ``node_name``'s bin (or its NodeClaim's name)."""
        if node_name:
            self._dirty.add(node_name)
            self._out = None

    def forget(self, node_name: str) -> None:
        """Node ``node_name`` was deleted."""
        self._bins.pop(node_name, None)
        self.touch(node_name)

    def nodes(self) -> tuple[list[results.ExistingNode], set[str]]:
        """The bins of the parsable Nodes by name and the names of their NodeClaims (shared: read-only)."""
        keys = self.state.node_keys()
        part = self._part
        if part is None or keys is not self._keys:
            return self._rebuild(keys)
        for name in sorted(self._dirty):
            n = self.state.node(name)
            if n is None:
                part.pop(name, None)
                self._out = None
                continue
            if name not in part:  # parsable again: its place in the order is new
                return self._rebuild(keys)
            claim_name = self.state.nodeclaim_name_for_provider_id(n.provider_id)
            part[name] = (self.bin(n, claim_name), claim_name)
        self._dirty.clear()
        if self._out is None:
            self._out = ([b for b, _ in part.values()], {c for _, c in part.values() if c})
        return self._out

    def _rebuild(self, keys: list[str]) -> tuple[list[results.ExistingNode], set[str]]:
        part: dict[str, tuple[results.ExistingNode, str | None]] = {}
        for n in self.state.nodes():
            claim_name = self.state.nodeclaim_name_for_provider_id(n.provider_id)
            part[n.name] = (self.bin(n, claim_name), claim_name)
        self._part, self._keys = part, keys
        self._dirty.clear()
        self._out = ([b for b, _ in part.values()], {c for _, c in part.values() if c})
        return self._out

    def bin(self, n: node_mod.Node, claim_name: str | None) -> results.ExistingNode:
        """The scheduling core's bin for node ``n``, reused while the Node, its NodeClaim and its pods
        are the same objects."""
        state = self.state
        node_obj = state.raw("Node", n.name)
        claim_obj = state.raw("NodeClaim", claim_name) if claim_name else None
        node_pods = state.node_pods(n.name)[0]
        cached = self._bins.get(n.name)
        if cached is not None and cached[0] is node_obj and cached[1] is claim_obj and cached[2] is node_pods:
            return cached[3]
        claim = state.nodeclaim(claim_name) if claim_name else None
        pods = [p for p in node_pods if not p.is_terminal]
        deleting = n.deleting or (claim is not None and claim.metadata.deletion_timestamp is not None)
        in_flight = claim is not None and not claim.is_true(nodeclaim_mod.INITIALIZED) and \
            n.labels.get(wk.INITIALIZED) != "true"
        # Karpenter's StateNode.Taints: a node it launched that is not initialized yet has its
        # NodeClaim's taints (its startup taints are expected to go, so it counts as room)
        node_taints = tuple(claim.spec.taints) if in_flight and claim is not None else n.taints
        bin_ = results.ExistingNode(
            name=n.name, labels=n.labels, taints=node_taints,
            allocatable=n.allocatable or (claim.status.allocatable if claim is not None else {}),
            pods=pods, nodepool=n.labels.get(wk.NODEPOOL) or (claim.nodepool_name if claim else None),
            in_flight=in_flight, schedulable=not (deleting or n.unschedulable))
        node_count = state.node_count()
        if len(self._bins) > 2 * node_count + 64:
            self._bins = {k: v for k, v in self._bins.items() if state.raw("Node", k) is not None}
        self._bins[n.name] = (node_obj, claim_obj, node_pods, bin_)
        return bin_
