"""Which of a drained node's VolumeAttachments termination waits for before the instance goes.

Karpenter v1 (``pkg/controllers/node/termination/volumedetachment.go``): once a node is drained, its
instance is terminated only after the VolumeAttachments bound to it are gone (the NodeClaim condition
``VolumesDetached`` is ``False`` with reason ``AwaitingVolumeDetachment`` meanwhile), so that CSI volumes
detach cleanly instead of waiting for the attach/detach controller's 6-minute force detach. A caller may
rely on:

* :func:`blocking` lists the node's VolumeAttachments (``spec.nodeName``) that block: those of a
  PersistentVolume (``spec.source.persistentVolumeName``; inline volumes never block), except the
  volumes of pods the drain does not evict (:func:`drainable` is False: static pods, pods tolerating the
  disrupted taint, pods stuck terminating), whose volumes will not detach without intervention.
* :func:`deadline` bounds the wait: the NodeClaim's termination time (its ``terminationGracePeriod``) when
  it has one, else :data:`DETACH_WAIT` after the node was drained (karpy's bound: Karpenter waits without
  one when there is no terminationGracePeriod).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from karpy.api import labels as wk
from karpy.api import node as node_mod
from karpy.api import pod as pod_mod
from karpy.kube import errors, interface

DETACH_WAIT = 360.0
"""Seconds after the drain that termination waits for volumes at most without a terminationGracePeriod
(the attach/detach controller's force-detach delay)."""
STUCK_TERMINATING = 60.0
"""A pod terminating longer than this past the end of its grace period is stuck (Karpenter's
``IsStuckTerminating``)."""
DEFAULT_POD_GRACE = 30
DISRUPTED_TAINT = node_mod.Taint(key=wk.TAINT_DISRUPTED, effect="NoSchedule")


def stuck_terminating(p: pod_mod.Pod, now: float) -> bool:
    """Terminating for over a minute past its grace period. The API server stamps ``deletionTimestamp``
    with the deletion time plus the grace period (the in-memory cluster with the deletion time), so the
    pod's ``terminationGracePeriodSeconds`` is added here: on a real cluster that waits one grace period
    longer than Karpenter, never shorter."""
    deleted = p.metadata.deletion_timestamp
    if deleted is None:
        return False
    grace = p.termination_grace_period_seconds
    return now - deleted > (DEFAULT_POD_GRACE if grace is None else grace) + STUCK_TERMINATING


def is_static(p: pod_mod.Pod) -> bool:
    return p.owner_kind == "Node" or pod_mod.MIRROR_POD_ANNOTATION in p.annotations


def tolerates_disrupted(p: pod_mod.Pod) -> bool:
    return any(t.tolerates(DISRUPTED_TAINT) for t in p.tolerations)


def drainable(p: pod_mod.Pod, now: float) -> bool:
    """A pod the drain deletes (Karpenter's ``IsDrainable``)."""
    return not (tolerates_disrupted(p) or stuck_terminating(p, now) or is_static(p))


def blocking(attachments: Iterable[Mapping[str, Any]], node_name: str, pods: Iterable[pod_mod.Pod],
             volume_of: Callable[[str, str], str | None], now: float) -> list[Mapping[str, Any]]:
    """The node's VolumeAttachments termination waits for (module docstring). ``volume_of(namespace,
    claim)`` is the PersistentVolume a claim is bound to (None when unknown)."""
    mine = [va for va in attachments if (va.get("spec") or {}).get("nodeName") == node_name]
    if not mine:
        return []
    kept: set[str] = set()
    for p in pods:
        if drainable(p, now):
            continue
        for claim in p.pvc_names:
            pv = volume_of(p.namespace, claim)
            if pv:
                kept.add(pv)
    out = []
    for va in mine:
        pv = ((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
        if pv and pv not in kept:
            out.append(va)
    return out


def volume_finder(cluster: interface.Cluster) -> Callable[[str, str], str | None]:
    """``volume_of(namespace, claim)``: the PersistentVolume the claim is bound to, read from ``cluster``."""

    def volume_of(namespace: str, claim: str) -> str | None:
        try:
            pvc = cluster.get("PersistentVolumeClaim", claim, namespace)
        except errors.KubeError:
            return None
        return str((pvc.get("spec") or {}).get("volumeName") or "") or None

    return volume_of


def deadline(expiry: float | None, drained_at: float | None) -> float | None:
    """When termination stops waiting for volumes (module docstring); None: not yet known."""
    if expiry is not None:
        return expiry
    return None if drained_at is None else drained_at + DETACH_WAIT


def names(attachments: Iterable[Mapping[str, Any]], limit: int = 5) -> str:
    items = [str((va.get("metadata") or {}).get("name")) for va in attachments]
    return ", ".join(items[:limit]) + (" ..." if len(items) > limit else "")
