"""Cluster Autoscaler's behaviour, for ``karpy simulate --autoscaler cluster-autoscaler`` and ``karpy compare``.

This is not karpy: it is a model of the autoscaler most karpy users ran before, so the same scenario can
be run under each and compared. It runs in the simulated world only (node groups are simulated ASGs)
and talks to the same in-memory cluster and simulated cloud. What it does, every ``scanInterval``
(10 s), as Cluster Autoscaler 1.2x does with its defaults (:mod:`karpy.simulator.ca_config`):

* **Scale-up.** Pods the kube-scheduler marked ``Unschedulable`` first count on upcoming nodes
  (launched, not Ready yet). For the rest, each node group with room is asked how many new nodes of
  its template (instance type allocatable, group labels and taints, DaemonSet pods) the pods need:
  the binpacking estimate uses the scheduling core's predicates over that many template nodes. The
  expander picks one option (``least-waste``: least idle cpu then memory; ``price``: cheapest per pod
  placed; ``random`` (seeded); ``priority``: the highest-priority group whose name matches), the
  group's size goes up by that count (never over max), and after the group's ``provisioningDelay``
  the instances start; they register as Nodes without Karpenter's taints. Helped pods get a
  ``TriggeredScaleUp`` event (``pod triggered scale-up: [{group 3->4 (max: 6)}]``); pods no group can
  take get ``NotTriggerScaleUp``. An instance that never becomes Ready within
  ``maxNodeProvisionTime`` is terminated and its group backs off for 5 minutes, as after an
  insufficient-capacity error.
* **Scale-down.** No sooner than ``scaleDownDelayAfterAdd`` after a scale-up. A node of a group above
  its min size is *unneeded* when its requested cpu and memory are both under
  ``scaleDownUtilizationThreshold`` of allocatable and every pod on it can move: none is a bare pod, a
  kube-system pod, or annotated ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, and the
  scheduling core places them all on the other nodes. After ``scaleDownUnneededTime`` unneeded,
  empty nodes go in bulk (up to 10) and one non-empty node per scan is drained through the Eviction
  API (a PodDisruptionBudget that refuses keeps the node: it is untainted and tried later), then its
  instance is terminated. Events: ``ScaleDown`` on the Node.

A caller may rely on: deterministic for a seed; it never touches Nodes outside its node groups.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.api import errors as api_errors
from karpy.api import labels, meta, node, nodeclaim, pod, quantity, selectors
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider import instancetype
from karpy.controllers import runtime
from karpy.kube import errors, events, interface
from karpy.provisioning import results
from karpy.provisioning import scheduler as core
from karpy.simulator import ca_config, kube_scheduler, kubelet

log = logging.getLogger("karpy.simulator.cluster_autoscaler")

CONTROLLER = "simulator.cluster-autoscaler"
COMPONENT = "cluster-autoscaler"
KEY = "scan"
TO_BE_DELETED_TAINT = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
BACKOFF = 300.0
MAX_EMPTY_BULK_DELETE = 10


@dataclass
class _Upcoming:
    group: str
    provider_id: str
    zone: str
    since: float
    start_at: float
    """When the instance starts (after the group's provisioning delay); ``provider_id`` is set then."""


class ClusterAutoscaler:
    """Cluster Autoscaler over the simulated cloud's node groups; see the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, cloud: Any,
                 sim_kubelet: kubelet.SimulatedKubelet, bridge: Any, config: ca_config.Config,
                 rng: random.Random) -> None:
        self.cluster = cluster
        self.clock = clock
        self.cloud = cloud
        self.kubelet = sim_kubelet
        self.bridge = bridge
        self.config = config
        self.rng = rng
        self.recorder = events.EventRecorder(cluster, clock, COMPONENT)
        self.groups = {g.name: g for g in config.node_groups}
        types = {it.name: it for it in cloud.get_instance_types(None)}
        self.types: dict[str, instancetype.InstanceType] = {
            g.name: types[g.instance_type] for g in config.node_groups if g.instance_type in types}
        self._upcoming: list[_Upcoming] = []
        self._launched = 0
        self._last_scale_up = -math.inf
        self._unneeded: dict[str, float] = {}
        self._backoff: dict[str, float] = {}
        self.scale_ups = 0
        self.scale_downs = 0
        self._manager: runtime.Manager | None = None

    def register(self, manager: runtime.Manager) -> None:
        self._manager = manager
        manager.register(runtime.Controller(CONTROLLER, self.reconcile))
        manager.enqueue(CONTROLLER, KEY)

    # ------------------------------------------------------------------------------ the loop

    def reconcile(self, key: str) -> float | None:
        now = self.clock.now()
        self._start_due(now)
        nodes = {interface.name_of(n): n for n in self.cluster.list("Node")}
        pods = [p for p in self.cluster.list("Pod")
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        self._expire_upcoming(now, nodes)
        pending = [p for p in pods if _unschedulable(p)]
        if pending:
            self._scale_up(now, pending, pods, nodes)
        elif now - self._last_scale_up >= self.config.scale_down_delay_after_add:
            self._scale_down(now, pods, nodes)
        due = [u.start_at - now for u in self._upcoming if not u.provider_id and u.start_at > now]
        return min([self.config.scan_interval, *due])

    # ---------------------------------------------------------------------------- scale-up

    def _group_of(self, lb: Mapping[str, str]) -> str | None:
        name = lb.get(ca_config.GROUP_LABEL)
        if name in self.groups:
            return name
        return next((lb[k] for k in ca_config.NODEGROUP_LABELS if lb.get(k) in self.groups), None)

    def _size(self, group: str, nodes: Mapping[str, Mapping[str, Any]]) -> int:
        live = sum(1 for n in nodes.values() if self._group_of(interface.labels_of(n)) == group
                   and not interface.is_terminating(n))
        registered = {str((n.get("spec") or {}).get("providerID") or "") for n in nodes.values()}
        return live + sum(1 for u in self._upcoming if u.group == group and u.provider_id not in registered)

    def _not_schedulable_now(self, pending: list[pod.Pod], pods: Sequence[dict[str, Any]],
                             nodes: Mapping[str, Mapping[str, Any]]) -> list[pod.Pod]:
        """CA's filter-out-schedulable step: pods that fit the Ready nodes as they are now (the
        kube-scheduler has not bound them yet, e.g. while they back off) trigger no scale-up."""
        by_node: dict[str, list[pod.Pod]] = {}
        for p in pods:
            name = (p.get("spec") or {}).get("nodeName")
            if name and (m := _pod(p)) is not None:
                by_node.setdefault(str(name), []).append(m)
        existing = []
        for n in nodes.values():
            model = _node(n) if _ready(n) and not interface.is_terminating(n) else None
            if model is not None and not model.unschedulable:
                existing.append(results.ExistingNode(
                    name=model.name, labels=model.labels, taints=tuple(model.taints),
                    allocatable=model.allocatable, pods=by_node.get(model.name, [])))
        if not existing or not pending:
            return pending
        out = core.Scheduler(existing=existing).solve(pending)
        placed = {p.key for ps in out.existing.values() for p in ps}
        return [p for p in pending if p.key not in placed]

    def _template(self, group: ca_config.NodeGroup, zone: str, index: int) -> results.ExistingNode:
        it = self.types[group.name]
        lb = {**it.labels, **group.labels, ca_config.GROUP_LABEL: group.name, labels.INSTANCE_TYPE: it.name,
              labels.CAPACITY_TYPE: group.capacity_type, labels.ARCH: it.labels.get(labels.ARCH, "amd64"),
              labels.OS: it.labels.get(labels.OS, "linux"), labels.HOSTNAME: f"template-{group.name}-{index}"}
        if zone:
            lb[labels.ZONE] = zone
        return results.ExistingNode(name=f"template-{group.name}-{index}", labels=lb, taints=tuple(group.taints),
                                    allocatable=dict(it.allocatable), in_flight=True)

    def _zone_for(self, group: ca_config.NodeGroup, nodes: Mapping[str, Mapping[str, Any]]) -> str:
        """The group's zone with the fewest of its nodes (an ASG balances its zones)."""
        counts = {z: 0 for z in group.zones}
        for n in nodes.values():
            lb = interface.labels_of(n)
            if self._group_of(lb) == group.name and lb.get(labels.ZONE) in counts:
                counts[lb[labels.ZONE]] += 1
        for u in self._upcoming:
            if u.group == group.name and u.zone in counts:
                counts[u.zone] += 1
        return min(counts, key=lambda z: (counts[z], z)) if counts else ""

    def _scale_up(self, now: float, pending_objs: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]],
                  nodes: Mapping[str, Mapping[str, Any]]) -> None:
        pending = [m for m in (_pod(p) for p in pending_objs) if m is not None]
        pending = self._not_schedulable_now(pending, pods, nodes)
        daemons = self._daemon_pods()
        upcoming = [self._template(self.groups[u.group], u.zone, i)
                    for i, u in enumerate(self._upcoming) if u.group in self.types and _not_ready(u, nodes)]
        if upcoming:
            out = core.Scheduler(existing=upcoming, daemonsets=daemons).solve(pending)
            placed = {p.key for ps in out.existing.values() for p in ps}
            pending = [p for p in pending if p.key not in placed]
        if not pending:
            return
        options: list[tuple[ca_config.NodeGroup, int, list[pod.Pod], float]] = []
        for group in self.groups.values():
            if group.name not in self.types or self._backoff.get(group.name, -math.inf) > now:
                continue
            room = group.max_size - self._size(group.name, nodes)
            if room <= 0:
                continue
            zone = self._zone_for(group, nodes) if len(group.zones) == 1 else ""
            k = min(room, len(pending))
            tmpl = [self._template(group, zone or (group.zones[0] if group.zones else ""), i) for i in range(k)]
            out = core.Scheduler(existing=tmpl, daemonsets=daemons).solve(pending)
            used = [name for name, ps in out.existing.items() if ps]
            helped = [p for ps in out.existing.values() for p in ps]
            if used:
                options.append((group, len(used), helped, self._waste(group, len(used), helped, daemons)))
        if not options:
            for p in pending_objs:
                self._event(p, events.NORMAL, "NotTriggerScaleUp",
                            f"pod didn't trigger scale-up: {len(self.groups)} node group(s) cannot take it")
            return
        group, count, helped, _ = self._expand(options)
        before = self._size(group.name, nodes)
        for _ in range(count):
            zone = self._zone_for(group, nodes)
            self._upcoming.append(_Upcoming(group.name, "", zone, now, now + self.config.provisioning_delay))
        self._last_scale_up = now
        self.scale_ups += 1
        message = f"pod triggered scale-up: [{{{group.name} {before}->{before + count} (max: {group.max_size})}}]"
        keys = {p.key for p in helped}
        for p in pending_objs:
            if f"{interface.namespace_of(p) or 'default'}/{interface.name_of(p)}" in keys:
                self._event(p, events.NORMAL, "TriggeredScaleUp", message)
        if self._manager is not None:
            self._manager.enqueue(CONTROLLER, KEY, self.config.provisioning_delay)

    def _waste(self, group: ca_config.NodeGroup, count: int, helped: Sequence[pod.Pod],
               daemons: Sequence[pod.Pod]) -> float:
        alloc = self.types[group.name].allocatable
        used = _sum(p.requests for p in helped)
        waste = 0.0
        for dim in ("cpu", "memory"):
            total = alloc.get(dim, 0) * count
            if total:
                waste += (total - used.get(dim, 0)) / total
        return waste

    def _expand(self, options: list[tuple[ca_config.NodeGroup, int, list[pod.Pod], float]]
                ) -> tuple[ca_config.NodeGroup, int, list[pod.Pod], float]:
        exp = self.config.expander
        if exp == "random":
            return options[self.rng.randrange(len(options))]
        if exp == "price":
            return min(options, key=lambda o: (self._price(o[0]) * o[1] / max(1, len(o[2])), o[3], o[0].name))
        if exp == "priority":
            for _, patterns in self.config.priorities:
                best = [o for o in options if any(re.fullmatch(pat, o[0].name) for pat in patterns)]
                if best:
                    return best[self.rng.randrange(len(best))] if len(best) > 1 else best[0]
        return min(options, key=lambda o: (o[3], -len(o[2]), o[0].name))

    def _price(self, group: ca_config.NodeGroup) -> float:
        it = self.types[group.name]
        prices = [o.price for o in it.offerings if o.capacity_type == group.capacity_type]
        return min(prices, default=0.0)

    def _start_due(self, now: float) -> None:
        for u in self._upcoming:
            if u.provider_id or u.start_at > now:
                continue
            group = self.groups[u.group]
            self._launched += 1
            claim = nodeclaim.NodeClaim(
                metadata=meta.ObjectMeta(name=f"{group.name}-{self._launched}",
                                         labels={**group.labels, ca_config.GROUP_LABEL: group.name}),
                spec=nodeclaim.NodeClaimSpec(requirements=(
                    selectors.NodeSelectorRequirement(labels.INSTANCE_TYPE, "In", (group.instance_type,)),
                    selectors.NodeSelectorRequirement(labels.ZONE, "In", (u.zone,)),
                    selectors.NodeSelectorRequirement(labels.CAPACITY_TYPE, "In", (group.capacity_type,)))))
            try:
                launched = self.cloud.create(claim)
            except cp_errors.CloudProviderError as exc:
                log.info("cluster-autoscaler: node group %s could not launch: %s", group.name, exc)
                self._backoff[group.name] = now + BACKOFF
                u.provider_id = "failed"
                continue
            pid = launched.status.provider_id
            inst = self.cloud.instance(pid)
            u.provider_id = pid
            if inst is None:
                continue
            info = kubelet.InstanceInfo(
                provider_id=pid, instance_type=inst.instance_type, zone=inst.zone, capacity_type=inst.capacity_type,
                capacity=dict(inst.capacity), allocatable=dict(inst.allocatable),
                labels={k: v for k, v in inst.labels.items() if k != labels.NODEPOOL}, node_name=inst.hostname,
                karpenter=False)
            self.kubelet.instance_launched(launched, info)
            self.bridge.adopted(pid)
        self._upcoming = [u for u in self._upcoming if u.provider_id != "failed"]

    def _expire_upcoming(self, now: float, nodes: Mapping[str, Mapping[str, Any]]) -> None:
        ready = {str((n.get("spec") or {}).get("providerID") or "") for n in nodes.values() if _ready(n)}
        keep = []
        for u in self._upcoming:
            if u.provider_id and u.provider_id in ready:
                continue  # arrived
            if u.provider_id and now - u.start_at > self.config.max_node_provision_time:
                self._backoff[u.group] = now + BACKOFF
                self._terminate(u.provider_id)
                continue
            keep.append(u)
        self._upcoming = keep

    # -------------------------------------------------------------------------- scale-down

    def _scale_down(self, now: float, pods: Sequence[dict[str, Any]], nodes: Mapping[str, Mapping[str, Any]]) -> None:
        by_node: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            name = (p.get("spec") or {}).get("nodeName")
            if name:
                by_node.setdefault(str(name), []).append(p)
        models = {name: nm for name, n in nodes.items() if (nm := _node(n)) is not None}
        pdb_blocked: set[str] = set()
        unneeded: list[str] = []
        removing: set[str] = set()
        sizes = {g: self._size(g, nodes) for g in self.groups}
        for name in sorted(models):
            n = models[name]
            group = self._group_of(n.labels)
            if group is None or not n.ready or n.deleting or sizes[group] <= self.groups[group].min_size:
                continue
            node_pods = by_node.get(name, [])
            if _utilization(n, node_pods) >= self.config.utilization_threshold:
                continue
            movable = [m for p in node_pods if not _daemon(p) and (m := _pod(p)) is not None]
            if any(_blocks(p) for p in node_pods if not _daemon(p)):
                continue
            others = [results.ExistingNode(name=o.name, labels=o.labels, taints=tuple(o.taints),
                                           allocatable=o.allocatable,
                                           pods=[m for q in by_node.get(o.name, []) if (m := _pod(q)) is not None])
                      for o in models.values() if o.name != name and o.name not in removing and o.ready
                      and not o.deleting and not o.unschedulable]
            if movable:
                out = core.Scheduler(existing=others).solve(movable)
                if out.errors:
                    continue
            unneeded.append(name)
            removing.add(name)
            sizes[group] -= 1
        self._unneeded = {n: self._unneeded.get(n, now) for n in unneeded}
        ripe = [n for n in unneeded if now - self._unneeded[n] >= self.config.scale_down_unneeded_time]
        empty = [n for n in ripe if not [p for p in by_node.get(n, []) if not _daemon(p)]][:MAX_EMPTY_BULK_DELETE]
        busy = [n for n in ripe if n not in empty][:1]
        for name in [*empty, *busy]:
            if not self._drain(nodes[name], by_node.get(name, [])):
                pdb_blocked.add(name)
                continue
            self._remove(nodes[name])
            self._unneeded.pop(name, None)

    def _drain(self, n: Mapping[str, Any], node_pods: Sequence[dict[str, Any]]) -> bool:
        name = interface.name_of(n)
        taints = list((n.get("spec") or {}).get("taints") or [])
        with contextlib.suppress(errors.KubeError):
            self.cluster.patch("Node", name, {"spec": {"taints": [*taints, TO_BE_DELETED_TAINT]}})
        for p in node_pods:
            if _daemon(p):
                continue
            try:
                self.cluster.evict(interface.name_of(p), interface.namespace_of(p) or "default")
            except errors.NotFound:
                continue
            except errors.KubeError:
                with contextlib.suppress(errors.KubeError):
                    self.cluster.patch("Node", name, {"spec": {"taints": taints}})
                return False
        return True

    def _remove(self, n: Mapping[str, Any]) -> None:
        name = interface.name_of(n)
        self.recorder.normal(n, "ScaleDown", "node removed by cluster autoscaler")
        self.scale_downs += 1
        pid = str((n.get("spec") or {}).get("providerID") or "")
        if self.cloud.instance(pid) is not None:
            self._terminate(pid)
        else:  # a node of a pre-existing node group: its ASG terminates it
            with contextlib.suppress(errors.NotFound):
                self.cluster.delete("Node", name)

    def _terminate(self, provider_id: str) -> None:
        claim = nodeclaim.NodeClaim(metadata=meta.ObjectMeta(name=provider_id.rsplit("/", 1)[-1]),
                                    status=nodeclaim.NodeClaimStatus(provider_id=provider_id))
        with contextlib.suppress(cp_errors.CloudProviderError):
            self.bridge.delete(claim)

    # ------------------------------------------------------------------------------ helpers

    def _daemon_pods(self) -> list[pod.Pod]:
        out = []
        for ds in self.cluster.list("DaemonSet"):
            with contextlib.suppress(api_errors.ValidationError):
                from karpy.api import workloads

                out.append(workloads.DaemonSet.from_manifest(ds).template_pod)
        return out

    def _event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        with contextlib.suppress(errors.KubeError):
            self.recorder.publish(obj, type_, reason, message)


def _unschedulable(p: Mapping[str, Any]) -> bool:
    if not kube_scheduler.is_pending(p) or _daemon(p):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (p.get("status") or {}).get("conditions") or ())


def _daemon(p: Mapping[str, Any]) -> bool:
    return any(r.get("kind") in ("DaemonSet", "Node") and r.get("controller") for r in interface.owner_references(p))


def _blocks(p: Mapping[str, Any]) -> bool:
    """A pod Cluster Autoscaler will not move (its defaults: bare pods, kube-system pods, safe-to-evict=false)."""
    if interface.annotations_of(p).get(SAFE_TO_EVICT) == "false":
        return True
    if interface.namespace_of(p) == "kube-system":
        return True
    return not any(r.get("controller") for r in interface.owner_references(p))


def _pod(p: Mapping[str, Any]) -> pod.Pod | None:
    try:
        return pod.Pod.from_manifest(p)
    except api_errors.ValidationError:
        return None


def _node(n: Mapping[str, Any]) -> node.Node | None:
    try:
        return node.Node.from_manifest(n)
    except api_errors.ValidationError:
        return None


def _ready(n: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (n.get("status") or {}).get("conditions") or ())


def _not_ready(u: _Upcoming, nodes: Mapping[str, Mapping[str, Any]]) -> bool:
    return not any(str((n.get("spec") or {}).get("providerID") or "") == u.provider_id and _ready(n)
                   for n in nodes.values()) if u.provider_id else True


def _utilization(n: node.Node, node_pods: Sequence[Mapping[str, Any]]) -> float:
    models = [m for p in node_pods if (m := _pod(p)) is not None]
    used = _sum(m.requests for m in models)
    return max((used.get(d, 0) / n.allocatable[d] for d in ("cpu", "memory") if n.allocatable.get(d)), default=0.0)


def _sum(lists: Iterable[Mapping[str, int]]) -> quantity.ResourceList:
    total: quantity.ResourceList = {}
    for r in lists:
        total = quantity.add(total, r)
    return total
