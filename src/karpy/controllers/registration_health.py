"""``nodepool.registrationhealth``: the NodePool condition ``NodeRegistrationHealthy``, as Karpenter keeps it.

Karpenter (``pkg/state/nodepoolhealth/tracker.go``, ``pkg/controllers/nodepool/registrationhealth``,
and the NodeClaim lifecycle's ``registration.go`` / ``liveness.go``) keeps, per NodePool, the
outcomes of its last :data:`BUFFER_SIZE` NodeClaims (registered, or deleted by the liveness check
for not launching or registering in time):

* a NodeClaim registers: if the outcomes with this success would be healthy (fewer than
  :data:`THRESHOLD_FALSE` of :data:`BUFFER_SIZE` failures), the condition becomes ``True``;
* a NodeClaim fails: if the outcomes with this failure would be unhealthy (at least half of the
  buffer's size), the condition becomes ``False`` with reason ``RegistrationFailed`` ("Failed to
  register node") when it had launched, else its ``Launched`` condition's reason and message;
* the NodePool's ``generation`` differs from the condition's ``observedGeneration``, or its
  NodeClass's ``generation`` from ``status.nodeClassObservedGeneration`` (either was changed), or the
  condition is missing: it becomes ``Unknown`` and the outcomes are forgotten;
* after a restart the outcomes are rebuilt from the condition (``True``: one success; ``False``:
  enough failures to stay unhealthy).

The lifecycle controller reports liveness failures through :meth:`RegistrationHealth.failed`;
registrations are seen on the NodeClaim watch (``Registered=True``, once per NodeClaim).
"""

from __future__ import annotations

import collections
import copy
import logging
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.controllers import nodeclass_status, runtime
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.controllers.registration_health")

NAME = "nodepool.registrationhealth"
CONDITION = "NodeRegistrationHealthy"
BUFFER_SIZE = 4
THRESHOLD_FALSE = 0.5
UNKNOWN, HEALTHY, UNHEALTHY = "Unknown", "Healthy", "Unhealthy"
MAX_SEEN = 100_000


class Tracker:
    """The outcomes of a NodePool's last :data:`BUFFER_SIZE` NodeClaims (a ring buffer)."""

    def __init__(self) -> None:
        self.outcomes: collections.deque[bool] = collections.deque(maxlen=BUFFER_SIZE)

    def status(self, extra: bool | None = None) -> str:
        """Healthy, Unhealthy or Unknown (nothing recorded); ``extra``: as if one more outcome came."""
        items = list(self.outcomes)
        if extra is not None:
            items = [*items, extra][-BUFFER_SIZE:]
        if not items:
            return UNKNOWN
        return UNHEALTHY if sum(1 for ok in items if not ok) / BUFFER_SIZE >= THRESHOLD_FALSE else HEALTHY

    def set_status(self, status: str) -> None:
        self.outcomes.clear()
        if status == HEALTHY:
            self.outcomes.append(True)
        elif status == UNHEALTHY:
            self.outcomes.extend([False] * int(BUFFER_SIZE * THRESHOLD_FALSE))


class RegistrationHealth:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock) -> None:
        self.cluster = cluster
        self.clock = clock
        self.manager: runtime.Manager | None = None
        self.trackers: dict[str, Tracker] = {}
        """NodePool uid (its name when it has none) -> its outcomes."""
        self._pending: dict[str, list[tuple[bool, str, str]]] = {}
        """NodePool name -> outcomes not applied yet: (success, reason, message)."""
        self._registered: set[str] = set()

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [("NodePool", self._on_nodepool),
                                                         ("NodeClaim", self._on_nodeclaim)])

    @staticmethod
    def _on_nodepool(event: str, obj: dict[str, Any]) -> list[str]:
        return [] if event == interface.DELETED else [interface.name_of(obj)]

    def _on_nodeclaim(self, event: str, obj: dict[str, Any]) -> list[str]:
        name = interface.name_of(obj)
        if event == interface.DELETED:
            self._registered.discard(name)
            return []
        pool = interface.labels_of(obj).get(wk.NODEPOOL)
        if not pool or name in self._registered or not _is_true(obj, "Registered"):
            return []
        if len(self._registered) >= MAX_SEEN:
            self._registered.clear()
        self._registered.add(name)
        self._pending.setdefault(pool, []).append((True, "", ""))
        return [pool]

    def failed(self, claim: dict[str, Any]) -> None:
        """NodeClaim ``claim`` is deleted for not launching or registering in time (liveness)."""
        pool = interface.labels_of(claim).get(wk.NODEPOOL)
        if not pool:
            return
        launched = _condition(claim, "Launched")
        if launched is not None and launched.get("status") == "True":
            reason, message = "RegistrationFailed", "Failed to register node"
        else:
            reason = str((launched or {}).get("reason") or "LaunchFailed")
            message = str((launched or {}).get("message") or "Failed to launch node")
        self._pending.setdefault(pool, []).append((False, reason, message))
        if self.manager is not None:
            self.manager.enqueue(NAME, pool)

    def reconcile(self, key: str) -> float | None:
        try:
            pool = self.cluster.get("NodePool", key)
        except kube_errors.NotFound:
            self._pending.pop(key, None)
            return None
        if (pool.get("metadata") or {}).get("deletionTimestamp"):
            return None
        node_class = self._node_class(pool)
        if node_class is None:
            self._pending.pop(key, None)  # Karpenter ignores NodePools without a supported NodeClass
            return None
        md = pool.get("metadata") or {}
        uid = str(md.get("uid") or key)
        tracker = Tracker()  # a copy, kept only once the status is written
        tracker.outcomes.extend(self.trackers.get(uid, Tracker()).outcomes)
        status = copy.deepcopy(pool.get("status") or {})
        cond = next((c for c in status.get("conditions") or () if c.get("type") == CONDITION), None)
        if tracker.status() == UNKNOWN and cond is not None and cond.get("status") in ("True", "False"):
            tracker.set_status(HEALTHY if cond.get("status") == "True" else UNHEALTHY)  # after a restart
        class_gen = (node_class.get("metadata") or {}).get("generation")
        if cond is None or status.get("nodeClassObservedGeneration") != class_gen \
                or cond.get("observedGeneration") != md.get("generation"):
            cond = self._set(status, "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation",
                             md.get("generation"))
            tracker.set_status(UNKNOWN)
        pending = list(self._pending.get(key, ()))
        for success, reason, message in pending:
            if success and tracker.status(True) == HEALTHY and cond.get("status") != "True":
                cond = self._set(status, "True", CONDITION, "", md.get("generation"))
            elif not success and tracker.status(False) == UNHEALTHY and cond.get("status") != "False":
                cond = self._set(status, "False", reason, message, md.get("generation"))
            tracker.outcomes.append(success)
        status["nodeClassObservedGeneration"] = class_gen
        if status != (pool.get("status") or {}):
            updated = dict(pool)
            updated["status"] = status
            self.cluster.update_status(updated)  # Conflict: retried after a re-read, nothing applied yet
        self.trackers[uid] = tracker
        left = self._pending.get(key, [])[len(pending):]
        if left:
            self._pending[key] = left
        else:
            self._pending.pop(key, None)
        return None

    def _set(self, status: dict[str, Any], value: str, reason: str, message: str, generation: Any) -> dict[str, Any]:
        cond: dict[str, Any] = {"type": CONDITION, "status": value, "reason": reason, "message": message}
        if generation is not None:
            cond["observedGeneration"] = generation
        status["conditions"] = nodeclass_status.merge_conditions(status.get("conditions") or [], [cond],
                                                                 self.clock.now())
        return next(c for c in status["conditions"] if c.get("type") == CONDITION)

    def _node_class(self, pool: dict[str, Any]) -> dict[str, Any] | None:
        ref = ((pool.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef") or {}
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        if not kind or not name:
            return None
        try:
            return self.cluster.get(kind, name)
        except kube_errors.NotFound:
            return None


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == type_), None)


def _is_true(obj: dict[str, Any], type_: str) -> bool:
    c = _condition(obj, type_)
    return c is not None and c.get("status") == "True"


def register(manager: runtime.Manager, cluster: interface.Cluster, clock: clock_mod.Clock) -> RegistrationHealth:
    """Register the controller, mark the NodeClaims registered already as seen, queue every NodePool."""
    ctl = RegistrationHealth(cluster, clock)
    ctl.manager = manager
    manager.register(ctl.controller())
    for claim in cluster.list("NodeClaim"):
        if _is_true(claim, "Registered"):
            ctl._registered.add(interface.name_of(claim))
    for obj in cluster.list("NodePool"):
        manager.enqueue(NAME, interface.name_of(obj))
    return ctl
