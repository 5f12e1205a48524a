"""AKS Node Auto-Provisioning's ``AKSNodeClass`` (``karpenter.azure.com/v1beta1``).

What an AKS NodePool needs to know about Azure: the image family (and a pinned image version), the OS
disk size (the node's ephemeral-storage), the subnet of the nodes' NICs, tags, kubelet settings and
``maxPods``; its ``status`` holds the images the provider resolved, the cluster's Kubernetes version
and the ``Ready`` condition.

A caller may rely on: models are frozen; ``from_manifest`` reads ``v1beta1`` (``v1alpha2`` goes
through :mod:`karpy.api.conversion` first) and raises :class:`karpy.api.errors.ValidationError`
naming object, path, expected and found; ``to_manifest`` writes it back and
``from_manifest(to_manifest(x)) == x``; ``hash()`` is a stable decimal string over the spec (every
AKSNodeClass field is a static drift field), stored in :data:`karpy.api.labels.NODECLASS_HASH_AZURE`.
:mod:`karpy.api.nodeclass` re-exports these names (``nodeclass.AKSNodeClass`` keeps working).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import fields, kubeletconfig, meta, nodeclaim, selectors

AKS_API_VERSION = "karpenter.azure.com/v1beta1"
AKS_KIND = "AKSNodeClass"
AKS_IMAGE_FAMILIES = ("Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux")
"""AKSNodeClass ``imageFamily`` values (``Ubuntu`` is AKS's current Ubuntu, 22.04)."""


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

    @staticmethod
    def parse(f: fields.Fields) -> AKSNodeClassStatus:
        return AKSNodeClassStatus(conditions=nodeclaim.parse_conditions(f),
                                  images=tuple(AKSImage.parse(i) for i in f.items("images")),
                                  kubernetes_version=f.str("kubernetesVersion"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.images:
            out["images"] = [i.to_dict() for i in self.images]
        if self.kubernetes_version is not None:
            out["kubernetesVersion"] = self.kubernetes_version
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
    status: AKSNodeClassStatus = field(default_factory=AKSNodeClassStatus)

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
        if self.kubelet is not None:
            spec["kubelet"] = self.kubelet.to_dict()
        if self.max_pods is not None:
            spec["maxPods"] = self.max_pods
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
