"""AKS node images per AKSNodeClass ``imageFamily``, and the AKSNodeClass status the provider writes.

Images come from AKS's public community galleries, as Karpenter's Azure provider uses them:
``/CommunityGalleries/<gallery>/images/<definition>/versions/<version>``. Each family has three
definitions: Gen2 amd64, Gen1 amd64 and Gen2 arm64. Which family a version-less ``imageFamily`` is
depends on the cluster's Kubernetes version, as in Karpenter's Azure provider (:func:`effective_family`):
``Ubuntu`` is ``Ubuntu2404`` from Kubernetes 1.34, else ``Ubuntu2204``; ``AzureLinux`` is Azure Linux 3
(``V3gen2``, ``V3``, ``V3gen2arm64``) from 1.32, else Azure Linux 2 (``V2gen2``, ...).
With trusted launch (``security.trustedLaunch``: secure boot or vTPM) a family has one definition,
its Gen2 amd64 trusted-launch image (``2204gen2TLcontainerd``, ``2404gen2TLcontainerd``, ``V2gen2TL``,
``V3gen2TL``),
as Karpenter's Azure provider picks it. With ``fipsMode: FIPS`` there is none: AKS publishes FIPS images
only in its shared image gallery, not in the community galleries karpy (like the provider without
``USE_SIG``) launches from, so the AKSNodeClass is not Ready (``ImagesNotReady``, saying so).
Each definition's version is the AKSNodeClass ``imageVersion`` when pinned, else the newest version
the gallery has (``latest``, a :class:`Resolver` such as :meth:`.gallery.ImageVersions.latest`), else
:data:`DEFAULT_VERSION` (the fallback when the gallery cannot be read).
:func:`image_for` picks the definition from a size's architecture and Hyper-V generation labels;
:func:`status_images` lists them with the requirements a size must meet, in the form of the
AKSNodeClass ``status.images``; :func:`resolve_status` is the whole status (with a ``Ready``
condition that is False, with a reason, for an unknown image family, FIPS, or a malformed
``vnetSubnetID``, and ``localDNSState``: :func:`local_dns_state`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import labels
from karpy.cloudprovider import interface

UBUNTU_GALLERY = "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2"
AZURE_LINUX_GALLERY = "AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b"
DEFAULT_VERSION = "202501.02.0"
SIG_GALLERIES = {UBUNTU_GALLERY: ("AKS-Ubuntu", "AKSUbuntu"), AZURE_LINUX_GALLERY: ("AKS-AzureLinux", "AKSAzureLinux")}
"""Community gallery -> (resource group, name) of the shared image gallery AKS publishes the same images in."""
UBUNTU_2404_FROM = (1, 34)
"""``imageFamily: Ubuntu`` launches Ubuntu 24.04 from this Kubernetes version (Karpenter's ``UseUbuntu2404``)."""
AZURE_LINUX_3_FROM = (1, 32)
"""``imageFamily: AzureLinux`` launches Azure Linux 3 from this Kubernetes version (``UseAzureLinux3``)."""

_DEFINITIONS: dict[str, tuple[str, str, str, str]] = {
    # family: (gallery, gen2 amd64, gen1 amd64, gen2 arm64)
    "Ubuntu2204": (UBUNTU_GALLERY, "2204gen2containerd", "2204containerd", "2204gen2arm64containerd"),
    "Ubuntu2404": (UBUNTU_GALLERY, "2404gen2containerd", "2404containerd", "2404gen2arm64containerd"),
    "AzureLinux": (AZURE_LINUX_GALLERY, "V2gen2", "V2", "V2gen2arm64"),
    "AzureLinux3": (AZURE_LINUX_GALLERY, "V3gen2", "V3", "V3gen2arm64"),
}
_TRUSTED_LAUNCH = {"Ubuntu2204": "2204gen2TLcontainerd", "Ubuntu2404": "2404gen2TLcontainerd",
                   "AzureLinux": "V2gen2TL", "AzureLinux3": "V3gen2TL"}
"""The Gen2 amd64 trusted-launch definition of each family."""
FAMILIES = ("Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux")
"""The ``imageFamily`` values an AKSNodeClass may name."""
EFFECTIVE_NAMES = {"Ubuntu2204": "Ubuntu2204", "Ubuntu2404": "Ubuntu2404", "AzureLinux": "AzureLinux2",
                   "AzureLinux3": "AzureLinux3"}
"""The name of each launched family (the ``kubernetes.azure.com/os-sku-effective`` label)."""
LOCAL_DNS_PREFERRED_MIN_VERSION = (1, 99)
"""``localDNS.mode: Preferred`` turns LocalDNS on from this Kubernetes version: Karpenter's Azure provider
v1.14 raised it from 1.36 to 1.99 (#1771), so no cluster of today gets LocalDNS from ``Preferred``."""
Resolver = Callable[[str, str], "str | None"]
"""(gallery, image definition) -> the newest version there, or ``None`` (unknown)."""

SUBNET_ID = re.compile(
    r"^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+"
    r"/subnets/[^/]+$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Image:
    """One image of a family: its gallery id and which sizes may boot it."""

    id: str
    arch: str
    hyperv_generation: str

    def requirements(self) -> list[dict[str, Any]]:
        return [
            {"key": labels.ARCH, "operator": "In", "values": [self.arch]},
            {"key": labels.AZURE_SKU_HYPERV_GENERATION, "operator": "In", "values": [self.hyperv_generation]},
        ]


def family_of(image_family: str, kubernetes_version: str = "") -> str | None:
    """The family an ``imageFamily`` launches on a cluster of ``kubernetes_version`` (see the module
    docstring; an unknown or empty version counts as below both thresholds), or ``None`` when unknown."""
    if image_family not in FAMILIES:
        return None
    version = _major_minor(kubernetes_version) if kubernetes_version else None
    if image_family == "Ubuntu":
        return "Ubuntu2404" if version is not None and version >= UBUNTU_2404_FROM else "Ubuntu2204"
    if image_family == "AzureLinux" and version is not None and version >= AZURE_LINUX_3_FROM:
        return "AzureLinux3"
    return image_family


def effective_name(image_family: str, kubernetes_version: str = "") -> str:
    """The ``os-sku-effective`` label of an ``imageFamily`` (``Ubuntu2404``, ``AzureLinux3``, ...)."""
    family = family_of(image_family, kubernetes_version)
    return EFFECTIVE_NAMES[family] if family is not None else image_family


def images(image_family: str, version: str | None = None, latest: Resolver | None = None, *,
           trusted_launch: bool = False, fips: bool = False, kubernetes_version: str = "",
           sig_subscription: str = "") -> list[Image]:
    """The images of a family: Gen2 amd64, Gen1 amd64, Gen2 arm64; with ``trusted_launch`` its Gen2
    amd64 trusted-launch image only; none with ``fips`` (see the module docstring) or for an unknown
    family. With ``sig_subscription`` (``USE_SIG``) the ids are AKS's shared image gallery ones in that
    subscription (:func:`karpy.cloudprovider.azure.sig.image_id`), ``latest`` answering for them."""
    family = family_of(image_family, kubernetes_version)
    if family is None or (fips and not sig_subscription):
        return []
    gallery, gen2, gen1, arm = _DEFINITIONS[family]

    def gid(definition: str) -> str:
        v = version or (latest(gallery, definition) if latest is not None else None) or DEFAULT_VERSION
        if sig_subscription:
            rg, name = SIG_GALLERIES[gallery]
            return (f"/subscriptions/{sig_subscription}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/"
                    f"{name}/images/{definition}/versions/{v}")
        return f"/CommunityGalleries/{gallery}/images/{definition}/versions/{v}"

    if fips:  # AKS's shared image gallery only
        return [Image(gid(d), arch, gen) for d, arch, gen in _fips_definitions(image_family, family, trusted_launch)]
    if trusted_launch:
        return [Image(gid(_TRUSTED_LAUNCH[family]), "amd64", "2")]
    return [Image(gid(gen2), "amd64", "2"), Image(gid(gen1), "amd64", "1"), Image(gid(arm), "arm64", "2")]


def _fips_definitions(image_family: str, family: str, trusted_launch: bool) -> list[tuple[str, str, str]]:
    """(definition, arch, Hyper-V generation) of the FIPS images AKS publishes in its shared image gallery, as
    Karpenter's Azure provider picks them: ``Ubuntu`` is Ubuntu 20.04 FIPS (22.04 FIPS with trusted launch),
    ``Ubuntu2204`` has only the trusted-launch one, ``Ubuntu2404`` none; Azure Linux ignores trusted launch."""
    if family in ("Ubuntu2204", "Ubuntu2404") and (image_family == "Ubuntu" or family == "Ubuntu2204"):
        if trusted_launch:
            return [("2204gen2fipsTLcontainerd", "amd64", "2")]
        if image_family == "Ubuntu":
            return [("2004gen2fipscontainerd", "amd64", "2"), ("2004fipscontainerd", "amd64", "1")]
        return []
    if family == "AzureLinux":
        return [("V2gen2fips", "amd64", "2"), ("V2fips", "amd64", "1")]
    if family == "AzureLinux3":
        return [("V3gen2fips", "amd64", "2"), ("V3fips", "amd64", "1"), ("V3gen2arm64fips", "arm64", "2")]
    return []


def image_for(image_family: str, version: str | None, size_labels: Mapping[str, str],
              latest: Resolver | None = None, *, trusted_launch: bool = False, fips: bool = False,
              kubernetes_version: str = "", sig_subscription: str = "") -> str | None:
    """The image a size with ``size_labels`` boots: its arch, Gen2 where the size supports it."""
    arch = size_labels.get(labels.ARCH, "amd64")
    gen = size_labels.get(labels.AZURE_SKU_HYPERV_GENERATION, "2")
    for image in images(image_family, version, latest, trusted_launch=trusted_launch, fips=fips,
                        kubernetes_version=kubernetes_version, sig_subscription=sig_subscription):
        if image.arch == arch and image.hyperv_generation == gen:
            return image.id
    return None


def status_images(image_family: str, version: str | None = None, latest: Resolver | None = None, *,
                  trusted_launch: bool = False, fips: bool = False,
                  kubernetes_version: str = "", sig_subscription: str = "") -> list[dict[str, Any]]:
    return [{"id": i.id, "requirements": i.requirements()}
            for i in images(image_family, version, latest, trusted_launch=trusted_launch, fips=fips,
                            kubernetes_version=kubernetes_version, sig_subscription=sig_subscription)]


def _major_minor(kubernetes_version: str) -> tuple[int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)", kubernetes_version.strip())
    return (int(m[1]), int(m[2])) if m is not None else None


def local_dns_state(spec: Mapping[str, Any], previous: str | None, kubernetes_version: str,
                    network_plugin: str = "") -> str:
    """``status.localDNSState`` for an AKSNodeClass ``spec``: ``Enabled`` for ``mode: Required``,
    ``Disabled`` for ``Disabled`` or no mode; ``Preferred`` is ``Enabled`` once it was (sticky), else when
    the cluster runs Kubernetes :data:`LOCAL_DNS_PREFERRED_MIN_VERSION` or later (1.99: none does yet), its
    network plugin is not ``none`` and the image is not the FIPS Ubuntu 20.04 one (``Ubuntu`` with FIPS and
    without trusted launch), as Karpenter's Azure provider v1.14 decides it. Not checked here: the
    provider's cluster gates (NetworkPolicies that would conflict, an upstream node-local-dns DaemonSet),
    which it consults only after these static gates pass, so never below Kubernetes 1.99."""
    mode = (spec.get("localDNS") or {}).get("mode")
    if mode == "Required":
        return "Enabled"
    if mode != "Preferred":
        return "Disabled"
    if previous == "Enabled":
        return "Enabled"
    version = _major_minor(kubernetes_version) if kubernetes_version else None
    if version is None or version < LOCAL_DNS_PREFERRED_MIN_VERSION or network_plugin.lower() == "none":
        return "Disabled"
    trusted = (spec.get("security") or {}).get("trustedLaunch") or {}
    if (spec.get("imageFamily") in (None, "Ubuntu") and spec.get("fipsMode") == "FIPS"
            and not (trusted.get("secureBoot") or trusted.get("vtpm"))):
        return "Disabled"
    return "Enabled"


def resolve_status(node_class: Mapping[str, Any], kubernetes_version: str = "",
                   latest: Resolver | None = None, network_plugin: str = "",
                   sig_subscription: str = "") -> dict[str, Any]:
    """The ``status`` of an AKSNodeClass object (a dict as the API returns it)."""
    kind = str(node_class.get("kind") or "")
    status: dict[str, Any] = {k: v for k, v in dict(node_class.get("status") or {}).items()
                              if k not in ("images", "conditions", "kubernetesVersion")}
    others = [c for c in (node_class.get("status") or {}).get("conditions") or () if c.get("type") != "Ready"]
    if kind != "AKSNodeClass":
        status["conditions"] = [*others, interface.ready_condition(
            False, "UnsupportedNodeClass", f"the Azure provider does not serve {kind or 'this kind'}")]
        return status
    spec = node_class.get("spec") or {}
    family = str(spec.get("imageFamily") or "Ubuntu2204")
    version = spec.get("imageVersion")
    subnet = spec.get("vnetSubnetID")
    trusted = (spec.get("security") or {}).get("trustedLaunch") or {}
    trusted_launch = bool(trusted.get("secureBoot") or trusted.get("vtpm"))
    fips = spec.get("fipsMode") == "FIPS"
    if family_of(family) is None:
        ready = interface.ready_condition(
            False, "ImagesNotReady", f"imageFamily {family!r} is not one of {', '.join(FAMILIES)}")
    elif fips and not sig_subscription:
        ready = interface.ready_condition(
            False, "ImagesNotReady", f"fipsMode FIPS: AKS publishes {family} FIPS images only in its shared image "
            "gallery, and karpy launches from the community galleries")
    elif subnet is not None and not SUBNET_ID.match(str(subnet)):
        ready = interface.ready_condition(
            False, "SubnetsNotReady", f"vnetSubnetID {subnet!r} is not a subnet resource id "
            "(/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>"
            "/subnets/<subnet>)")
    else:
        ready = interface.ready_condition(True, "Ready")
    found = status_images(family, str(version) if version else None, latest, trusted_launch=trusted_launch,
                          fips=fips, kubernetes_version=kubernetes_version, sig_subscription=sig_subscription)
    if fips and sig_subscription and not found:
        ready = interface.ready_condition(
            False, "ImagesNotReady", f"fipsMode FIPS: AKS publishes no {effective_name(family, kubernetes_version)} "
            "FIPS image" + (" with trusted launch" if trusted_launch else " without trusted launch"))
    if found:
        status["images"] = found
    if kubernetes_version:
        status["kubernetesVersion"] = kubernetes_version
    previous = (node_class.get("status") or {}).get("localDNSState")
    status["localDNSState"] = local_dns_state(spec, str(previous) if previous else None, kubernetes_version,
                                              network_plugin)
    status["conditions"] = [*others, ready]
    return status
