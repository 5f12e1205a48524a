"""EC2 instances as karpy's NodeClaims: ownership tags, the labels of a launch, and a described instance's claim.

What a caller may rely on:

* **Ownership** (:func:`owned`): an instance is this cluster's only when it carries
  ``karpenter.sh/nodepool``, ``karpenter.k8s.aws/ec2nodeclass`` and ``eks:eks-cluster-name`` equal to the
  cluster name; ``kubernetes.io/cluster/<cluster>=owned`` alone (node groups carry it) never suffices.
* **Launch labels** (:func:`launch_labels`), as Karpenter's AWS provider sets them on a launched node:
  ``topology.k8s.aws/zone-id`` (the zone's subnet's zone id), ``karpenter.k8s.aws/instance-tenancy``
  (``default``), ``karpenter.k8s.aws/placement-group-id`` with a placement group and, for a
  ``partition`` group, ``karpenter.k8s.aws/placement-group-partition``: the partition launched into
  (:func:`partition_of`: the lowest value the claim's requirement on that label allows), else the one EC2
  chose (``Placement.PartitionNumber`` of the instance, read after the launch).
* :func:`claim_of`: the NodeClaim of a ``DescribeInstances`` entry (name from the ``karpenter.sh/nodeclaim``
  tag, else the instance id; labels: type, zone, region, capacity type, nodepool, reservation and the
  placement-group partition when EC2 reports one).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import capacityreservation as cr
from karpy.api import labels, meta, nodeclaim, nodeclass, selectors
from karpy.cloudprovider import instancetype
from karpy.cloudprovider.aws import nodeclasses

TAG_NODEPOOL = "karpenter.sh/nodepool"
TAG_NODECLAIM = "karpenter.sh/nodeclaim"
TAG_NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
TAG_CLUSTER = "eks:eks-cluster-name"
LABEL_ZONE_ID = "topology.k8s.aws/zone-id"
LABEL_TENANCY = "karpenter.k8s.aws/instance-tenancy"
LABEL_PLACEMENT_GROUP = labels.AWS_PLACEMENT_GROUP_ID
LABEL_PLACEMENT_PARTITION = labels.AWS_PLACEMENT_GROUP_PARTITION
LIVE_STATES = ("pending", "running", "stopping", "stopped")
STRATEGY_PARTITION = "partition"


def instance_id_of(provider_id: str) -> str:
    """``aws:///us-east-1a/i-0123`` -> ``i-0123`` (``""`` when it is not an AWS provider id)."""
    if not provider_id.startswith("aws://"):
        return ""
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else ""


def tags_of(inst: Mapping[str, Any]) -> dict[str, str]:
    """An instance's tags as a mapping."""
    return {str(t["Key"]): str(t.get("Value", "")) for t in inst.get("Tags") or ()}


def owned(tags: Mapping[str, str], cluster: str) -> bool:
    """Did karpy launch this instance for ``cluster``? (module docstring, Ownership)."""
    return TAG_NODEPOOL in tags and TAG_NODECLASS in tags and tags.get(TAG_CLUSTER) == cluster


def partition_of(group: nodeclasses.PlacementGroup | None,
                 requirements: Sequence[selectors.NodeSelectorRequirement]) -> int:
    """The partition to launch into: for a ``partition`` group, the lowest number the claim's requirements on
    ``karpenter.k8s.aws/placement-group-partition`` allow (``In``), as Karpenter picks it; ``0`` (EC2 chooses)
    without such a requirement or another strategy."""
    if group is None or group.strategy != STRATEGY_PARTITION:
        return 0
    allowed: set[int] | None = None
    for req in requirements:
        if req.key != LABEL_PLACEMENT_PARTITION or req.operator != "In":
            continue
        values = {int(v) for v in req.values if v.isdigit() and int(v) > 0}
        allowed = values if allowed is None else allowed & values
    return min(allowed) if allowed else 0


def with_placement_group(types: Sequence[instancetype.InstanceType], group: nodeclasses.PlacementGroup | None
                         ) -> list[instancetype.InstanceType]:
    """``types`` for a NodeClass that launches into ``group``, as Karpenter's provider offers them: each type
    labelled ``karpenter.k8s.aws/placement-group-id``; a ``partition`` group's offerings decide
    ``karpenter.k8s.aws/placement-group-partition`` (any of ``1`` .. ``PartitionCount``), so a pod that requires a
    partition gets a NodeClaim whose launch goes into that partition (:func:`partition_of`)."""
    if group is None:
        return list(types)
    count = group.partition_count if group.strategy == STRATEGY_PARTITION else 0
    partitions = ((LABEL_PLACEMENT_PARTITION, tuple(str(i) for i in range(1, count + 1))),) if count > 0 else ()
    return [dataclasses.replace(t, labels={**t.labels, LABEL_PLACEMENT_GROUP: group.id}, offerings=tuple(
        dataclasses.replace(o, labels=(*o.labels, *partitions)) for o in t.offerings) if partitions else t.offerings)
        for t in types]


def launch_labels(res: nodeclasses.Resolved, zone: str, partition: int = 0) -> dict[str, str]:
    """Labels of a node launched in ``zone`` (module docstring); ``partition``: the placement-group
    partition it is in (``0``: not known or not a partition group)."""
    out = {LABEL_TENANCY: "default"}
    if res.placement_group is not None:
        out[LABEL_PLACEMENT_GROUP] = res.placement_group.id
        if res.placement_group.strategy == STRATEGY_PARTITION and partition > 0:
            out[LABEL_PLACEMENT_PARTITION] = str(partition)
    zone_id = next((s.zone_id for s in res.subnets if s.zone == zone and s.zone_id), "")
    if zone_id:
        out[LABEL_ZONE_ID] = zone_id
    return out


def instance_partition(inst: Mapping[str, Any]) -> int:
    """``Placement.PartitionNumber`` of a described instance (``0`` when EC2 gives none)."""
    number = (inst.get("Placement") or {}).get("PartitionNumber")
    return int(number) if isinstance(number, int) and not isinstance(number, bool) and number > 0 else 0


def claim_of(inst: Mapping[str, Any], *, region: str, created: float | None,
             reservations_enabled: bool) -> nodeclaim.NodeClaim:
    """The NodeClaim of a described instance (module docstring); ``created``: its creation time."""
    tags = tags_of(inst)
    iid = str(inst["InstanceId"])
    zone = str((inst.get("Placement") or {}).get("AvailabilityZone") or "")
    spot = inst.get("InstanceLifecycle") == "spot" or bool(inst.get("SpotInstanceRequestId"))
    node_labels = {labels.INSTANCE_TYPE: str(inst.get("InstanceType") or ""), labels.ZONE: zone,
                   labels.REGION: region,
                   labels.CAPACITY_TYPE: labels.CAPACITY_TYPE_SPOT if spot else labels.CAPACITY_TYPE_ON_DEMAND}
    if tags.get(TAG_NODEPOOL):
        node_labels[labels.NODEPOOL] = tags[TAG_NODEPOOL]
    if inst.get("CapacityReservationId") and reservations_enabled:  # launched into a reservation
        node_labels.update({labels.CAPACITY_TYPE: labels.CAPACITY_TYPE_RESERVED,
                            cr.LABEL_ID: str(inst["CapacityReservationId"]),
                            cr.LABEL_TYPE: cr.TYPE_CAPACITY_BLOCK if inst.get("InstanceLifecycle") ==
                            "capacity-block" else cr.TYPE_DEFAULT})
    partition = instance_partition(inst)
    if partition:
        node_labels[LABEL_PLACEMENT_PARTITION] = str(partition)
    ref = nodeclaim.NodeClassRef("karpenter.k8s.aws", nodeclass.EC2_KIND, tags[TAG_NODECLASS]) \
        if tags.get(TAG_NODECLASS) else None
    return nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(name=tags.get(TAG_NODECLAIM) or iid, labels=node_labels,
                                 creation_timestamp=created),
        spec=nodeclaim.NodeClaimSpec(node_class_ref=ref),
        status=nodeclaim.NodeClaimStatus(provider_id=f"aws:///{zone}/{iid}",
                                         image_id=str(inst.get("ImageId") or "")))
