"""Well-known label, annotation, taint and finalizer names, the same as Karpenter's.

A platform engineer's dashboards, selectors and alerts keep working when they move to karpy
because every name here matches Karpenter v1 (``karpenter.sh``), its AWS provider
(``karpenter.k8s.aws``) and AKS Node Auto-Provisioning (``karpenter.azure.com``).
"""

from __future__ import annotations

GROUP = "karpenter.sh"
AWS_GROUP = "karpenter.k8s.aws"
AZURE_GROUP = "karpenter.azure.com"

# Kubernetes well-known labels
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
ZONE_LEGACY = "failure-domain.beta.kubernetes.io/zone"
REGION_LEGACY = "failure-domain.beta.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
INSTANCE_TYPE_LEGACY = "beta.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
ARCH_LEGACY = "beta.kubernetes.io/arch"
OS = "kubernetes.io/os"
OS_LEGACY = "beta.kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"

# Karpenter core labels
NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
PROVISIONER_NAME = "karpenter.sh/provisioner-name"  # v1alpha5
NODECLASS_LABEL_PREFIX = "karpenter.k8s.aws/ec2nodeclass"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"

# Karpenter core annotations
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DO_NOT_EVICT_LEGACY = "karpenter.sh/do-not-evict"  # v1alpha5 pods
DO_NOT_CONSOLIDATE_LEGACY = "karpenter.sh/do-not-consolidate"  # v1alpha5 nodes
NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
NODECLAIM_TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
NODECLASS_HASH_AWS = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_AZURE = "karpenter.azure.com/aksnodeclass-hash"
NODECLASS_HASH_VERSION_AWS = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLASS_HASH_VERSION_AZURE = "karpenter.azure.com/aksnodeclass-hash-version"
HASH_VERSION_SUFFIX = "-version"
"""A hash annotation's version annotation is its name plus this suffix (Karpenter's convention)."""

# Taints and finalizers
TAINT_DISRUPTED = "karpenter.sh/disrupted"
TAINT_UNREGISTERED = "karpenter.sh/unregistered"
FINALIZER_TERMINATION = "karpenter.sh/termination"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

# AWS provider labels
AWS_INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
AWS_INSTANCE_ENCRYPTION_IN_TRANSIT = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
AWS_INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
AWS_INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
AWS_INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
AWS_INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
AWS_INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
AWS_INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
AWS_INSTANCE_CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
AWS_INSTANCE_CPU_SUSTAINED_CLOCK = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
AWS_INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
AWS_INSTANCE_EBS_BANDWIDTH = "karpenter.k8s.aws/instance-ebs-bandwidth"
AWS_INSTANCE_NETWORK_BANDWIDTH = "karpenter.k8s.aws/instance-network-bandwidth"
AWS_INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
AWS_INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
AWS_INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
AWS_INSTANCE_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
AWS_INSTANCE_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
AWS_INSTANCE_ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
AWS_INSTANCE_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
AWS_PLACEMENT_GROUP_ID = "karpenter.k8s.aws/placement-group-id"
AWS_PLACEMENT_GROUP_PARTITION = "karpenter.k8s.aws/placement-group-partition"

AWS_LABELS = frozenset({
    AWS_INSTANCE_HYPERVISOR, AWS_INSTANCE_ENCRYPTION_IN_TRANSIT, AWS_INSTANCE_CATEGORY,
    AWS_INSTANCE_FAMILY, AWS_INSTANCE_GENERATION, AWS_INSTANCE_LOCAL_NVME, AWS_INSTANCE_SIZE,
    AWS_INSTANCE_CPU, AWS_INSTANCE_CPU_MANUFACTURER, AWS_INSTANCE_CPU_SUSTAINED_CLOCK,
    AWS_INSTANCE_MEMORY, AWS_INSTANCE_EBS_BANDWIDTH, AWS_INSTANCE_NETWORK_BANDWIDTH,
    AWS_INSTANCE_GPU_NAME, AWS_INSTANCE_GPU_MANUFACTURER, AWS_INSTANCE_GPU_COUNT,
    AWS_INSTANCE_GPU_MEMORY, AWS_INSTANCE_ACCELERATOR_NAME, AWS_INSTANCE_ACCELERATOR_MANUFACTURER,
    AWS_INSTANCE_ACCELERATOR_COUNT, AWS_PLACEMENT_GROUP_ID, AWS_PLACEMENT_GROUP_PARTITION,
})

# Azure (AKS Node Auto-Provisioning) labels
AZURE_SKU_NAME = "karpenter.azure.com/sku-name"
AZURE_SKU_FAMILY = "karpenter.azure.com/sku-family"
AZURE_SKU_VERSION = "karpenter.azure.com/sku-version"
AZURE_SKU_CPU = "karpenter.azure.com/sku-cpu"
AZURE_SKU_MEMORY = "karpenter.azure.com/sku-memory"
AZURE_SKU_ACCELERATED_NETWORKING = "karpenter.azure.com/sku-networking-accelerated"
AZURE_SKU_STORAGE_PREMIUM = "karpenter.azure.com/sku-storage-premium-capable"
AZURE_SKU_STORAGE_EPHEMERAL_OS_MAX = "karpenter.azure.com/sku-storage-ephemeralos-maxsize"
AZURE_SKU_STORAGE_ULTRA_SSD = "karpenter.azure.com/sku-storage-ultra-ssd"
"""Set on every Azure node (``true`` / ``false``: whether its VM has Ultra SSD enabled), not on instance types;
well-known (a pod or NodePool may require it), as in Karpenter's Azure provider."""
AZURE_SKU_GPU_NAME = "karpenter.azure.com/sku-gpu-name"
AZURE_SKU_GPU_MANUFACTURER = "karpenter.azure.com/sku-gpu-manufacturer"
AZURE_SKU_GPU_COUNT = "karpenter.azure.com/sku-gpu-count"
AZURE_SKU_HYPERV_GENERATION = "karpenter.azure.com/sku-hyperv-generation"
AZURE_SKU_ENCRYPTION_AT_HOST = "karpenter.azure.com/sku-encryptionathost-capable"
AZURE_SKU_SUBFAMILY = "karpenter.azure.com/sku-subfamily"
AZURE_SKU_SERIES = "karpenter.azure.com/sku-series"
AKS_NODEPOOL = "kubernetes.azure.com/agentpool"

AZURE_LABELS = frozenset({
    AZURE_SKU_NAME, AZURE_SKU_FAMILY, AZURE_SKU_VERSION, AZURE_SKU_CPU, AZURE_SKU_MEMORY,
    AZURE_SKU_ACCELERATED_NETWORKING, AZURE_SKU_STORAGE_PREMIUM, AZURE_SKU_STORAGE_EPHEMERAL_OS_MAX,
    AZURE_SKU_GPU_NAME, AZURE_SKU_GPU_MANUFACTURER, AZURE_SKU_GPU_COUNT, AZURE_SKU_HYPERV_GENERATION,
    AZURE_SKU_ENCRYPTION_AT_HOST, AZURE_SKU_SUBFAMILY, AZURE_SKU_SERIES, AZURE_SKU_STORAGE_ULTRA_SSD,
})

WELL_KNOWN_LABELS = frozenset({
    ZONE, REGION, INSTANCE_TYPE, ARCH, OS, WINDOWS_BUILD, NODEPOOL, CAPACITY_TYPE,
}) | AWS_LABELS | AZURE_LABELS
"""Labels a NodePool need not define for a pod to select them: every launched node gets them."""

RESTRICTED_LABEL_DOMAINS = frozenset({GROUP, AWS_GROUP, AZURE_GROUP})
"""Label domains (and their subdomains) a NodePool may not set, except well-known labels.

Karpenter v1.12+ (``RestrictedLabelDomains``: ``karpenter.sh``, plus each provider's own group)
no longer reserves ``kubernetes.io`` and ``k8s.io``: only ``kubernetes.io/hostname`` there is
restricted (:data:`RESTRICTED_LABELS`)."""

LABEL_DOMAIN_EXCEPTIONS = frozenset({"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"})
"""Subdomains a user may always use (kept for callers; none is inside a restricted domain now)."""

RESTRICTED_LABELS = frozenset({HOSTNAME, REGISTERED, INITIALIZED, PROVISIONER_NAME})
"""Labels nobody but karpy and the kubelet may set on a node template."""

NORMALIZED_LABELS = {
    ZONE_LEGACY: ZONE,
    REGION_LEGACY: REGION,
    INSTANCE_TYPE_LEGACY: INSTANCE_TYPE,
    ARCH_LEGACY: ARCH,
    OS_LEGACY: OS,
    PROVISIONER_NAME: NODEPOOL,
}
"""Deprecated label keys pods still use, mapped to the key karpy schedules on."""


def domain(key: str) -> str:
    """The prefix before ``/`` (``""`` for unprefixed keys)."""
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted(key: str) -> bool:
    """True when a NodePool may not set or require ``key`` (Karpenter's rule).

    Well-known labels are allowed; :data:`RESTRICTED_LABELS` and keys in a
    :data:`RESTRICTED_LABEL_DOMAINS` domain (or a subdomain of one) are not, as Karpenter v1's
    ``IsRestrictedLabel``; ``kubernetes.io`` / ``k8s.io`` keys other than the hostname are allowed.
    """
    if key in WELL_KNOWN_LABELS:
        return False
    if key in RESTRICTED_LABELS:
        return True
    dom = domain(key)
    for exc in LABEL_DOMAIN_EXCEPTIONS:
        if dom == exc or dom.endswith("." + exc):
            return False
    return any(dom == r or dom.endswith("." + r) for r in RESTRICTED_LABEL_DOMAINS)
