"""``is_provisionable`` (inlined field reads) answers what the plain reading of the rules answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import pod as pod_mod
from karpy.controllers import provisionable
from karpy.kube import interface


def _reference(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if spec.get("nodeName") or interface.is_terminating(obj):
        return False
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    for ref in interface.owner_references(obj):
        if ref.get("controller") and ref.get("kind") in ("DaemonSet", "Node"):
            return False
    if pod_mod.MIRROR_POD_ANNOTATION in interface.annotations_of(obj):
        return False
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return bool(c.get("status") == "False" and c.get("reason") == "Unschedulable")
    return False


_CONDITION = st.fixed_dictionaries({"type": st.sampled_from(["PodScheduled", "Ready"]),
                                    "status": st.sampled_from(["True", "False"]),
                                    "reason": st.sampled_from(["Unschedulable", "SchedulerError", ""])})
_POD = st.fixed_dictionaries({
    "metadata": st.fixed_dictionaries({}, optional={
        "deletionTimestamp": st.sampled_from(["", "2026-01-01T00:00:00Z"]),
        "ownerReferences": st.lists(st.fixed_dictionaries({
            "kind": st.sampled_from(["ReplicaSet", "DaemonSet", "Node"]), "controller": st.booleans()}), max_size=2),
        "annotations": st.dictionaries(st.sampled_from([pod_mod.MIRROR_POD_ANNOTATION, "other"]), st.just("x"))}),
    "spec": st.fixed_dictionaries({}, optional={"nodeName": st.sampled_from(["", "n1"])}),
    "status": st.fixed_dictionaries({}, optional={"phase": st.sampled_from(["Pending", "Failed", "Succeeded"]),
                                                  "conditions": st.lists(_CONDITION, max_size=3)}),
})


@settings(max_examples=400, deadline=None)
@given(pod=_POD)
def test_a_pod_is_provisionable_exactly_when_the_rules_say_so(pod: dict[str, Any]) -> None:
    assert provisionable.is_provisionable(pod) == _reference(pod)
