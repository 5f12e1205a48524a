"""The ``nodeoverlay`` controller: Karpenter v1.14's NodeOverlay validation controller.

Registered by :func:`karpy.operator.register_all` when the ``NodeOverlay`` feature gate is on. One key
(:data:`KEY`): every NodeOverlay, NodePool and NodeClass change queues it, and it runs again every
:data:`RESYNC` seconds (Karpenter's 6 h). A reconcile

* reads every NodeOverlay and NodePool (NodePools being deleted are left out), and each NodePool's
  instance types from the *undecorated* cloud (a NodePool whose types cannot be read is left out and
  retried: its pods wait, as with Karpenter's ``UnevaluatedNodePoolError``);
* evaluates the overlays (:func:`karpy.cloudprovider.overlay.evaluate`) and hands the result to the
  :class:`karpy.cloudprovider.overlay_provider.OverlaidProvider` every other controller uses;
* writes each overlay's conditions, as Karpenter does: ``ValidationSucceeded`` True, or False with reason
  ``RuntimeValidation`` (what is wrong) or ``Conflict`` (``conflict with another overlay``), and the root
  ``Ready`` (True, or False with reason ``UnhealthyDependents``); ``lastTransitionTime`` moves only when a
  status changes; nothing is written when nothing changed;
* tells disruption that consolidation must look again (``on_change``): prices and capacity changed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.api import errors as api_errors
from karpy.api import nodeoverlay, nodepool
from karpy.cloudprovider import instancetype, overlay, overlay_provider
from karpy.controllers import nodeclass_status, runtime
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.controllers.nodeoverlay")

NAME = "nodeoverlay.controller"
KEY = "nodeoverlays"
RESYNC = 6 * 3600.0
RETRY = 10.0
"""After a NodePool whose instance types could not be read, or a status write that met a newer object."""


class NodeOverlayController:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, cloud: Any, decorated: overlay_provider.OverlaidProvider,
                 clock: clock_mod.Clock, *, nodeclass_kinds: Sequence[str] = (),
                 on_change: Callable[[], None] | None = None) -> None:
        self.cluster = cluster
        self.cloud = cloud
        self.decorated = decorated
        self.clock = clock
        self.nodeclass_kinds = tuple(nodeclass_kinds)
        self.on_change = on_change
        self.evaluations = 0
        self._generations: dict[str, Any] = {}
        decorated.refresh = self._refresh

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [
            ("NodeOverlay", self._spec_change), ("NodePool", self._spec_change),
            *((k, self._spec_change) for k in self.nodeclass_kinds)])

    def _spec_change(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        """A new generation, a creation or a deletion (Karpenter's GenerationChangedPredicate); not a
        status write."""
        if event in (interface.ADDED, interface.DELETED):
            return (KEY,)
        seen = (obj.get("metadata") or {}).get("generation")
        name = f"{obj.get('kind')}/{interface.name_of(obj)}"
        if seen is None or self._generations.get(name) != seen:
            self._generations[name] = seen
            return (KEY,)
        return ()

    # -------------------------------------------------------------------------------- evaluation

    def _refresh(self) -> None:
        self.evaluate()

    def evaluate(self) -> tuple[overlay.Store, dict[str, str], bool]:
        """Evaluate every overlay now and hand the store to the decorated cloud; returns the store, the
        overlays that could not be read (name -> why) and whether a NodePool's types could not be read."""
        raws = self.cluster.list("NodeOverlay")
        parsed: list[nodeoverlay.NodeOverlay] = []
        unreadable: dict[str, str] = {}
        for raw in raws:
            try:
                parsed.append(nodeoverlay.NodeOverlay.from_manifest(raw))
            except api_errors.ValidationError as exc:
                unreadable[interface.name_of(raw)] = "; ".join(
                    f"{e.path}: expected {e.expected}, found {e.found!r}" for e in exc.errors)
        pools: list[nodepool.NodePool] = []
        for raw in self.cluster.list("NodePool"):
            if interface.is_terminating(raw):
                continue
            try:
                pools.append(nodepool.NodePool.from_manifest(raw))
            except api_errors.ValidationError as exc:
                log.warning("%s: NodePool %s cannot be read: %s", NAME, interface.name_of(raw), exc)
        types: dict[str, list[instancetype.InstanceType]] = {}
        failed = False
        for p in pools:
            try:
                types[p.name] = list(self.cloud.get_instance_types(p))
            except Exception as exc:  # one NodePool's failure must not stop the others
                failed = True
                log.warning("%s: listing instance types for nodepool %s: %s", NAME, p.name, exc)
        store = overlay.evaluate(parsed, pools, types)
        self.decorated.use(store)
        self.evaluations += 1
        if self.on_change is not None:
            self.on_change()
        return store, unreadable, failed

    def reconcile(self, key: str) -> float | None:
        store, unreadable, failed = self.evaluate()
        retry = False
        for raw in self.cluster.list("NodeOverlay"):
            name = interface.name_of(raw)
            why = unreadable.get(name) or store.invalid.get(name)
            if why:
                conditions = _conditions("False", nodeoverlay.REASON_RUNTIME, why)
                log.warning("%s: NodeOverlay %s is not applied: %s", NAME, name, why)
            elif name in store.conflicts:
                conditions = _conditions("False", nodeoverlay.REASON_CONFLICT, nodeoverlay.CONFLICT_MESSAGE)
                log.warning("%s: NodeOverlay %s is not applied: %s", NAME, name, nodeoverlay.CONFLICT_MESSAGE)
            else:
                conditions = _conditions("True", nodeoverlay.VALIDATION_SUCCEEDED, "")
            retry |= self._write(raw, conditions)
        return RETRY if failed or retry else RESYNC

    def _write(self, raw: Mapping[str, Any], conditions: list[dict[str, Any]]) -> bool:
        """Write the conditions when they changed; True when the object moved on (re-evaluate soon)."""
        gen = (raw.get("metadata") or {}).get("generation")
        if isinstance(gen, int) and not isinstance(gen, bool):
            for c in conditions:
                c["observedGeneration"] = gen
        status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
        old = [c for c in (status or {}).get("conditions") or () if isinstance(c, Mapping)]
        new = nodeclass_status.merge_conditions(old, conditions, self.clock.now())
        if _strip(old) == _strip(new):
            return False
        updated = copy.deepcopy(dict(raw))
        updated["status"] = {**(status or {}), "conditions": new}
        try:
            self.cluster.update_status(updated)
        except (kube_errors.Conflict, kube_errors.NotFound):
            return True
        return False


def _conditions(status: str, reason: str, message: str) -> list[dict[str, Any]]:
    ready = {"type": nodeoverlay.READY, "status": "True", "reason": nodeoverlay.READY, "message": ""} \
        if status == "True" else {"type": nodeoverlay.READY, "status": "False", "reason": "UnhealthyDependents",
                                  "message": f"{nodeoverlay.VALIDATION_SUCCEEDED}=False"}
    return [{"type": nodeoverlay.VALIDATION_SUCCEEDED, "status": status, "reason": reason, "message": message},
            ready]


def _strip(conditions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions),
                  key=lambda c: str(c.get("type")))


def register(manager: runtime.Manager, cluster: interface.Cluster, cloud: Any,
             decorated: overlay_provider.OverlaidProvider, clock: clock_mod.Clock, *,
             nodeclass_kinds: Sequence[str] = (), on_change: Callable[[], None] | None = None) -> NodeOverlayController:
    """Register the controller and queue its first reconcile."""
    ctrl = NodeOverlayController(cluster, cloud, decorated, clock, nodeclass_kinds=nodeclass_kinds,
                                 on_change=on_change)
    manager.register(ctrl.controller())
    manager.enqueue(NAME, KEY)
    return ctrl
