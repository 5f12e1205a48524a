"""Build the Azure cloud provider from settings, options and the environment (TEAM.md contract).

``build(settings, clock, cluster, **options) -> CloudProvider``. Where the VMs go: each option falls
back to the environment variable Karpenter's Azure provider reads:

=====================  =============================  =============================================
option                 environment                    meaning
=====================  =============================  =============================================
``subscription_id``    ``ARM_SUBSCRIPTION_ID``        subscription of the node resource group
``resource_group``     ``AZURE_NODE_RESOURCE_GROUP``  the node resource group (``MC_...``); also the
                                                      setting ``nodeResourceGroup``
``region``             ``LOCATION``                   ARM region (``japaneast``)
``subnet_id``          ``AZURE_SUBNET_ID``            default subnet of the nodes' NICs; also the
                                                      setting ``vnetSubnetID`` (``VNET_SUBNET_ID``)
``ssh_public_key``     ``SSH_PUBLIC_KEY``             the nodes' admin key (setting ``sshPublicKey``)
``endpoint_url``       ``ARM_ENDPOINT``               ARM base URL (public Azure when unset)
``kubernetes_version`` ``KUBERNETES_VERSION``         the nodes' version; else the API server's
``tenant_id``          ``AZURE_TENANT_ID``            written to the nodes' cloud config
``ca_bundle``          (none)                         the cluster CA (base64 PEM); else the CA of
                                                      the cluster connection (kubeconfig), else the
                                                      service-account CA file (``ca_file``)
=====================  =============================  =============================================

How nodes join the cluster comes from :class:`karpy.settings.Settings`, Karpenter Azure's names
(flags, environment, settings file): ``clusterEndpoint``, ``kubeletBootstrapToken``, ``sshPublicKey``,
``vnetSubnetID``, ``nodeResourceGroup`` (required, as in Karpenter Azure), ``networkPlugin``
(``azure``|``none``), ``networkPluginMode`` (``overlay``|``""``), ``networkPolicy``, ``networkDataplane``
(``azure``|``cilium``|``""``), ``dnsServiceIP``, ``vnetGUID``, ``nodeIdentities``,
``kubeletIdentityClientID``, ``linuxAdminUsername``. :func:`validate` checks them all at once; what is
missing or malformed raises :class:`karpy.cloudprovider.errors.CloudProviderError` (not retryable)
naming each flag / environment variable and what it must be, before anything is called.

Other options: ``credential`` (an azure.core ``TokenCredential``; default: azure-identity's
``DefaultAzureCredential`` when installed, or an offline token for a loopback ``endpoint_url``),
``retail_prices_endpoint`` (``None`` or ``""`` turns live prices off: the packaged table only; default
the public API, or the ARM endpoint itself when that is a loopback emulator),
``polling_interval`` (seconds between long-running-operation polls; 0 for a loopback emulator),
``nap_mode`` (environment ``NAP_MODE=true``: create NAP's ``default`` / ``system-surge`` objects when
missing, :mod:`.nap`),
``image_ttl`` (seconds the gallery's latest image versions are kept, :mod:`.gallery`),
``aks_identifying_extension`` (add ``computeAksLinuxBilling`` to every VM; default: when the ARM endpoint is
the public, China or US Government cloud's, as Karpenter's Azure provider does).
A loopback ``endpoint_url`` (``http://127.0.0.1:...``) fills what is missing with
:func:`emulator_defaults` (an emulator, ``karpy simulate``: no real cluster to join).
"""

from __future__ import annotations

import base64
import importlib
import ipaddress
import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from karpy import clock, settings
from karpy.cloudprovider import errors, interface
from karpy.cloudprovider.azure import bootstrap, clients, images, launch, nap, pricing, provider
from karpy.kube import errors as kube_errors
from karpy.kube import interface as kube_interface

log = logging.getLogger("karpy.cloudprovider.azure")

ENVIRONMENT = {
    "subscription_id": "ARM_SUBSCRIPTION_ID", "resource_group": "AZURE_NODE_RESOURCE_GROUP",
    "region": "LOCATION", "subnet_id": "AZURE_SUBNET_ID", "ssh_public_key": "SSH_PUBLIC_KEY",
    "endpoint_url": "ARM_ENDPOINT", "kubernetes_version": "KUBERNETES_VERSION", "tenant_id": "AZURE_TENANT_ID",
    "cluster_resource_group": "ARM_RESOURCE_GROUP",
}
REQUIRED = ("subscription_id", "resource_group", "region", "subnet_id")
SERVICE_ACCOUNT_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
EMULATOR_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nkarpy-emulator\n-----END CERTIFICATE-----\n").decode()
BOOTSTRAP_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
ADMIN_USERNAME = re.compile(r"^[A-Za-z][-A-Za-z0-9_]{0,31}$")
_WHAT = {
    "subscription_id": "ARM_SUBSCRIPTION_ID: the subscription of the node resource group",
    "resource_group": "--node-resource-group / AZURE_NODE_RESOURCE_GROUP: the node resource group (MC_...)",
    "region": "LOCATION: the ARM region of the cluster",
    "subnet_id": "--vnet-subnet-id / VNET_SUBNET_ID (or AZURE_SUBNET_ID): the nodes' default subnet",
}


def _option(options: Mapping[str, Any], key: str, environ: Mapping[str, str]) -> str:
    value = options.get(key)
    if value is None:
        value = environ.get(ENVIRONMENT[key], "")
    return str(value)


def _default_credential(endpoint: str) -> Any:
    if clients.is_loopback_http(endpoint):
        return clients.StaticTokenCredential()
    try:
        identity = importlib.import_module("azure.identity")
    except ImportError as exc:
        raise errors.CloudProviderError(
            "no Azure credential: install azure-identity (pip install 'karpy[azure]') or pass credential=",
            reason="Configuration") from exc
    return identity.DefaultAzureCredential()


def emulator_defaults(cluster_name: str, region: str) -> dict[str, str]:
    """What a loopback ARM endpoint (an emulator, ``karpy simulate``) gets when not told: a zero
    subscription, AKS's node resource group name and a subnet in it, and a make-believe cluster to
    join (endpoint, CA, bootstrap token, SSH key) since there is no real one."""
    sub = "00000000-0000-0000-0000-000000000000"
    rg = f"MC_{cluster_name}_{cluster_name}_{region}"
    return {"subscription_id": sub, "resource_group": rg, "region": region,
            "subnet_id": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/"
                         f"aks-vnet/subnets/aks-subnet",
            "cluster_endpoint": f"https://{cluster_name}.hcp.{region}.azmk8s.io:443", "ca_bundle": EMULATOR_CA,
            "bootstrap_token": "karpy0.emulator00000000", "ssh_public_key": "ssh-rsa AAAA karpy-emulator",
            "kubernetes_version": "1.31.2", "cluster_resource_group": cluster_name}


def node_class_lookup(cluster: kube_interface.Cluster) -> provider.NodeClassLookup:
    """AKSNodeClass name -> the object in ``cluster`` (``None`` when missing)."""
    def lookup(name: str) -> Mapping[str, Any] | None:
        try:
            return cluster.get("AKSNodeClass", name)
        except kube_errors.NotFound:
            return None
    return lookup


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def validate(config: launch.ClusterConfig) -> list[str]:
    """Every problem with the configuration, each naming the flag and environment variable to set
    (empty: the provider can launch nodes that join the cluster)."""
    out: list[str] = []
    for key in REQUIRED:
        if not getattr(config, key):
            out.append(f"{_WHAT[key]} is required")
    if not config.cluster_endpoint:
        out.append("--cluster-endpoint / CLUSTER_ENDPOINT: the API server URL new nodes join is required")
    elif not re.match(r"^https?://[^/:\s]+", config.cluster_endpoint):
        out.append(f"--cluster-endpoint / CLUSTER_ENDPOINT must be a URL such as https://x.hcp.eastus.azmk8s.io:443, "
                   f"not {config.cluster_endpoint!r}")
    if not config.bootstrap_token:
        out.append("--kubelet-bootstrap-token / KUBELET_BOOTSTRAP_TOKEN: the bootstrap token new nodes join with "
                   "is required")
    elif not BOOTSTRAP_TOKEN.match(config.bootstrap_token):
        out.append("--kubelet-bootstrap-token / KUBELET_BOOTSTRAP_TOKEN must be a bootstrap token "
                   "(<6 of [a-z0-9]>.<16 of [a-z0-9]>)")
    if not config.ssh_public_key:
        out.append("--ssh-public-key / SSH_PUBLIC_KEY: the nodes' admin SSH public key is required")
    if not config.ca_bundle:
        out.append(f"the cluster CA is required: pass ca_bundle (base64 PEM) or run in the cluster "
                   f"({SERVICE_ACCOUNT_CA})")
    if config.subnet_id and not images.SUBNET_ID.match(config.subnet_id):
        out.append(f"--vnet-subnet-id / VNET_SUBNET_ID must be a subnet resource id (/subscriptions/<sub>/"
                   f"resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>), "
                   f"not {config.subnet_id!r}")
    if config.network_plugin not in ("azure", "none"):
        out.append(f"--network-plugin / NETWORK_PLUGIN must be azure or none, not {config.network_plugin!r}")
    if config.network_plugin_mode not in ("overlay", ""):
        out.append(f"--network-plugin-mode / NETWORK_PLUGIN_MODE must be overlay or empty, "
                   f"not {config.network_plugin_mode!r}")
    elif config.network_plugin == "none" and config.network_plugin_mode:
        out.append("--network-plugin-mode / NETWORK_PLUGIN_MODE must be empty when the network plugin is none")
    if config.network_dataplane not in ("azure", "cilium", ""):
        out.append(f"--network-dataplane / NETWORK_DATAPLANE must be azure or cilium, not {config.network_dataplane!r}")
    if config.vnet_guid and not _is_uuid(config.vnet_guid):
        out.append(f"--vnet-guid / VNET_GUID must be a GUID, not {config.vnet_guid!r}")
    if config.kubelet_identity_client_id and not _is_uuid(config.kubelet_identity_client_id):
        out.append(f"--kubelet-identity-client-id / KUBELET_IDENTITY_CLIENT_ID must be a GUID, "
                   f"not {config.kubelet_identity_client_id!r}")
    if config.dns_service_ip:
        try:
            ipaddress.ip_address(config.dns_service_ip)
        except ValueError:
            out.append(f"--dns-service-ip / DNS_SERVICE_IP must be an IP address, not {config.dns_service_ip!r}")
    if not ADMIN_USERNAME.match(config.admin_username):
        out.append("--linux-admin-username / LINUX_ADMIN_USERNAME must start with a letter and hold at most 32 "
                   f"letters, digits, '-' and '_', not {config.admin_username!r}")
    for identity in config.node_identities:
        if not re.match(r"^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ManagedIdentity/"
                        r"userAssignedIdentities/[^/]+$", identity, re.IGNORECASE):
            out.append(f"--node-identities / NODE_IDENTITIES must be user-assigned identity resource ids, "
                       f"not {identity!r}")
    out.extend(provision_mode_problems(config))
    try:
        bootstrap.kube_binary_url(config.kubernetes_version or launch.DEFAULT_KUBERNETES_VERSION, "amd64")
    except ValueError:
        out.append(f"KUBERNETES_VERSION must be like 1.31.2, not {config.kubernetes_version!r}")
    return out


MACHINE_API_MODES = ("aksmachineapi", "aksmachineapiheaderbatch")


def provision_mode_problems(config: launch.ClusterConfig) -> list[str]:
    """What is wrong with ``PROVISION_MODE`` and the settings its mode needs (Karpenter Azure's checks:
    the AKS machine API modes need ``AKS_MACHINES_POOL_NAME``, ``USE_SIG=true`` and ``ARM_RESOURCE_GROUP``;
    ``USE_SIG`` needs ``SIG_SUBSCRIPTION_ID``). ``aksmachineapiheaderbatch`` (batched creates) is refused."""
    modes = (launch.PROVISION_MODE_SCRIPTLESS, launch.PROVISION_MODE_BOOTSTRAPPING_CLIENT,
             launch.PROVISION_MODE_AKS_MACHINE_API)
    mode = config.provision_mode
    if mode not in modes:
        extra = (": karpy creates AKS machines one at a time (aksmachineapi), never in header batches"
                 if mode == "aksmachineapiheaderbatch" else "")
        return [f"--provision-mode / PROVISION_MODE must be {', '.join(modes)}, not {mode!r}{extra}"]
    out: list[str] = []
    if config.use_sig and not config.sig_subscription_id:
        out.append("--sig-subscription-id / SIG_SUBSCRIPTION_ID is required when USE_SIG is true")
    if config.use_sig and mode != launch.PROVISION_MODE_AKS_MACHINE_API:
        out.append("--use-sig / USE_SIG=true is taken with PROVISION_MODE=aksmachineapi only: in the VM modes "
                   "Karpenter's Azure provider reads the shared image gallery through the NAP add-on's "
                   "SIG_ACCESS_TOKEN_SERVER_URL, which karpy does not implement")
    if mode == launch.PROVISION_MODE_AKS_MACHINE_API:
        if not config.aks_machines_pool_name:
            out.append("--aks-machines-pool-name / AKS_MACHINES_POOL_NAME is required when PROVISION_MODE is "
                       "aksmachineapi")
        if not config.use_sig:
            out.append("--use-sig / USE_SIG must be true when PROVISION_MODE is aksmachineapi (the AKS machine "
                       "API takes shared image gallery images only)")
        if not config.cluster_resource_group:
            out.append("ARM_RESOURCE_GROUP (the managed cluster's resource group) is required when PROVISION_MODE "
                       "is aksmachineapi")
    if mode == launch.PROVISION_MODE_BOOTSTRAPPING_CLIENT:
        url = config.node_bootstrapping_server_url
        if not url:
            out.append("--nodebootstrapping-server-url / NODEBOOTSTRAPPING_SERVER_URL is required when "
                       "PROVISION_MODE is bootstrappingclient")
        elif not re.match(r"^https?://[^/\s]+", url):
            out.append(f"--nodebootstrapping-server-url / NODEBOOTSTRAPPING_SERVER_URL must be a URL, not {url!r}")
        if not config.cluster_resource_group:
            out.append("ARM_RESOURCE_GROUP: the managed cluster's resource group is required when PROVISION_MODE "
                       "is bootstrappingclient (the node bootstrapping API is the cluster's)")
    return out


def _kubernetes_version(cluster: kube_interface.Cluster, given: str) -> str:
    if given:
        return given
    getter = getattr(cluster, "server_version", None)
    if callable(getter):
        try:
            return str(getter())
        except Exception as exc:  # the adapter's own errors; the default below is logged
            log.warning("could not read the Kubernetes version from the API server: %s", exc)
    log.warning("Kubernetes version unknown (set KUBERNETES_VERSION); nodes bootstrap as %s",
                launch.DEFAULT_KUBERNETES_VERSION)
    return ""


def _read_base64(path: Path) -> str:
    try:
        return base64.b64encode(path.read_bytes()).decode()
    except OSError:
        return ""


def _kubeconfig_ca(cluster: kube_interface.Cluster) -> str:
    """The CA of the Kubernetes adapter's connection (kubeconfig or in-cluster), as Karpenter Azure takes
    it from its REST client config; ``""`` for a cluster without one (the in-memory cluster)."""
    config = getattr(getattr(getattr(cluster, "client", None), "connection", None), "config", None)
    data = getattr(getattr(config, "cluster", None), "certificate_auth_data", None)
    if data:
        return str(data)
    path = getattr(getattr(config, "cluster", None), "certificate_auth", None)
    if not path:
        return ""
    file = Path(str(path))
    fname = getattr(config, "fname", None)
    if not file.is_absolute() and fname:
        file = Path(str(fname)).parent / file
    return _read_base64(file)


def _ca_bundle(options: Mapping[str, Any], cluster: kube_interface.Cluster) -> str:
    """``ca_bundle`` option, else the cluster connection's CA, else the service-account CA file."""
    given = options.get("ca_bundle")
    if given:
        return str(given)
    return _kubeconfig_ca(cluster) or _read_base64(Path(str(options.get("ca_file") or SERVICE_ACCOUNT_CA)))


AKS_CLOUD_ENDPOINTS = ("management.azure.com", "management.chinacloudapi.cn", "management.usgovcloudapi.net")
"""The ARM hosts of the clouds where Karpenter's Azure provider adds the AKS identifying extension."""


def _aks_cloud(endpoint: str) -> bool:
    """Whether ``endpoint`` (``""``: public Azure) is the ARM of the public, China or US Government cloud."""
    if not endpoint:
        return True
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return host in AKS_CLOUD_ENDPOINTS


def config_of(settings_: settings.Settings, cluster: kube_interface.Cluster, options: Mapping[str, Any],
              environ: Mapping[str, str]) -> launch.ClusterConfig:
    """The provider's configuration from settings, options and the environment (not yet validated)."""
    values = {key: _option(options, key, environ) for key in ENVIRONMENT}
    values["resource_group"] = values["resource_group"] or settings_.node_resource_group
    values["subnet_id"] = str(options.get("subnet_id") or settings_.vnet_subnet_id or values["subnet_id"])
    values["ssh_public_key"] = str(options.get("ssh_public_key") or settings_.ssh_public_key
                                   or values["ssh_public_key"])
    values["cluster_endpoint"] = settings_.cluster_endpoint
    values["bootstrap_token"] = settings_.kubelet_bootstrap_token
    values["ca_bundle"] = _ca_bundle(options, cluster)
    if clients.is_loopback_http(values["endpoint_url"]):
        for key, value in emulator_defaults(settings_.cluster_name, values["region"] or "eastus").items():
            values[key] = values[key] or value
    return launch.ClusterConfig(
        cluster_name=settings_.cluster_name, region=values["region"], resource_group=values["resource_group"],
        subnet_id=values["subnet_id"], cluster_endpoint=values["cluster_endpoint"],
        ssh_public_key=values["ssh_public_key"],
        kubernetes_version=_kubernetes_version(cluster, values["kubernetes_version"]),
        ca_bundle=values["ca_bundle"], bootstrap_token=values["bootstrap_token"],
        subscription_id=values["subscription_id"], tenant_id=values["tenant_id"],
        network_plugin=settings_.network_plugin, network_plugin_mode=settings_.network_plugin_mode,
        network_policy=settings_.network_policy, network_dataplane=settings_.network_dataplane,
        dns_service_ip=settings_.dns_service_ip, vnet_guid=settings_.vnet_guid,
        kubelet_identity_client_id=settings_.kubelet_identity_client_id,
        node_identities=tuple(i.strip() for i in settings_.node_identities.split(",") if i.strip()),
        admin_username=settings_.linux_admin_username or "azureuser",
        provision_mode=settings_.provision_mode,
        node_bootstrapping_server_url=settings_.node_bootstrapping_server_url,
        cluster_resource_group=values["cluster_resource_group"], use_sig=settings_.use_sig,
        sig_subscription_id=settings_.sig_subscription_id, aks_machines_pool_name=settings_.aks_machines_pool_name,
        aks_identifying_extension=bool(options.get("aks_identifying_extension", _aks_cloud(values["endpoint_url"]))))


def build(settings_: settings.Settings, clk: clock.Clock, cluster: kube_interface.Cluster,
          **options: Any) -> interface.CloudProvider:
    """The Azure provider for ``settings_.cluster_name`` (see the module docstring)."""
    environ = options.pop("environ", os.environ)
    config = config_of(settings_, cluster, options, environ)
    problems = validate(config)
    if problems:
        raise errors.CloudProviderError(
            "the Azure provider's configuration is incomplete or wrong:\n" + "\n".join(f"  - {p}" for p in problems),
            reason="Configuration")
    endpoint = _option(options, "endpoint_url", environ) or "https://management.azure.com"
    credential = options.get("credential") or _default_credential(endpoint)
    polling = options.get("polling_interval")
    if polling is None and clients.is_loopback_http(endpoint):
        polling = 0  # an emulator on this machine: no reason to wait ARM's 30 s between polls
    azure = clients.connect(config.subscription_id, credential, endpoint=endpoint, polling_interval=polling)
    # an emulator on this machine serves the prices too (or the packaged table is used): never the internet
    default_prices = endpoint if clients.is_loopback_http(endpoint) else pricing.RETAIL_PRICES_ENDPOINT
    prices_endpoint = options.get("retail_prices_endpoint", default_prices)
    fetch = None
    if prices_endpoint:
        def fetch(region: str) -> pricing.Prices:
            return pricing.fetch_retail_prices(region, endpoint=str(prices_endpoint))
    nap_mode = options.get("nap_mode")
    if nap_mode is None:
        nap_mode = str(environ.get("NAP_MODE", "")).strip().lower() == "true"
    if nap_mode:
        nap.ensure(cluster)
    cloud = provider.AzureCloudProvider(azure, config, clk, node_class_lookup(cluster),
                                        pricing.PriceBook(config.region, clk, fetch))
    if options.get("image_ttl") is not None:
        cloud.image_versions.ttl = float(options["image_ttl"])
    return cloud
