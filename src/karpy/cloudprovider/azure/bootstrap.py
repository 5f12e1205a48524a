"""The VM custom data that joins a new VM to the AKS cluster, as Karpenter's Azure provider writes it.

AKS node images (the VHDs of AKS's community galleries) carry AKS's node provisioning scripts under
``/opt/azure/containers``; a VM joins the cluster when its custom data exports the variables those
scripts read and starts ``provision_start.sh`` ("scriptless" provisioning, Karpenter Azure's default
``PROVISION_MODE=aksscriptless``: no Custom Script Extension is needed). :func:`custom_data` renders
that bash script and base64-encodes it for ARM's ``osProfile.customData``. What a caller may rely on:

* the cluster: ``API_SERVER_NAME`` (the host of ``clusterEndpoint``), ``KUBE_CA_CRT`` (the cluster CA,
  base64 PEM), ``TLS_BOOTSTRAP_TOKEN`` (``KUBELET_BOOTSTRAP_TOKEN``; ``ENABLE_TLS_BOOTSTRAPPING=true``),
  ``KUBERNETES_VERSION``, tenant / subscription / location / node resource group, the subnet's
  ``SUBNET`` / ``VIRTUAL_NETWORK`` / ``VIRTUAL_NETWORK_RESOURCE_GROUP``, ``NETWORK_PLUGIN`` (``none`` for
  Azure CNI overlay and ``networkPlugin: none``, else ``azure``; AKS's rule), ``NETWORK_POLICY``,
  ``USER_ASSIGNED_IDENTITY_ID`` (the kubelet identity);
* the node: ``KUBELET_NODE_LABELS`` (the labels the kubelet may set on itself, :func:`kubelet_may_set`),
  ``KUBELET_FLAGS`` (:func:`kubelet_flags`: AKS's base flags, ``--max-pods``, ``--cluster-dns``,
  ``--register-with-taints`` with the NodeClaim's taints, its startup taints and
  ``karpenter.sh/unregistered:NoExecute``, the AKSNodeClass kubelet settings, ``--fail-swap-on`` when
  ``kubelet.failSwapOn`` is set), ``GPU_NODE`` / ``CONFIG_GPU_DRIVER_IF_NEEDED`` (an NVIDIA size whose
  AKSNodeClass ``gpu.mode`` is not ``None``: the node installs the driver);
* the AKSNodeClass ``linuxOSConfig`` (:func:`linux_os_variables`): ``SYSCTL_CONTENT`` (AKS's node
  sysctls with the AKSNodeClass ``sysctls`` over them, as ``/etc/sysctl.d`` lines, base64),
  ``SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE`` / ``THP_ENABLED`` / ``THP_DEFRAG``, ``SHOULD_CONFIG_SWAP_FILE`` /
  ``SWAP_FILE_SIZE_MB`` (``swapFileSize`` in MiB, rounded, as the provider converts it);
* the output depends only on the arguments (sorted), so one NodeClaim always gets the same bytes;
  :func:`decode` and :func:`variables_of` read it back (tests, debugging).

Pure: no I/O.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpy.api import aksnodeclass, kubeletconfig, labels, quantity

PROVISION_START = "/opt/azure/containers/provision_start.sh"
PROVISION_SCRIPT = "/opt/azure/containers/provision.sh"
AKS_MIRROR = "https://acs-mirror.azureedge.net"
DEFAULT_CLUSTER_DNS = "10.0.0.10"
CREDENTIAL_PROVIDER_VERSIONS = {29: "1.29.15", 30: "1.30.12", 31: "1.31.6", 32: "1.32.5"}
LATEST_CREDENTIAL_PROVIDER = "1.33.0"
UNREGISTERED_TAINT = f"{labels.TAINT_UNREGISTERED}:NoExecute"

_BASE_KUBELET_FLAGS = {
    "--address": "0.0.0.0", "--anonymous-auth": "false", "--authentication-token-webhook": "true",
    "--authorization-mode": "Webhook", "--cgroups-per-qos": "true", "--client-ca-file": "/etc/kubernetes/certs/ca.crt",
    "--cloud-config": "/etc/kubernetes/azure.json", "--cloud-provider": "external", "--cluster-domain": "cluster.local",
    "--enforce-node-allocatable": "pods", "--event-qps": "0",
    "--eviction-hard": "memory.available<750Mi,nodefs.available<10%,nodefs.inodesFree<5%",
    "--image-gc-high-threshold": "85", "--image-gc-low-threshold": "80", "--kubeconfig": "/var/lib/kubelet/kubeconfig",
    "--node-status-update-frequency": "10s",
    "--pod-infra-container-image": "mcr.microsoft.com/oss/kubernetes/pause:3.6",
    "--pod-manifest-path": "/etc/kubernetes/manifests", "--pod-max-pids": "-1", "--protect-kernel-defaults": "true",
    "--read-only-port": "0", "--resolv-conf": "/run/systemd/resolve/resolv.conf", "--rotate-certificates": "true",
    "--streaming-connection-idle-timeout": "4h", "--tls-cert-file": "/etc/kubernetes/certs/kubeletserver.crt",
    "--tls-private-key-file": "/etc/kubernetes/certs/kubeletserver.key",
}
"""The kubelet flags of an AKS agent node (AKS's node pools run the same)."""

DEFAULT_SYSCTLS = {
    "net.core.message_burst": "80", "net.core.message_cost": "40", "net.core.somaxconn": "16384",
    "net.ipv4.neigh.default.gc_thresh1": "4096", "net.ipv4.neigh.default.gc_thresh2": "8192",
    "net.ipv4.neigh.default.gc_thresh3": "16384", "net.ipv4.tcp_max_syn_backlog": "16384",
    "net.ipv4.tcp_retries2": "8",
}
"""The sysctls every AKS node gets (AKS's node ``sysctl.conf``)."""
SYSCTL_NAMES = {
    "fsAioMaxNr": "fs.aio-max-nr", "fsFileMax": "fs.file-max", "fsInotifyMaxUserWatches": "fs.inotify.max_user_watches",
    "fsNrOpen": "fs.nr_open", "kernelThreadsMax": "kernel.threads-max",
    "netCoreNetdevMaxBacklog": "net.core.netdev_max_backlog", "netCoreOptmemMax": "net.core.optmem_max",
    "netCoreRmemDefault": "net.core.rmem_default", "netCoreRmemMax": "net.core.rmem_max",
    "netCoreSomaxconn": "net.core.somaxconn", "netCoreWmemDefault": "net.core.wmem_default",
    "netCoreWmemMax": "net.core.wmem_max", "netIPv4IPLocalPortRange": "net.ipv4.ip_local_port_range",
    "netIPv4NeighDefaultGcThresh1": "net.ipv4.neigh.default.gc_thresh1",
    "netIPv4NeighDefaultGcThresh2": "net.ipv4.neigh.default.gc_thresh2",
    "netIPv4NeighDefaultGcThresh3": "net.ipv4.neigh.default.gc_thresh3",
    "netIPv4TCPFinTimeout": "net.ipv4.tcp_fin_timeout", "netIPv4TCPKeepaliveIntvl": "net.ipv4.tcp_keepalive_intvl",
    "netIPv4TCPKeepaliveProbes": "net.ipv4.tcp_keepalive_probes",
    "netIPv4TCPKeepaliveTime": "net.ipv4.tcp_keepalive_time",
    "netIPv4TCPMaxSynBacklog": "net.ipv4.tcp_max_syn_backlog",
    "netIPv4TCPMaxTwBuckets": "net.ipv4.tcp_max_tw_buckets", "netIPv4TCPTwReuse": "net.ipv4.tcp_tw_reuse",
    "netNetfilterNfConntrackBuckets": "net.netfilter.nf_conntrack_buckets",
    "netNetfilterNfConntrackMax": "net.netfilter.nf_conntrack_max", "vmMaxMapCount": "vm.max_map_count",
    "vmSwappiness": "vm.swappiness", "vmVfsCachePressure": "vm.vfs_cache_pressure",
}
"""AKSNodeClass ``linuxOSConfig.sysctls`` field -> the kernel setting."""

_KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
})
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_SUBNET = re.compile(r"/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Network/virtualNetworks/(?P<vnet>[^/]+)"
                     r"/subnets/(?P<subnet>[^/]+)$", re.IGNORECASE)


@dataclass(frozen=True)
class ClusterBootstrap:
    """The cluster-wide part: Karpenter Azure's operator settings and the cluster's identity."""

    cluster_name: str
    api_server: str
    """Host name of the API server (``clusterEndpoint`` without scheme and port)."""
    ca_bundle: str
    """The cluster CA certificate(s), PEM, base64-encoded."""
    bootstrap_token: str = field(repr=False)
    kubernetes_version: str
    subscription_id: str
    location: str
    node_resource_group: str
    subnet_id: str
    tenant_id: str = ""
    network_plugin: str = "azure"
    network_plugin_mode: str = "overlay"
    network_policy: str = ""
    dns_service_ip: str = ""
    kubelet_identity_client_id: str = ""
    admin_username: str = "azureuser"


@dataclass(frozen=True)
class NodeBootstrap:
    """What one node needs besides the cluster's part."""

    cluster: ClusterBootstrap
    node_labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[str] = ()
    """``key=value:Effect`` strings: the NodeClaim's taints, then its startup taints."""
    max_pods: int = 250
    kubelet: kubeletconfig.KubeletConfiguration | None = None
    arch: str = "amd64"
    gpu_node: bool = False
    """An NVIDIA size whose drivers the node installs (``gpu.mode`` not ``None``)."""
    fail_swap_on: bool | None = None
    linux_os: aksnodeclass.LinuxOSConfig | None = None


def api_server_name(endpoint: str) -> str:
    """``https://x.hcp.azmk8s.io:443`` -> ``x.hcp.azmk8s.io``."""
    rest = endpoint.split("://", 1)[-1]
    host = rest.split("/", 1)[0]
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def agent_network_plugin(plugin: str, mode: str) -> str:
    """What the node's scripts are told: ``none`` for Azure CNI overlay and ``networkPlugin: none`` (the
    CNI is installed by the cluster's own daemonsets), else ``azure``."""
    return "none" if plugin == "none" or mode == "overlay" else "azure"


def _version(text: str) -> tuple[int, int, int | None]:
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(f"kubernetes version {text!r} is not like 1.31.2")
    return int(m[1]), int(m[2]), int(m[3]) if m[3] is not None else None


def credential_provider_url(kubernetes_version: str, arch: str) -> str:
    """The out-of-tree ACR credential provider for Kubernetes 1.30+ (``""`` before)."""
    _, minor, _ = _version(kubernetes_version)
    if minor < 30:
        return ""
    v = CREDENTIAL_PROVIDER_VERSIONS.get(minor, LATEST_CREDENTIAL_PROVIDER)
    return f"{AKS_MIRROR}/cloud-provider-azure/v{v}/binaries/azure-acr-credential-provider-linux-{arch}-v{v}.tar.gz"


def kube_binary_url(kubernetes_version: str, arch: str) -> str:
    """Where the node fetches kubelet when its image has not cached the version (``""`` from 1.34, whose
    images carry it, and when only ``major.minor`` is known)."""
    major, minor, patch = _version(kubernetes_version)
    if minor >= 34 or patch is None:
        return ""
    return f"{AKS_MIRROR}/kubernetes/v{major}.{minor}.{patch}/binaries/kubernetes-node-linux-{arch}.tar.gz"


def _joined(values: Mapping[str, str], sep: str) -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(values.items()))


def kubelet_config_flags(kc: kubeletconfig.KubeletConfiguration | None) -> dict[str, str]:
    """The flags an AKSNodeClass ``kubelet`` block sets."""
    out: dict[str, str] = {}
    if kc is None:
        return out
    if kc.system_reserved:
        out["--system-reserved"] = _joined(quantity.format_list(kc.system_reserved), "=")
    if kc.kube_reserved:
        out["--kube-reserved"] = _joined(quantity.format_list(kc.kube_reserved), "=")
    for flag, mapping in (("--eviction-hard", kc.eviction_hard), ("--eviction-soft", kc.eviction_soft)):
        if mapping:
            out[flag] = _joined(mapping, "<")
    if kc.eviction_soft_grace_period:
        out["--eviction-soft-grace-period"] = _joined(kc.eviction_soft_grace_period, "=")
    scalars = (("--eviction-max-pod-grace-period", kc.eviction_max_pod_grace_period),
               ("--image-gc-high-threshold", kc.image_gc_high_threshold_percent),
               ("--image-gc-low-threshold", kc.image_gc_low_threshold_percent),
               ("--cpu-manager-policy", kc.cpu_manager_policy), ("--cpu-cfs-quota-period", kc.cpu_cfs_quota_period),
               ("--topology-manager-policy", kc.topology_manager_policy),
               ("--container-log-max-size", kc.container_log_max_size),
               ("--container-log-max-files", kc.container_log_max_files), ("--pod-max-pids", kc.pod_pids_limit))
    for flag, value in scalars:
        if value is not None and value != "":
            out[flag] = str(value)
    if kc.cpu_cfs_quota is not None:
        out["--cpu-cfs-quota"] = str(kc.cpu_cfs_quota).lower()
    if kc.allowed_unsafe_sysctls:
        out["--allowed-unsafe-sysctls"] = ",".join(kc.allowed_unsafe_sysctls)
    if kc.cluster_dns:
        out["--cluster-dns"] = ",".join(kc.cluster_dns)
    return out


def register_taints(taints: Sequence[str]) -> list[str]:
    """The taints the kubelet registers the Node with: those given plus ``karpenter.sh/unregistered``,
    which Karpenter removes once it has synced the NodeClaim onto the Node."""
    out = list(dict.fromkeys(taints))
    if not any(t.split("=", 1)[0].split(":", 1)[0] == labels.TAINT_UNREGISTERED for t in out):
        out.append(UNREGISTERED_TAINT)
    return out


def kubelet_flags(node: NodeBootstrap) -> dict[str, str]:
    """Every kubelet flag of the node (flag -> value)."""
    version = node.cluster.kubernetes_version
    _, minor, _ = _version(version)
    flags = dict(_BASE_KUBELET_FLAGS)
    flags["--cluster-dns"] = node.cluster.dns_service_ip or DEFAULT_CLUSTER_DNS
    if minor < 31:
        flags["--keep-terminated-pod-volumes"] = "false"
    if minor >= 34:
        del flags["--cloud-config"]
    if minor >= 35:
        del flags["--pod-infra-container-image"]
    if credential_provider_url(version, node.arch):
        flags["--image-credential-provider-config"] = "/var/lib/kubelet/credential-provider-config.yaml"
        flags["--image-credential-provider-bin-dir"] = "/var/lib/kubelet/credential-provider"
    else:
        flags["--azure-container-registry-config"] = "/etc/kubernetes/azure.json"
    flags["--max-pods"] = str(node.max_pods)
    flags["--register-with-taints"] = ",".join(register_taints(node.taints))
    flags.update(kubelet_config_flags(node.kubelet))
    if node.fail_swap_on is not None:
        flags["--fail-swap-on"] = str(node.fail_swap_on).lower()
    return flags


def sysctl_content(linux_os: aksnodeclass.LinuxOSConfig | None) -> str:
    """``SYSCTL_CONTENT``: AKS's node sysctls with the AKSNodeClass's over them, ``key=value`` lines,
    sorted, base64."""
    values = dict(DEFAULT_SYSCTLS)
    for name, value in (linux_os.sysctls if linux_os is not None else {}).items():
        key = SYSCTL_NAMES.get(name)
        if key is None:
            raise ValueError(f"linuxOSConfig.sysctls.{name} is not a sysctl AKS sets")
        values[key] = str(int(value)) if isinstance(value, bool) else str(value)
    text = "".join(f"{k}={v}\n" for k, v in sorted(values.items()))
    return base64.b64encode(text.encode()).decode()


def swap_file_mb(size: str) -> int:
    """``swapFileSize`` (a quantity such as ``1500M`` or ``2Gi``) in MiB, rounded (the provider's rule)."""
    return round(quantity.parse_milli(size) / quantity.MILLI / 2**20)


def linux_os_variables(linux_os: aksnodeclass.LinuxOSConfig | None) -> dict[str, str]:
    """The provisioning variables of ``linuxOSConfig`` (see the module docstring)."""
    thp_enabled = linux_os.transparent_huge_page_enabled if linux_os is not None else None
    thp_defrag = linux_os.transparent_huge_page_defrag if linux_os is not None else None
    swap = linux_os.swap_file_size if linux_os is not None else None
    return {
        "SHOULD_CONFIG_SWAP_FILE": str(bool(swap)).lower(),
        "SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE": str(bool(thp_enabled or thp_defrag)).lower(),
        "SWAP_FILE_SIZE_MB": str(swap_file_mb(swap)) if swap else "0",
        "SYSCTL_CONTENT": sysctl_content(linux_os),
        "THP_DEFRAG": thp_defrag or "",
        "THP_ENABLED": thp_enabled or "",
    }


def kubelet_may_set(key: str) -> bool:
    """Whether the kubelet may put label ``key`` on its own Node (the NodeRestriction admission rule):
    not in the ``kubernetes.io`` / ``k8s.io`` namespaces, except the well-known labels and the
    ``kubelet.kubernetes.io`` / ``node.kubernetes.io`` namespaces."""
    if key in _KUBELET_LABELS:
        return True
    namespace = key.split("/", 1)[0] if "/" in key else ""
    for domain in ("kubernetes.io", "k8s.io"):
        if namespace == domain or namespace.endswith("." + domain):
            return any(namespace == ns or namespace.endswith("." + ns)
                       for ns in ("kubelet.kubernetes.io", "node.kubernetes.io"))
    return True


def variables(node: NodeBootstrap) -> dict[str, str]:
    """The variables AKS's node provisioning scripts read (name -> value)."""
    c = node.cluster
    m = _SUBNET.search(c.subnet_id)
    subnet = (m["subnet"], m["vnet"], m["rg"]) if m is not None else ("aks-subnet", "", "")
    return {
        **linux_os_variables(node.linux_os),
        "ADMINUSER": c.admin_username,
        "API_SERVER_NAME": c.api_server,
        "CLI_TOOL": "ctr",
        "CNI_PLUGINS_URL": f"{AKS_MIRROR}/cni-plugins/v1.1.1/binaries/cni-plugins-linux-{node.arch}-v1.1.1.tgz",
        "CONFIG_GPU_DRIVER_IF_NEEDED": str(node.gpu_node).lower(),
        "CONTAINER_RUNTIME": "containerd",
        "CREDENTIAL_PROVIDER_DOWNLOAD_URL": credential_provider_url(c.kubernetes_version, node.arch),
        "CSE_CONFIG_FILEPATH": "/opt/azure/containers/provision_configs.sh",
        "CSE_HELPERS_FILEPATH": "/opt/azure/containers/provision_source.sh",
        "CSE_INSTALL_FILEPATH": "/opt/azure/containers/provision_installs.sh",
        "ENABLE_TLS_BOOTSTRAPPING": "true",
        "GPU_NODE": str(node.gpu_node).lower(),
        "IS_VHD": "true",
        "KUBE_BINARY_URL": kube_binary_url(c.kubernetes_version, node.arch),
        "KUBE_CA_CRT": c.ca_bundle,
        "KUBELET_FLAGS": " ".join(f"{k}={v}" for k, v in sorted(kubelet_flags(node).items())),
        "KUBELET_NODE_LABELS": ",".join(f"{k}={v}" for k, v in sorted(node.node_labels.items()) if kubelet_may_set(k)),
        "KUBERNETES_VERSION": c.kubernetes_version,
        "LOAD_BALANCER_SKU": "Standard",
        "LOCATION": c.location,
        "NEEDS_CGROUPV2": "true",
        "NEEDS_CONTAINERD": "true",
        "NETWORK_PLUGIN": agent_network_plugin(c.network_plugin, c.network_plugin_mode),
        "NETWORK_POLICY": c.network_policy,
        "RESOURCE_GROUP": c.node_resource_group,
        "SERVICE_PRINCIPAL_CLIENT_ID": "msi",
        "SERVICE_PRINCIPAL_FILE_CONTENT": base64.b64encode(b"msi").decode(),
        "SUBNET": subnet[0],
        "SUBSCRIPTION_ID": c.subscription_id,
        "TARGET_CLOUD": "AzurePublicCloud",
        "TARGET_ENVIRONMENT": "AzurePublicCloud",
        "TENANT_ID": c.tenant_id,
        "TLS_BOOTSTRAP_TOKEN": c.bootstrap_token,
        "USE_INSTANCE_METADATA": "true",
        "USE_MANAGED_IDENTITY_EXTENSION": "true",
        "USER_ASSIGNED_IDENTITY_ID": c.kubelet_identity_client_id,
        "VIRTUAL_NETWORK": subnet[1],
        "VIRTUAL_NETWORK_RESOURCE_GROUP": subnet[2],
        "VM_TYPE": "standard",
        "VNET_CNI_PLUGINS_URL": (f"{AKS_MIRROR}/azure-cni/v1.4.32/binaries/"
                                 f"azure-vnet-cni-linux-{node.arch}-v1.4.32.tgz"),
    }


def render(node: NodeBootstrap) -> str:
    """The bash script (before base64)."""
    lines = [
        "#!/bin/bash",
        f"# karpy: joins AKS cluster {node.cluster.cluster_name} through the node image's provisioning scripts",
        "set -o allexport",
        "mkdir -p /var/log/azure/Microsoft.Azure.Extensions.CustomScript/events",
        f"for i in $(seq 1 1200); do grep -Fq EOF {PROVISION_SCRIPT} && break; "
        "if [ $i -eq 1200 ]; then exit 100; else sleep 1; fi; done",
        *(f"{name}={shlex.quote(value)}" for name, value in sorted(variables(node).items())),
        f'/usr/bin/nohup /bin/bash -c "/bin/bash {PROVISION_START}"',
    ]
    return "\n".join(lines) + "\n"


def custom_data(node: NodeBootstrap) -> str:
    """``osProfile.customData``: the script, base64."""
    return base64.b64encode(render(node).encode()).decode()


def decode(data: str) -> str:
    """The script of a ``customData`` value."""
    return base64.b64decode(data.encode()).decode()


def variables_of(script: str) -> dict[str, str]:
    """The ``NAME=value`` assignments of a rendered script (the inverse of :func:`render`'s quoting)."""
    out: dict[str, str] = {}
    for line in script.splitlines():
        m = re.match(r"^([A-Z][A-Z0-9_]*)=(.*)$", line)
        if m is not None:
            words = shlex.split(m[2])
            out[m[1]] = words[0] if words else ""
    return out
