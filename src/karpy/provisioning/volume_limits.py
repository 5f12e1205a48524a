"""CSI volume attach limits on existing nodes, in-flight NodeClaims and new NodeClaims.

A CSI driver can attach only so many volumes to one node (EBS on Nitro: 28 slots shared with network
interfaces; Azure: the size's data disks); kube-scheduler refuses a node whose CSINode count would be
exceeded, so a NodeClaim that Karpenter sizes by cpu and memory alone can come up unable to run the
pods it was launched for (kubernetes-sigs/karpenter#1748). karpy turns each driver's attach count into
one more resource dimension of the scheduling run, so every bin (existing node, in-flight NodeClaim,
new NodeClaim) holds at most its limit and a new NodeClaim's instance types are only those whose limit
holds its volumes. What a caller may rely on:

* :func:`pod_volumes`: the CSI volumes a pod mounts, by driver: a PVC bound to a PV with ``spec.csi``
  counts for that driver; an unbound PVC counts for its StorageClass's ``provisioner``. Each distinct
  PVC is one volume; PVCs that cannot be read are left to :mod:`karpy.scheduling.volumetopology`.
* :func:`with_requests`: pods with one unit of ``attachable-volumes-csi-<driver>`` (:func:`resource`,
  the name Kubernetes' old in-tree limits used) per volume added to their overhead (only the
  scheduling run sees it: :func:`without` strips it from a NodeClaim's requests).
* :class:`TypeLimits`: instance types with that dimension in their capacity: the type's
  ``volume_limits`` for the driver (or its ``*`` entry; no entry: no limit). Copies are kept, one per
  type and driver set, so the scheduler's type tables are reused between runs.
* :func:`with_node_limits`: existing nodes and in-flight NodeClaims with the dimension in their
  allocatable: the node's CSINode ``allocatable.count`` for the driver, else its instance type's limit
  (by the ``node.kubernetes.io/instance-type`` label), else (an in-flight NodeClaim not launched yet)
  the smallest limit of the types it may launch as, less the distinct volumes its pods already hold
  (pods that carry the request themselves, as those a simulated kube-scheduler bound, count as used).

Known difference: a PVC shared by two pods on one node attaches once; karpy counts it for each
pending pod (the pods already on a node count it once). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.cloudprovider import instancetype
from karpy.provisioning import results
from karpy.scheduling import volumetopology

PREFIX = "attachable-volumes-csi-"
ANY_DRIVER = "*"
NO_LIMIT = 1_000_000
"""Volumes a bin may take when no limit is known."""


def resource(driver: str) -> str:
    """The scheduling dimension of ``driver``'s attach count."""
    return PREFIX + driver


def without(resources: Mapping[str, int]) -> dict[str, int]:
    """``resources`` without the attach-count dimensions (what a NodeClaim's requests say)."""
    return {k: v for k, v in resources.items() if not k.startswith(PREFIX)}


def pod_volumes(p: pod_mod.Pod, vols: volumetopology.Volumes) -> dict[str, set[tuple[str, str]]]:
    """Driver -> the PVCs (namespace, name) of ``p`` that driver attaches (module docstring)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for claim in p.pvc_names:
        key = (p.namespace, claim)
        driver = _driver(vols.claims.get(key), vols)
        if driver:
            out.setdefault(driver, set()).add(key)
    return out


def _driver(pvc: Mapping[str, Any] | None, vols: volumetopology.Volumes) -> str:
    if pvc is None:
        return ""
    spec = pvc.get("spec") or {}
    name = str(spec.get("volumeName") or "")
    if name:
        pv = vols.volumes.get(name) or {}
        return str(((pv.get("spec") or {}).get("csi") or {}).get("driver") or "")
    storage_class = vols.classes.get(str(spec.get("storageClassName") or "")) or {}
    return str(storage_class.get("provisioner") or "")


def drivers(pods: Iterable[pod_mod.Pod], vols: volumetopology.Volumes) -> tuple[str, ...]:
    """The CSI drivers the pods' volumes use, sorted."""
    out: set[str] = set()
    for p in pods:
        if p.pvc_names:
            out.update(pod_volumes(p, vols))
    return tuple(sorted(out))


def with_requests(pods: Sequence[pod_mod.Pod], vols: volumetopology.Volumes) -> list[pod_mod.Pod]:
    """Pods with their attach counts as requests (module docstring); pods without CSI volumes as they are."""
    out: list[pod_mod.Pod] = []
    for p in pods:
        counts = pod_volumes(p, vols) if p.pvc_names else {}
        if not counts:
            out.append(p)
            continue
        overhead = dict(p.overhead)
        for driver, claims in counts.items():
            overhead[resource(driver)] = len(claims) * quantity.MILLI
        out.append(dataclasses.replace(p, overhead=overhead))
    return out


def type_limit(t: instancetype.InstanceType, driver: str) -> int | None:
    """Volumes of ``driver`` one node of type ``t`` attaches (None: no limit known)."""
    limits = t.volume_limits
    found = limits.get(driver)
    return found if found is not None else limits.get(ANY_DRIVER)


class TypeLimits:
    """Instance types with the attach-count dimensions, copies kept between runs (module docstring)."""

    def __init__(self) -> None:
        self._copies: dict[tuple[int, tuple[str, ...]], tuple[instancetype.InstanceType,
                                                              instancetype.InstanceType]] = {}

    def apply(self, types: Mapping[str, Sequence[instancetype.InstanceType]],
              driver_names: tuple[str, ...]) -> dict[str, list[instancetype.InstanceType]]:
        if not driver_names:
            return {pool: list(ts) for pool, ts in types.items()}
        kept: dict[tuple[int, tuple[str, ...]], tuple[instancetype.InstanceType, instancetype.InstanceType]] = {}
        out: dict[str, list[instancetype.InstanceType]] = {}
        for pool, ts in types.items():
            row: list[instancetype.InstanceType] = []
            for t in ts:
                key = (id(t), driver_names)
                hit = self._copies.get(key) or kept.get(key)
                if hit is None or hit[0] is not t:
                    hit = (t, _limited(t, driver_names))
                kept[key] = hit
                row.append(hit[1])
            out[pool] = row
        self._copies = kept
        return out


def _limited(t: instancetype.InstanceType, driver_names: tuple[str, ...]) -> instancetype.InstanceType:
    capacity = dict(t.capacity)
    for driver in driver_names:
        limit = type_limit(t, driver)
        capacity[resource(driver)] = (NO_LIMIT if limit is None else limit) * quantity.MILLI
    return dataclasses.replace(t, capacity=capacity)


def _smallest(types: Sequence[instancetype.InstanceType], driver: str) -> int | None:
    limits = [type_limit(t, driver) for t in types]
    return None if any(x is None for x in limits) else min(x for x in limits if x is not None)


def csinode_limits(csinodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Node name -> driver -> ``allocatable.count`` of the CSINodes (drivers without a count left out)."""
    out: dict[str, dict[str, int]] = {}
    for obj in csinodes:
        name = str((obj.get("metadata") or {}).get("name") or "")
        for d in (obj.get("spec") or {}).get("drivers") or ():
            count = ((d or {}).get("allocatable") or {}).get("count")
            if name and isinstance(count, int) and not isinstance(count, bool):
                out.setdefault(name, {})[str(d.get("name") or "")] = count
    return out


def requested_drivers(pods: Iterable[pod_mod.Pod]) -> tuple[str, ...]:
    """The drivers whose attach counts :func:`with_requests` put in the pods' requests, sorted."""
    return tuple(sorted({k[len(PREFIX):] for p in pods for k in p.overhead if k.startswith(PREFIX)}))


class NodeLimits:
    """Each node's attach limit per driver: its CSINode's count, else its type's (module docstring)."""

    def __init__(self, driver_names: tuple[str, ...], csinodes: Mapping[str, Mapping[str, int]],
                 types: Iterable[instancetype.InstanceType],
                 allowed: Mapping[str, Sequence[str]] | None = None) -> None:
        self.drivers = driver_names
        self.csinodes = csinodes
        self.allowed = allowed or {}
        self.by_name: dict[str, instancetype.InstanceType] = {}
        for it in types:
            self.by_name.setdefault(it.name, it)
        self.smallest: dict[str, int | None] = {}
        for driver in driver_names:
            known = [limit for it in self.by_name.values() if (limit := type_limit(it, driver)) is not None]
            self.smallest[driver] = min(known) if known else None

    def limit(self, name: str, node_labels: Mapping[str, str], driver: str) -> int | None:
        found = self.csinodes.get(name, {}).get(driver)
        if found is not None:
            return found
        t = self.by_name.get(node_labels.get(wk.INSTANCE_TYPE, ""))
        if t is not None:
            return type_limit(t, driver)
        options = [self.by_name[n] for n in self.allowed.get(name, ()) if n in self.by_name]
        return _smallest(options, driver) if options else self.smallest[driver]

    def allocatable(self, name: str, node_labels: Mapping[str, str], allocatable: Mapping[str, int],
                    held: Mapping[str, int] | None = None) -> dict[str, int]:
        """``allocatable`` with each driver's limit less ``held`` (driver -> volumes already counted)."""
        out = dict(allocatable)
        for driver in self.drivers:
            limit = self.limit(name, node_labels, driver)
            free = NO_LIMIT if limit is None else max(0, limit - (held or {}).get(driver, 0))
            out[resource(driver)] = free * quantity.MILLI
        return out


def with_node_limits(existing: Sequence[results.ExistingNode], driver_names: tuple[str, ...],
                     vols: volumetopology.Volumes, csinodes: Mapping[str, Mapping[str, int]],
                     types: Iterable[instancetype.InstanceType],
                     allowed: Mapping[str, Sequence[str]] | None = None) -> list[results.ExistingNode]:
    """Existing nodes and in-flight NodeClaims with their remaining attach counts (module docstring).
    ``allowed``: an in-flight NodeClaim's name -> the instance types it may still launch as (its
    limit is their smallest: the one it launches as holds the volumes it was opened for)."""
    if not driver_names:
        return list(existing)
    limits = NodeLimits(driver_names, csinodes, types, allowed)
    out: list[results.ExistingNode] = []
    for node in existing:
        held: dict[str, set[tuple[str, str]]] = {}
        for p in node.pods:
            if p.pvc_names:
                for driver, claims in pod_volumes(p, vols).items():
                    if resource(driver) not in p.overhead:  # else its request is already used capacity
                        held.setdefault(driver, set()).update(claims)
        counts = {d: len(c) for d, c in held.items()}
        out.append(dataclasses.replace(node, allocatable=limits.allocatable(node.name, node.labels,
                                                                            node.allocatable, counts)))
    return out
