"""Drift marking: the ``Drifted`` condition of every launched NodeClaim, kept up to date.

:class:`DriftMarker` is the part of the disruption controller that talks to the cluster and the cloud
about drift; the decision itself is :func:`karpy.disruption.drift.drift_reason` (pure). Each pass of
:meth:`DriftMarker.mark`:

* re-stamps a claim whose hash annotations carry another hash version (Karpenter's, after a take-over)
  with karpy's, instead of calling it drifted;
* otherwise computes the claim's drift reason (NodePool hash, requirements no longer met, the cloud's
  :meth:`~karpy.cloudprovider.interface.CloudProvider.is_drifted`), cached while the claim's spec,
  labels and annotations, its Node's labels, its NodePool and the NodeClasses are unchanged (a status
  write other than the provider and image IDs does not count) and at most :data:`DRIFT_RECHECK`
  seconds (a cloud's images change on their own);
* writes the ``Drifted`` condition when it changed, and returns NodeClaim name -> reason.

A caller may rely on: a NodeClass kind the API server does not serve counts as no NodeClass; a claim
that is gone, or whose drift the cloud cannot tell, is not drifted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.api import nodeclaim, nodepool
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import lifecycle, state
from karpy.disruption import drift
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.disruption")

DRIFT_RECHECK = 1800.0
"""Seconds after which a cached drift answer is recomputed even when nothing karpy watches changed."""

NodeClassHash = Callable[[nodepool.NodePool], tuple[str, str] | None]


class DriftMarker:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider | None, nodeclass_kinds: Sequence[str],
                 nodeclass_hash: NodeClassHash | None) -> None:
        self.cluster = cluster
        self.clock = clock
        self.state = cluster_state
        self.cloud = cloud
        self.nodeclass_kinds = tuple(nodeclass_kinds)
        self.nodeclass_hash = nodeclass_hash
        self._drift_cache: dict[str, tuple[Any, str | None]] = {}

    def mark(self, pools: Mapping[str, nodepool.NodePool]) -> dict[str, str]:
        """Set or clear the ``Drifted`` condition of every launched claim; NodeClaim -> reason."""
        out: dict[str, str] = {}
        # a cached answer holds while the claim, its node, its NodePool and the NodeClasses are
        # unchanged, and at most DRIFT_RECHECK seconds (the cloud's images change on their own)
        epoch = (self._cloud_epoch(), int(self.clock.now() // DRIFT_RECHECK))
        for claim in self.state.nodeclaims():
            pool = pools.get(claim.nodepool_name or "")
            if pool is None or claim.metadata.deletion_timestamp is not None or not claim.status.provider_id:
                continue
            if drift.needs_restamp(claim):
                try:
                    stamp = self.nodeclass_hash
                    self.cluster.patch("NodeClaim", claim.name,
                                       drift.restamp_patch(pool, stamp(pool) if stamp is not None else None))
                except kube_errors.NotFound:
                    continue
                continue  # a re-stamped claim is not drifted by the hash; look again next loop
            node_labels: Mapping[str, str] = {}
            node_name = self.state.node_name_for_provider_id(claim.status.provider_id)
            n = self.state.node(node_name) if node_name else None
            if n is not None:
                node_labels = n.labels
            # what drift reads: the claim's spec, labels and annotations, its node's labels (a status
            # write, a heartbeat, changes none of them), the NodePool, the NodeClasses, the time
            key = (claim.metadata.uid, claim.spec, claim.metadata.labels, claim.metadata.annotations,
                   claim.status.provider_id, claim.status.image_id, node_labels, pool.metadata.resource_version,
                   epoch)
            cached = self._drift_cache.get(claim.name)
            if cached is not None and cached[0] == key:
                reason = cached[1]
            else:
                reason = drift.drift_reason(claim, pool, node_labels, self._cloud_drift(claim))
                self._drift_cache[claim.name] = (key, reason)
            if reason is not None:
                out[claim.name] = reason
            self._write_drifted(claim, reason)
        return out

    def _cloud_epoch(self) -> int:
        """Changes whenever a NodeClass changes, so cached drift answers are recomputed. A NodeClass
        kind the API server does not serve (its CRD not installed: AKSNodeClass on EKS) counts as none."""
        revision = 0
        for kind in self.nodeclass_kinds:
            try:
                objs = self.cluster.list(kind)
            except kube_errors.KubeError as exc:
                log.debug("disruption: cannot list %s: %s", kind, exc)
                continue
            for obj in objs:
                revision += int(str(obj.get("metadata", {}).get("resourceVersion", "0")) or 0)
        return revision

    def _cloud_drift(self, claim: nodeclaim.NodeClaim) -> str:
        if self.cloud is None:
            return ""
        try:
            return str(self.cloud.is_drifted(claim) or "")
        except Exception as exc:  # gone or unreadable: not evidence of drift
            log.debug("disruption: drift of %s unknown: %s", claim.name, exc)
            return ""

    def _write_drifted(self, claim: nodeclaim.NodeClaim, reason: str | None) -> None:
        current = claim.condition(nodeclaim.DRIFTED)
        if reason is None and current is None:
            return
        if reason is not None and current is not None and current.is_true and current.reason == reason:
            return
        obj = self.state.raw("NodeClaim", claim.name)
        if obj is None:
            return
        status = dict(obj.get("status") or {})
        if reason is None:
            status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") != nodeclaim.DRIFTED]
        else:
            lifecycle.set_condition(status, nodeclaim.DRIFTED, "True", self.clock.now(), reason)
        try:
            self.cluster.patch_status("NodeClaim", claim.name, {"status": {"conditions": status["conditions"]}})
        except kube_errors.NotFound:
            return
        if reason is not None:
            log.info("disruption: nodeclaim %s drifted (%s)", claim.name, reason)
