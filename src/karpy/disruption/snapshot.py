"""A typed, immutable picture of the cluster for consolidation decisions.

:class:`ClusterSnapshot` holds everything the consolidation methods
(:mod:`karpy.disruption.consolidation`) and the what-if simulation
(:mod:`karpy.disruption.simulation`) read, so that they do no I/O: every node with its NodeClaim,
NodePool, pods and the price of the offering it runs on (:class:`NodeInfo`), the pending pods, the
NodePools with their instance types, the DaemonSets' template pods, each NodePool's usage,
in-flight NodeClaims (as :class:`karpy.provisioning.results.ExistingNode`) and the time ``now``.

A caller may rely on:

* :func:`node_info` finds a node's current offering from its labels (instance type, zone,
  capacity type) in its NodePool's instance types first, then in every NodePool's; the price is
  the offering's even when the offering is not available to launch any more. Unknown offerings
  leave ``price`` at ``None``.
* :meth:`ClusterSnapshot.existing_nodes` turns every node except an excluded set (and except
  nodes being deleted, always) into the scheduler's bins, with their non-terminal pods as used
  capacity; :meth:`ClusterSnapshot.pods_to_reschedule` lists the pods of excluded nodes that
  would have to move: not DaemonSet or mirror/static pods, not finished, not terminating.
* :meth:`ClusterSnapshot.allowed_disruptions` applies the NodePool disruption budgets
  (:mod:`karpy.disruption.budgets`) to the snapshot's nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import labels as wk
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.cloudprovider import instancetype
from karpy.disruption import budgets
from karpy.disruption import candidates as candidates_mod
from karpy.provisioning import results, reuse
from karpy.scheduling import namespaces as ns_mod


@dataclass(frozen=True)
class NodeInfo:
    """One node as consolidation sees it: the Node, its NodeClaim and NodePool (``None`` when
    the node is not karpy's), its pods and its current offering.

    Readers may remember what they compute from one in its ``__dict__`` under a name starting with
    ``_`` (its fields are immutable), as long as it reads nothing of its NodePool but the name: a
    NodeInfo kept for the next snapshot with a newer object of its NodePool keeps those entries
    (:func:`node_info`)."""

    node: node_mod.Node
    nodeclaim: nodeclaim_mod.NodeClaim | None
    nodepool: nodepool_mod.NodePool | None
    pods: tuple[pod_mod.Pod, ...]
    instance_type: instancetype.InstanceType | None = None
    zone: str = ""
    capacity_type: str = ""
    price: float | None = None
    """US dollars per hour of the offering the node runs on, ``None`` when unknown."""

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def deleting(self) -> bool:
        claim_deleting = self.nodeclaim is not None and self.nodeclaim.metadata.deletion_timestamp is not None
        return self.node.deleting or claim_deleting

    @property
    def initialized(self) -> bool:
        if self.nodeclaim is None:
            return True
        return (self.node.labels.get(wk.INITIALIZED) == "true"
                or self.nodeclaim.is_true(nodeclaim_mod.INITIALIZED))

    @property
    def capacity(self) -> quantity.ResourceList:
        """The node's capacity, else its instance type's (what counts against NodePool limits)."""
        if self.node.capacity:
            return dict(self.node.capacity)
        if self.instance_type is not None:
            return dict(self.instance_type.capacity)
        return {}

    def reschedulable_pods(self) -> list[pod_mod.Pod]:
        """Pods that would have to move if this node went away (computed once per NodeInfo: its
        fields and pods are immutable)."""
        hit: tuple[pod_mod.Pod, ...] | None = self.__dict__.get("_reschedulable")
        if hit is None:
            hit = self.__dict__["_reschedulable"] = tuple(p for p in self.pods if candidates_mod.is_reschedulable(p))
        return list(hit)

    def existing_node(self) -> results.ExistingNode:
        """The scheduler's bin for this node: its non-terminal pods are used capacity (built once per
        NodeInfo; a scheduling run never changes a bin, see :mod:`karpy.provisioning.reuse`)."""
        hit: results.ExistingNode | None = self.__dict__.get("_bin")
        if hit is None:
            hit = self.__dict__["_bin"] = self._existing_node()
        return hit

    def _existing_node(self) -> results.ExistingNode:
        allocatable = dict(self.node.allocatable)
        if not allocatable and self.instance_type is not None:
            allocatable = dict(self.instance_type.allocatable)
        pool = self.node.labels.get(wk.NODEPOOL) or (self.nodepool.name if self.nodepool is not None else None)
        return results.ExistingNode(
            name=self.name, labels=self.node.labels, taints=self.node.taints, allocatable=allocatable,
            pods=[p for p in self.pods if not p.is_terminal], nodepool=pool,
            in_flight=not self.initialized, schedulable=not (self.deleting or self.node.unschedulable))


def find_offering(
    instance_types: Mapping[str, Sequence[instancetype.InstanceType]],
    type_name: str,
    zone: str,
    capacity_type: str,
    prefer_pool: str | None = None,
    index: Mapping[str, Mapping[str, Sequence[instancetype.InstanceType]]] | None = None,
) -> tuple[instancetype.InstanceType | None, float | None]:
    """The instance type named ``type_name`` and the price of its (zone, capacity type) offering.

    ``prefer_pool``'s instance types are searched first. A missing zone or capacity type matches
    any, and then the cheapest such offering is taken. ``index`` (:func:`type_index` of
    ``instance_types``) makes the lookup by name.
    """
    pools = list(instance_types)
    if prefer_pool is not None and prefer_pool in instance_types:
        pools.remove(prefer_pool)
        pools.insert(0, prefer_pool)
    found: instancetype.InstanceType | None = None
    for pool in pools:
        named = index[pool].get(type_name, ()) if index is not None else \
            [t for t in instance_types[pool] if t.name == type_name]
        for t in named:
            if found is None:
                found = t
            prices = [o.price for o in t.offerings
                      if (not zone or o.zone == zone) and (not capacity_type or o.capacity_type == capacity_type)]
            if prices:
                return t, min(prices)
    return found, None


def type_index(instance_types: Mapping[str, Sequence[instancetype.InstanceType]]
               ) -> dict[str, dict[str, list[instancetype.InstanceType]]]:
    """NodePool -> instance type name -> the types of that name, in order (for :func:`find_offering`)."""
    out: dict[str, dict[str, list[instancetype.InstanceType]]] = {}
    for pool, types in instance_types.items():
        by_name = out[pool] = {}
        for t in types:
            by_name.setdefault(t.name, []).append(t)
    return out


def node_info(
    n: node_mod.Node,
    claim: nodeclaim_mod.NodeClaim | None,
    pool: nodepool_mod.NodePool | None,
    pods: Iterable[pod_mod.Pod],
    instance_types: Mapping[str, Sequence[instancetype.InstanceType]],
    billed: Mapping[str, float] | None = None,
    index: Mapping[str, Mapping[str, Sequence[instancetype.InstanceType]]] | None = None,
    previous: Mapping[str, NodeInfo] | None = None,
) -> NodeInfo:
    """A :class:`NodeInfo` with the node's offering looked up in ``instance_types``; its price is what it
    is billed (``billed`` by provider ID, when the cloud knows the customer's commitments), else its
    offering's price. ``previous``: NodeInfos by node name (an earlier snapshot's); the one of this
    node is returned when every field would be the same (the same objects, the same pods in order),
    with what it computed once (its bin, its reschedulable pods); when only its NodePool is a newer
    object of the same name, a copy with it keeps what was computed (see :class:`NodeInfo`)."""
    lbls = dict(claim.labels) if claim is not None else {}
    lbls.update(n.labels)
    type_name = lbls.get(wk.INSTANCE_TYPE, "")
    zone = lbls.get(wk.ZONE, "")
    capacity_type = lbls.get(wk.CAPACITY_TYPE, "")
    pool_name = lbls.get(wk.NODEPOOL) or (pool.name if pool is not None else None)
    it: instancetype.InstanceType | None = None
    price: float | None = None
    if type_name:
        it, price = find_offering(instance_types, type_name, zone, capacity_type, pool_name, index)
    if billed is not None and n.provider_id in billed:
        price = billed[n.provider_id]
    pods = tuple(pods)
    old = previous.get(n.name) if previous is not None else None
    if old is not None and old.node is n and old.nodeclaim is claim and old.instance_type is it \
            and old.price == price and old.zone == zone and old.capacity_type == capacity_type \
            and len(old.pods) == len(pods) and all(a is b for a, b in zip(old.pods, pods, strict=True)):
        if old.nodepool is pool:
            return old
        if old.nodepool is not None and pool is not None and old.nodepool.name == pool.name:
            # a newer object of its NodePool (a status write): what the NodeInfo computed holds
            fresh: NodeInfo = object.__new__(NodeInfo)  # dataclasses.replace, with the remembered entries
            fresh.__dict__.update(old.__dict__)
            fresh.__dict__["nodepool"] = pool
            return fresh
    return NodeInfo(node=n, nodeclaim=claim, nodepool=pool, pods=pods, instance_type=it,
                    zone=zone, capacity_type=capacity_type, price=price)


@dataclass(frozen=True)
class ClusterSnapshot:
    """The cluster at one instant; see the module docstring."""

    nodes: tuple[NodeInfo, ...]
    nodepools: tuple[nodepool_mod.NodePool, ...]
    instance_types: Mapping[str, Sequence[instancetype.InstanceType]]
    pending_pods: tuple[pod_mod.Pod, ...] = ()
    daemonsets: tuple[pod_mod.Pod, ...] = ()
    usage: Mapping[str, quantity.ResourceList] = field(default_factory=dict)
    in_flight: tuple[results.ExistingNode, ...] = ()
    """NodeClaims launched or launching whose Node is not there yet."""
    now: float = 0.0
    """Epoch seconds (node age, budgets); the caller's clock, never the wall clock."""
    ignore_preferences: bool = False
    """``PREFERENCE_POLICY=Ignore``: what-if runs schedule pods without their preferences (as Karpenter's
    disruption simulation does)."""
    namespaces: ns_mod.NamespaceIndex = ns_mod.EMPTY
    """The cluster's Namespaces (pod affinity terms with a ``namespaceSelector``)."""
    scheduling_cache: reuse.SchedulingCache = field(default_factory=reuse.SchedulingCache, compare=False,
                                                    repr=False)
    """Kept between the what-if scheduling runs over this snapshot (karpy.provisioning.reuse):
    they differ only by the nodes taken out, so each run costs what it removes."""
    marked: frozenset[str] = frozenset()
    """Nodes of commands already started and waiting for their replacements (Karpenter's
    ``MarkedForDeletion``): they count against the disruption budgets and their pods need a place in
    every what-if run, as the pods of deleting nodes do."""
    milp_memo: Any = field(default=None, compare=False, repr=False)
    """A :class:`karpy.disruption.milp.Memo` kept by the caller across snapshots (None: none; typed Any
    because milp reads snapshots and the two modules must not import each other)."""

    @classmethod
    def build(
        cls,
        nodes: Iterable[tuple[node_mod.Node, nodeclaim_mod.NodeClaim | None, Sequence[pod_mod.Pod]]],
        nodepools: Sequence[nodepool_mod.NodePool],
        instance_types: Mapping[str, Sequence[instancetype.InstanceType]],
        *,
        pending_pods: Sequence[pod_mod.Pod] = (),
        daemonsets: Sequence[pod_mod.Pod] = (),
        usage: Mapping[str, quantity.ResourceList] | None = None,
        in_flight: Sequence[results.ExistingNode] = (),
        now: float = 0.0,
        billed: Mapping[str, float] | None = None,
        namespaces: ns_mod.NamespaceIndex = ns_mod.EMPTY,
        scheduling_cache: reuse.SchedulingCache | None = None,
        milp_memo: Any = None,
        marked: Iterable[str] = (),
        previous: ClusterSnapshot | None = None,
    ) -> ClusterSnapshot:
        """A snapshot from ``(node, nodeclaim or None, pods)``; each node's NodePool is found by
        its ``karpenter.sh/nodepool`` label. Without ``usage``, each NodePool's usage is the sum
        of its nodes' capacity. ``scheduling_cache``: one kept by the caller across snapshots
        (the what-if runs then cost what changed since the last pass, not the cluster; the plans
        are the same, see :mod:`karpy.provisioning.reuse`); default a fresh one. ``milp_memo``: a
        :class:`karpy.disruption.milp.Memo` kept across snapshots, for the re-pack MILPs. ``marked``: see
        :attr:`marked`. ``previous``: the caller's last snapshot, whose unchanged nodes are kept
        (:func:`node_info`)."""
        pools = {p.name: p for p in nodepools}
        infos: list[NodeInfo] = []
        index = type_index(instance_types)
        kept = {info.name: info for info in previous.nodes} if previous is not None else None
        for n, claim, pods in nodes:
            pool_name = n.labels.get(wk.NODEPOOL) or (claim.nodepool_name if claim is not None else None)
            pool = pools.get(pool_name) if pool_name else None
            infos.append(node_info(n, claim, pool, pods, instance_types, billed, index, kept))
        if usage is None:
            computed: dict[str, quantity.ResourceList] = {}
            for info in infos:
                if info.nodepool is not None:
                    name = info.nodepool.name
                    computed[name] = quantity.add(computed.get(name, {}), info.capacity)
            usage = computed
        return cls(nodes=tuple(infos), nodepools=tuple(nodepools),
                   instance_types={k: list(v) for k, v in instance_types.items()},
                   pending_pods=tuple(pending_pods), daemonsets=tuple(daemonsets), usage=dict(usage),
                   in_flight=tuple(in_flight), now=now, namespaces=namespaces,
                   scheduling_cache=scheduling_cache if scheduling_cache is not None else reuse.SchedulingCache(),
                   milp_memo=milp_memo, marked=frozenset(marked))

    # ------------------------------------------------------------------------------------ lookups

    def node(self, name: str) -> NodeInfo | None:
        index = self.__dict__.get("_index")
        if index is None:
            index = {info.name: info for info in self.nodes}
            object.__setattr__(self, "_index", index)
        found: NodeInfo | None = index.get(name)
        return found

    def nodepool(self, name: str) -> nodepool_mod.NodePool | None:
        for p in self.nodepools:
            if p.name == name:
                return p
        return None

    def price_of(self, name: str) -> float | None:
        info = self.node(name)
        return info.price if info is not None else None

    # ------------------------------------------------------------------------- scheduler inputs

    def existing_nodes(self, exclude: Collection[str] = ()) -> list[results.ExistingNode]:
        """Bins for every node but ``exclude`` and the nodes being deleted, then the in-flight
        NodeClaims (also minus ``exclude``)."""
        bins: dict[str, results.ExistingNode] | None = self.__dict__.get("_bins")
        if bins is None:  # built once per snapshot: the bins are never changed by a scheduling run
            bins = {info.name: info.existing_node() for info in self.nodes if not info.deleting}
            object.__setattr__(self, "_bins", bins)
        out = [b for name, b in bins.items() if name not in exclude]
        out.extend(e for e in self.in_flight if e.name not in exclude)
        return out

    def pods_to_reschedule(self, names: Iterable[str]) -> list[pod_mod.Pod]:
        """The reschedulable pods of the nodes ``names`` (unknown names are ignored), in the
        snapshot's node order."""
        position: dict[str, int] | None = self.__dict__.get("_position")
        if position is None:  # a snapshot's nodes never change: looked up, not scanned, per call
            position = {info.name: i for i, info in enumerate(self.nodes)}
            object.__setattr__(self, "_position", position)
        out: list[pod_mod.Pod] = []
        for i in sorted({position[name] for name in names if name in position}):
            out.extend(self.nodes[i].reschedulable_pods())
        return out

    def deleting_nodes(self) -> list[str]:
        """Names of the nodes being deleted or :attr:`marked` (their pods are going to need a place too)."""
        deleting: list[str] | None = self.__dict__.get("_deleting")
        if deleting is None:
            deleting = [info.name for info in self.nodes if info.deleting or info.name in self.marked]
            object.__setattr__(self, "_deleting", deleting)
        return list(deleting)

    def usage_without(self, names: Iterable[str]) -> dict[str, quantity.ResourceList]:
        """NodePool usage once the nodes ``names`` are gone (their capacity freed, floor 0)."""
        out = {k: dict(v) for k, v in self.usage.items()}
        for name in names:
            info = self.node(name)
            if info is None or info.nodepool is None:
                continue
            pool = info.nodepool.name
            current = out.get(pool, {})
            out[pool] = {k: max(0, v - info.capacity.get(k, 0)) for k, v in current.items()}
        return out

    # -------------------------------------------------------------------------------- budgets

    def allowed_disruptions(self, reason: str) -> dict[str, int]:
        """Per NodePool, how many more nodes may start being disrupted for ``reason`` now.

        A NodePool's nodes are the snapshot's nodes labelled with it; those deleting, not ready or
        :attr:`marked` count as being disrupted already.
        """
        total: dict[str, int] = {}
        disrupting: dict[str, int] = {}
        for info in self.nodes:
            pool = info.node.labels.get(wk.NODEPOOL)
            if not pool:
                continue
            total[pool] = total.get(pool, 0) + 1
            if info.deleting or not info.node.ready or info.name in self.marked:
                disrupting[pool] = disrupting.get(pool, 0) + 1
        return {p.name: budgets.allowed_disruptions(p, reason, total.get(p.name, 0),
                                                    disrupting.get(p.name, 0), self.now)
                for p in self.nodepools}
