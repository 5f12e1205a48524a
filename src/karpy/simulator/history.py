"""What karpy did during a run, for the table's story: every NodeClaim launched, and the ones disrupted.

:class:`NodeClaimHistory` watches NodeClaims from the start of a run and keeps one record per NodeClaim
ever created, even after it is gone: its name, NodePool, when it was created, and - as soon as its
launch fills them in - instance type, zone, capacity type and node; when it was deleted. The run's
events then add what karpy said about it (:func:`story`): how many pods were nominated to it, the
disruption that removed it (``Disrupting Node: <Method>/<Decision>``) and which NodeClaims were
launched to replace it. Pure bookkeeping: nothing here writes the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import labels
from karpy.disruption import orchestrator
from karpy.kube import interface

DISRUPTING = "Disrupting Node: "
_NOMINATED_ON = re.compile(r"nodeclaim/([^\s,]+)")


class NodeClaimHistory:
    """A NodeClaim watch handler; :meth:`records` lists what it saw, in creation order."""

    def __init__(self, now: Any, start: float) -> None:
        self._now = now
        self._start = start
        self._records: dict[str, dict[str, Any]] = {}

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        name = interface.name_of(obj)
        t = round(self._now() - self._start, 3)
        rec = self._records.get(name)
        if rec is None:
            if event == interface.DELETED:
                return
            rec = self._records[name] = {"name": name, "created": t, "deleted": None, "nodepool": "",
                                         "instanceType": "", "zone": "", "capacityType": "", "node": ""}
        md = obj.get("metadata") or {}
        lb = md.get("labels") or {}
        rec["nodepool"] = lb.get(labels.NODEPOOL, rec["nodepool"])
        rec["instanceType"] = lb.get(labels.INSTANCE_TYPE, rec["instanceType"])
        rec["zone"] = lb.get(labels.ZONE, rec["zone"])
        rec["capacityType"] = lb.get(labels.CAPACITY_TYPE, rec["capacityType"])
        rec["node"] = (obj.get("status") or {}).get("nodeName") or rec["node"]
        if event == interface.DELETED and rec["deleted"] is None:
            rec["deleted"] = t

    def records(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._records.values()]


def story(claims: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The NodeClaim records with what karpenter's events said of each: ``pods`` (distinct pods
    nominated to it), ``launchedFor`` (``provisioning`` or the disruption reason of a replacement),
    ``disrupted`` ({``t``, ``reason``} or None) and ``replacedBy`` (names of the NodeClaims launched
    for the disruption that removed it; empty when it was deleted without replacement)."""
    out = {str(c["name"]): {**c, "pods": 0, "launchedFor": "provisioning", "disrupted": None, "replacedBy": []}
           for c in claims}
    nominated: dict[str, set[tuple[str, str]]] = {}
    launching: list[tuple[float, str, str]] = []  # (t, NodeClaim, reason) of disruption replacements
    for e in events:
        if e.get("source") != "karpenter":
            continue
        obj = e.get("involvedObject") or {}
        reason = e.get("reason")
        if reason == "Nominated" and obj.get("kind") == "Pod":
            for claim in _NOMINATED_ON.findall(str(e.get("message", ""))):
                nominated.setdefault(claim, set()).add((str(obj.get("namespace", "")), str(obj.get("name", ""))))
        elif obj.get("kind") == "NodeClaim" and reason == "DisruptionLaunching":
            why = str(e.get("message", "")).removeprefix("Launching NodeClaim: ")
            launching.append((float(e["t"]), str(obj.get("name")), why))
            if obj.get("name") in out:
                out[str(obj["name"])]["launchedFor"] = why
        elif obj.get("kind") == "NodeClaim" and reason == "DisruptionTerminating" and obj.get("name") in out:
            rec = out[str(obj["name"])]
            if rec["disrupted"] is None:
                rec["disrupted"] = {"t": float(e["t"]), "reason": str(e.get("message", "")).removeprefix(DISRUPTING)}
    for name, pods in nominated.items():
        if name in out:
            out[name]["pods"] = len(pods)
    for rec in out.values():
        d = rec["disrupted"]
        if d is not None and d["reason"].endswith("/Replace"):
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
