"""AKS Node Auto-Provisioning's ``AKSNodeClass`` (``karpenter.azure.com/v1beta1``).

What an AKS NodePool needs to know about Azure: the image family (and a pinned image version), the OS
disk size (the node's ephemeral-storage), the subnet of the nodes' NICs, tags, kubelet settings
(with ``failSwapOn``) and ``maxPods``, ``security`` (encryption at host, trusted launch: secure boot,
vTPM), ``fipsMode``, ``localDNS``, ``artifactStreaming``, ``gpu`` (driver mode) and ``linuxOSConfig``
(sysctls, transparent huge pages, swap file); its ``status`` holds the images the provider resolved,
the cluster's Kubernetes version, the resolved ``localDNSState`` and the ``Ready`` condition.
The helpers (:meth:`AKSNodeClass.trusted_launch`, :meth:`AKSNodeClass.artifact_streaming_on`, ...) say
what each setting means as AKS's provider reads it (an unset boolean is false; ``gpu.mode`` defaults to
``Driver``; LocalDNS is on only when ``status.localDNSState`` says ``Enabled``).

A caller may rely on: models are frozen; ``from_manifest`` reads ``v1beta1`` (``v1alpha2`` goes
through :mod:`karpy.api.conversion` first) and raises :class:`karpy.api.errors.ValidationError`
naming object, path, expected and found; ``to_manifest`` writes it back and
``from_manifest(to_manifest(x)) == x``; ``hash()`` is a stable decimal string over the spec (every
AKSNodeClass field is a static drift field), stored in :data:`karpy.api.labels.NODECLASS_HASH_AZURE`.
:mod:`karpy.api.nodeclass` re-exports these names (``nodeclass.AKSNodeClass`` keeps working).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, fields, kubeletconfig, meta, nodeclaim, selectors

AKS_API_VERSION = "karpenter.azure.com/v1beta1"
AKS_KIND = "AKSNodeClass"
AKS_IMAGE_FAMILIES = ("Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux")
"""AKSNodeClass ``imageFamily`` values (``Ubuntu`` is AKS's current Ubuntu, 22.04)."""
GPU_MODES = ("Driver", "None")
LOCAL_DNS_MODES = ("Preferred", "Required", "Disabled")
FIPS_MODES = ("FIPS", "Disabled")
THP_ENABLED = ("always", "madvise", "never")
THP_DEFRAG = ("always", "defer", "defer+madvise", "madvise", "never")
SYSCTL_FIELDS = frozenset({
    "fsAioMaxNr", "fsFileMax", "fsInotifyMaxUserWatches", "fsNrOpen", "kernelThreadsMax", "netCoreNetdevMaxBacklog",
    "netCoreOptmemMax", "netCoreRmemDefault", "netCoreRmemMax", "netCoreSomaxconn", "netCoreWmemDefault",
    "netCoreWmemMax", "netIPv4IPLocalPortRange", "netIPv4NeighDefaultGcThresh1", "netIPv4NeighDefaultGcThresh2",
    "netIPv4NeighDefaultGcThresh3", "netIPv4TCPFinTimeout", "netIPv4TCPKeepaliveIntvl", "netIPv4TCPKeepaliveProbes",
    "netIPv4TCPKeepaliveTime", "netIPv4TCPMaxSynBacklog", "netIPv4TCPMaxTwBuckets", "netIPv4TCPTwReuse",
    "netNetfilterNfConntrackBuckets", "netNetfilterNfConntrackMax", "vmMaxMapCount", "vmSwappiness",
    "vmVfsCachePressure",
})
"""The ``linuxOSConfig.sysctls`` fields AKS sets."""


def _enum(f: fields.Fields, key: str, allowed: tuple[str, ...]) -> str | None:
    value = f.str(key)
    if value is not None and value not in allowed:
        raise f.fail(key, "one of " + ", ".join(allowed), value)
    return value


@dataclass(frozen=True, slots=True)
class AKSSecurity:
    """``spec.security``: encryption at host and trusted launch (an unset boolean is ``None``)."""

    encryption_at_host: bool | None = None
    secure_boot: bool | None = None
    vtpm: bool | None = None

    @staticmethod
    def parse(f: fields.Fields) -> AKSSecurity:
        tl = f.sub("trustedLaunch")
        return AKSSecurity(encryption_at_host=f.bool("encryptionAtHost"), secure_boot=tl.bool("secureBoot"),
                           vtpm=tl.bool("vtpm"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.encryption_at_host is not None:
            out["encryptionAtHost"] = self.encryption_at_host
        tl = {k: v for k, v in (("secureBoot", self.secure_boot), ("vtpm", self.vtpm)) if v is not None}
        if tl:
            out["trustedLaunch"] = tl
        return out


@dataclass(frozen=True, slots=True)
class LinuxOSConfig:
    """``spec.linuxOSConfig``: sysctls (by the AKSNodeClass field name), transparent huge pages, swap file."""

    sysctls: Mapping[str, Any] = field(default_factory=dict)
    transparent_huge_page_enabled: str | None = None
    transparent_huge_page_defrag: str | None = None
    swap_file_size: str | None = None

    @staticmethod
    def parse(f: fields.Fields) -> LinuxOSConfig:
        raw = f.raw("sysctls", {})
        if not isinstance(raw, Mapping):
            raise f.fail("sysctls", "a mapping of sysctl settings", raw)
        for key, value in raw.items():
            if key not in SYSCTL_FIELDS:
                raise errors.ValidationError.single(f.obj, f"{f.at('sysctls')}.{key}",
                                                    "a sysctl AKS sets (fsFileMax, netCoreSomaxconn, ...)", key)
            if (isinstance(value, bool) and key != "netIPv4TCPTwReuse") or not isinstance(value, int | str):
                raise errors.ValidationError.single(
                    f.obj, f"{f.at('sysctls')}.{key}",
                    "an integer (netIPv4IPLocalPortRange: 'first last', netIPv4TCPTwReuse: a boolean)", value)
        return LinuxOSConfig(sysctls=dict(sorted(raw.items())),
                             transparent_huge_page_enabled=_enum(f, "transparentHugePageEnabled", THP_ENABLED),
                             transparent_huge_page_defrag=_enum(f, "transparentHugePageDefrag", THP_DEFRAG),
                             swap_file_size=f.str("swapFileSize"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.sysctls:
            out["sysctls"] = dict(self.sysctls)
        for key, value in (("transparentHugePageEnabled", self.transparent_huge_page_enabled),
                           ("transparentHugePageDefrag", self.transparent_huge_page_defrag),
                           ("swapFileSize", self.swap_file_size)):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class AKSImage:
    """One resolved node image of ``status.images``: its gallery id and which sizes may boot it."""

    id: str
    requirements: tuple[selectors.NodeSelectorRequirement, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> AKSImage:
        return AKSImage(id=f.str("id", "") or "",
                        requirements=tuple(selectors.NodeSelectorRequirement.parse(r) for r in f.items("requirements")))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "requirements": [r.to_dict() for r in self.requirements]}


@dataclass(frozen=True, slots=True)
class AKSNodeClassStatus:
    """What the provider resolved (``images``, ``kubernetesVersion``) and the ``Ready`` condition."""

    conditions: tuple[nodeclaim.Condition, ...] = ()
    images: tuple[AKSImage, ...] = ()
    kubernetes_version: str | None = None
    local_dns_state: str | None = None
    """``Enabled`` / ``Disabled``: LocalDNS as the provider resolved ``spec.localDNS.mode``."""

    @staticmethod
    def parse(f: fields.Fields) -> AKSNodeClassStatus:
        return AKSNodeClassStatus(conditions=nodeclaim.parse_conditions(f),
                                  images=tuple(AKSImage.parse(i) for i in f.items("images")),
                                  kubernetes_version=f.str("kubernetesVersion"),
                                  local_dns_state=f.str("localDNSState"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.images:
            out["images"] = [i.to_dict() for i in self.images]
        if self.kubernetes_version is not None:
            out["kubernetesVersion"] = self.kubernetes_version
        if self.local_dns_state is not None:
            out["localDNSState"] = self.local_dns_state
        if self.conditions:
            out["conditions"] = [c.to_dict() for c in self.conditions]
        return out


@dataclass(frozen=True, slots=True)
class AKSNodeClass:
    """An AKS Node Auto-Provisioning ``AKSNodeClass`` (``karpenter.azure.com/v1beta1``)."""

    metadata: meta.ObjectMeta
    image_family: str = "Ubuntu2204"
    image_version: str | None = None
    os_disk_size_gb: int = 128
    vnet_subnet_id: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    kubelet: kubeletconfig.KubeletConfiguration | None = None
    max_pods: int | None = None
    fail_swap_on: bool | None = None
    """``spec.kubelet.failSwapOn`` (AKS's kubelet block has it; the shared kubelet model does not)."""
    security: AKSSecurity | None = None
    fips_mode: str | None = None
    local_dns: Mapping[str, Any] | None = None
    """``spec.localDNS`` as given (``mode``, ``kubeDNSOverrides``, ``vnetDNSOverrides``)."""
    artifact_streaming: bool | None = None
    gpu_mode: str | None = None
    linux_os_config: LinuxOSConfig | None = None
    status: AKSNodeClassStatus = field(default_factory=AKSNodeClassStatus)

    # What each setting means, as AKS's provider reads it.

    def encryption_at_host(self) -> bool:
        return bool(self.security is not None and self.security.encryption_at_host)

    def secure_boot(self) -> bool:
        return bool(self.security is not None and self.security.secure_boot)

    def vtpm(self) -> bool:
        return bool(self.security is not None and self.security.vtpm)

    def trusted_launch(self) -> bool:
        """Trusted launch is on when secure boot or vTPM is."""
        return self.secure_boot() or self.vtpm()

    def fips(self) -> bool:
        return self.fips_mode == "FIPS"

    def artifact_streaming_on(self, arch: str) -> bool:
        """Artifact streaming for a node of ``arch`` (never on arm64)."""
        return bool(self.artifact_streaming) and arch != "arm64"

    def gpu_driver_installation(self) -> bool:
        """GPU drivers are installed unless ``gpu.mode`` is ``None``."""
        return self.gpu_mode != "None"

    def local_dns_mode(self) -> str | None:
        mode = (self.local_dns or {}).get("mode")
        return str(mode) if mode else None

    def local_dns_enabled(self) -> bool:
        return self.status.local_dns_state == "Enabled"

    @property
    def name(self) -> str:
        return self.metadata.name

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> AKSNodeClass:
        f = meta.reader(AKS_KIND, d)
        spec = f.sub("spec")
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=False),
            image_family=spec.str("imageFamily", "Ubuntu2204") or "Ubuntu2204",
            image_version=spec.str("imageVersion"),
            os_disk_size_gb=spec.int("osDiskSizeGB", 128) or 0,
            vnet_subnet_id=spec.str("vnetSubnetID"),
            tags=spec.str_map("tags"),
            kubelet=kubeletconfig.KubeletConfiguration.parse(spec.sub("kubelet")) if spec.has("kubelet") else None,
            max_pods=spec.int("maxPods"),
            fail_swap_on=spec.sub("kubelet").bool("failSwapOn"),
            security=AKSSecurity.parse(spec.sub("security")) if spec.has("security") else None,
            fips_mode=_enum(spec, "fipsMode", FIPS_MODES),
            local_dns=_local_dns(spec),
            artifact_streaming=spec.sub("artifactStreaming").bool("enabled"),
            gpu_mode=_enum(spec.sub("gpu"), "mode", GPU_MODES),
            linux_os_config=LinuxOSConfig.parse(spec.sub("linuxOSConfig")) if spec.has("linuxOSConfig") else None,
            status=AKSNodeClassStatus.parse(f.sub("status")),
        )

    def spec_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"imageFamily": self.image_family, "osDiskSizeGB": self.os_disk_size_gb}
        if self.image_version is not None:
            spec["imageVersion"] = self.image_version
        if self.vnet_subnet_id is not None:
            spec["vnetSubnetID"] = self.vnet_subnet_id
        if self.tags:
            spec["tags"] = dict(self.tags)
        if self.kubelet is not None or self.fail_swap_on is not None:
            kubelet = self.kubelet.to_dict() if self.kubelet is not None else {}
            if self.fail_swap_on is not None:
                kubelet["failSwapOn"] = self.fail_swap_on
            spec["kubelet"] = kubelet
        if self.max_pods is not None:
            spec["maxPods"] = self.max_pods
        if self.security is not None:
            spec["security"] = self.security.to_dict()
        if self.fips_mode is not None:
            spec["fipsMode"] = self.fips_mode
        if self.local_dns is not None:
            spec["localDNS"] = copy.deepcopy(dict(self.local_dns))
        if self.artifact_streaming is not None:
            spec["artifactStreaming"] = {"enabled": self.artifact_streaming}
        if self.gpu_mode is not None:
            spec["gpu"] = {"mode": self.gpu_mode}
        if self.linux_os_config is not None:
            spec["linuxOSConfig"] = self.linux_os_config.to_dict()
        return spec

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": AKS_API_VERSION, "kind": AKS_KIND,
                               "metadata": self.metadata.to_dict(), "spec": self.spec_dict()}
        status = self.status.to_dict()
        if status:
            out["status"] = status
        return out

    def hash(self) -> str:
        """Hash of the spec: every AKSNodeClass field is a static drift field."""
        return kubeletconfig.stable_hash(self.spec_dict())


def _local_dns(spec: fields.Fields) -> dict[str, Any] | None:
    """``spec.localDNS`` as given, its ``mode`` checked (the overrides are kept as they are)."""
    if not spec.has("localDNS"):
        return None
    f = spec.sub("localDNS")
    _enum(f, "mode", LOCAL_DNS_MODES)
    for key in ("kubeDNSOverrides", "vnetDNSOverrides"):
        for item in f.items(key):
            item.str("zone")
    return copy.deepcopy(dict(spec.raw("localDNS")))
