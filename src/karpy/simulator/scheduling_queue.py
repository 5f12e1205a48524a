"""The simulated kube-scheduler's scheduling queue: backoff, the unschedulable pool, queueing hints.

kube-scheduler (SchedulerQueueingHints, on by default since 1.32) keeps a pod that failed in its
*unschedulable pool* and moves it back only when a cluster event may make *that pod* schedulable:
each filter plugin that rejected the pod on some node (its *rejectors*) registers the events it
cares about with a hint function, and the pod moves when one of its rejectors' hints says
``Queue``. A moved pod still waits out its backoff (1 s doubling per failed attempt, at most
10 s: podInitialBackoffSeconds / podMaxBackoffSeconds) before it is tried again. :class:`Queue`
models this for the simulated kube-scheduler (:mod:`karpy.simulator.kube_scheduler`); the hints,
after pkg/scheduler/framework/plugins/*/ ``isSchedulableAfter...``:

* ``NodeUnschedulable`` (node(s) were unschedulable): a node added, or updated from
  unschedulable (cordoned or being deleted), that is schedulable now.
* ``TaintToleration`` (untolerated taint; a not-Ready node counts as tainted
  ``node.kubernetes.io/not-ready``, as the node lifecycle controller taints it): a node added, or
  updated from having a taint the pod does not tolerate, whose hard taints the pod tolerates.
  So a node registering with ``karpenter.sh/unregistered`` or not Ready moves no pod that only
  taints kept off the other nodes; the node turning Ready with its startup taints gone does.
* ``NodeAffinity`` (node affinity/selector): a node added, or relabelled from not matching, that
  matches the pod's required node affinity and selector.
* ``NodeResourcesFit`` (Insufficient ..., Too many pods; also karpy's "no room left once the
  other pending pods were placed"): a node added whose allocatable fits the pod's requests
  (taints are the other plugins' business: the real hint moves the pod too), a node whose
  allocatable grew in a resource the pod requests (or in pods), or a scheduled pod removed
  (deleted, finished, or moved off its node).
* ``NodePorts``: a node added, or a scheduled pod using one of the pod's host ports removed.
* ``InterPodAffinity``: a scheduled pod added that matches one of the pod's required affinity
  terms, or removed that matches one of its required anti-affinity terms; a node added or
  relabelled.
* ``PodTopologySpread``: a scheduled pod added or removed that one of the pod's constraints
  selects (same namespace); a node added or deleted that has every topology key of the pod's hard
  constraints, or updated so that it gained or lost them or (having them) changed one's value or
  its taints - not any other relabelling.
* ``VolumeBinding`` (the pod's volumes keep it off every node): a claim, volume or storage class
  changed; a node added or relabelled.

A pod that failed with no rejector at all (no nodes in the cluster) goes back after its backoff
with no event, as the real queue does. A pod left in the pool longer than 5 minutes
(podMaxInUnschedulablePodsDuration) is flushed back at the next 30-second tick of the virtual clock.

The queue keeps, per pod, its failed attempts and when it last failed, and groups the pods in the
pool by what the hints read (namespace, requests, tolerations, node selector and affinity, pod
(anti-)affinity, spread constraints, host ports: the caller's *signature*) and by rejectors, so
an event costs one hint per group, not per pod. It also keeps when each pod's wait ends in a heap,
so finding the pods due (:meth:`Queue.take_due`) and the next wake-up (:meth:`Queue.next_due`)
costs what became due, not a look at every waiting pod. Pure: nothing here reads or writes the
cluster.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from karpy.api import node, pod
from karpy.provisioning import podgroups
from karpy.scheduling import requirements, taints
from karpy.simulator import unschedulable

NODE_UNSCHEDULABLE = "NodeUnschedulable"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_RESOURCES_FIT = "NodeResourcesFit"
NODE_PORTS = "NodePorts"
INTER_POD_AFFINITY = "InterPodAffinity"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
VOLUME_BINDING = "VolumeBinding"

BACKOFF_INITIAL = 1.0
"""podInitialBackoffSeconds."""
BACKOFF_MAX = 10.0
"""podMaxBackoffSeconds."""
MAX_IN_UNSCHEDULABLE = 300.0
"""podMaxInUnschedulablePodsDuration: how long a pod may sit in the pool without an event."""
FLUSH_PERIOD = 30.0
"""How often kube-scheduler flushes pods left in the pool too long."""

PodKey = tuple[str, str]
_HARD = ("NoSchedule", "NoExecute")


def backoff(attempts: int) -> float:
    """The backoff after ``attempts`` failed attempts: 1, 2, 4, 8, then 10 s."""
    return min(BACKOFF_MAX, BACKOFF_INITIAL * 2.0 ** max(0, attempts - 1))


@dataclass
class _Group:
    model: pod.Pod
    rejectors: frozenset[str]
    keys: set[PodKey] = field(default_factory=set)
    _reqs: requirements.Requirements | None = None

    def reqs(self) -> requirements.Requirements:
        if self._reqs is None:
            self._reqs = podgroups.make_group([self.model]).strict_requirements()
        return self._reqs


class _Entry:
    """A pod's failed attempts, when it last failed, its pool group and when its wait ends."""

    __slots__ = ("attempts", "failed_at", "group", "wait_end")

    def __init__(self, attempts: int, failed_at: float, group: Hashable | None) -> None:
        self.attempts = attempts
        self.failed_at = failed_at
        self.group = group
        """The pool group it waits in; ``None`` once an event (or having no rejector) moved it back."""
        self.wait_end = failed_at + backoff(attempts)
        """When the pod becomes due without an event: its backoff over and, while it is in the
        pool, its flush (a wait only ever shortens: an event moves it out of the pool)."""
        if group is not None:
            self.wait_end = max(self.wait_end, Queue._flush_at(self))


def _schedulable(n: node.Node) -> bool:
    return not n.unschedulable and not n.deleting


def _tolerates(p: pod.Pod, n: node.Node) -> bool:
    return taints.first_untolerated(p.tolerations, unschedulable.hard_taints(n), _HARD) is None


def _fits(p: pod.Pod, n: node.Node) -> bool:
    alloc = n.allocatable
    return all(v <= alloc.get(k, 0) for k, v in p.requests.items() if v > 0)


def _grew(p: pod.Pod, old: node.Node, new: node.Node) -> bool:
    if new.allocatable.get("pods", 0) > old.allocatable.get("pods", 0):
        return True
    return any(v > 0 and new.allocatable.get(k, 0) > old.allocatable.get(k, 0) for k, v in p.requests.items())


def _term_selects(term: object, owner: pod.Pod, other: pod.Pod) -> bool:
    sel = getattr(term, "label_selector", None)
    if sel is None or not sel.matches(other.labels):
        return False
    namespaces = getattr(term, "namespaces", ())
    if getattr(term, "namespace_selector", None) is not None:
        return True  # namespace labels are not modelled: may match
    return other.namespace in namespaces if namespaces else other.namespace == owner.namespace


def _affinity_selects(p: pod.Pod, other: pod.Pod) -> bool:
    return p.pod_affinity is not None and any(_term_selects(t, p, other) for t in p.pod_affinity.required)


def _anti_affinity_selects(p: pod.Pod, other: pod.Pod) -> bool:
    return p.pod_anti_affinity is not None and any(
        _term_selects(t, p, other) for t in p.pod_anti_affinity.required)


def _spread_selects(p: pod.Pod, other: pod.Pod) -> bool:
    return other.namespace == p.namespace and any(
        c.label_selector is not None and c.label_selector.matches(other.labels)
        for c in p.topology_spread_constraints)


def _spread_keys(p: pod.Pod) -> list[str]:
    return [c.topology_key for c in p.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]


def _has_spread_keys(p: pod.Pod, n: node.Node) -> bool:
    return all(k in n.labels for k in _spread_keys(p))


def _spread_hint(p: pod.Pod, old: node.Node | None, new: node.Node) -> bool:
    """PodTopologySpread's hint for a node added (``old`` None) or updated: added with every
    topology key of the pod's hard constraints; updated so that it gained or lost them, or, having
    them, changed one's value or its taints (a Ready change is one: the not-ready taint). Other
    label changes (Karpenter's registered/initialized labels) move nothing."""
    matching = _has_spread_keys(p, new)
    if old is None:
        return matching
    if matching != _has_spread_keys(p, old):
        return True
    return matching and (any(old.labels.get(k) != new.labels.get(k) for k in _spread_keys(p))
                         or unschedulable.hard_taints(old) != unschedulable.hard_taints(new))


def _ports_overlap(p: pod.Pod, other: pod.Pod) -> bool:
    mine = {(proto, port) for _, proto, port in p.host_ports()}
    return any((proto, port) in mine for _, proto, port in other.host_ports())


class Queue:
    """See the module docstring. ``node_reqs`` gives a node's labels as requirements (cached by the caller)."""

    def __init__(self, node_reqs: Callable[[node.Node], requirements.Requirements]) -> None:
        self._node_reqs = node_reqs
        self._entries: dict[PodKey, _Entry] = {}
        self._pool: dict[Hashable, _Group] = {}
        self._fresh: set[PodKey] = set()
        """Pods :meth:`arrived` and never tried: due at once."""
        self._ready: set[PodKey] = set()
        """Pods whose wait is over (found by :meth:`take_due` / :meth:`next_due`) until tried again."""
        self._waits: dict[float, list[tuple[PodKey, _Entry]]] = {}
        """When a wait ends -> (pod, its entry then): one record per change of an entry's wait (pods
        failing together share a time); a record whose entry was replaced, forgotten or whose wait
        changed is stale and skipped."""
        self._times: list[float] = []
        """The keys of ``_waits`` as a heap."""
        self._records = 0
        self.moved = 0
        """Pods an event moved out of the pool (for tests and figures)."""

    # ------------------------------------------------------------------------------ pods

    def __len__(self) -> int:
        return len(self._entries)

    def arrived(self, key: PodKey) -> None:
        """A pending pod was seen; one never tried is due at once (:meth:`take_due`)."""
        if key not in self._entries:
            self._fresh.add(key)

    def failed(self, key: PodKey, model: pod.Pod, signature: Hashable, rejectors: frozenset[str],
               now: float) -> None:
        """The pod was tried at ``now`` and fits nowhere: one more attempt; into the pool (with
        rejectors) or straight back to backoff (none)."""
        entry = self._entries.get(key)
        self._leave_pool(key, entry)
        attempts = 1 if entry is None else entry.attempts + 1
        group_key: Hashable | None = None
        if rejectors:
            group_key = (signature, rejectors)
            group = self._pool.get(group_key)
            if group is None:
                group = self._pool[group_key] = _Group(model, rejectors)
            group.keys.add(key)
        self._entries[key] = new = _Entry(attempts, now, group_key)
        self._fresh.discard(key)
        self._ready.discard(key)
        self._push(key, new)

    def forget(self, key: PodKey) -> None:
        """The pod is no longer pending (bound, deleted, finished)."""
        entry = self._entries.pop(key, None)
        self._leave_pool(key, entry)
        self._fresh.discard(key)
        self._ready.discard(key)

    def _leave_pool(self, key: PodKey, entry: _Entry | None) -> None:
        if entry is None or entry.group is None:
            return
        group = self._pool.get(entry.group)
        if group is not None:
            group.keys.discard(key)
            if not group.keys:
                del self._pool[entry.group]
        entry.group = None
        entry.wait_end = entry.failed_at + backoff(entry.attempts)

    def take_due(self, now: float) -> list[PodKey]:
        """Every pod due at ``now`` among those :meth:`arrived` - never tried, or moved back (by an
        event, or flushed from the pool) with its backoff over - (in no order; a pod stays
        due until it is tried again or forgotten), in time proportional to those that are due."""
        self._pop_until(now)
        return [*self._fresh, *self._ready]

    def next_due(self, now: float) -> float | None:
        """The earliest time after ``now`` at which a waiting pod becomes due, if any."""
        self._pop_until(now)
        times, waits = self._times, self._waits
        while times:
            at = times[0]
            records = waits[at]
            while records:
                key, entry = records[-1]
                if self._entries.get(key) is entry and entry.wait_end == at:
                    return at
                records.pop()
                self._records -= 1
            heapq.heappop(times)
            del waits[at]
        return None

    def _pop_until(self, now: float) -> None:
        """Records whose wait ended by ``now``: their pods (leaving the pool if flushed) are due."""
        times, waits, entries = self._times, self._waits, self._entries
        while times and times[0] <= now:
            at = heapq.heappop(times)
            records = waits.pop(at)
            self._records -= len(records)
            for key, entry in records:
                if entries.get(key) is entry and entry.wait_end == at:
                    self._leave_pool(key, entry)
                    self._ready.add(key)

    def _push(self, key: PodKey, entry: _Entry) -> None:
        if self._records > 2 * len(self._entries) + 1000:
            # Mostly stale records (pods tried again or moved before a flush): one per entry again.
            self._waits, self._times, self._records = {}, [], 0
            for k, e in self._entries.items():
                if e is not entry:
                    self._record(k, e)
        self._record(key, entry)

    def _record(self, key: PodKey, entry: _Entry) -> None:
        at = entry.wait_end
        records = self._waits.get(at)
        if records is None:
            records = self._waits[at] = []
            heapq.heappush(self._times, at)
        records.append((key, entry))
        self._records += 1

    @staticmethod
    def _flush_at(entry: _Entry) -> float:
        return (math.floor((entry.failed_at + MAX_IN_UNSCHEDULABLE) / FLUSH_PERIOD) + 1) * FLUSH_PERIOD

    def waiting(self) -> Mapping[PodKey, int]:
        """Pods in the unschedulable pool -> their failed attempts."""
        return {k: e.attempts for k, e in self._entries.items() if e.group is not None}

    # ---------------------------------------------------------------------------- events

    def _move(self, hint: Callable[[_Group], bool]) -> bool:
        """Move every pooled group whose hint says Queue; True if any pod moved."""
        moved = [gk for gk, group in self._pool.items() if hint(group)]
        for gk in moved:
            group = self._pool.pop(gk)
            for key in group.keys:
                entry = self._entries[key]
                entry.group = None
                entry.wait_end = entry.failed_at + backoff(entry.attempts)
                self._push(key, entry)
            self.moved += len(group.keys)
        return bool(moved)

    def node_changed(self, old: node.Node | None, new: node.Node) -> bool:
        """A node was added (``old`` None) or updated; True if it moved a pod out of the pool."""
        if not self._pool:
            return False
        labels_changed = old is None or old.labels != new.labels

        def hint(g: _Group) -> bool:
            p = g.model
            for plugin in g.rejectors:
                if plugin == NODE_UNSCHEDULABLE:
                    queue = _schedulable(new) and (old is None or not _schedulable(old))
                elif plugin == TAINT_TOLERATION:
                    queue = _tolerates(p, new) and (old is None or not _tolerates(p, old))
                elif plugin == NODE_AFFINITY:
                    queue = labels_changed and self._matches(g, new) and (old is None or not self._matches(g, old))
                elif plugin == NODE_RESOURCES_FIT:
                    queue = _fits(p, new) and (old is None or _grew(p, old, new))
                elif plugin == NODE_PORTS:
                    queue = old is None
                elif plugin in (INTER_POD_AFFINITY, VOLUME_BINDING):
                    queue = labels_changed
                elif plugin == POD_TOPOLOGY_SPREAD:
                    queue = _spread_hint(p, old, new)
                else:
                    queue = True
                if queue:
                    return True
            return False

        return self._move(hint)

    def node_deleted(self, old: node.Node | None = None) -> bool:
        """A node (``old``: its last model, if known) went away: only topology spread may care (its
        domains changed), when the node had every topology key of the pod's constraints."""
        return self._move(lambda g: POD_TOPOLOGY_SPREAD in g.rejectors and
                          (old is None or _has_spread_keys(g.model, old)))

    def _matches(self, g: _Group, n: node.Node) -> bool:
        return self._node_reqs(n).compatible(g.reqs(), frozenset()) is None

    def scheduled_pod_removed(self, removed: Callable[[], pod.Pod | None]) -> bool:
        """A pod that held a node was deleted, finished or moved off it (``removed`` gives its model)."""
        if not self._pool:
            return False
        cache: list[pod.Pod | None] = []

        def other() -> pod.Pod | None:
            if not cache:
                cache.append(removed())
            return cache[0]

        def hint(g: _Group) -> bool:
            for plugin in g.rejectors:
                if plugin == NODE_RESOURCES_FIT:
                    return True
                o = other() if plugin in (NODE_PORTS, INTER_POD_AFFINITY, POD_TOPOLOGY_SPREAD) else None
                if o is None:
                    continue
                if (plugin == NODE_PORTS and _ports_overlap(g.model, o)) or \
                        (plugin == INTER_POD_AFFINITY and _anti_affinity_selects(g.model, o)) or \
                        (plugin == POD_TOPOLOGY_SPREAD and _spread_selects(g.model, o)):
                    return True
            return False

        return self._move(hint)

    def scheduled_pod_added(self, added: Callable[[], pod.Pod | None]) -> bool:
        """A pod was bound to a node (``added`` gives its model): pods whose required affinity or
        spread selects it may fit."""
        if not any(g.rejectors & _POD_ADD_PLUGINS for g in self._pool.values()):
            return False
        other = added()
        if other is None:
            return False
        return self._move(lambda g: (INTER_POD_AFFINITY in g.rejectors and _affinity_selects(g.model, other))
                          or (POD_TOPOLOGY_SPREAD in g.rejectors and _spread_selects(g.model, other)))

    def move_all(self) -> None:
        """Every pod in the pool goes back (to wait out its backoff), as on an unknown event."""
        self._move(lambda g: True)

    def pooled(self) -> bool:
        """Whether any pod waits in the unschedulable pool."""
        return bool(self._pool)

    def volumes_changed(self) -> bool:
        """A PersistentVolumeClaim, PersistentVolume or StorageClass changed."""
        return self._move(lambda g: VOLUME_BINDING in g.rejectors)


_POD_ADD_PLUGINS = frozenset({INTER_POD_AFFINITY, POD_TOPOLOGY_SPREAD})


def plugins_of(reasons: Iterable[str]) -> frozenset[str]:
    """The filter plugins behind kube-scheduler's per-node reasons (``node(s) had untolerated taint ...``)."""
    key = reasons if isinstance(reasons, frozenset) else frozenset(reasons)
    hit = _PLUGINS_OF.get(key)
    if hit is None:
        hit = frozenset(_plugin_of(r) for r in key)
        if len(_PLUGINS_OF) < 10_000:
            _PLUGINS_OF[key] = hit
    return hit


_PLUGINS_OF: dict[frozenset[str], frozenset[str]] = {}


def _plugin_of(reason: str) -> str:
    for needle, plugin in _REASON_PLUGINS:
        if needle in reason:
            return plugin
    return NODE_RESOURCES_FIT


_REASON_PLUGINS = (
    ("were unschedulable", NODE_UNSCHEDULABLE),
    ("untolerated taint", TAINT_TOLERATION),
    ("volume node affinity", VOLUME_BINDING),
    ("node affinity/selector", NODE_AFFINITY),
    ("free ports", NODE_PORTS),
    ("topology spread", POD_TOPOLOGY_SPREAD),
    ("anti-affinity", INTER_POD_AFFINITY),
    ("pod affinity", INTER_POD_AFFINITY),
    ("Insufficient", NODE_RESOURCES_FIT),
    ("Too many pods", NODE_RESOURCES_FIT),
)
