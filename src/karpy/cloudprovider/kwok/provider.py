"""The KWOK cloud provider: a NodeClaim becomes a Node object that KWOK (kwok.x-k8s.io) keeps alive.

As Karpenter's own ``kwok`` provider does, there is no cloud: ``create`` writes a Node into the cluster
(there is no kubelet to do it) marked for KWOK to manage, and KWOK's controller makes it Ready and
runs its pods. So a team can try karpy on any cluster with KWOK installed and no cloud account.

What a caller may rely on (on top of :class:`karpy.cloudprovider.interface.CloudProvider`):

- Instance types are the KWOK catalog (:mod:`karpy.cloudprovider.kwok.instancetypes`): 144 generic
  shapes in zones ``test-zone-a`` .. ``test-zone-d``, spot and on-demand.
- ``create`` chooses the cheapest available offering compatible with the claim's requirements whose
  allocatable holds its requests (among the zones that offer it at that price, the one with the fewest
  of this provider's nodes, then by name: KWOK prices are the same in every zone, and Karpenter's KWOK
  provider samples among them; capacity piled into one zone would make the kube-scheduler, which counts
  only zones with nodes, put zonally spread pods there), and creates Node ``<nodeclaim name>`` with provider ID
  ``kwok://<node name>``; labels: the claim's, its single-valued requirements, the instance type's,
  zone, region-less capacity type, ``kubernetes.io/hostname``, ``kwok.x-k8s.io/node=fake`` and the
  ownership label :data:`OWNER_LABEL` = :func:`owner_value` of the cluster name (the name itself when
  it is a valid label value, else a 52-character prefix and a hash: a label value holds at most 63
  characters, and an EKS cluster name up to 100); annotation ``kwok.x-k8s.io/node: fake``; the
  ``karpenter.sh/unregistered:NoExecute`` taint; capacity/allocatable of the instance type; phase
  Pending and no Ready condition (KWOK sets those). The Node's name is the NodeClaim's, so a repeated
  create (a restart mid-launch) finds the Node it made and returns it instead of making another.
- ``delete``/``get``/``list`` touch only Nodes carrying this cluster's ownership label and a
  ``kwok://`` provider ID: a Node of someone else is ``NotOwnedError`` on delete and invisible to
  ``get``/``list``. A Node being deleted counts as gone.
- ``resolve_node_class`` is Ready for ``KWOKNodeClass`` (``karpenter.kwok.sh``), ``UnsupportedNodeClass``
  otherwise; there is no drift.

Writes go through the :class:`karpy.kube.interface.Cluster` given; with the real-time driver they run
on a cloud-call worker thread, so the cluster must accept writes from any thread (the Kubernetes
adapter does; the in-memory cluster is used with inline calls).
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import labels, nodeclaim, nodepool, quantity
from karpy.cloudprovider import errors, instancetype
from karpy.cloudprovider import interface as cp_interface
from karpy.cloudprovider.fake import capacity
from karpy.cloudprovider.kwok import instancetypes
from karpy.kube import errors as kube_errors
from karpy.kube import interface

PROVIDER_PREFIX = "kwok://"
KWOK_NODE_KEY = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"
OWNER_LABEL = "karpenter.sh/managed-by"
"""Node label naming the cluster whose karpy launched it (Karpenter's ownership tag key)."""
NODE_CLASS_GROUP = "karpenter.kwok.sh"
NODE_CLASS_KIND = "KWOKNodeClass"
PRICE_LABEL = "eks-node-viewer/instance-price"
UNREGISTERED_TAINT = {"key": labels.TAINT_UNREGISTERED, "effect": "NoExecute"}
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
OWNER_PREFIX = 52
"""Characters of a long cluster name kept before ``-`` and its hash (52 + 1 + 10 = 63)."""


def owner_value(cluster_name: str) -> str:
    """The :data:`OWNER_LABEL` value for ``cluster_name``: the name when it is a valid label value (63
    characters at most, alphanumeric at both ends, ``-_.`` inside), else its first 52 label characters
    and the first 10 hex digits of its SHA-256 (distinct long names stay distinct)."""
    if _LABEL_VALUE.fullmatch(cluster_name):
        return cluster_name
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:10]
    prefix = re.sub(r"[^-A-Za-z0-9_.]", "-", cluster_name)[:OWNER_PREFIX]
    prefix = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", prefix)
    return f"{prefix}-{digest}" if prefix else digest


class KwokCloudProvider:
    """See the module docstring."""

    name = "kwok"

    def __init__(self, cluster: interface.Cluster, *, cluster_name: str,
                 types: Sequence[instancetype.InstanceType] | None = None) -> None:
        self.cluster = cluster
        self.cluster_name = cluster_name
        self.owner = owner_value(cluster_name)
        self.types = list(types) if types is not None else instancetypes.kwok()
        self._by_name = {t.name: t for t in self.types}
        self._defined = capacity.defined_keys(self.types)
        self._lock = threading.Lock()
        self._zones: dict[str, int] | None = None
        """Zone -> this provider's nodes there (read from the cluster at the first create, then kept)."""

    # ------------------------------------------------------------------------------ launching

    def _choose(self, cands: Sequence[capacity.Candidate]) -> capacity.Candidate:
        """The first (cheapest) candidate's type and capacity type at its price, in the zone with the
        fewest of this provider's nodes (ties by zone name); that zone's count goes up by one."""
        first = cands[0]
        ties = [c for c in cands if c.instance_type.name == first.instance_type.name
                and c.offering.capacity_type == first.offering.capacity_type
                and c.offering.price == first.offering.price]
        with self._lock:
            counts = self._zones
            if counts is None:
                counts = self._zones = {}
                for c in self.list():
                    zone = c.labels.get(labels.ZONE, "")
                    counts[zone] = counts.get(zone, 0) + 1
            chosen = min(ties, key=lambda c: (counts.get(c.offering.zone, 0), c.offering.zone))
            counts[chosen.offering.zone] = counts.get(chosen.offering.zone, 0) + 1
        return chosen

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        types: Sequence[instancetype.InstanceType] = self.types
        for req in claim.spec.requirements:
            if req.key == labels.INSTANCE_TYPE and req.operator == "In":
                types = [self._by_name[n] for n in sorted(set(req.values)) if n in self._by_name]
        cands = capacity.candidates(types, claim.spec.requirements, claim.spec.resources_requests, "",
                                    self._defined)
        if not cands:
            raise errors.CreateError(
                f"launching nodeclaim {claim.name}: no KWOK instance type offering is compatible with its "
                "requirements and resource requests", reason="NoCompatibleInstanceTypes")
        chosen = self._choose(cands)
        node = self._node(claim, chosen.instance_type, chosen.offering)
        try:
            stored = self.cluster.create(node)
        except kube_errors.AlreadyExists:
            stored = self._existing(claim.name)
        except kube_errors.KubeError as exc:
            raise errors.CreateError(f"launching nodeclaim {claim.name}: creating node: {exc}",
                                     retryable=bool(getattr(exc, "retryable", False))) from exc
        launched = self._claim_of(stored)
        return dataclasses.replace(
            claim,
            metadata=dataclasses.replace(claim.metadata, labels={**claim.metadata.labels, **launched.labels}),
            status=dataclasses.replace(claim.status, provider_id=launched.status.provider_id,
                                       capacity=dict(launched.status.capacity),
                                       allocatable=dict(launched.status.allocatable)),
        )

    def _existing(self, name: str) -> dict[str, Any]:
        """The Node a previous create of the same NodeClaim made; anything else is not ours."""
        try:
            node = self.cluster.get("Node", name)
        except kube_errors.KubeError as exc:
            raise errors.CreateError(f"launching nodeclaim {name}: node {name} exists but cannot be read: {exc}",
                                     retryable=True) from exc
        if not self._owned(node):
            raise errors.CreateError(f"launching nodeclaim {name}: a node named {name} exists and was not "
                                     f"launched by karpy for cluster {self.cluster_name}", reason="NodeNameTaken")
        return node

    def _node(self, claim: nodeclaim.NodeClaim, it: instancetype.InstanceType,
              offering: instancetype.Offering) -> dict[str, Any]:
        node_labels = dict(claim.metadata.labels)
        for req in claim.spec.requirements:
            if req.operator == "In" and len(req.values) == 1:
                node_labels[req.key] = req.values[0]
        node_labels.update(it.labels)
        node_labels.update({
            labels.INSTANCE_TYPE: it.name, labels.ZONE: offering.zone, labels.CAPACITY_TYPE: offering.capacity_type,
            labels.HOSTNAME: claim.name, KWOK_NODE_KEY: KWOK_NODE_VALUE, OWNER_LABEL: self.owner,
            PRICE_LABEL: f"{offering.price:f}",
        })
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": claim.name, "labels": node_labels,
                         "annotations": {**claim.metadata.annotations, KWOK_NODE_KEY: KWOK_NODE_VALUE}},
            "spec": {"providerID": PROVIDER_PREFIX + claim.name, "taints": [dict(UNREGISTERED_TAINT)]},
            "status": {"capacity": quantity.format_list(it.capacity),
                       "allocatable": quantity.format_list(it.allocatable), "phase": "Pending"},
        }

    # ------------------------------------------------------------------------------- the rest

    def _owned(self, node: Mapping[str, Any]) -> bool:
        pid = str((node.get("spec") or {}).get("providerID") or "")
        return pid.startswith(PROVIDER_PREFIX) and interface.labels_of(node).get(OWNER_LABEL) == self.owner

    def _claim_of(self, node: Mapping[str, Any]) -> nodeclaim.NodeClaim:
        status = node.get("status") or {}
        meta: dict[str, Any] = {"name": interface.name_of(node), "labels": dict(interface.labels_of(node)),
                                "annotations": {KWOK_NODE_KEY: KWOK_NODE_VALUE}}
        created = (node.get("metadata") or {}).get("creationTimestamp")
        if created:
            meta["creationTimestamp"] = created
        manifest = {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
            "spec": {"requirements": []},
            "status": {"providerID": (node.get("spec") or {}).get("providerID"),
                       "capacity": dict(status.get("capacity") or {}),
                       "allocatable": dict(status.get("allocatable") or {})},
        }
        return nodeclaim.NodeClaim.from_manifest(manifest)

    def _node_for(self, provider_id: str) -> dict[str, Any] | None:
        if not provider_id.startswith(PROVIDER_PREFIX):
            return None
        try:
            return self.cluster.get("Node", provider_id[len(PROVIDER_PREFIX):])
        except kube_errors.NotFound:
            return None

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        pid = claim.status.provider_id
        node = self._node_for(pid)
        if node is None or interface.is_terminating(node):
            raise errors.NodeClaimNotFoundError(f"instance {pid or '(no provider id)'} of NodeClaim {claim.name} "
                                                "not found")
        if not self._owned(node):
            raise errors.NotOwnedError(f"node {interface.name_of(node)} is not labelled {OWNER_LABEL}={self.owner} "
                                       f"(cluster {self.cluster_name}); refusing to delete it")
        try:
            self.cluster.delete("Node", interface.name_of(node))
        except kube_errors.NotFound:
            raise errors.NodeClaimNotFoundError(f"instance {pid} of NodeClaim {claim.name} not found") from None
        zone = str(((node.get("metadata") or {}).get("labels") or {}).get(labels.ZONE, ""))
        with self._lock:
            if self._zones is not None and self._zones.get(zone, 0) > 0:
                self._zones[zone] -= 1

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        node = self._node_for(provider_id)
        if node is None or interface.is_terminating(node) or not self._owned(node):
            raise errors.NodeClaimNotFoundError(f"instance {provider_id} not found")
        return self._claim_of(node)

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        nodes = [n for n in self.cluster.list("Node", label_selector={OWNER_LABEL: self.owner})
                 if self._owned(n) and not interface.is_terminating(n)]
        nodes.sort(key=lambda n: (str((n.get("metadata") or {}).get("creationTimestamp") or ""), interface.name_of(n)))
        return [self._claim_of(n) for n in nodes]

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        return sorted(self.types, key=lambda t: t.name)

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        return ""

    def repair_policies(self) -> builtins.list[cp_interface.RepairPolicy]:
        return [cp_interface.RepairPolicy("Ready", "False", 600.0),
                cp_interface.RepairPolicy("Ready", "Unknown", 600.0)]

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        kind = str(node_class.get("kind", ""))
        status = dict(node_class.get("status") or {})
        if kind == NODE_CLASS_KIND:
            status["conditions"] = [cp_interface.ready_condition(True, "Ready")]
        else:
            status["conditions"] = [cp_interface.ready_condition(
                False, "UnsupportedNodeClass", f"the kwok cloud provider serves {NODE_CLASS_KIND}, not {kind}")]
        return status
