"""Drift marking: the ``Drifted`` condition of every launched NodeClaim, kept up to date.

:class:`DriftMarker` is the part of the disruption controller that talks to the cluster and the cloud
about drift; the decision itself is :func:`karpy.disruption.drift.drift_reason` (pure). Each pass of
:meth:`DriftMarker.mark`:

* re-stamps a claim whose hash annotations carry another hash version (Karpenter's, after a take-over)
  with karpy's, instead of calling it drifted;
* otherwise computes the claim's drift reason (NodePool hash, requirements no longer met, the cloud's
  :meth:`~karpy.cloudprovider.interface.CloudProvider.is_drifted`), cached while the claim's spec,
  labels and annotations, its Node's labels on keys the NodePool's requirements name, its NodePool's
  spec and annotations and the NodeClasses are unchanged (a status write, the claim's other than the
  provider and image IDs, or the NodePool's counts, does not count) and at most
  :data:`DRIFT_RECHECK` seconds (a cloud's images change on their own: at a re-check where nothing else
  changed, only the cloud is asked again, and the reason recomputed only when its answer changed);
  claims gone are forgotten;
* writes the ``Drifted`` condition when it changed, and returns NodeClaim name -> reason.

Given :class:`karpy.disruption.changes.Changes`, a pass looks only at the claims marked since the
last one (their own events and their Nodes'), plus the claims it re-stamped, as long as no
NodePool's version, NodeClass or re-check epoch changed (then it walks every claim): an unmarked
claim's cached answer holds by the rule above.

A caller may rely on: a NodeClass kind the API server does not serve counts as no NodeClass; a claim
that is gone, or whose drift the cloud cannot tell, is not drifted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import claim_status, state
from karpy.disruption import changes, drift
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.disruption")

DRIFT_RECHECK = 1800.0
"""Seconds after which a cached drift answer is recomputed even when nothing karpy watches changed."""

NodeClassHash = Callable[[nodepool.NodePool], tuple[str, str] | None]
Entry = tuple[str, str, Any, Any, str | None, Any, str]
"""A claim's drift cache entry; see :attr:`DriftMarker._drift_cache`."""


def pool_version(pool: nodepool.NodePool) -> tuple[str, int | str, Any]:
    """What of ``pool`` drift reads changes only with this: its spec (``metadata.generation``, which
    the API server bumps on every spec change and only then; the resourceVersion where it is unset)
    and its annotations. A status write (the NodePool's counts and conditions) does not change it."""
    md = pool.metadata
    return (md.uid, md.generation or md.resource_version, md.annotations)


def _label_keys_read(pool: nodepool.NodePool) -> frozenset[str]:
    """The node label keys requirements drift can read for ``pool``: its requirements' keys and
    every key that normalizes to another (a legacy zone or arch label stands for the current one)."""
    keys = {r.key for r in pool.template.spec.requirements}
    keys.update(labels.NORMALIZED_LABELS)
    keys.update(labels.NORMALIZED_LABELS.values())
    return frozenset(keys)


def _rv(obj: Mapping[str, Any] | None) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "") if obj is not None else ""


class DriftMarker:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider | None, nodeclass_kinds: Sequence[str],
                 nodeclass_hash: NodeClassHash | None, changes_: changes.Changes | None = None) -> None:
        self.cluster = cluster
        self.clock = clock
        self.state = cluster_state
        self.cloud = cloud
        self.nodeclass_kinds = tuple(nodeclass_kinds)
        self.nodeclass_hash = nodeclass_hash
        self._drift_cache: dict[str, Entry] = {}
        """NodeClaim -> (its resourceVersion, its Node's, its NodePool's version, what drift read, the reason,
        the epoch it was computed in, the cloud's answer)."""
        self._dirty = changes_.subscribe(nodes=False) if changes_ is not None else None
        """Claims marked since the last pass (``None``: every pass looks at every claim)."""
        self._out: dict[str, str] = {}
        """NodeClaim -> drift reason, as the last pass left it."""
        self._retry: set[str] = set()
        """Claims re-stamped at the last pass: looked at again at the next."""
        self._epoch: Any = None
        self._versions: dict[str, Any] = {}

    def mark(self, pools: Mapping[str, nodepool.NodePool]) -> dict[str, str]:
        """Set or clear the ``Drifted`` condition of every launched claim; NodeClaim -> reason.

        With ``changes``, only the claims marked since the last pass are looked at again while
        the NodePools' versions and the NodeClasses / re-check epoch stay the same (an unmarked
        claim's cached answer holds: its object, its node's and its NodePool's are unchanged)."""
        # a cached answer holds while the claim, its node, its NodePool and the NodeClasses are
        # unchanged, and at most DRIFT_RECHECK seconds (the cloud's images change on their own)
        epoch = (self._cloud_epoch(), int(self.clock.now() // DRIFT_RECHECK))
        versions = {name: pool_version(pool) for name, pool in pools.items()}
        keys: dict[str, frozenset[str]] = {}
        claims: set[str] = set()
        if self._dirty is None:
            everything = True
        else:
            everything, _, claims = self._dirty.take()
        if everything or epoch != self._epoch or versions != self._versions:
            self._epoch, self._versions = epoch, versions
            seen: dict[str, Entry] = {}
            self._retry = set()
            for claim in self.state.nodeclaims():
                entry = self._mark_one(claim, pools, versions, keys, epoch)
                if entry is not None:
                    seen[claim.name] = entry
            self._drift_cache = seen  # claims gone, deleting or no longer of a NodePool are forgotten
            self._out = {name: e[4] for name, e in seen.items() if e[4] is not None}
            return dict(self._out)
        retry, self._retry = self._retry, set()
        for name in sorted(claims | retry):
            current = self.state.nodeclaim(name)
            entry = self._mark_one(current, pools, versions, keys, epoch) if current is not None else None
            if entry is None:
                self._drift_cache.pop(name, None)
                self._out.pop(name, None)
                continue
            self._drift_cache[name] = entry
            if entry[4] is not None:
                self._out[name] = entry[4]
            else:
                self._out.pop(name, None)
        return dict(self._out)

    def _mark_one(self, claim: nodeclaim.NodeClaim, pools: Mapping[str, nodepool.NodePool],
                  versions: Mapping[str, Any], keys: dict[str, frozenset[str]], epoch: Any) -> Entry | None:
        """The drift cache entry of ``claim`` now (writing its ``Drifted`` condition when it
        changed), or ``None`` when it has none (not launched, deleting, of no NodePool, re-stamped)."""
        pool = pools.get(claim.nodepool_name or "")
        if pool is None or claim.metadata.deletion_timestamp is not None or not claim.status.provider_id:
            return None
        node_name = self.state.node_name_for_provider_id(claim.status.provider_id)
        # the same stored versions of the claim and its node as at the last pass (whose Drifted
        # write, if any, made a new claim version): the same answer, nothing to write
        claim_rv = _rv(self.state.raw("NodeClaim", claim.name))
        node_rv = _rv(self.state.raw("Node", node_name)) if node_name else ""
        pool_v = versions[pool.name]
        cached = self._drift_cache.get(claim.name)
        if cached is not None and cached[0] == claim_rv and cached[1] == node_rv and claim_rv \
                and cached[2] == pool_v:
            if cached[5] == epoch:
                return cached
            if cached[5][0] == epoch[0]:
                # only the re-check time passed (no NodeClass changed, neither did the claim, its node
                # or its NodePool): the cloud's answer is the one input that may differ
                cloud = self._cloud_drift(claim)
                if cloud == cached[6]:
                    return (*cached[:5], epoch, cloud)
                n = self.state.node(node_name) if node_name else None
                reason = drift.drift_reason(claim, pool, n.labels if n is not None else {}, cloud)
                self._write_drifted(claim, reason)
                return (claim_rv, node_rv, pool_v, cached[3], reason, epoch, cloud)
        if drift.needs_restamp(claim):
            try:
                stamp = self.nodeclass_hash
                self.cluster.patch("NodeClaim", claim.name,
                                   drift.restamp_patch(pool, stamp(pool) if stamp is not None else None))
            except kube_errors.NotFound:
                return None
            self._retry.add(claim.name)
            return None  # a re-stamped claim is not drifted by the hash; look again next loop
        node_labels: Mapping[str, str] = {}
        n = self.state.node(node_name) if node_name else None
        if n is not None:
            node_labels = n.labels
        read = keys.get(pool.name)
        if read is None:
            read = keys[pool.name] = _label_keys_read(pool)
        # what drift reads: the claim's spec, labels and annotations, the node's labels over the
        # claim's on keys the NodePool's requirements name (a status write, a heartbeat, the node
        # registering with the claim's labels or getting the initialized label change none of
        # them), the NodePool's spec, the NodeClasses, the time
        merged = {**claim.metadata.labels, **node_labels}
        key = (claim.metadata.uid, claim.spec, claim.metadata.labels, claim.metadata.annotations,
               claim.status.provider_id, claim.status.image_id,
               tuple(sorted((k, v) for k, v in merged.items() if k in read)))
        if cached is not None and cached[3] == key and cached[2] == pool_v and cached[5] == epoch:
            reason, cloud = cached[4], cached[6]
        else:
            cloud = self._cloud_drift(claim)
            reason = drift.drift_reason(claim, pool, node_labels, cloud)
        self._write_drifted(claim, reason)
        return (claim_rv, node_rv, pool_v, key, reason, epoch, cloud)

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
            claim_status.set_condition(status, nodeclaim.DRIFTED, "True", self.clock.now(), reason)
        try:
            self.cluster.patch_status("NodeClaim", claim.name, {"status": {"conditions": status["conditions"]}})
        except kube_errors.NotFound:
            return
        if reason is not None:
            log.info("disruption: nodeclaim %s drifted (%s)", claim.name, reason)
