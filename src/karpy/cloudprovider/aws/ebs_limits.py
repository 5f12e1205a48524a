"""How many EBS volumes the EBS CSI driver (``ebs.csi.aws.com``) lets one node of a type attach.

The driver reports this count in the node's CSINode (``spec.drivers[].allocatable.count``) and
kube-scheduler enforces it; karpy computes the same number ahead of launch so a new NodeClaim is
only given types that hold its pods' volumes (:mod:`karpy.provisioning.volume_limits`). The rule
(the EBS CSI driver's, as EC2's volume-limit documentation describes):

* **Dedicated-limit types** (families ``m7i m7a c7i c7a r7a r7i r7iz``): the EBS limit is their own
  and not shared with other attachments: 32 up to ``12xlarge``, 48 at ``16xlarge``, 64 at
  ``24xlarge``, 88 at ``32xlarge``, 128 at ``48xlarge``, 31 for ``metal-16xl``/``metal-24xl``,
  79 for ``metal-32xl``/``metal-48xl``.
* **Other Nitro types**: 28 attachment slots shared by EBS volumes, network interfaces and NVMe
  instance-store volumes. Some types cap EBS lower (``.metal``: 31, high-memory ``u-*``: 27, their
  ``.metal``: 19, and the short list in :data:`EBS_CAPS`); a capped type's cap already leaves room for
  its primary network interface.
* **Xen (non-Nitro) types**: 39.

Then one slot goes to the root volume. karpy counts one network interface (the primary: what a node
has when the driver starts, before the VPC CNI attaches more) and the type's NVMe instance-store
disks (the live catalog's ``InstanceStorageInfo`` disk count; the built-in catalog, which has only
the total size, counts one disk when the type has an NVMe instance store). Never below 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRIVER = "ebs.csi.aws.com"
NITRO_SLOTS = 28
XEN_SLOTS = 39
ROOT_VOLUMES = 1
PRIMARY_ENIS = 1
DEDICATED_FAMILIES = frozenset({"m7i", "m7a", "c7i", "c7a", "r7a", "r7i", "r7iz"})
DEDICATED_SMALL = frozenset({"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge"})
DEDICATED_BY_SIZE = {"16xlarge": 48, "24xlarge": 64, "32xlarge": 88, "48xlarge": 128,
                     "metal-16xl": 31, "metal-24xl": 31, "metal-32xl": 79, "metal-48xl": 79}
XEN_FAMILIES = frozenset({"t2", "c3", "m3", "r3", "c4", "m4", "r4", "x1", "x1e", "p2", "p3", "g3", "d2", "h1"})
EBS_CAPS = {"d3.8xlarge": 3, "d3.12xlarge": 3, "g5.48xlarge": 9, "inf1.xlarge": 26, "inf1.2xlarge": 26,
            "inf1.6xlarge": 23, "inf1.24xlarge": 11, "mac1.metal": 16}


def dedicated_limit(name: str) -> int | None:
    """The type's dedicated EBS limit, or None when its EBS volumes share the Nitro slots."""
    family, _, size = name.partition(".")
    if family not in DEDICATED_FAMILIES:
        return None
    if size in DEDICATED_SMALL:
        return 32
    return DEDICATED_BY_SIZE.get(size)


def ebs_cap(name: str) -> int | None:
    """A type's own cap on EBS attachments (None: only the slot count applies)."""
    if name in EBS_CAPS:
        return EBS_CAPS[name]
    family, _, size = name.partition(".")
    if family.startswith("u-"):
        return 19 if size == "metal" else 27
    if size == "metal":
        return 31
    return None


def nvme_disks(spec: Mapping[str, Any]) -> int:
    """NVMe instance-store disks of a spec record (see the module docstring)."""
    if spec.get("nvme_disks") is not None:
        return int(spec["nvme_disks"])
    return 1 if spec.get("nvme") else 0


def limit(name: str, spec: Mapping[str, Any]) -> int:
    """EBS volumes one node of type ``name`` (its catalog spec record ``spec``) can attach."""
    dedicated = dedicated_limit(name)
    family = name.partition(".")[0]
    nitro = family not in XEN_FAMILIES and spec.get("hv", "nitro") != "xen"
    if dedicated is not None:
        slots = dedicated
    elif nitro:
        cap = ebs_cap(name)
        slots = NITRO_SLOTS if cap is None else min(cap, NITRO_SLOTS)
        slots -= nvme_disks(spec) + (PRIMARY_ENIS if cap is None else PRIMARY_ENIS - 1)
    else:
        slots = XEN_SLOTS
    return max(1, slots - ROOT_VOLUMES)


def limits(name: str, spec: Mapping[str, Any]) -> dict[str, int]:
    """The type's ``InstanceType.volume_limits``: the EBS CSI driver's count."""
    return {DRIVER: limit(name, spec)}
