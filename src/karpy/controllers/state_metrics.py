"""The gauges Karpenter computes from its cluster state, read from karpy's at scrape time.

:class:`StateMetrics` implements :class:`karpy.observability.metrics.StateCollector`: every family of
:data:`karpy.observability.catalog.GAUGES`, with Karpenter v1.14's names and labels, from
:class:`karpy.controllers.state.ClusterState`:

* ``karpenter_cluster_state_node_count``, ``..._synced`` (1 when no NodeClaim is still launching) and
  ``..._unsynced_time_seconds`` (how long it has not been);
* ``karpenter_nodes_allocatable`` / ``_total_pod_requests`` / ``_total_pod_limits`` /
  ``_total_daemon_requests`` / ``_total_daemon_limits`` / ``_system_overhead`` (per node and resource:
  cores, bytes, counts) and ``_current_lifetime_seconds``, labelled by the node's well-known labels in
  snake case, ``node_name``, ``phase`` and ``managed`` (``"true"`` for a node of a NodeClaim);
* ``karpenter_cluster_utilization_percent`` (pod requests over allocatable, managed nodes);
* ``karpenter_nodepools_usage``, ``..._limit`` (``spec.limits``) and ``..._cost_total`` (summed offering
  prices of the pool's launched NodeClaims, from the provisioner's last instance types);
* ``karpenter_pods_state`` (one per pod), ``karpenter_pods_unbound_time_seconds`` and
  ``..._unstarted_time_seconds`` (pods not bound / not running, seconds since creation), and the
  ``..._provisioning_*`` gauges from the pod recorder's first-seen / decided times;
* ``karpenter_cloudprovider_instance_type_*`` from the instance types the provisioner last read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import core as prom_core

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.api import meta, quantity
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype
from karpy.controllers import state as state_mod
from karpy.kube import interface
from karpy.observability import catalog
from karpy.observability import metrics as metrics_mod

TypesSource = Callable[[], Mapping[str, Sequence[instancetype.InstanceType]]]
_WELL_KNOWN = ((wk.ARCH, "arch"), (wk.CAPACITY_TYPE, "capacity_type"), (wk.INSTANCE_TYPE, "instance_type"),
               (wk.NODEPOOL, "nodepool"), (wk.OS, "os"), (wk.REGION, "region"),
               (wk.WINDOWS_BUILD, "windows_build"), (wk.ZONE, "zone"))


def resource_label(name: str) -> str:
    """Karpenter's ``resource_type`` label value: lower case, dashes as underscores."""
    return name.lower().replace("-", "_")


def _family(name: str) -> prom_core.GaugeMetricFamily:
    row = _ROWS[name]
    return prom_core.GaugeMetricFamily(row.name, row.help, labels=list(row.labels))


_ROWS = {row.name: row for row in catalog.GAUGES}
POD_FAMILIES = ("karpenter_pods_unbound_time_seconds", "karpenter_pods_unstarted_time_seconds",
                "karpenter_pods_provisioning_unbound_time_seconds",
                "karpenter_pods_provisioning_unstarted_time_seconds",
                "karpenter_pods_provisioning_scheduling_undecided_time_seconds", "karpenter_pods_state")
"""The families :meth:`StateMetrics._pods` makes (one sample per pod)."""
TYPE_FAMILIES = ("karpenter_cloudprovider_instance_type_cpu_cores",
                 "karpenter_cloudprovider_instance_type_memory_bytes",
                 "karpenter_cloudprovider_instance_type_offering_available",
                 "karpenter_cloudprovider_instance_type_offering_price_estimate")
"""The families :meth:`StateMetrics._types` makes (one sample per instance type or offering)."""


def _limits(obj: Mapping[str, Any]) -> dict[str, int]:
    """Summed container limits of a pod manifest (milli-units)."""
    total: dict[str, int] = {}
    for c in ((obj.get("spec") or {}).get("containers") or []):
        limits = ((c or {}).get("resources") or {}).get("limits") or {}
        try:
            total = quantity.add(total, quantity.parse_list(limits))
        except (ValueError, TypeError):
            continue
    return total


class StateMetrics:
    """Scrape-time gauges of one :class:`~karpy.controllers.state.ClusterState` (see the module docstring)."""

    def __init__(self, state: state_mod.ClusterState, clock: clock_mod.Clock, metrics: metrics_mod.Metrics,
                 instance_types: TypesSource | None = None) -> None:
        self.state, self.clock, self.metrics = state, clock, metrics
        self.instance_types = instance_types
        self._unsynced_since: float | None = None

    def families(self, wanted: Callable[[str], bool] | None = None) -> Iterable[Any]:
        """``wanted``: the per-pod families are made only if it accepts one of their names (a
        snapshot that drops them need not build one sample per pod)."""
        if not self.metrics.cluster_state_enabled:  # DISABLE_CLUSTER_STATE_OBSERVABILITY: names, no samples
            for row in catalog.GAUGES:
                yield prom_core.GaugeMetricFamily(row.name, row.help, labels=list(row.labels))
            return
        yield from self._cluster()
        yield from self._nodes(wanted)
        yield from self._nodepools()
        if wanted is None or any(wanted(name) for name in POD_FAMILIES):
            yield from self._pods()
        if wanted is None or any(wanted(name) for name in TYPE_FAMILIES):
            yield from self._types()

    # ---------------------------------------------------------------------------------- parts

    def _cluster(self) -> Iterator[Any]:
        count = _family("karpenter_cluster_state_node_count")
        count.add_metric([], float(self.state.node_count()))
        synced = self.state.synced()
        now = self.clock.now()
        if synced:
            self._unsynced_since = None
        elif self._unsynced_since is None:
            self._unsynced_since = now
        flag = _family("karpenter_cluster_state_synced")
        flag.add_metric([], 1.0 if synced else 0.0)
        unsynced = _family("karpenter_cluster_state_unsynced_time_seconds")
        unsynced.add_metric([], 0.0 if self._unsynced_since is None else now - self._unsynced_since)
        yield from (count, flag, unsynced)

    def _nodes(self, wanted: Callable[[str], bool] | None = None) -> Iterator[Any]:
        """The per-node families (left empty unless ``wanted`` accepts them) and the utilization."""
        names = ("karpenter_nodes_allocatable", "karpenter_nodes_total_pod_requests",
                 "karpenter_nodes_total_pod_limits", "karpenter_nodes_total_daemon_requests",
                 "karpenter_nodes_total_daemon_limits", "karpenter_nodes_system_overhead")
        fams = {n: _family(n) for n in names}
        lifetime = _family("karpenter_nodes_current_lifetime_seconds")
        keep = {n: wanted is None or wanted(n) for n in (*names, lifetime.name)}
        per_node = [n for n in names if keep[n]]
        utilization = _family("karpenter_cluster_utilization_percent")
        used: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        now = self.clock.now()
        for obj in self.state.raws("Node"):
            node = self.state.node(interface.name_of(obj))
            if node is None:
                continue
            node_labels = node.labels
            managed = self.state.nodeclaim_for_node(node.name) is not None
            phase = str((obj.get("status") or {}).get("phase") or "")
            base = [node_labels.get(key, "") for key, _ in _WELL_KNOWN] + \
                [node.name, phase, "true" if managed else "false"]
            requests: dict[str, int] = {}
            limits: dict[str, int] = {}
            daemon_requests: dict[str, int] = {}
            daemon_limits: dict[str, int] = {}
            for p in self.state.pods_on(node.name):
                if p.is_terminal:
                    continue
                requests = quantity.add(requests, p.requests)
                if not per_node:  # only the utilization: the pods' requests
                    continue
                raw = self.state.raw("Pod", p.key) or {}
                pod_limits = _limits(raw)
                limits = quantity.add(limits, pod_limits)
                if p.is_daemonset_pod:
                    daemon_requests = quantity.add(daemon_requests, p.requests)
                    daemon_limits = quantity.add(daemon_limits, pod_limits)
            if per_node:
                overhead = {k: max(0, v - node.allocatable.get(k, 0)) for k, v in node.capacity.items()}
                for name, values in zip(names, (node.allocatable, requests, limits, daemon_requests,
                                                daemon_limits, overhead), strict=True):
                    if keep[name]:
                        for res, milli in sorted(values.items()):
                            fams[name].add_metric([*base, resource_label(res)], milli / quantity.MILLI)
            created = meta.created_at(obj)
            if created is not None and keep[lifetime.name]:
                lifetime.add_metric(base, max(0.0, now - created))
            if managed:
                used = quantity.add(used, requests)
                allocatable = quantity.add(allocatable, node.allocatable)
        for res, total in sorted(allocatable.items()):
            if total > 0:
                utilization.add_metric([resource_label(res)], 100.0 * used.get(res, 0) / total)
        yield from fams.values()
        yield from (lifetime, utilization)

    def _types(self) -> Iterator[Any]:
        cpu = _family("karpenter_cloudprovider_instance_type_cpu_cores")
        memory = _family("karpenter_cloudprovider_instance_type_memory_bytes")
        available = _family("karpenter_cloudprovider_instance_type_offering_available")
        price = _family("karpenter_cloudprovider_instance_type_offering_price_estimate")
        seen: set[str] = set()
        offered: set[tuple[str, str, str]] = set()
        for types in (self.instance_types() if self.instance_types is not None else {}).values():
            for it in types:
                if it.name not in seen:
                    seen.add(it.name)
                    cpu.add_metric([it.name], it.capacity.get("cpu", 0) / quantity.MILLI)
                    memory.add_metric([it.name], it.capacity.get("memory", 0) / quantity.MILLI)
                for o in it.offerings:
                    key = (it.name, o.capacity_type, o.zone)
                    if key in offered:
                        continue
                    offered.add(key)
                    available.add_metric(list(key), 1.0 if o.available else 0.0)
                    price.add_metric(list(key), float(o.price))
        yield from (cpu, memory, available, price)

    def _prices(self) -> dict[tuple[str, str, str], float]:
        out: dict[tuple[str, str, str], float] = {}
        for types in (self.instance_types() if self.instance_types is not None else {}).values():
            for it in types:
                for o in it.offerings:
                    out[(it.name, o.capacity_type, o.zone)] = float(o.price)
        return out

    def _nodepools(self) -> Iterator[Any]:
        usage = _family("karpenter_nodepools_usage")
        for pool, resources in sorted(self.state.nodepool_usage().items()):
            for res, milli in sorted(resources.items()):
                usage.add_metric([resource_label(res), pool], milli / quantity.MILLI)
        limit = _family("karpenter_nodepools_limit")
        for np in self.state.nodepools():
            for res, milli in sorted(np.limits.items()):
                limit.add_metric([resource_label(res), np.name], milli / quantity.MILLI)
        cost = _family("karpenter_nodepools_cost_total")
        prices = self._prices()
        totals: dict[str, float] = {np.name: 0.0 for np in self.state.nodepools()}
        for claim in self.state.nodeclaims():
            pool = claim.nodepool_name or ""
            labels = claim.labels
            key = (labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.CAPACITY_TYPE, ""), labels.get(wk.ZONE, ""))
            if pool in totals and key in prices:
                totals[pool] += prices[key]
        for pool, total in sorted(totals.items()):
            cost.add_metric([pool], total)
        yield from (usage, limit, cost)

    def _pods(self) -> Iterator[Any]:  # the families of POD_FAMILIES
        now = self.clock.now()
        unbound = _family("karpenter_pods_unbound_time_seconds")
        unstarted = _family("karpenter_pods_unstarted_time_seconds")
        p_unbound = _family("karpenter_pods_provisioning_unbound_time_seconds")
        p_unstarted = _family("karpenter_pods_provisioning_unstarted_time_seconds")
        undecided = _family("karpenter_pods_provisioning_scheduling_undecided_time_seconds")
        states = _family("karpenter_pods_state")
        recorder = self.metrics.pods
        nodes = {interface.name_of(n): n for n in self.state.raws("Node")}
        for obj in self.state.raws("Pod"):
            status = obj.get("status") or {}
            phase = str(status.get("phase") or "")
            if phase in ("Succeeded", "Failed"):
                continue
            key = [interface.name_of(obj), interface.namespace_of(obj)]
            node_name = str((obj.get("spec") or {}).get("nodeName") or "")
            created = meta.created_at(obj)
            uid = interface.uid_of(obj) or "/".join(interface.meta_key(obj)[1:])
            decided = recorder.decided_at.get(uid) if recorder is not None else None
            seen = recorder.first_seen.get(uid) if recorder is not None else None
            if not node_name and created is not None:
                unbound.add_metric(key, max(0.0, now - created))
            if phase != "Running" and created is not None:
                unstarted.add_metric(key, max(0.0, now - created))
            if decided is not None and not node_name:
                p_unbound.add_metric(key, max(0.0, now - decided))
            if decided is not None and phase != "Running":
                p_unstarted.add_metric(key, max(0.0, now - decided))
            if seen is not None and decided is None:
                undecided.add_metric(key, max(0.0, now - seen))
            if self.metrics.pod_state_enabled:
                states.add_metric(_pod_state(obj, nodes.get(node_name), phase), 1.0)
        yield from (unbound, unstarted, p_unbound, p_unstarted, undecided)
        if self.metrics.pod_state_enabled:
            yield states


def effective_zone(p: pod_mod.Pod) -> str:
    """Karpenter's effective zone of a pending pod (``karpenter_scheduler_pending_pods_by_effective_zone_count``):
    the one zone its node selector and required node affinity allow, ``flexible`` when they allow several
    or say nothing, ``none`` when they allow none. (Karpenter also narrows by topology spread and volumes.)"""
    allowed: set[str] | None = None
    selected = p.node_selector.get(wk.ZONE)
    if selected is not None:
        allowed = {selected}
    terms = p.node_affinity.required if p.node_affinity is not None else ()
    if terms:
        union: set[str] = set()
        for term in terms:
            values: set[str] | None = None
            for r in term.match_expressions:
                if r.key == wk.ZONE and r.operator == "In":
                    values = set(r.values) if values is None else values & set(r.values)
            if values is None:
                union = set()
                break  # a term that does not restrict the zone: any zone
            union |= values
        else:
            allowed = union if allowed is None else allowed & union
    if allowed is None:
        return "flexible"
    if not allowed:
        return "none"
    return next(iter(allowed)) if len(allowed) == 1 else "flexible"


def _pod_state(obj: Mapping[str, Any], node: Mapping[str, Any] | None, phase: str) -> list[str]:
    node_labels = interface.labels_of(node or {})
    ref = interface.owner(dict(obj))
    conditions = {str((c or {}).get("type")): str((c or {}).get("status"))
                  for c in ((obj.get("status") or {}).get("conditions") or []) if isinstance(c, Mapping)}
    node_name = str((obj.get("spec") or {}).get("nodeName") or "")
    values = {
        "name": interface.name_of(dict(obj)), "namespace": interface.namespace_of(dict(obj)),
        "owner": f"{ref.get('kind', '')}/{ref.get('name', '')}" if ref else "",
        "node": node_name, "scheduled": conditions.get("PodScheduled", "false").lower(),
        "nodepool": node_labels.get(wk.NODEPOOL, ""), "zone": node_labels.get(wk.ZONE, ""),
        "arch": node_labels.get(wk.ARCH, ""), "capacity_type": node_labels.get(wk.CAPACITY_TYPE, ""),
        "instance_type": node_labels.get(wk.INSTANCE_TYPE, ""), "phase": phase,
        "ready": conditions.get("Ready", "false").lower(), "managed": "true" if wk.NODEPOOL in node_labels else "false",
    }
    return [values[k] for k in catalog.POD_STATE_LABELS]
