"""The ``bootstrappingclient`` provisioning mode: AKS's node bootstrapping API writes the node's custom data.

With ``PROVISION_MODE=bootstrappingclient`` Karpenter's Azure provider does not render the custom data
itself (:mod:`.bootstrap`, ``aksscriptless``): it sends the node's provisioning values to AKS's node
bootstrapping service and launches the VM with what comes back, then adds the Custom Script Extension
that runs the returned command. What a caller may rely on:

* :func:`provision_values` is the request body (``ProvisionValues`` in AKS's wire form):
  ``provisionProfile`` (``name`` empty, ``architecture`` ``x64``/``Arm64``, ``osType`` 2 (Linux),
  ``osSku`` 1 (Ubuntu) or 7 (AzureLinux), ``vmSize``, ``distro`` (:data:`DISTROS`, from the image
  definition), ``customNodeLabels`` (the labels the kubelet may set on itself), ``orchestratorVersion``,
  ``vnetSubnetID``, ``vnetCidrs`` (empty), ``storageProfile`` (``Ephemeral`` / ``ManagedDisks``),
  ``nodeTaints`` and ``nodeInitializationTaints`` (the startup taints plus ``karpenter.sh/unregistered``),
  ``securityProfile`` (``sshAccess`` 0, ``enableVTPM`` / ``enableSecureBoot`` as the AKSNodeClass says,
  omitted when unset), ``maxPods``, ``enableFIPS``, ``artifactStreamingProfile.enabled``,
  ``customLinuxOSConfig`` (sysctls under AKS's names, transparent huge pages, ``swapFileSizeMB``),
  ``localDNSProfile`` (the AKSNodeClass ``localDNS`` with ``Preferred`` already resolved to
  ``Required`` / ``Disabled`` by ``status.localDNSState``: Preferred is never sent), ``customKubeletConfig``
  (when the AKSNodeClass has ``kubelet``), ``mode`` 1 (system) / 2 (user) from
  ``kubernetes.azure.com/mode``, ``gpuProfile`` (NVIDIA sizes: ``driverType`` 2 GRID for the converged
  A10 sizes, else 3 CUDA, ``installGPUDriver`` from ``gpu.mode``) and ``provisionHelperValues``
  (``skuCPU``, ``skuMemory`` in GiB rounded up);
* :class:`NodeBootstrappingClient` GETs (with that JSON body, as AKS's generated client does)
  ``<NODEBOOTSTRAPPING_SERVER_URL>/subscriptions/<sub>/resourceGroups/<cluster resource group>/providers/
  Microsoft.ContainerService/managedclusters/<cluster>/nodeBootstrapping`` with the ARM bearer token and
  returns ``(customData, cse)`` with the redacted bootstrap token (``{{.TokenID}}.{{.TokenSecret}}``)
  filled in (:func:`hydrate`); an answer without either is an error;
* every failure is a :class:`karpy.cloudprovider.azure.clients.AzureAPIError` (the launch stops).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from azure.core import PipelineClient
from azure.core.credentials import TokenCredential
from azure.core.pipeline import policies
from azure.core.rest import HttpRequest

from karpy.api import aksnodeclass, labels, quantity
from karpy.cloudprovider import instancetype
from karpy.cloudprovider.azure import bootstrap, clients, instancetypes

TOKEN_PLACEHOLDER = "{{.TokenID}}.{{.TokenSecret}}"
OS_TYPE_LINUX = 2
OS_SKU = {"Ubuntu": 1, "AzureLinux": 7}
MODE = {"system": 1, "user": 2}
SSH_ACCESS_LOCAL_USER = 0
DRIVER_GRID, DRIVER_CUDA = 2, 3
GRID_SIZES = frozenset({
    "standard_nv6ads_a10_v5", "standard_nv12ads_a10_v5", "standard_nv18ads_a10_v5", "standard_nv36ads_a10_v5",
    "standard_nv72ads_a10_v5", "standard_nv36adms_a10_v5", "standard_nc8ads_a10_v4", "standard_nc16ads_a10_v4",
    "standard_nc32ads_a10_v4",
})
"""The sizes whose NVIDIA driver is AKS's converged (GRID) one."""
DISTROS = {
    "2204gen2containerd": "aks-ubuntu-containerd-22.04-gen2", "2204containerd": "aks-ubuntu-containerd-22.04",
    "2204gen2arm64containerd": "aks-ubuntu-arm64-containerd-22.04-gen2",
    "2204gen2TLcontainerd": "aks-ubuntu-containerd-22.04-tl-gen2",
    "2404gen2containerd": "aks-ubuntu-containerd-24.04-gen2", "2404containerd": "aks-ubuntu-containerd-24.04",
    "2404gen2arm64containerd": "aks-ubuntu-arm64-containerd-24.04-gen2",
    "2404gen2TLcontainerd": "aks-ubuntu-containerd-24.04-tl-gen2",
    "V2gen2": "aks-azurelinux-v2-gen2", "V2": "aks-azurelinux-v2", "V2gen2arm64": "aks-azurelinux-v2-arm64-gen2",
    "V2gen2TL": "aks-azurelinux-v2-gen2-tl",
    "V3gen2": "aks-azurelinux-v3-gen2", "V3": "aks-azurelinux-v3", "V3gen2arm64": "aks-azurelinux-v3-arm64-gen2",
    "V3gen2TL": "aks-azurelinux-v3-gen2-tl",
}
"""AKS's distro name of each image definition karpy launches."""
LOCAL_DNS_OVERRIDE_FIELDS = ("queryLogging", "protocol", "forwardDestination", "forwardPolicy", "maxConcurrent",
                             "serveStale")


def distro(image_id: str) -> str:
    """AKS's distro of a community gallery image id (``.../images/<definition>/versions/<v>``)."""
    parts = image_id.split("/")
    definition = parts[parts.index("images") + 1] if "images" in parts[:-1] else ""
    if definition not in DISTROS:
        raise clients.AzureAPIError(f"no AKS distro is known for image {image_id!r}", code="ImageNotFound")
    return DISTROS[definition]


def _seconds(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    text, total = str(value), 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", text):
        total += float(amount) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
    return int(total)


def local_dns_profile(nc: aksnodeclass.AKSNodeClass) -> dict[str, Any] | None:
    """``localDNSProfile``: the AKSNodeClass ``localDNS`` with ``Preferred`` resolved by ``status.localDNSState``
    (``Required`` when Enabled, else ``Disabled``), overrides keyed by zone."""
    spec = nc.local_dns
    if spec is None:
        return None
    out: dict[str, Any] = {}
    mode = nc.local_dns_mode()
    if mode == "Preferred":
        mode = "Required" if nc.local_dns_enabled() else "Disabled"
    if mode:
        out["mode"] = mode
    for key in ("vnetDNSOverrides", "kubeDNSOverrides"):
        overrides = spec.get(key) or []
        if not overrides:
            continue
        zones: dict[str, Any] = {}
        for o in overrides:
            entry = {k: o[k] for k in LOCAL_DNS_OVERRIDE_FIELDS if o.get(k) not in (None, "")}
            for src, dst in (("cacheDuration", "cacheDurationInSeconds"),
                             ("serveStaleDuration", "serveStaleDurationInSeconds")):
                seconds = _seconds(o.get(src))
                if seconds is not None:
                    entry[dst] = seconds
            zones[str(o.get("zone", ""))] = entry
        out[key] = zones
    return out


def _mib(size: str | None) -> int | None:
    if not size:
        return None
    return round(quantity.parse_milli(size) / quantity.MILLI / 2**20)


def linux_os_config(nc: aksnodeclass.AKSNodeClass) -> dict[str, Any] | None:
    """``customLinuxOSConfig`` of the AKSNodeClass ``linuxOSConfig`` (AKS's wire names)."""
    cfg = nc.linux_os_config
    if cfg is None:
        return None
    out: dict[str, Any] = {}
    if cfg.sysctls:
        out["sysctls"] = {_wire_sysctl(k): v for k, v in cfg.sysctls.items()}
    if cfg.transparent_huge_page_enabled is not None:
        out["transparentHugePageEnabled"] = cfg.transparent_huge_page_enabled
    if cfg.transparent_huge_page_defrag is not None:
        out["transparentHugePageDefrag"] = cfg.transparent_huge_page_defrag
    swap = _mib(cfg.swap_file_size)
    if swap is not None:
        out["swapFileSizeMB"] = swap
    return out


def _wire_sysctl(name: str) -> str:
    """The AKSNodeClass sysctl field -> the API's (``netIPv4TCPFinTimeout`` -> ``netIpv4TcpFinTimeout``)."""
    special = {"netIPv4TCPKeepaliveIntvl": "netIpv4TcpkeepaliveIntvl", "netIPv4IPLocalPortRange":
               "netIpv4IpLocalPortRange"}
    if name in special:
        return special[name]
    return name.replace("IPv4TCP", "Ipv4Tcp").replace("IPv4", "Ipv4")


def kubelet_config(nc: aksnodeclass.AKSNodeClass) -> dict[str, Any] | None:
    """``customKubeletConfig`` of the AKSNodeClass ``kubelet`` (``None`` without one)."""
    k = nc.kubelet
    if k is None:
        return None
    out: dict[str, Any] = {}
    for key, value in (("cpuCfsQuota", k.cpu_cfs_quota), ("imageGcHighThreshold", k.image_gc_high_threshold_percent),
                       ("imageGcLowThreshold", k.image_gc_low_threshold_percent),
                       ("containerLogMaxFiles", k.container_log_max_files), ("failSwapOn", nc.fail_swap_on),
                       ("cpuManagerPolicy", k.cpu_manager_policy or None),
                       ("topologyManagerPolicy", k.topology_manager_policy or None),
                       ("cpuCfsQuotaPeriod", k.cpu_cfs_quota_period or None)):
        if value is not None:
            out[key] = value
    if k.pod_pids_limit is not None:
        out["podMaxPids"] = max(-1, min(k.pod_pids_limit, 2**31 - 1))
    if k.container_log_max_size:
        out["containerLogMaxSizeMB"] = _mib(k.container_log_max_size)
    if k.allowed_unsafe_sysctls:
        out["allowedUnsafeSysctls"] = list(k.allowed_unsafe_sysctls)
    return out


def provision_values(node: bootstrap.NodeBootstrap, nc: aksnodeclass.AKSNodeClass | None,
                     it: instancetype.InstanceType, *, image_id: str, subnet_id: str, ephemeral: bool,
                     taints: Sequence[str], startup_taints: Sequence[str]) -> dict[str, Any]:
    """The node bootstrapping API's request body (see the module docstring)."""
    nc = nc if nc is not None else aksnodeclass.AKSNodeClass.from_manifest(
        {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"}})
    arch = it.labels.get(labels.ARCH, "amd64")
    family = node.node_labels.get("kubernetes.azure.com/os-sku", "Ubuntu")
    unregistered = bootstrap.UNREGISTERED_TAINT
    init = list(startup_taints)
    if unregistered not in init and unregistered not in taints:
        init.append(unregistered)
    security: dict[str, Any] = {"sshAccess": SSH_ACCESS_LOCAL_USER}
    if nc.security is not None and nc.security.vtpm is not None:
        security["enableVTPM"] = nc.security.vtpm
    if nc.security is not None and nc.security.secure_boot is not None:
        security["enableSecureBoot"] = nc.security.secure_boot
    profile: dict[str, Any] = {
        "name": "", "architecture": "x64" if arch == "amd64" else "Arm64", "osType": OS_TYPE_LINUX,
        "osSku": OS_SKU.get(family, OS_SKU["Ubuntu"]), "vmSize": it.name, "distro": distro(image_id),
        "customNodeLabels": {k: v for k, v in sorted(node.node_labels.items()) if bootstrap.kubelet_may_set(k)},
        "orchestratorVersion": node.cluster.kubernetes_version, "vnetSubnetID": subnet_id, "vnetCidrs": [],
        "storageProfile": "Ephemeral" if ephemeral else "ManagedDisks",
        "nodeInitializationTaints": init, "nodeTaints": list(taints), "securityProfile": security,
        "maxPods": node.max_pods, "enableFIPS": nc.fips(),
        "artifactStreamingProfile": {"enabled": nc.artifact_streaming_on(arch)},
        "mode": MODE["system"] if node.node_labels.get("kubernetes.azure.com/mode") == "system" else MODE["user"],
    }
    for key, value in (("customLinuxOSConfig", linux_os_config(nc)), ("localDNSProfile", local_dns_profile(nc)),
                       ("customKubeletConfig", kubelet_config(nc))):
        if value is not None:
            profile[key] = value
    if it.labels.get(labels.AZURE_SKU_GPU_MANUFACTURER) == "nvidia":
        profile["gpuProfile"] = {"driverType": DRIVER_GRID if it.name.lower() in GRID_SIZES else DRIVER_CUDA,
                                 "installGPUDriver": nc.gpu_driver_installation()}
    memory = it.capacity.get("memory", 0) / quantity.MILLI / (1 - instancetypes.VM_MEMORY_OVERHEAD_PERCENT)
    return {"provisionProfile": profile,
            "provisionHelperValues": {"skuCPU": it.capacity.get("cpu", 0) / quantity.MILLI,
                                      "skuMemory": float(math.ceil(memory / 2**30))}}


def hydrate(custom_data: str, cse: str, token: str) -> tuple[str, str]:
    """The custom data (base64) and the CSE command with the bootstrap token in place of the placeholder."""
    try:
        decoded = base64.b64decode(custom_data.encode(), validate=True).decode()
    except ValueError as exc:
        raise clients.AzureAPIError(f"node bootstrapping API: customData is not base64: {exc}",
                                    code="InvalidNodeBootstrapping") from exc
    filled = base64.b64encode(decoded.replace(TOKEN_PLACEHOLDER, token).encode()).decode()
    return filled, cse.replace(TOKEN_PLACEHOLDER, token)


class NodeBootstrappingClient:
    """AKS's node bootstrapping API of one managed cluster (see the module docstring)."""

    def __init__(self, server_url: str, credential: TokenCredential, *, subscription_id: str,
                 resource_group: str, cluster_name: str, bootstrap_token: str) -> None:
        base = server_url.rstrip("/")
        if base.startswith("http://") and not clients.is_loopback_http(base):
            raise clients.AzureAPIError(f"refusing to send Azure credentials over plain http to {base}",
                                        code="Configuration")
        auth: Any = (clients.loopback_bearer_policy(credential) if base.startswith("http://")
                     else policies.BearerTokenCredentialPolicy(credential, clients.ARM_SCOPE))
        self._client: PipelineClient[Any, Any] = PipelineClient(
            base_url=base, policies=[policies.HeadersPolicy(), policies.RetryPolicy(retry_total=3), auth])
        self.path = (f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
                     f"Microsoft.ContainerService/managedclusters/{cluster_name}/nodeBootstrapping")
        self._token = bootstrap_token

    def get(self, values: Mapping[str, Any]) -> tuple[str, str]:
        """``(customData, cse)`` for ``values``, the bootstrap token filled in."""
        request = HttpRequest("GET", self._client.format_url(self.path), json=dict(values))
        action = "getting node bootstrapping values"
        response = clients.call(action, self._client.send_request, request)
        if response.status_code != 200:
            text = response.text()[: clients.MESSAGE_LIMIT]
            raise clients.AzureAPIError(f"{action}: HTTP {response.status_code}: {text}",
                                        code="NodeBootstrappingFailed", status=response.status_code,
                                        retryable=response.status_code == 429 or response.status_code >= 500)
        try:
            payload = response.json()
        except ValueError as exc:
            raise clients.AzureAPIError(f"{action}: the answer is not JSON", code="InvalidNodeBootstrapping") from exc
        custom_data, cse = payload.get("customData"), payload.get("cse")
        if not custom_data or not cse:
            missing = "customData" if not custom_data else "cse"
            raise clients.AzureAPIError(f"{action}: no {missing} in the answer", code="InvalidNodeBootstrapping")
        return hydrate(str(custom_data), str(cse), self._token)
