"""NodeClass status and NodePool readiness, as Karpenter v1 keeps them.

Two controllers and the rule the provisioner applies:

* ``nodeclass.status`` watches the NodeClass kinds in :data:`KINDS` (EC2NodeClass, AKSNodeClass) and
  writes ``cloud.resolve_node_class(obj)`` to the status subresource whenever it differs from what is
  stored, setting ``lastTransitionTime`` on a condition whose status changed (kept otherwise). It looks
  again every :data:`RESYNC` seconds (the cloud's view may change: a subnet deleted, an AMI
  published). A :class:`karpy.cloudprovider.errors.CloudProviderError` keeps the previous status and
  is retried.
* ``nodepool.readiness`` sets the NodePool conditions Karpenter v1 sets: ``ValidationSucceeded``
  (True: karpy validates before storing), ``NodeClassReady`` (False with reason ``NodeClassNotFound``
  when the referenced NodeClass does not exist, ``NodeClassTerminating`` when it is being deleted,
  the NodeClass's own reason when its Ready condition is False, Unknown with
  ``NodeClassReadinessUnknown`` before its status is written) and the root ``Ready`` (True when both
  are True, else False with reason ``UnhealthyDependents`` naming the failing condition). Conditions
  of other types are kept. A NodePool whose ``spec``, ``template``, template ``spec`` or
  ``nodeClassRef`` is not a mapping gets ``ValidationSucceeded`` False naming the field (and a log
  line); a NodeClass whose status is not a mapping makes its NodePools' ``NodeClassReady`` False
  (``NodeClassInvalid``). Neither ever stops the readiness of the other objects.
* :func:`readiness` is what the provisioner asks before planning with a NodePool: a NodePool whose
  NodeClass (of a kind in :data:`KINDS`) is missing or not Ready is skipped, with the reason in its
  pods' FailedScheduling events. NodeClass kinds outside :data:`KINDS` (e.g. KWOK's) are not gated.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.cloudprovider import errors as cloud_errors
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import runtime
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.controllers.nodeclass_status")

NAME = "nodeclass.status"
READINESS_NAME = "nodepool.readiness"
KINDS = ("EC2NodeClass", "AKSNodeClass")
RESYNC = 300.0
NODECLASS_READY = "NodeClassReady"
VALIDATION_SUCCEEDED = "ValidationSucceeded"
READY = "Ready"


@dataclass(frozen=True, slots=True)
class Readiness:
    status: str
    """``True``, ``False`` or ``Unknown``."""
    reason: str
    message: str

    @property
    def ready(self) -> bool:
        return self.status == "True"


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (a hostile object must not raise here)."""
    return value if isinstance(value, Mapping) else {}


def _conditions(obj: Any) -> list[Mapping[str, Any]]:
    """The well-formed entries of ``obj.status.conditions`` (none when any level is not as expected)."""
    conditions = _mapping(_mapping(obj).get("status")).get("conditions")
    return [c for c in conditions if isinstance(c, Mapping)] if isinstance(conditions, list) else []


def _condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    for c in _conditions(obj):
        if c.get("type") == type_:
            return c
    return None


def shape_problem(pool: Mapping[str, Any]) -> str:
    """Why NodePool ``pool`` cannot be read for readiness (``""`` when it can): ``spec``,
    ``spec.template``, ``spec.template.spec`` or ``nodeClassRef`` that is there but not a mapping."""
    value: Any = pool
    path = ""
    for key in ("spec", "template", "spec", "nodeClassRef"):
        value = value.get(key)
        path = f"{path}.{key}" if path else key
        if value is None:
            return ""
        if not isinstance(value, Mapping):
            return f"{path} is not a mapping (found {type(value).__name__})"
    return ""


def _ref(pool: Mapping[str, Any]) -> Mapping[str, Any] | None:
    ref = _mapping(_mapping(_mapping(_mapping(pool).get("spec")).get("template")).get("spec")).get("nodeClassRef")
    return ref if isinstance(ref, Mapping) else None


def readiness(cluster: interface.Cluster, pool: Mapping[str, Any]) -> Readiness:
    """Whether NodePool ``pool`` (a dict) may be provisioned from: its NodeClass's readiness."""
    ref = _ref(pool)
    if ref is None:
        return Readiness("True", "NodeClassReady", "")
    kind, name = ref.get("kind"), ref.get("name")
    if not isinstance(kind, str | None) or not isinstance(name, str | None):
        return Readiness("False", "NodeClassInvalid", "spec.template.spec.nodeClassRef kind and name must be strings")
    return readiness_of(cluster, kind or "", name or "")


def readiness_of(cluster: interface.Cluster, kind: str, name: str) -> Readiness:
    """The readiness of NodeClass ``kind``/``name`` (always ready for kinds outside :data:`KINDS`)."""
    if kind not in KINDS:
        return Readiness("True", "NodeClassReady", "")
    try:
        nc = cluster.get(kind, name)
    except kube_errors.NotFound:
        return Readiness("False", "NodeClassNotFound", f"{kind} {name} not found on cluster")
    if interface.is_terminating(nc):
        return Readiness("False", "NodeClassTerminating", f"{kind} {name} is terminating")
    if not isinstance(nc.get("status"), Mapping | None):
        return Readiness("False", "NodeClassInvalid",
                         f"{kind} {name} has a status that is not a mapping (found {type(nc['status']).__name__})")
    cond = _condition(nc, READY)
    if cond is None or cond.get("status") not in ("True", "False"):
        return Readiness("Unknown", "NodeClassReadinessUnknown", f"{kind} {name} readiness unknown")
    if cond.get("status") == "False":
        reason = cond.get("reason")
        reason = reason if isinstance(reason, str) and reason else "NodeClassNotReady"
        message = cond.get("message")
        message = message if isinstance(message, str) else ""
        return Readiness("False", reason, f"{kind} {name} is not ready" + (f": {message}" if message else ""))
    return Readiness("True", "NodeClassReady", "")


def split_ready(cluster: interface.Cluster, pools: Iterable[Any]) -> tuple[list[Any], dict[str, Readiness]]:
    """NodePool models (with ``name`` and ``node_class_ref``) that may be provisioned from, and the
    readiness of those that may not, by name."""
    ready: list[Any] = []
    skipped: dict[str, Readiness] = {}
    for pool in pools:
        ref = pool.node_class_ref
        r = readiness_of(cluster, ref.kind, ref.name) if ref is not None else Readiness("True", "", "")
        if r.ready:
            ready.append(pool)
        else:
            skipped[pool.name] = r
    return ready, skipped


def describe_skipped(skipped: Mapping[str, Readiness]) -> str:
    """``"; NodePool a not used: EC2NodeClass x not found on cluster (NodeClassNotFound)"`` or ``""``."""
    return "".join(f"; NodePool {name} not used: {r.message} ({r.reason})" for name, r in sorted(skipped.items()))


def merge_conditions(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]],
                     now: float) -> list[dict[str, Any]]:
    """``new`` conditions with ``lastTransitionTime`` kept from ``old`` when the status did not change
    (set to ``now`` otherwise); conditions of ``old`` whose type is not in ``new`` are kept."""
    before = {str(c.get("type")): c for c in old if isinstance(c, Mapping)}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in new:
        cond = dict(c)
        prev = before.get(str(cond.get("type")))
        seen.add(str(cond.get("type")))
        if prev is not None and prev.get("status") == cond.get("status") and prev.get("lastTransitionTime"):
            cond["lastTransitionTime"] = prev["lastTransitionTime"]
        else:
            cond["lastTransitionTime"] = clock_mod.rfc3339(now)
        out.append(cond)
    out.extend(dict(c) for t, c in before.items() if t not in seen)
    return sorted(out, key=lambda c: str(c.get("type")))


def _strip_times(conditions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions),
                  key=lambda c: str(c.get("type")))


class NodeClassStatus:
    """Writes each NodeClass's status from the cloud (see the module docstring)."""

    def __init__(self, cluster: interface.Cluster, cloud: cp_interface.CloudProvider,
                 clock: clock_mod.Clock, kinds: Sequence[str] = KINDS) -> None:
        self.cluster = cluster
        self.cloud = cloud
        self.clock = clock
        self.kinds = tuple(kinds) or KINDS
        self.writes = 0

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [(k, self._mapper(k)) for k in self.kinds])

    @staticmethod
    def _mapper(kind: str) -> runtime.Mapper:
        def keys(event: str, obj: dict[str, Any]) -> Iterable[str]:
            return () if event == interface.DELETED else (f"{kind}/{interface.name_of(obj)}",)
        return keys

    def reconcile(self, key: str) -> float | None:
        kind, _, name = key.partition("/")
        try:
            obj = self.cluster.get(kind, name)
        except kube_errors.NotFound:
            return None
        try:
            status = dict(self.cloud.resolve_node_class(copy.deepcopy(obj)))
        except cloud_errors.CloudProviderError as exc:
            log.warning("nodeclass.status: cannot resolve %s %s: %s", kind, name, exc)
            if exc.retryable:
                raise
            return RESYNC
        old = dict(_mapping(obj.get("status")))
        old_conditions = _conditions(obj)
        status["conditions"] = merge_conditions(old_conditions, status.get("conditions") or [], self.clock.now())
        same = {k: v for k, v in old.items() if k != "conditions"} == \
            {k: v for k, v in status.items() if k != "conditions"} and \
            _strip_times(old_conditions) == _strip_times(status["conditions"])
        if not same:
            updated = copy.deepcopy(obj)
            updated["status"] = status
            self.cluster.update_status(updated)  # Conflict: retried by the manager after a re-read
            self.writes += 1
        return RESYNC


class NodePoolReadiness:
    """Keeps the NodePool conditions of Karpenter v1 (see the module docstring)."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, kinds: Sequence[str] = KINDS) -> None:
        self.cluster = cluster
        self.clock = clock
        self.kinds = tuple(kinds) or KINDS

    def controller(self) -> runtime.Controller:
        return runtime.Controller(READINESS_NAME, self.reconcile,
                                  [("NodePool", runtime.by_name), *((k, self._pools_of) for k in self.kinds)])

    def _pools_of(self, _event: str, obj: dict[str, Any]) -> Iterable[str]:
        """The NodePools that reference NodeClass ``obj``; a NodePool that cannot be read is skipped (its
        own reconcile says why), never the others."""
        kind, name = str(obj.get("kind") or ""), interface.name_of(obj)
        out = []
        for pool in self.cluster.list("NodePool"):
            ref = _ref(pool)
            if ref is not None and ref.get("name") == name and (ref.get("kind") or kind) == kind:
                out.append(interface.name_of(pool))
        return out

    def conditions(self, pool: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The three conditions this controller owns, for NodePool ``pool`` now. A NodePool whose
        ``spec``, ``template``, template ``spec`` or ``nodeClassRef`` is not a mapping gets
        ``ValidationSucceeded`` False saying which (and is not Ready)."""
        gen = _mapping(pool.get("metadata")).get("generation")
        problem = shape_problem(pool)
        if problem:
            log.warning("%s: NodePool %s cannot be read: %s", READINESS_NAME, interface.name_of(pool), problem)
            return self._stamp([
                {"type": NODECLASS_READY, "status": "Unknown", "reason": "NodePoolInvalid", "message": problem},
                {"type": VALIDATION_SUCCEEDED, "status": "False", "reason": "ValidationFailed", "message": problem},
                {"type": READY, "status": "False", "reason": "UnhealthyDependents",
                 "message": f"{VALIDATION_SUCCEEDED}=False"}], gen)
        r = readiness(self.cluster, pool)
        nodeclass = {"type": NODECLASS_READY, "status": r.status, "reason": r.reason, "message": r.message}
        validation = {"type": VALIDATION_SUCCEEDED, "status": "True", "reason": VALIDATION_SUCCEEDED,
                      "message": ""}
        if r.ready:
            ready = {"type": READY, "status": "True", "reason": READY, "message": ""}
        else:
            ready = {"type": READY, "status": "False" if r.status == "False" else "Unknown",
                     "reason": "UnhealthyDependents", "message": f"{NODECLASS_READY}={r.status}"}
        return self._stamp([nodeclass, validation, ready], gen)

    @staticmethod
    def _stamp(out: list[dict[str, Any]], gen: Any) -> list[dict[str, Any]]:
        if isinstance(gen, int) and not isinstance(gen, bool):
            for c in out:
                c["observedGeneration"] = gen
        return out

    def reconcile(self, key: str) -> float | None:
        try:
            pool = self.cluster.get("NodePool", key)
        except kube_errors.NotFound:
            return None
        old = _conditions(pool)
        new = merge_conditions(old, self.conditions(pool), self.clock.now())
        if _strip_times(old) != _strip_times(new) or not isinstance(pool.get("status"), Mapping | None):
            warning = next((c["message"] for c in new if c["type"] == VALIDATION_SUCCEEDED and c["message"]), None)
            if warning:
                log.warning("%s", warning)
            updated = copy.deepcopy(pool)
            if not isinstance(updated.get("status"), Mapping):
                updated["status"] = {}
            updated["status"]["conditions"] = new
            self.cluster.update_status(updated)
        return None


def register(manager: runtime.Manager, cluster: interface.Cluster, cloud: cp_interface.CloudProvider,
             clock: clock_mod.Clock, *, kinds: Sequence[str] = ()) -> tuple[NodeClassStatus, NodePoolReadiness]:
    """Register both controllers and queue every existing NodeClass (of ``kinds``, default :data:`KINDS`)
    and NodePool."""
    status = NodeClassStatus(cluster, cloud, clock, kinds)
    pools = NodePoolReadiness(cluster, clock, kinds)
    manager.register(status.controller())
    manager.register(pools.controller())
    for kind in status.kinds:
        for obj in cluster.list(kind):
            manager.enqueue(NAME, f"{kind}/{interface.name_of(obj)}")
    for obj in cluster.list("NodePool"):
        manager.enqueue(READINESS_NAME, interface.name_of(obj))
    return status, pools
