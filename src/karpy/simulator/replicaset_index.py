"""The simulated ReplicaSet controller's index of each ReplicaSet's pods, fed by the Pod watch.

:class:`PodIndex` keeps, per ReplicaSet ``(namespace, name)``, its pods by name (the latest stored
version of each) and their :class:`karpy.simulator.replicaset_tally.Tallies`. A write that leaves
what the tally counts alone - the same labels, controller owner uid, activeness and readiness, as
most pod status writes (the kube-scheduler's condition, a container status) do - only replaces the
indexed object; any other change counts the pod again. Pure: nothing here reads or writes the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from karpy.kube import interface
from karpy.simulator import replicaset_tally

Key = tuple[str, str]


class PodIndex:
    """See the module docstring; ``is_active`` / ``is_ready`` / ``controller_ref`` are the
    controller's own pod predicates (passed in so both always agree)."""

    def __init__(self, is_active: replicaset_tally.PodCheck, is_ready: replicaset_tally.PodCheck,
                 controller_ref: Callable[[Mapping[str, Any]], Mapping[str, Any] | None]) -> None:
        self._is_active = is_active
        self._is_ready = is_ready
        self._controller_ref = controller_ref
        self.owned: dict[Key, dict[str, dict[str, Any]]] = {}
        """(namespace, ReplicaSet name) -> pod name -> pod."""
        self._owner_of: dict[Key, Key] = {}
        self.tallies = replicaset_tally.Tallies(is_active, is_ready, controller_ref)

    def index(self, event: str, obj: dict[str, Any]) -> None:
        """Follow one watch event of a pod."""
        md = obj.get("metadata") or {}
        ns, name = md.get("namespace") or "", str(md.get("name"))
        ref = self._controller_ref(obj)
        after = (ns, str(ref.get("name"))) if ref is not None and ref.get("kind") == "ReplicaSet" else None
        owner = self._owner_of.get((ns, name)) if event == interface.MODIFIED else None
        if owner is not None and owner == after:
            pods = self.owned.get(owner)
            prev = None if pods is None else pods.get(name)
            if pods is not None and prev is not None and self.counts_alike(prev, obj):
                pods[name] = obj  # counted as before: only the indexed object changes
                return
        before = self._owner_of.pop((ns, name), None)
        self.tallies.uncount((ns, name))
        if before is not None and (before != after or event == interface.DELETED):
            pods = self.owned.get(before)
            if pods is not None:
                pods.pop(name, None)
                if not pods:
                    del self.owned[before]
        if after is not None and event != interface.DELETED:
            self.owned.setdefault(after, {})[name] = obj
            self._owner_of[(ns, name)] = after
            self.tallies.count(after, (ns, name), obj, str((ref or {}).get("uid") or ""))

    def counts_alike(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
        """Two versions of a pod its ReplicaSet's tally counts alike: the same labels, controller
        owner uid, activeness and readiness."""
        bmd, amd = before.get("metadata", {}), after.get("metadata", {})
        if bmd.get("labels") is not amd.get("labels") and bmd.get("labels") != amd.get("labels"):
            return False
        if bmd.get("ownerReferences") is not amd.get("ownerReferences"):
            bref, aref = self._controller_ref(before), self._controller_ref(after)
            if (bref or {}).get("uid") != (aref or {}).get("uid"):
                return False
        return self._is_active(before) == self._is_active(after) and \
            self._is_ready(before) == self._is_ready(after)
