"""How many managed data disks the Azure Disk CSI driver (``disk.csi.azure.com``) attaches to one VM size.

The driver reports the size's ``MaxDataDiskCount`` (a Resource SKUs API capability) in the node's
CSINode and kube-scheduler enforces it; karpy uses the same number ahead of launch
(:mod:`karpy.provisioning.volume_limits`). :data:`MAX_DATA_DISKS` holds the sizes whose count the
project's Resource SKUs extract (``azure-vm-skus.json``) lists; for other sizes karpy uses Azure's
common rule, two data disks per vCPU, at most 32 (an approximation: a few series differ; a live
cluster's CSINode, when present, wins over it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRIVER = "disk.csi.azure.com"
PER_VCPU = 2
RULE_MAX = 32
MAX_DATA_DISKS: Mapping[str, int] = {
    "Standard_A0": 1,
    "Standard_B1s": 2,
    "Standard_B20ms": 32,
    "Standard_D128ds_v6": 64,
    "Standard_D16plds_v5": 32,
    "Standard_D2_v2": 8,
    "Standard_D2_v3": 4,
    "Standard_D2_v5": 4,
    "Standard_D2as_v6": 4,
    "Standard_D2s_v3": 4,
    "Standard_D4s_v3": 8,
    "Standard_D64s_v3": 32,
    "Standard_DC8s_v3": 32,
    "Standard_DS2_v2": 8,
    "Standard_E4d_v5": 8,
    "Standard_F16s_v2": 32,
    "Standard_M8-2ms": 8,
    "Standard_NC16as_T4_v3": 32,
    "Standard_NC24ads_A100_v4": 8,
    "Standard_NC6s_v3": 12,
}


def limit(name: str, rec: Mapping[str, Any]) -> int:
    """Data disks one VM of size ``name`` (its catalog record ``rec``) can attach."""
    known = MAX_DATA_DISKS.get(name)
    if known is not None:
        return known
    return max(1, min(RULE_MAX, PER_VCPU * int(rec.get("vcpu") or 1)))


def limits(name: str, rec: Mapping[str, Any]) -> dict[str, int]:
    """The size's ``InstanceType.volume_limits``: the Azure Disk CSI driver's count."""
    return {DRIVER: limit(name, rec)}
