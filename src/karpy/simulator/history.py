"""What karpy did during a run, for the table's story: every NodeClaim launched, and the ones disrupted.

:class:`NodeClaimHistory` watches NodeClaims from the start of a run and keeps one record per NodeClaim
ever created, even after it is gone: its name, NodePool, when it was created, and - as soon as its
launch fills them in - instance type, zone, capacity type and node; when it was deleted. The run's
events then add what karpy said about it (:func:`story`): how many pods were nominated to it, the
disruption that removed it (``Disrupting Node: <Method>/<Decision>``) and which NodeClaims were
launched to replace it. Pure bookkeeping: nothing here writes the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import labels
from karpy.disruption import orchestrator
from karpy.kube import interface

DISRUPTING = "Disrupting Node: "
INVOLUNTARY = frozenset({"SpotInterrupted", "InstanceStopping", "InstanceTerminating", "InstanceUnhealthy"})
"""Events on a NodeClaim that the cloud ended (interruption), disrupted without a disruption command."""


class NodeClaimHistory:
    """A NodeClaim watch handler; :meth:`records` lists what it saw, in creation order."""

    def __init__(self, now: Any, start: float) -> None:
        self._now = now
        self._start = start
        self._records: dict[str, dict[str, Any]] = {}
        self._claim_of_node: dict[str, str] = {}
        self._counted: set[str] = set()
        """Uids of the pods already counted on a NodeClaim's node."""

    def pod(self, event: str, obj: dict[str, Any]) -> None:
        """A Pod watch handler: each pod (not a DaemonSet's) bound to a NodeClaim's node counts once
        in that NodeClaim's ``pods``."""
        node = (obj.get("spec") or {}).get("nodeName")
        if not node or event == interface.DELETED:
            return
        claim = self._claim_of_node.get(node)
        uid = interface.uid_of(obj) or "/".join(interface.meta_key(obj))
        if claim is None or uid in self._counted:
            return
        if any(ref.get("kind") == "DaemonSet" for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()):
            return
        self._counted.add(uid)
        self._records[claim]["pods"] += 1

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        name = interface.name_of(obj)
        t = round(self._now() - self._start, 3)
        rec = self._records.get(name)
        if rec is None:
            if event == interface.DELETED:
                return
            rec = self._records[name] = {"name": name, "created": t, "deleted": None, "nodepool": "",
                                         "instanceType": "", "zone": "", "capacityType": "", "node": "", "pods": 0}
        md = obj.get("metadata") or {}
        lb = md.get("labels") or {}
        rec["nodepool"] = lb.get(labels.NODEPOOL, rec["nodepool"])
        rec["instanceType"] = lb.get(labels.INSTANCE_TYPE, rec["instanceType"])
        rec["zone"] = lb.get(labels.ZONE, rec["zone"])
        rec["capacityType"] = lb.get(labels.CAPACITY_TYPE, rec["capacityType"])
        rec["node"] = (obj.get("status") or {}).get("nodeName") or rec["node"]
        if rec["node"]:
            self._claim_of_node[rec["node"]] = name
        if event == interface.DELETED and rec["deleted"] is None:
            rec["deleted"] = t

    def records(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._records.values()]


def story(claims: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The NodeClaim records (``pods``: the pods that ran on its node, DaemonSets' aside) with what
    karpenter's events said of each: ``launchedFor`` (``provisioning`` or the disruption reason of a
    replacement), ``disrupted`` ({``t``, ``reason``} or None: a ``Disrupting Node: <Method>/<Decision>``,
    or an involuntary one such as ``SpotInterrupted``) and ``replacedBy``: for a voluntary disruption
    the NodeClaims launched for it; for an involuntary one the NodeClaims provisioning launched between
    the warning and two minutes after the NodeClaim was gone (a reading of the timeline, not a link
    karpy records); empty when nothing replaced it."""
    out = {str(c["name"]): {**c, "launchedFor": "provisioning", "disrupted": None, "replacedBy": []}
           for c in claims}
    involuntary: list[tuple[float, str, str]] = []
    launching: list[tuple[float, str, str]] = []  # (t, NodeClaim, reason) of disruption replacements
    for e in events:
        if e.get("source") != "karpenter":
            continue
        obj = e.get("involvedObject") or {}
        reason = e.get("reason")
        if obj.get("kind") == "NodeClaim" and reason in INVOLUNTARY and obj.get("name") in out:
            involuntary.append((float(e["t"]), str(obj["name"]), str(reason)))
        elif obj.get("kind") == "NodeClaim" and reason == "DisruptionLaunching":
            why = str(e.get("message", "")).removeprefix("Launching NodeClaim: ")
            launching.append((float(e["t"]), str(obj.get("name")), why))
            if obj.get("name") in out:
                out[str(obj["name"])]["launchedFor"] = why
        elif obj.get("kind") == "NodeClaim" and reason == "DisruptionTerminating" and obj.get("name") in out:
            rec = out[str(obj["name"])]
            if rec["disrupted"] is None:
                rec["disrupted"] = {"t": float(e["t"]), "reason": str(e.get("message", "")).removeprefix(DISRUPTING)}
    for t, name, reason in involuntary:
        rec = out[name]
        if rec["disrupted"] is None:
            rec["disrupted"] = {"t": t, "reason": reason}
            gone = rec["deleted"] if rec["deleted"] is not None else t
            rec["replacedBy"] = [c["name"] for c in out.values() if c["launchedFor"] == "provisioning"
                                 and t <= c["created"] <= gone + 120.0 and c["name"] != name]
    for rec in out.values():
        d = rec["disrupted"]
        if d is not None and d["reason"].endswith("/Replace") and not rec["replacedBy"]:
            # the replacements: launched for this disruption method before the candidate was terminated
            # and after the previous command of the same method had terminated its candidates
            method = d["reason"].split("/", 1)[0]
            rec["replacedBy"] = [n for t, n, why in launching if t <= d["t"] and _same_method(why, method)
                                 and t > _previous_termination(out.values(), method, d["t"])]
    return list(out.values())


def _same_method(launch_reason: str, method: str) -> bool:
    """``Launching NodeClaim: Underutilized`` replaces for ``Consolidation/Replace``, and so on."""
    return orchestrator.METHOD_NAMES.get(launch_reason, launch_reason) == method


def _previous_termination(records: Any, method: str, before: float) -> float:
    times = [r["disrupted"]["t"] for r in records if r["disrupted"] is not None
             and r["disrupted"]["reason"].startswith(method + "/") and r["disrupted"]["t"] < before]
    return max(times, default=-1.0)
