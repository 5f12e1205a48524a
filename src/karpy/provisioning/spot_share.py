"""Spot / on-demand share per workload: ``karpy.io/max-spot-percent`` (karpy's own API, not Karpenter's).

A Deployment or StatefulSet annotated ``karpy.io/max-spot-percent: "30"`` wants at most 30 % of its
replicas on spot capacity (aws/karpenter-provider-aws#2508). The rule (docs/spot-share.md):

* **allowed** spot replicas = ``floor(percent * spec.replicas / 100)`` (never above the share: 10
  replicas at 30 % -> 3, at 25 % -> 2; ``0`` keeps the workload off spot, ``100`` changes nothing);
* **on spot** = the workload's pods bound to nodes labelled ``karpenter.sh/capacity-type: spot``;
* of the workload's **pending** pods, the first ``allowed - on spot`` by name are left as they are and
  every other one gets the required node-affinity expression ``karpenter.sh/capacity-type NotIn [spot]``
  (ANDed into each of its terms, as volume topology is), so it can only open or join on-demand (or
  reserved) capacity;
* in consolidation's what-if runs (:func:`keep_off_spot`) a pod of such a workload that is not on spot now
  stays off spot, so no move raises the workload's spot count.

A pod's workload is its controller owner: a StatefulSet, or a ReplicaSet's Deployment (:class:`Workloads`;
the annotation is read on the workload only, not on pods). A value that
is not a whole number from 0 to 100 (``"30"`` or ``"30%"``) is ignored with :class:`Invalid` naming the
object, the field, what is expected and what was found. Pure: works on parsed pods and plain dicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.api import selectors
from karpy.provisioning import results
from karpy.scheduling import volumetopology

ANNOTATION = "karpy.io/max-spot-percent"
KINDS = ("Deployment", "StatefulSet")
OFF_SPOT: volumetopology.Term = (selectors.NodeSelectorRequirement(
    key=wk.CAPACITY_TYPE, operator="NotIn", values=(wk.CAPACITY_TYPE_SPOT,)),)
EXPECTED = 'a whole number of percent from 0 to 100 ("30" or "30%")'

Key = tuple[str, str, str]
"""(kind, namespace, name) of a workload."""


@dataclass(frozen=True)
class Invalid:
    """A workload whose annotation cannot be read: what to tell its owner."""

    kind: str
    namespace: str
    name: str
    found: str

    def message(self) -> str:
        return (f"{self.kind} {self.namespace}/{self.name}: annotation {ANNOTATION}: expected {EXPECTED}, "
                f"found {self.found!r}; the spot share is not applied")


def parse_percent(value: str) -> int | None:
    """``"30"`` / ``"30%"`` -> 30; None when not a whole number from 0 to 100."""
    text = value.strip().removesuffix("%").strip()
    if not text.isdigit():
        return None
    n = int(text)
    return n if 0 <= n <= 100 else None


def allowed(percent: int, replicas: int) -> int:
    """Replicas that may run on spot (the floor: never above the share)."""
    return math.floor(percent * max(0, replicas) / 100)


class Workloads:
    """Annotated Deployments and StatefulSets and which pods belong to them (module docstring)."""

    def __init__(self, deployments: Iterable[Mapping[str, Any]], statefulsets: Iterable[Mapping[str, Any]],
                 replicasets: Iterable[Mapping[str, Any]]) -> None:
        self.shares: dict[Key, tuple[int, int]] = {}
        """Workload -> (percent, spec.replicas)."""
        self.invalid: list[Invalid] = []
        for kind, objs in (("Deployment", deployments), ("StatefulSet", statefulsets)):
            for obj in objs:
                meta = obj.get("metadata") or {}
                raw = (meta.get("annotations") or {}).get(ANNOTATION)
                if raw is None:
                    continue
                key = (kind, str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
                percent = parse_percent(str(raw))
                if percent is None:
                    self.invalid.append(Invalid(*key, str(raw)))
                    continue
                replicas = (obj.get("spec") or {}).get("replicas")
                self.shares[key] = (percent, 1 if replicas is None else int(replicas))
        self._deployment_of: dict[tuple[str, str], str] = {}
        if any(k[0] == "Deployment" for k in self.shares):
            for rs in replicasets:
                meta = rs.get("metadata") or {}
                for ref in meta.get("ownerReferences") or ():
                    if ref.get("controller") and ref.get("kind") == "Deployment":
                        self._deployment_of[(str(meta.get("namespace") or "default"), str(meta.get("name")))] = \
                            str(ref.get("name"))

    def __bool__(self) -> bool:
        return bool(self.shares)

    def of(self, p: pod_mod.Pod) -> Key | None:
        """The annotated workload ``p`` belongs to, or None."""
        ref = p.metadata.controller
        if ref is None:
            return None
        if ref.kind == "ReplicaSet":
            name = self._deployment_of.get((p.namespace, ref.name))
            key: Key | None = ("Deployment", p.namespace, name) if name is not None else None
        else:
            key = (ref.kind, p.namespace, ref.name)
        return key if key in self.shares else None


def read(cluster: Any) -> Workloads:
    """The annotated workloads of a cluster (``karpy.kube.interface.Cluster``); ReplicaSets are only
    listed when a Deployment is annotated. Raises what the cluster's ``list`` raises."""

    def replicasets() -> Iterable[Mapping[str, Any]]:
        yield from cluster.list("ReplicaSet")

    return Workloads(cluster.list("Deployment"), cluster.list("StatefulSet"), replicasets())


def on_spot(nodes: Iterable[results.ExistingNode], workloads: Workloads) -> dict[Key, int]:
    """Each workload's pods on spot nodes."""
    out: dict[Key, int] = {}
    for n in nodes:
        if n.labels.get(wk.CAPACITY_TYPE) != wk.CAPACITY_TYPE_SPOT:
            continue
        for p in n.pods:
            if p.is_terminal or p.metadata.deletion_timestamp is not None:
                continue
            key = workloads.of(p)
            if key is not None:
                out[key] = out.get(key, 0) + 1
    return out


def constrain(pending: Sequence[pod_mod.Pod], workloads: Workloads,
              spot_now: Mapping[Key, int]) -> list[pod_mod.Pod]:
    """The pending pods, those over their workload's spot share kept off spot (module docstring)."""
    if not workloads:
        return list(pending)
    by_workload: dict[Key, list[pod_mod.Pod]] = {}
    for p in pending:
        key = workloads.of(p)
        if key is not None:
            by_workload.setdefault(key, []).append(p)
    off: set[str] = set()
    for key, pods in by_workload.items():
        percent, replicas = workloads.shares[key]
        budget = max(0, allowed(percent, replicas) - spot_now.get(key, 0))
        off.update(p.key for p in sorted(pods, key=lambda q: q.name)[budget:])
    return [volumetopology.inject(p, [OFF_SPOT]) if p.key in off else p for p in pending]


def keep_off_spot(pods: Sequence[pod_mod.Pod], workloads: Workloads, node_is_spot: bool) -> list[pod_mod.Pod]:
    """Pods of a node, for consolidation's what-if: on a node that is not spot, pods of an annotated
    workload are kept off spot (a move never raises a workload's spot count)."""
    if node_is_spot or not workloads:
        return list(pods)
    return [volumetopology.inject(p, [OFF_SPOT]) if workloads.of(p) is not None else p for p in pods]
