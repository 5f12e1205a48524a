"""The simulated kube-scheduler: binds pending pods to Ready nodes, or says why it cannot.

In ``karpy simulate`` nothing else binds ordinary pods. :class:`KubeScheduler` is one controller
on the :class:`karpy.controllers.runtime.Manager`, woken by Pod and Node changes and run at most
once per ``interval`` virtual seconds (default 1 s). Each run:

* takes the pending pods (phase Pending, no ``spec.nodeName``, not being deleted, scheduler
  ``default-scheduler``) that are due, as kube-scheduler's scheduling queue with queueing hints
  decides (:mod:`karpy.simulator.scheduling_queue`): a new pod at once; a pod that fit nowhere
  once a cluster event that may make *it* schedulable moved it out of the unschedulable pool
  (a node added or updated that its rejecting filters now pass, a scheduled pod removed that held
  room or ports, a pod bound that its affinity wants, a volume change) and its backoff (1 s
  doubling per failed try up to 10 s) is over, or after 5 minutes in the pool - and every
  existing node that is ``Ready`` and not being deleted;
* asks the scheduling core (:class:`karpy.provisioning.scheduler.Scheduler`) with those nodes only
  and no NodePools where the pods fit - the very predicates karpy's provisioner uses (resources,
  taints and tolerations, node selectors and affinity, pod (anti-)affinity, topology spread, host
  ports, and the pod's volumes: :mod:`karpy.scheduling.volumetopology` folds a bound PV's node
  affinity or a WaitForFirstConsumer class's allowedTopologies into the pod's affinity, and a pod
  with an unbound Immediate claim waits) - and binds each pod the core placed in one write, as
  the ``pods/binding`` subresource does: ``spec.nodeName`` plus ``PodScheduled=True``;
* for every other pod it tried, sets ``PodScheduled=False``, reason ``Unschedulable``, with a
  message in the real scheduler's form, e.g. ``0/3 nodes are available: 1 Insufficient cpu, 2
  node(s) had untolerated taint {karpenter.sh/unregistered: }.`` (reasons per node are the first
  failing filter in kube-scheduler's order; counts are summed and sorted) - written only when the
  condition changes, as kube-scheduler's ``updatePod`` skips an unchanged one - and records a
  ``FailedScheduling`` Warning event (component ``default-scheduler``) per failed try the way
  the events.k8s.io recorder does (:meth:`karpy.kube.events.EventRecorder.series`: one Event per
  pod resourceVersion, a repeat bumps its count once, further repeats are not written). That
  condition is what makes a pod provisionable for karpy, as for Karpenter.

Work per run is proportional to the pods due and the nodes: the scheduler keeps pending pods,
bound pods by node and nodes from its watches (it never lists every pod). What it tells the
scheduling core about a node (its model, its pods' models, free capacity, the
:class:`karpy.provisioning.results.ExistingNode`) is built again only when that node or one of its
pods changed; otherwise the core gets the very same objects, pass after pass (read-only), so a
cache keyed on them stays valid (a bound pod's status write, the kubelet's, keeps its node's pod
models). Pod and node models are :mod:`karpy.simulator.scheduler_models`' (parsed again only when
what they read changed); the message is :mod:`karpy.simulator.unschedulable`'s, each node's reasons
per pod signature kept from pass to pass while the node and its pods stay.

Nodes that are not Ready count as having the ``node.kubernetes.io/not-ready`` taint. A pod is
written only when its binding or condition changes, so a run that changes nothing writes nothing
and does not wake itself. Deterministic: pods and nodes are handled in name order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels, node, pod
from karpy.controllers import namespaces as namespaces_mod
from karpy.controllers import runtime
from karpy.kube import errors, events, interface
from karpy.provisioning import results, reuse, volume_limits
from karpy.provisioning import scheduler as core
from karpy.scheduling import volumetopology
from karpy.simulator import scheduler_models, scheduling_queue, unschedulable

log = logging.getLogger("karpy.simulator.kube_scheduler")

CONTROLLER = "simulator.kube-scheduler"
COMPONENT = "default-scheduler"
KEY = "schedule"
UNSCHEDULABLE = "Unschedulable"
_TERMINAL = ("Succeeded", "Failed")
BACKOFF_INITIAL = scheduling_queue.BACKOFF_INITIAL
"""kube-scheduler's podInitialBackoffSeconds: the first retry of an unschedulable pod."""
BACKOFF_MAX = scheduling_queue.BACKOFF_MAX
"""kube-scheduler's podMaxBackoffSeconds."""
NOT_READY_TAINT = unschedulable.NOT_READY_TAINT


def is_pending(p: Mapping[str, Any]) -> bool:
    """A pod the kube-scheduler should place."""
    spec = p.get("spec") or {}
    phase = (p.get("status") or {}).get("phase") or "Pending"
    return phase == "Pending" and not spec.get("nodeName") and not interface.is_terminating(p) \
        and (spec.get("schedulerName") or pod.DEFAULT_SCHEDULER) == pod.DEFAULT_SCHEDULER


def _condition(p: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for c in (p.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


class KubeScheduler:
    """See the module docstring. Call :meth:`register` with the Manager."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, *, interval: float = 1.0,
                 record_events: bool = True) -> None:
        self.cluster = cluster
        self.clock = clock
        self.interval = interval
        self.recorder = events.EventRecorder(cluster, clock, component=COMPONENT) if record_events else None
        self.runs = 0
        self.bound = 0
        self.scheduling_cache = reuse.SchedulingCache()
        """Kept between passes (existing nodes as arrays): see karpy.provisioning.reuse."""
        self.models = scheduler_models.Models()
        """The pods' and nodes' models (karpy.simulator.scheduler_models)."""
        self.namespaces = namespaces_mod.NamespaceWatch(cluster)
        """The Namespaces' labels (pod affinity terms with a namespaceSelector)."""
        self.queue = scheduling_queue.Queue(self.models.node_reqs)
        """Backoff, the unschedulable pool and queueing hints (karpy.simulator.scheduling_queue)."""
        self._manager: runtime.Manager | None = None
        self._last_run: float | None = None
        # What the watches told: pending pods, bound (non-terminal) pods by node, nodes.
        self._watching = False
        self._pending: dict[tuple[str, str], dict[str, Any]] = {}
        self._bound: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._bound_at: dict[tuple[str, str], str] = {}
        self._node_objs: dict[str, dict[str, Any]] = {}
        self._node_pods: dict[str, list[pod.Pod]] = {}
        """Node -> models of its bound pods; dropped whenever the watch changes one of them."""
        self._models_by_node: dict[str, list[pod.Pod]] | None = None
        """``_node_pods`` of every node with bound pods as the last pass read them (None: read all again)."""
        self._stale: set[str] = set()
        """Nodes whose ``_node_pods`` entry was dropped since the last pass."""
        self._node_models: list[node.Node] | None = None
        """The nodes' models by name as the last pass read them; None after a Node event."""
        self._anti: dict[str, int] = {}
        """Node -> how many of its pods (as last modelled) have required pod anti-affinity."""
        self._used: dict[str, tuple[node.Node, Sequence[pod.Pod], tuple[dict[str, int], set[unschedulable.Port]]]] = {}
        self._existing: dict[str, tuple[node.Node, list[pod.Pod], results.ExistingNode, dict[str, int]]] = {}
        """Node -> (model, pod models, what the core is given, free cpu/memory/pods), reused while both stay."""
        self._explained = unschedulable.NodeMemo()
        """Node -> its reasons per pod signature, reused while the node and its pods stay (Explainer's memo)."""

    # ------------------------------------------------------------------------------ wiring

    def controller(self) -> runtime.Controller:
        return runtime.Controller(CONTROLLER, self.reconcile)

    def register(self, manager: runtime.Manager) -> None:
        self._manager = manager
        manager.register(self.controller())
        self._watching = True
        self.namespaces.start()
        for p in self.cluster.list("Pod"):
            self._track_pod(interface.ADDED, p)
        for n in self.cluster.list("Node"):
            self._node_objs[interface.name_of(n)] = n
        manager.cluster.watch("Pod", self._on_pod)
        manager.cluster.watch("Node", self._on_node)
        for kind in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"):
            manager.cluster.watch(kind, self._on_volume)

    def _track_pod(self, event: str, obj: dict[str, Any]) -> bool:
        """Keep ``_pending`` and ``_bound`` as the watch tells (a pod keeps its place in them);
        True if a queueing hint moved a waiting pod."""
        key = (interface.namespace_of(obj), interface.name_of(obj))
        spec = obj.get("spec") or {}
        live = event != interface.DELETED
        bound_to = str(spec.get("nodeName") or "") if live else ""
        keep_bound = bool(bound_to) and (obj.get("status") or {}).get("phase") not in _TERMINAL
        was_on = self._bound_at.get(key)
        moved = False
        if was_on is not None and (not keep_bound or was_on != bound_to):
            del self._bound_at[key]
            on_node = self._bound[was_on]
            old = on_node.pop(key)
            self._node_pods.pop(was_on, None)
            self._stale.add(was_on)
            if not on_node:
                del self._bound[was_on]
                self._anti.pop(was_on, None)
            moved = self.queue.scheduled_pod_removed(lambda: self.models.pod_model(old))
        if keep_bound:
            on_node = self._bound.setdefault(bound_to, {})
            before = on_node.get(key)
            on_node[key] = obj
            self._bound_at[key] = bound_to
            if before is None or not scheduler_models.same_model(before, obj):
                self._node_pods.pop(bound_to, None)  # a status write (the kubelet's) keeps the models
                self._stale.add(bound_to)
            if was_on != bound_to:
                moved = self.queue.scheduled_pod_added(lambda: self.models.pod_model(obj)) or moved
        if live and not bound_to and is_pending(obj):
            self._pending[key] = obj
            self.queue.arrived(key)
        else:
            self._pending.pop(key, None)
            self.queue.forget(key)
        return moved

    def _wake(self) -> None:
        if self._manager is None:
            return
        now = self.clock.now()
        after = 0.0 if self._last_run is None else max(0.0, self._last_run + self.interval - now)
        self._manager.enqueue(CONTROLLER, KEY, after)

    def _on_pod(self, event: str, obj: dict[str, Any]) -> None:
        moved = self._track_pod(event, obj)
        if moved or (event == interface.ADDED and is_pending(obj)):
            self._wake()

    def _on_volume(self, event: str, obj: dict[str, Any]) -> None:
        """A claim, volume or storage class changed (e.g. a claim bound): pods its volumes kept off may fit now."""
        if self.queue.volumes_changed():
            self._wake()

    def _on_node(self, event: str, obj: dict[str, Any]) -> None:
        name = interface.name_of(obj)
        self._node_models = None
        if event == interface.DELETED:
            self._node_objs.pop(name, None)
            self._existing.pop(name, None)
            self._used.pop(name, None)
            last = self.models.last_node(name)
            self.models.drop_node(name)
            self._explained.drop(name)
            moved = self.queue.node_deleted(last)
        else:
            self._node_objs[name] = obj
            moved = False
            if self.queue.pooled():
                old = self.models.last_node(name) if event != interface.ADDED else None
                new = self.models.node_model(obj)
                if new is not None and (old is None or old is not new):
                    moved = self.queue.node_changed(old, new)
        if moved:
            self._wake()

    # ----------------------------------------------------------------------------- reconcile

    def reconcile(self, key: str) -> float | None:
        now = self.clock.now()
        if self._last_run is not None and now < self._last_run + self.interval:
            return self._last_run + self.interval - now
        self._last_run = now
        if not self._watching:  # not registered: read the cluster (tests drive reconcile by hand)
            self._node_objs = {interface.name_of(n): n for n in self.cluster.list("Node")}
            self._pending, self._bound, self._bound_at, self._node_pods, self._anti = {}, {}, {}, {}, {}
            self._models_by_node, self._node_models = None, None
            for p in self.cluster.list("Pod"):
                self._track_pod(interface.ADDED, p)
            self.queue.move_all()  # no watch: any pass may follow a change
        queue = self.queue
        pending_objs = self._pending
        due = sorted(filter(pending_objs.__contains__, queue.take_due(now)))
        if not due:
            self._forget()
            return self._next(now)
        self.runs += 1
        by_node = dict(self._bound_models())  # this pass adds the pods it binds
        nodes = self._nodes()
        tried: list[tuple[pod.Pod, scheduling_queue.PodKey, Mapping[str, Any], scheduler_models.PodEntry | None]] = []
        raw_by_key: dict[str, tuple[scheduling_queue.PodKey, Mapping[str, Any]]] = {}
        for k in due:
            p = pending_objs[k]
            parsed = self.models.pod_entry(p)
            model = parsed.model
            if model is not None:
                tried.append((model, k, p, parsed))
                raw_by_key[parsed.key] = (k, p)
        pending = [t[0] for t in tried]
        volume_errors: dict[str, str] = {}
        unconstrained: dict[str, pod.Pod] = {}
        if volumetopology.needs_volumes(pending):
            unconstrained = {m.key: m for m in pending}
            vols = volumetopology.Volumes.of(
                self.cluster.list("PersistentVolumeClaim"), self.cluster.list("PersistentVolume"),
                self.cluster.list("StorageClass"))
            pending, volume_errors = volumetopology.apply(pending, vols)
            pending = volume_limits.with_requests(pending, vols)  # NodeVolumeLimits: CSINode counts
            for model_key in sorted(volume_errors):
                text = unschedulable.volume_message(volume_errors[model_key], len(nodes))
                self._failed(*raw_by_key[model_key], unconstrained[model_key], text,
                             frozenset({scheduling_queue.VOLUME_BINDING}), now)
            if not pending:
                self._forget()
                return self._next(now)
        usable = [self._existing_node(n, by_node.get(n.name, _NO_PODS))
                  for n in nodes if n.ready and not n.deleting]
        if not _needs_every_node(pending, self._anti):
            # Nodes too full for even the smallest pending pod change nothing: leave them out.
            floor = {d: min(p.requests.get(d, 0) for p in pending) for d in _FLOOR_DIMS}
            usable = [u for u in usable if u[2].schedulable and all(u[3][d] >= need for d, need in floor.items())]
        placed_on: Mapping[str, Sequence[pod.Pod]] = {}
        existing = [u[2] for u in usable]
        drivers = volume_limits.requested_drivers(pending) if unconstrained else ()
        if drivers and existing:
            existing = volume_limits.with_node_limits(existing, drivers, vols, volume_limits.csinode_limits(
                self.cluster.list("CSINode")), ())
        if usable:  # no node a pod could use: every pod fails, no need to ask the core
            placed_on = core.Scheduler(existing=existing, cache=self.scheduling_cache,
                                       namespaces=self.namespaces.index()).solve(
                pending).existing
        placed: set[scheduling_queue.PodKey] = set()
        for node_name in sorted(placed_on):
            for model in placed_on[node_name]:
                pod_key, obj = raw_by_key[model.key]
                bound = self._bind(obj, model, node_name)
                if bound is not None:
                    placed.add(pod_key)
                    by_node[node_name] = [*by_node.get(node_name, ()), bound]
        explainer: unschedulable.Explainer | None = None
        # With volumes the models tried are the ones volumetopology made (same pods, same order).
        for model, pod_key, obj, entry in tried if not unconstrained else \
                [(m, *raw_by_key[m.key], None) for m in pending]:
            if pod_key in placed:
                continue
            if explainer is None:
                explainer = unschedulable.Explainer(nodes, by_node, self.models.node_reqs, self._usage, self._explained)
            without = unconstrained.get(model.key) if unconstrained else None
            if without is None:
                assert entry is not None  # without volumes the pods tried are the entries
                sig = self.models.entry_signature(entry, model)
                text, reasons = explainer.explain(model, None, sig)
            else:
                text, reasons = explainer.explain(model, without)
                model, sig = without, self.models.signature(without)
            self.queue.failed(pod_key, model, sig, scheduling_queue.plugins_of(reasons), now)
            self._mark_unschedulable(obj, pod_key, text)
        self._forget()
        return self._next(now)

    def _next(self, now: float) -> float | None:
        """When to run again: the earliest pod that becomes due without a new event."""
        at = self.queue.next_due(now)
        return None if at is None else at - now

    def _failed(self, key: scheduling_queue.PodKey, obj: Mapping[str, Any], model: pod.Pod, message: str,
                rejectors: frozenset[str], now: float) -> None:
        """The pod (``key``: namespace, name) was tried and fits nowhere: into the queue's
        unschedulable pool; its condition and a FailedScheduling event as kube-scheduler's
        handleSchedulingFailure writes them."""
        self.queue.failed(key, model, self.models.signature(model), rejectors, now)
        self._mark_unschedulable(obj, key, message)

    def _bound_models(self) -> dict[str, list[pod.Pod]]:
        """:meth:`_pods_on` of every node with bound pods, read again only for the nodes whose pods
        changed since the last pass (shared: read-only)."""
        kept = self._models_by_node
        if kept is None:
            kept = self._models_by_node = {name: self._pods_on(name) for name in sorted(self._bound)}
        else:
            for name in self._stale:
                if name in self._bound:
                    kept[name] = self._pods_on(name)
                else:
                    kept.pop(name, None)
        self._stale.clear()
        return kept

    def _nodes(self) -> list[node.Node]:
        """The models of the nodes by name (those that can be read), read again only after a Node
        event (shared: read-only)."""
        if self._node_models is None:
            models = (self.models.node_model(self._node_objs[k]) for k in sorted(self._node_objs))
            self._node_models = [m for m in models if m is not None]
        return self._node_models

    def _pods_on(self, name: str) -> list[pod.Pod]:
        """Models of the pods bound to node ``name`` (the same list while none of them changed)."""
        models = self._node_pods.get(name)
        if models is None:
            models = [m for m in (self.models.pod_model(p) for p in self._bound[name].values()) if m is not None]
            self._node_pods[name] = models
            anti = sum(1 for m in models if _required_anti(m))
            if anti:
                self._anti[name] = anti
            else:
                self._anti.pop(name, None)
        return models

    def _existing_node(self, n: node.Node, pods: list[pod.Pod]) -> tuple[
            node.Node, list[pod.Pod], results.ExistingNode, dict[str, int]]:
        """What the core is told about node ``n`` holding ``pods``, built again only when either
        changed."""
        hit = self._existing.get(n.name)
        if hit is not None and hit[0] is n and hit[1] is pods:
            return hit
        free = {d: n.allocatable.get(d, 0) for d in _FLOOR_DIMS}
        for p in pods:
            req = p.requests
            for d in _FLOOR_DIMS:
                free[d] -= req.get(d, 0)
        built = (n, pods, results.ExistingNode(
            name=n.name, labels=n.labels, taints=tuple(n.taints), allocatable=n.allocatable,
            pods=pods, nodepool=n.labels.get(labels.NODEPOOL), schedulable=not n.unschedulable), free)
        self._existing[n.name] = built
        return built

    def _usage(self, n: node.Node, pods: Sequence[pod.Pod]) -> tuple[dict[str, int], set[unschedulable.Port]]:
        """:func:`karpy.simulator.unschedulable.usage`, kept while the node's model and pod list stay
        the same objects (read-only)."""
        hit = self._used.get(n.name)
        if hit is not None and hit[0] is n and hit[1] is pods:
            return hit[2]
        used = unschedulable.usage(n, pods)
        self._used[n.name] = (n, pods, used)
        return used

    def _forget(self) -> None:
        self.models.forget(
            lambda: [*(interface.uid_of(p) for p in self._pending.values()),
                     *(interface.uid_of(p) for pods in self._bound.values() for p in pods.values())],
            lambda: (interface.uid_of(p) for p in self._pending.values()),
            len(self._pending) + len(self._bound_at), len(self._pending))

    def _bind(self, obj: Mapping[str, Any], model: pod.Pod, node_name: str) -> pod.Pod | None:
        """Bind in one write (the pods/binding subresource); the bound pod's model, or None if it vanished."""
        name, ns = interface.name_of(obj), interface.namespace_of(obj)
        uid = interface.uid_of(obj) or "/".join(interface.meta_key(obj))
        self.models.binding = (uid, model, node_name)
        try:
            stored = self.cluster.bind(name, ns, node_name)
            self.models.pod_entry(stored)  # the bound pod's model: the pending one with its node
        except (errors.NotFound, errors.Conflict):
            return None
        finally:
            self.models.binding = None
        self.bound += 1
        return self.models.bound_model(uid) or model

    def _mark_unschedulable(self, obj: Mapping[str, Any], key: scheduling_queue.PodKey, message: str) -> None:
        """PodScheduled=False/Unschedulable with ``message`` on pod ``key`` (namespace, name),
        written only when it changes, and a FailedScheduling event for this try (the recorder
        folds repeats into a series)."""
        current = _condition(obj, "PodScheduled")
        unchanged = current is not None and current.get("message") == message and \
            current.get("status") == "False" and current.get("reason") == UNSCHEDULABLE
        if not unchanged:
            ns, name = key
            ts = clock_mod.rfc3339(self.clock.now())
            keep_since = current is not None and current.get("status") == "False"
            cond = {"type": "PodScheduled", "status": "False", "reason": UNSCHEDULABLE, "message": message,
                    "lastTransitionTime": (current or {}).get("lastTransitionTime", ts) if keep_since else ts}
            conditions = [dict(c) for c in (obj.get("status") or {}).get("conditions") or ()
                          if c.get("type") != "PodScheduled"]
            conditions.insert(0, cond)
            try:
                self.cluster.patch_status("Pod", name, {"status": {"conditions": conditions}}, ns)
            except errors.NotFound:
                return
        if self.recorder is not None:
            self.recorder.series(obj, "Warning", "FailedScheduling", message)


_FLOOR_DIMS = ("cpu", "memory", "pods")
_NO_PODS: list[pod.Pod] = []


def _needs_every_node(pending: Sequence[pod.Pod], anti: Mapping[str, int]) -> bool:
    """Topology decides: pod (anti-)affinity or spread constraints count pods on full nodes too
    (``anti``: node -> how many of its pods have required anti-affinity)."""
    for p in pending:
        if p.topology_spread_constraints or p.pod_affinity is not None or p.pod_anti_affinity is not None:
            return True
    return any(anti.values())


def _required_anti(p: pod.Pod) -> bool:
    return p.pod_anti_affinity is not None and bool(p.pod_anti_affinity.required)
