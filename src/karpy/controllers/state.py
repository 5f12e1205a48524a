"""A typed cache of the cluster, fed by watches: what every karpy controller reads.

:class:`ClusterState` watches Nodes, NodeClaims, Pods, NodePools, DaemonSets, PodDisruptionBudgets and
(:attr:`ClusterState.namespaces`) Namespaces through :class:`karpy.kube.interface.Cluster` (call
:meth:`ClusterState.start` once, before the controllers are registered, so watch events reach it first). It
keeps the objects as the cluster hands them out (shared, read-only) and parses each one into its
:mod:`karpy.api` model lazily, at most once per ``resourceVersion``. An object that does not parse
is logged once per version and left out of every typed view; it never breaks the cache.

Indexes: pods by ``spec.nodeName``, unbound pods, Nodes and NodeClaims by ``providerID``, NodeClaims
without a ``providerID`` (:meth:`synced` is Karpenter's ``Cluster.Synced``: every NodeClaim launched).

What it produces for the scheduling core (:mod:`karpy.provisioning.scheduler`):

* :meth:`pending_pods`: pods the kube-scheduler marked ``PodScheduled=False`` with reason
  ``Unschedulable``, without ``spec.nodeName``, not terminal, not terminating, not owned by a
  DaemonSet or a Node (Karpenter's "provisionable" pods).
* :meth:`existing_nodes`: every Node (with its non-terminal pods) plus every NodeClaim whose Node
  has not registered yet. Nodes of NodeClaims that are not initialized and NodeClaims without a
  Node are ``in_flight``; their allocatable is the NodeClaim's ``status.allocatable`` or, before
  launch, the cheapest of its instance type options; their taints are the NodeClaim's
  ``spec.taints`` without its startup taints (Karpenter assumes pods fit once those go).
  Cordoned or deleting nodes are not
  ``schedulable``; deleting NodeClaims without a Node are left out.
* :meth:`nodepool_usage`: per NodePool, the summed capacity of its NodeClaims (launched capacity,
  else the cheapest option's capacity), counted against ``spec.limits``.
* :meth:`daemonset_pods`: each DaemonSet's template pod.

Karpenter's state gauges are read from it by :mod:`karpy.controllers.state_metrics`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import errors as api_errors
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.api import workloads
from karpy.cloudprovider import instancetype
from karpy.controllers import inflight, provisionable, reparse, spot_workloads, state_bins
from karpy.controllers import namespaces as namespaces_mod
from karpy.controllers import nominations as nominations_mod
from karpy.kube import interface
from karpy.provisioning import results, templates

log = logging.getLogger("karpy.controllers.state")

KINDS = ("Node", "NodeClaim", "Pod", "NodePool", "DaemonSet", "PodDisruptionBudget")
_NAMESPACED = frozenset(k for k in KINDS if interface.is_namespaced(k))
TERMINAL_PHASES = provisionable.TERMINAL_PHASES
is_provisionable = provisionable.is_provisionable  # re-exported

def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced kinds, ``name`` otherwise."""
    _, ns, name = interface.meta_key(obj)
    return f"{ns}/{name}" if ns else name


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class ClusterState:
    """The watch-fed cache; see the module docstring."""

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster
        self._objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self._parsed: dict[str, dict[str, tuple[Mapping[str, Any], Any]]] = {k: {} for k in KINDS}
        """kind -> key -> (the object parsed, its model): one entry per stored object, dropped with it."""
        self._bad: dict[tuple[str, str], tuple[str, str]] = {}
        self._pods_by_node: dict[str, set[str]] = {}
        self._node_by_pid: dict[str, str] = {}
        self._claim_by_pid: dict[str, str] = {}
        self._unlaunched: set[str] = set()
        """NodeClaims whose ``status.providerID`` is not set yet."""
        self._pods_on: dict[str, list[pod_mod.Pod]] = {}
        """Node name -> its parsed pods, dropped on any event of a pod bound (or once bound) to it."""
        self._pods_serial: dict[str, int] = {}
        """Node name -> the serial number of its ``_pods_on`` list (a new one for each list built)."""
        self._next_serial = 0
        self.bins = state_bins.NodeBins(self)
        """The Nodes as the scheduling core's bins, told which Nodes each event touches."""
        self._claim_bins: dict[str, tuple[Any, results.ExistingNode]] = {}
        """In-flight NodeClaim name -> (its object, its bin), reused while the object holds (launched
        claims only: before launch a bin's size depends on the instance types of the run)."""
        self._provisionable: set[str] = set()
        """Keys of the pods :func:`is_provisionable` holds for, kept on every Pod event."""
        self._pending_keys: list[str] | None = None
        """``_provisionable`` sorted, until it changes."""
        self._keys: dict[str, list[str] | None] = {k: None for k in KINDS}  # sorted, until an add/remove
        self._models: dict[str, list[Any] | None] = {k: None for k in KINDS}  # _all's, until an event
        self._unsubscribe: list[interface.Unsubscribe] = []
        self.parses = 0
        """How many objects were parsed so far (to check the once-per-version rule)."""
        self.namespaces = namespaces_mod.NamespaceWatch(cluster)  # for pod affinity's namespaceSelector
        self.spot_workloads = spot_workloads.SpotWorkloads(cluster)  # karpy.io/max-spot-percent, watch-fed
        self.nominations = nominations_mod.Nominations()
        """Nodes and in-flight NodeClaims the provisioner planned pending pods onto (Karpenter's
        ``NominateNodeForPod``); the disruption controller leaves them alone while nominated."""

    # ------------------------------------------------------------------------------ feeding

    def start(self) -> ClusterState:
        """Watch every kind and load what exists; idempotent."""
        if self._unsubscribe:
            return self
        self._unsubscribe.append(self.namespaces.start().stop)
        self._unsubscribe.append(self.spot_workloads.start().stop)
        for kind in KINDS:
            self._unsubscribe.append(self.cluster.watch(kind, self._handler(kind)))
            for obj in self.cluster.list(kind):
                self.observe(interface.ADDED, obj)
        return self

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def _handler(self, kind: str) -> interface.WatchHandler:
        def handle(event: str, obj: dict[str, Any]) -> None:
            try:
                self.observe(event, obj)
            except Exception:  # a bad object must never break the watch
                log.exception("state: cannot record %s %s", event, kind)

        return handle

    def observe(self, event: str, obj: dict[str, Any]) -> None:
        """Record one watch event (also usable to feed the state by hand)."""
        kind = str(obj.get("kind", ""))
        store = self._objects.get(kind)
        if store is None:
            return
        md = obj.get("metadata") or {}  # object_key(obj), for the kinds watched here
        name = str(md.get("name", ""))
        key = f"{md.get('namespace') or 'default'}/{name}" if kind in _NAMESPACED else name
        old = store.get(key)
        self._models[kind] = None
        if kind == "Node":
            self.bins.touch(key)
        if old is not None:
            self._unindex(kind, key, old)
        if old is None or event == interface.DELETED:
            self._keys[kind] = None
        if event == interface.DELETED:
            store.pop(key, None)
            self._parsed[kind].pop(key, None)
            self._bad.pop((kind, key), None)
            if kind in ("Node", "NodeClaim"):
                self.nominations.forget(key)
            if kind == "NodeClaim":
                self._claim_bins.pop(key, None)
            if kind == "Pod" and key in self._provisionable:
                self._provisionable.discard(key)
                self._pending_keys = None
            if kind == "Node":
                self.bins.forget(key)
                if not self._pods_by_node.get(key):
                    self._pods_on.pop(key, None)
                    self._pods_serial.pop(key, None)
            return
        store[key] = obj
        self._index(kind, key, obj)

    def _index(self, kind: str, key: str, obj: Mapping[str, Any]) -> None:
        if kind == "Pod":
            node_name = str((obj.get("spec") or {}).get("nodeName") or "")
            self._pods_by_node.setdefault(node_name, set()).add(key)
            self._pods_on.pop(node_name, None)
            self.bins.touch(node_name)
            if not node_name and is_provisionable(obj):
                if key not in self._provisionable:
                    self._provisionable.add(key)
                    self._pending_keys = None
            elif key in self._provisionable:
                self._provisionable.discard(key)
                self._pending_keys = None
        elif kind == "Node":
            pid = str((obj.get("spec") or {}).get("providerID") or "")
            if pid:
                self._node_by_pid[pid] = key
        elif kind == "NodeClaim":
            pid = str((obj.get("status") or {}).get("providerID") or "")
            if pid:
                self._claim_by_pid[pid] = key
                self.bins.touch(self._node_by_pid.get(pid, ""))
            else:
                self._unlaunched.add(key)

    def _unindex(self, kind: str, key: str, obj: Mapping[str, Any]) -> None:
        if kind == "Pod":
            node_name = str((obj.get("spec") or {}).get("nodeName") or "")  # as _index read it
            self._pods_on.pop(node_name, None)
            self.bins.touch(node_name)
            keys = self._pods_by_node.get(node_name)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._pods_by_node[node_name]
        elif kind == "Node":
            pid = str((obj.get("spec") or {}).get("providerID") or "")
            if pid and self._node_by_pid.get(pid) == key:
                del self._node_by_pid[pid]
        elif kind == "NodeClaim":
            self._unlaunched.discard(key)
            pid = str((obj.get("status") or {}).get("providerID") or "")
            if pid and self._claim_by_pid.get(pid) == key:
                del self._claim_by_pid[pid]
            self.bins.touch(self._node_by_pid.get(pid, "") if pid else "")

    # ------------------------------------------------------------------------------ parsing

    def parsed(self, kind: str, key: str) -> Any:
        """The model of ``kind``/``key`` (``None`` when absent or unparsable), parsed once per version."""
        store = self._objects.get(kind)
        obj = store.get(key) if store is not None else None
        if obj is None:
            return None
        parsed = self._parsed[kind]
        cached = parsed.get(key)
        if cached is not None and cached[0] is obj:  # the stored object is replaced on every change
            return cached[1]
        return self._parse(kind, key, obj, cached)

    def _parse(self, kind: str, key: str, obj: dict[str, Any], cached: tuple[Mapping[str, Any], Any] | None) -> Any:
        """:meth:`parsed` once the model kept for ``key`` (``cached``) is not ``obj``'s."""
        parsed = self._parsed[kind]
        rv = _rv(obj)
        if cached is not None and rv and _rv(cached[0]) == rv:
            parsed[key] = (obj, cached[1])
            return cached[1]
        bad = self._bad.get((kind, key))
        if bad is not None and bad[0] == rv and rv:
            return None
        try:
            self.parses += 1
            if cached is not None:
                model = reparse.reparse(kind, obj, cached[0], cached[1])
            else:
                model = reparse.PARSERS[kind](obj)
        except (api_errors.ValidationError, ValueError) as exc:
            self._bad[(kind, key)] = (rv, str(exc))
            parsed.pop(key, None)
            log.warning("state: ignoring %s %s (resourceVersion %s): %s", kind, key, rv, exc)
            return None
        parsed[key] = (obj, model)
        self._bad.pop((kind, key), None)
        return model

    def held(self) -> dict[str, int]:
        """How many parsed models the state keeps per kind: at most one per stored object."""
        return {kind: len(models) for kind, models in self._parsed.items()}

    def parse_error(self, kind: str, key: str) -> str | None:
        """Why the current version of ``kind``/``key`` did not parse (``None`` when it did)."""
        self.parsed(kind, key)
        bad = self._bad.get((kind, key))
        return bad[1] if bad is not None else None

    def _sorted_keys(self, kind: str) -> list[str]:
        """The stored keys of ``kind``, sorted (kept until an object is added or removed; shared)."""
        keys = self._keys[kind]
        if keys is None:
            keys = self._keys[kind] = sorted(self._objects[kind])
        return keys

    def _all(self, kind: str) -> list[Any]:
        """Every parsable model of ``kind`` by key (the list is kept until the next event of the kind)."""
        models = self._models[kind]
        if models is None:
            store, parsed = self._objects[kind], self._parsed[kind]
            models = []
            for key in self._sorted_keys(kind):
                cached = parsed.get(key)
                if cached is not None and cached[0] is store[key]:  # parsed from this very object
                    models.append(cached[1])
                    continue
                model = self.parsed(kind, key)
                if model is not None:
                    models.append(model)
            self._models[kind] = models
        return list(models)

    # ------------------------------------------------------------------------------ raw reads

    def raw(self, kind: str, key: str) -> dict[str, Any] | None:
        """The stored object (shared, read-only: copy before changing it)."""
        store = self._objects.get(kind)
        return store.get(key) if store is not None else None

    def raws(self, kind: str) -> list[dict[str, Any]]:
        store = self._objects.get(kind)
        return [store[k] for k in self._sorted_keys(kind)] if store is not None else []

    # ---------------------------------------------------------------------------- typed reads

    def nodes(self) -> list[node_mod.Node]:
        return self._all("Node")

    def node_keys(self) -> list[str]:
        """The Nodes' names, sorted (shared, read-only: a new list whenever a Node is added or removed)."""
        return self._sorted_keys("Node")

    def node(self, name: str) -> node_mod.Node | None:
        model: node_mod.Node | None = self.parsed("Node", name)
        return model

    def nodeclaims(self) -> list[nodeclaim_mod.NodeClaim]:
        return self._all("NodeClaim")

    def nodeclaim(self, name: str) -> nodeclaim_mod.NodeClaim | None:
        model: nodeclaim_mod.NodeClaim | None = self.parsed("NodeClaim", name)
        return model

    def nodepools(self) -> list[nodepool_mod.NodePool]:
        return self._all("NodePool")

    def nodepool(self, name: str) -> nodepool_mod.NodePool | None:
        model: nodepool_mod.NodePool | None = self.parsed("NodePool", name)
        return model

    def pdbs(self) -> list[workloads.PodDisruptionBudget]:
        return self._all("PodDisruptionBudget")

    def daemonset_pods(self) -> list[pod_mod.Pod]:
        """The template pod of every DaemonSet."""
        return [ds.template_pod for ds in self._all("DaemonSet")]

    def node_name_for_provider_id(self, provider_id: str) -> str | None:
        return self._node_by_pid.get(provider_id) if provider_id else None

    def nodeclaim_name_for_provider_id(self, provider_id: str) -> str | None:
        return self._claim_by_pid.get(provider_id) if provider_id else None

    def synced(self) -> bool:
        """Karpenter's ``Cluster.Synced`` once the informers have synced: every NodeClaim has a
        provider ID (none is still being launched, whose instance type, zone and capacity are not
        known yet). The disruption controller makes no decision until it holds."""
        return not self._unlaunched

    def unlaunched(self) -> list[str]:
        """The NodeClaims without a provider ID yet, by name."""
        return sorted(self._unlaunched)

    def nodeclaim_for_node(self, node_name: str) -> nodeclaim_mod.NodeClaim | None:
        """The NodeClaim whose ``status.providerID`` is the node's (``None`` for unmanaged nodes)."""
        obj = self._objects["Node"].get(node_name)
        if obj is None:
            return None
        claim = self.nodeclaim_name_for_provider_id(str((obj.get("spec") or {}).get("providerID") or ""))
        return self.nodeclaim(claim) if claim else None

    def pod_keys_on(self, node_name: str) -> list[str]:
        return sorted(self._pods_by_node.get(node_name, ()))

    def pods_on(self, node_name: str) -> list[pod_mod.Pod]:
        """Parsed pods bound to ``node_name`` (terminal ones included), by namespace/name."""
        cached = self._pods_on.get(node_name)
        if cached is None:
            cached = []
            for key in self.pod_keys_on(node_name):
                p = self.parsed("Pod", key)
                if p is not None:
                    cached.append(p)
            self._pods_on[node_name] = cached
            self._next_serial += 1
            self._pods_serial[node_name] = self._next_serial
        return list(cached)

    def _node_pods(self, node_name: str) -> list[pod_mod.Pod]:
        """:meth:`pods_on` without the copy: the cached list itself (read-only; its identity says
        the node's pods did not change)."""
        cached = self._pods_on.get(node_name)
        if cached is None:
            self.pods_on(node_name)
            cached = self._pods_on[node_name]
        return cached

    def node_pods(self, node_name: str) -> tuple[list[pod_mod.Pod], int]:
        """:meth:`pods_on` without the copy (the list is shared and read-only) and its serial
        number, which changes whenever a pod bound to the node does (and only then)."""
        pods = self._node_pods(node_name)
        return pods, self._pods_serial[node_name]

    def is_pending(self, key: str) -> bool:
        """Whether pod ``key`` is provisionable now (see :func:`is_provisionable`)."""
        return key in self._provisionable

    def nominated(self, now: float) -> set[str]:
        """Nodes and NodeClaims nominated for pending pods now (see :mod:`karpy.controllers.nominations`)."""
        return self.nominations.names(now, self.is_pending)

    def pending_pods(self) -> list[pod_mod.Pod]:
        """Provisionable pods, by namespace/name (see :func:`is_provisionable`; the set is kept on
        every Pod event, so this reads only those pods)."""
        out = []
        if self._pending_keys is None:
            self._pending_keys = sorted(self._provisionable)
        for key in self._pending_keys:
            p = self.parsed("Pod", key)
            if p is not None:
                out.append(p)
        return out

    # -------------------------------------------------------------------- scheduler inputs

    def existing_nodes(self, instance_types: Mapping[str, Sequence[instancetype.InstanceType]] | None = None
                       ) -> list[results.ExistingNode]:
        """Nodes and in-flight NodeClaims as the scheduling core's bins (see the module docstring).

        ``instance_types`` is the scheduler's ``{nodepool: [InstanceType]}``; it sizes NodeClaims
        that have not launched yet.
        """
        types: inflight.TypeIndex | None = None
        node_bins, registered_claims = self.bins.nodes()
        out = list(node_bins)
        claim_store = self._objects["NodeClaim"]
        for claim in self.nodeclaims():
            if claim.name in registered_claims or claim.metadata.deletion_timestamp is not None:
                self._claim_bins.pop(claim.name, None)
                continue
            if self.node_name_for_provider_id(claim.status.provider_id):
                continue  # its node exists but is unparsable: do not count it twice
            obj = claim_store.get(claim.name)
            cached = self._claim_bins.get(claim.name)
            if cached is not None and cached[0] is obj:
                out.append(cached[1])
                continue
            allocatable = claim.status.allocatable
            if not allocatable:  # not launched yet: sized by the cheapest of its options
                if types is None:
                    types = inflight.TypeIndex(instance_types)
                allocatable = inflight.cheapest_resources(claim, types, allocatable=True)
            bin_ = results.ExistingNode(
                name=claim.name, labels=inflight.claim_labels(claim),
                taints=tuple(claim.spec.taints), allocatable=allocatable,
                pods=[], nodepool=claim.nodepool_name, in_flight=True, schedulable=True)
            if claim.status.allocatable:
                self._claim_bins[claim.name] = (obj, bin_)
            out.append(bin_)
        return out

    def nodepool_usage(self, instance_types: Mapping[str, Sequence[instancetype.InstanceType]] | None = None
                       ) -> dict[str, dict[str, int]]:
        """NodePool -> resource -> summed capacity of its NodeClaims (milli-units), plus Karpenter's
        ``nodes`` (one per NodeClaim), as counted against ``spec.limits``."""
        types: inflight.TypeIndex | None = None
        usage: dict[str, dict[str, int]] = {}
        for claim in self.nodeclaims():
            pool = claim.nodepool_name
            if not pool:
                continue
            capacity = claim.status.capacity
            if not capacity:  # not launched yet: the cheapest of its options
                if types is None:
                    types = inflight.TypeIndex(instance_types)
                capacity = inflight.cheapest_resources(claim, types, allocatable=False)
            total = usage.get(pool)
            if total is None:
                total = usage[pool] = {}
            for k, v in {**capacity, templates.NODES: templates.ONE_NODE}.items():  # summed in place
                total[k] = total.get(k, 0) + v
        return usage

    # ------------------------------------------------------------------- counts

    def node_count(self) -> int:
        return len(self._objects["Node"])

    def pending_pod_count(self) -> int:
        return len(self._provisionable)
