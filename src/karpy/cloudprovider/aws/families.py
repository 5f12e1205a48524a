"""What an EC2NodeClass's AMI family changes about the nodes it boots, as Karpenter's AMI families say.

:func:`of` gives a :class:`Family` for an ``amiFamily`` name (``None``/unknown: ``AL2023``, the default):

* ``os``: ``kubernetes.io/os`` of its nodes: ``windows`` for ``Windows2019``/``Windows2022``/
  ``Windows2025`` (amd64 only: an arm64 type has no Windows offering), else ``linux``;
* ``windows_build``: ``node.kubernetes.io/windows-build`` (``10.0.17763``, ``10.0.20348``,
  ``10.0.26100``) on Windows;
* ``eni_limited_pods``: max pods from the ENI limits (every Linux family); Windows nodes get 110
  (the VPC CNI's Windows IPAM does not use secondary ENIs), ``maxPods`` wins in both;
* ``pods_per_core``: whether ``podsPerCore`` caps max pods (not on Bottlerocket);
* ``root_device`` / ``root_gib``: the default root (ephemeral) volume: ``/dev/xvda`` 20Gi,
  Bottlerocket's data volume ``/dev/xvdb`` 20Gi, Windows ``/dev/sda1`` 50Gi;
* ``min_kubernetes``: the oldest Kubernetes minor its EKS AMIs exist for (Windows Server 2025:
  1.35), enforced by :func:`check_version`.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.cloudprovider import errors

WINDOWS_BUILD_LABEL = "node.kubernetes.io/windows-build"
WINDOWS_BUILDS = {"Windows2019": "10.0.17763", "Windows2022": "10.0.20348", "Windows2025": "10.0.26100"}
PRIVATE_IPV4_RESOURCE = "vpc.amazonaws.com/PrivateIPv4Address"
"""The Windows IPAM's extended resource (secondary IPv4 addresses of the primary ENI)."""
WINDOWS_MAX_PODS = 110


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    os: str = "linux"
    windows_build: str = ""
    eni_limited_pods: bool = True
    pods_per_core: bool = True
    root_device: str = "/dev/xvda"
    root_gib: int = 20
    min_kubernetes: tuple[int, int] = (1, 0)

    @property
    def windows(self) -> bool:
        return self.os == "windows"


_FAMILIES = {
    "AL2": Family("AL2"),
    "AL2023": Family("AL2023"),
    "Custom": Family("Custom"),
    "Bottlerocket": Family("Bottlerocket", pods_per_core=False, root_device="/dev/xvdb"),
    "Windows2019": Family("Windows2019", os="windows", windows_build=WINDOWS_BUILDS["Windows2019"],
                          eni_limited_pods=False, root_device="/dev/sda1", root_gib=50),
    "Windows2022": Family("Windows2022", os="windows", windows_build=WINDOWS_BUILDS["Windows2022"],
                          eni_limited_pods=False, root_device="/dev/sda1", root_gib=50),
    "Windows2025": Family("Windows2025", os="windows", windows_build=WINDOWS_BUILDS["Windows2025"],
                          eni_limited_pods=False, root_device="/dev/sda1", root_gib=50, min_kubernetes=(1, 35)),
}
DEFAULT = _FAMILIES["AL2023"]


def of(name: str | None) -> Family:
    """The family of an ``amiFamily`` name (the default ``AL2023`` for ``None`` or an unknown name)."""
    return _FAMILIES.get(name or "", DEFAULT)


def is_windows(name: str | None) -> bool:
    return of(name).windows


def check_version(family: str, kubernetes_version: str) -> None:
    """Raise :class:`errors.CloudProviderError` (not retryable) when the family's EKS AMIs do not exist
    for ``kubernetes_version`` (``major.minor``)."""
    f = of(family)
    try:
        major, minor = (int(x) for x in kubernetes_version.split(".")[:2])
    except ValueError:
        return
    if (major, minor) < f.min_kubernetes:
        want = ".".join(str(x) for x in f.min_kubernetes)
        raise errors.CloudProviderError(
            f"amiFamily {family}: needs EKS {want} or newer, the cluster runs {kubernetes_version}",
            reason="UnsupportedKubernetesVersion")
