"""Build the Azure cloud provider from settings, options and the environment (TEAM.md contract).

``build(settings, clock, cluster, **options) -> CloudProvider``. Each option falls back to the
environment variable Karpenter's Azure provider reads:

=====================  =============================  =============================================
option                 environment                    meaning
=====================  =============================  =============================================
``subscription_id``    ``ARM_SUBSCRIPTION_ID``        subscription of the node resource group
``resource_group``     ``AZURE_NODE_RESOURCE_GROUP``  the node resource group (``MC_...``)
``region``             ``LOCATION``                   ARM region (``japaneast``)
``subnet_id``          ``AZURE_SUBNET_ID``            default subnet of the nodes' NICs
``ssh_public_key``     ``SSH_PUBLIC_KEY``             the nodes' admin key
``endpoint_url``       ``ARM_ENDPOINT``               ARM base URL (public Azure when unset)
``kubernetes_version`` ``KUBERNETES_VERSION``         written to AKSNodeClass status
=====================  =============================  =============================================

Other options: ``credential`` (an azure.core ``TokenCredential``; default: azure-identity's
``DefaultAzureCredential`` when installed, or an offline token for a loopback ``endpoint_url``),
``retail_prices_endpoint`` (``None`` or ``""`` turns live prices off: the packaged table only; default
the public API, or the ARM endpoint itself when that is a loopback emulator),
``polling_interval`` (seconds between long-running-operation polls), ``nap_mode`` (environment
``NAP_MODE=true``: create NAP's ``default`` / ``system-surge`` objects when missing, :mod:`.nap`).
A loopback ``endpoint_url`` (``http://127.0.0.1:...``) fills what is missing with
:func:`emulator_defaults`. Missing configuration raises
:class:`karpy.cloudprovider.errors.CloudProviderError` (not retryable) naming what is missing.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from karpy import clock, settings
from karpy.cloudprovider import errors, interface
from karpy.cloudprovider.azure import clients, nap, pricing, provider
from karpy.kube import errors as kube_errors
from karpy.kube import interface as kube_interface

ENVIRONMENT = {
    "subscription_id": "ARM_SUBSCRIPTION_ID", "resource_group": "AZURE_NODE_RESOURCE_GROUP",
    "region": "LOCATION", "subnet_id": "AZURE_SUBNET_ID", "ssh_public_key": "SSH_PUBLIC_KEY",
    "endpoint_url": "ARM_ENDPOINT", "kubernetes_version": "KUBERNETES_VERSION",
}
REQUIRED = ("subscription_id", "resource_group", "region", "subnet_id")


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
    subscription, AKS's node resource group name and a subnet in it."""
    sub = "00000000-0000-0000-0000-000000000000"
    rg = f"MC_{cluster_name}_{cluster_name}_{region}"
    return {"subscription_id": sub, "resource_group": rg, "region": region,
            "subnet_id": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/"
                         f"aks-vnet/subnets/aks-subnet"}


def node_class_lookup(cluster: kube_interface.Cluster) -> provider.NodeClassLookup:
    """AKSNodeClass name -> the object in ``cluster`` (``None`` when missing)."""
    def lookup(name: str) -> Mapping[str, Any] | None:
        try:
            return cluster.get("AKSNodeClass", name)
        except kube_errors.NotFound:
            return None
    return lookup


def build(settings_: settings.Settings, clk: clock.Clock, cluster: kube_interface.Cluster,
          **options: Any) -> interface.CloudProvider:
    """The Azure provider for ``settings_.cluster_name`` (see the module docstring)."""
    environ = options.pop("environ", os.environ)
    values = {key: _option(options, key, environ) for key in ENVIRONMENT}
    if clients.is_loopback_http(values["endpoint_url"]):
        for key, value in emulator_defaults(settings_.cluster_name, values["region"] or "eastus").items():
            values[key] = values[key] or value
    missing = [f"{key} ({ENVIRONMENT[key]})" for key in REQUIRED if not values[key]]
    if missing:
        raise errors.CloudProviderError(f"the Azure provider needs {', '.join(missing)}", reason="Configuration")
    endpoint = values["endpoint_url"] or "https://management.azure.com"
    credential = options.get("credential") or _default_credential(endpoint)
    azure = clients.connect(values["subscription_id"], credential, endpoint=endpoint,
                            polling_interval=options.get("polling_interval"))
    # an emulator on this machine serves the prices too (or the packaged table is used): never the internet
    default_prices = endpoint if clients.is_loopback_http(endpoint) else pricing.RETAIL_PRICES_ENDPOINT
    prices_endpoint = options.get("retail_prices_endpoint", default_prices)
    fetch = None
    if prices_endpoint:
        def fetch(region: str) -> pricing.Prices:
            return pricing.fetch_retail_prices(region, endpoint=str(prices_endpoint))
    config = provider.ClusterConfig(
        cluster_name=settings_.cluster_name, region=values["region"], resource_group=values["resource_group"],
        subnet_id=values["subnet_id"], cluster_endpoint=settings_.cluster_endpoint,
        ssh_public_key=values["ssh_public_key"], kubernetes_version=values["kubernetes_version"])
    nap_mode = options.get("nap_mode")
    if nap_mode is None:
        nap_mode = str(environ.get("NAP_MODE", "")).strip().lower() == "true"
    if nap_mode:
        nap.ensure(cluster)
    return provider.AzureCloudProvider(azure, config, clk, node_class_lookup(cluster),
                                       pricing.PriceBook(config.region, clk, fetch))
