"""The kubelet settings a NodeClass passes to its nodes, and the stable hash NodeClass drift uses.

:class:`KubeletConfiguration` is shared by AWS ``EC2NodeClass`` (:mod:`karpy.api.nodeclass`) and AKS
``AKSNodeClass`` (:mod:`karpy.api.aksnodeclass`): Karpenter v1 moved ``kubelet`` from the NodePool to
the NodeClass, and karpy's AKS model uses the same shape. It is frozen; ``parse(to_dict())`` round-trips.
:func:`stable_hash` is the decimal hash both NodeClasses (and NodePools) stamp for drift.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import fields, quantity

EVICTION_SIGNALS = ("memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
                    "imagefs.inodesFree", "pid.available")
RESERVED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")


def stable_hash(value: Any) -> str:
    """A stable decimal hash of a JSON-able value (key order and set order do not matter to callers
    that sort their sets first). Looks like Karpenter's: a uint64 in decimal."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return str(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))

def _str_tuple(f: fields.Fields, key: str) -> tuple[str, ...]:
    return tuple(f.str_list(key))

@dataclass(frozen=True, slots=True)
class KubeletConfiguration:
    """The kubelet settings Karpenter passes to nodes (a subset of the upstream KubeletConfiguration).

    ``system_reserved`` / ``kube_reserved`` are milli-unit resource lists; eviction thresholds are
    kept as written (``"5%"``, ``"500Mi"``) and grace periods as duration strings.
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: quantity.ResourceList = field(default_factory=dict)
    kube_reserved: quantity.ResourceList = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
    eviction_soft: Mapping[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: Mapping[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None
    cluster_dns: tuple[str, ...] = ()
    # AKS-only settings (karpenter.azure.com)
    cpu_manager_policy: str | None = None
    cpu_cfs_quota_period: str | None = None
    topology_manager_policy: str | None = None
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    container_log_max_size: str | None = None
    container_log_max_files: int | None = None
    pod_pids_limit: int | None = None

    @staticmethod
    def parse(f: fields.Fields) -> KubeletConfiguration:
        return KubeletConfiguration(
            max_pods=f.int("maxPods"),
            pods_per_core=f.int("podsPerCore"),
            system_reserved=quantity.read_list(f, "systemReserved"),
            kube_reserved=quantity.read_list(f, "kubeReserved"),
            eviction_hard=f.str_map("evictionHard"),
            eviction_soft=f.str_map("evictionSoft"),
            eviction_soft_grace_period=f.str_map("evictionSoftGracePeriod"),
            eviction_max_pod_grace_period=f.int("evictionMaxPodGracePeriod"),
            image_gc_high_threshold_percent=f.int("imageGCHighThresholdPercent"),
            image_gc_low_threshold_percent=f.int("imageGCLowThresholdPercent"),
            cpu_cfs_quota=f.bool("cpuCFSQuota"),
            cluster_dns=_str_tuple(f, "clusterDNS"),
            cpu_manager_policy=f.str("cpuManagerPolicy"),
            cpu_cfs_quota_period=f.str("cpuCFSQuotaPeriod"),
            topology_manager_policy=f.str("topologyManagerPolicy"),
            allowed_unsafe_sysctls=_str_tuple(f, "allowedUnsafeSysctls"),
            container_log_max_size=f.str("containerLogMaxSize"),
            container_log_max_files=f.int("containerLogMaxFiles"),
            pod_pids_limit=f.int("podPidsLimit"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        scalars: tuple[tuple[str, Any], ...] = (
            ("maxPods", self.max_pods), ("podsPerCore", self.pods_per_core),
            ("evictionMaxPodGracePeriod", self.eviction_max_pod_grace_period),
            ("imageGCHighThresholdPercent", self.image_gc_high_threshold_percent),
            ("imageGCLowThresholdPercent", self.image_gc_low_threshold_percent),
            ("cpuCFSQuota", self.cpu_cfs_quota), ("cpuManagerPolicy", self.cpu_manager_policy),
            ("cpuCFSQuotaPeriod", self.cpu_cfs_quota_period),
            ("topologyManagerPolicy", self.topology_manager_policy),
            ("containerLogMaxSize", self.container_log_max_size),
            ("containerLogMaxFiles", self.container_log_max_files), ("podPidsLimit", self.pod_pids_limit),
        )
        for key, value in scalars:
            if value is not None:
                out[key] = value
        if self.system_reserved:
            out["systemReserved"] = quantity.format_list(self.system_reserved)
        if self.kube_reserved:
            out["kubeReserved"] = quantity.format_list(self.kube_reserved)
        for key, mapping in (("evictionHard", self.eviction_hard), ("evictionSoft", self.eviction_soft),
                             ("evictionSoftGracePeriod", self.eviction_soft_grace_period)):
            if mapping:
                out[key] = dict(mapping)
        if self.cluster_dns:
            out["clusterDNS"] = list(self.cluster_dns)
        if self.allowed_unsafe_sysctls:
            out["allowedUnsafeSysctls"] = list(self.allowed_unsafe_sysctls)
        return out
