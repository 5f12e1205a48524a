"""Operator settings from flags, environment and a settings file, with Karpenter's names.

``karpy controller`` reads :class:`karpy.settings.Settings` from three places, the first that sets a
value wins: command-line flags (``--cluster-name``), environment variables (``CLUSTER_NAME``, as
Karpenter's Helm chart sets them on the container), a settings file (YAML with the camelCase keys of
Helm's ``settings.*`` and of a scenario's ``spec.settings``: ``clusterName``; a top-level
``settings:`` mapping is also accepted), then the defaults. :data:`ENVIRONMENT` lists the names
(Karpenter's): CLUSTER_NAME, CLUSTER_ENDPOINT, INTERRUPTION_QUEUE, BATCH_IDLE_DURATION,
BATCH_MAX_DURATION, FEATURE_GATES, VM_MEMORY_OVERHEAD_PERCENT, RESERVED_ENIS, ISOLATED_VPC, LOG_LEVEL,
METRICS_PORT (8080), HEALTH_PROBE_PORT (8081), KUBE_CLIENT_QPS (200) and KUBE_CLIENT_BURST (300), plus
the Azure provider's (:data:`AZURE_ENVIRONMENT`: KUBELET_BOOTSTRAP_TOKEN, SSH_PUBLIC_KEY, VNET_SUBNET_ID...);
each flag is the variable's name in lower case with dashes (``--batch-idle-duration``; Karpenter Azure's
``--node-resource-group`` for AZURE_NODE_RESOURCE_GROUP). karpy's own
settings (``registrationTTL``, ``consolidationValidationDelay``...) are read from the file only.

A bad value raises :class:`karpy.api.errors.ValidationError` naming the setting as the user wrote
it (``--metrics-port``, ``METRICS_PORT`` or ``settings.yaml: metricsPort``), what was expected and
what was found; every problem is reported at once and nothing is applied. The file is read by one
bounded reader (:func:`read_file`: the manifest loader's guards against alias bombs, deep nesting,
huge numbers and YAML-only values, a size limit), every number has a range
(:mod:`karpy.settings`), and :func:`check_bind_address` checks ``--bind-address``: no input ends in
a traceback.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from karpy import settings as settings_mod
from karpy.api import errors, manifest

ENVIRONMENT: dict[str, str] = {
    "clusterName": "CLUSTER_NAME",
    "clusterEndpoint": "CLUSTER_ENDPOINT",
    "interruptionQueue": "INTERRUPTION_QUEUE",
    "batchIdleDuration": "BATCH_IDLE_DURATION",
    "batchMaxDuration": "BATCH_MAX_DURATION",
    "featureGates": "FEATURE_GATES",
    "vmMemoryOverheadPercent": "VM_MEMORY_OVERHEAD_PERCENT",
    "reservedENIs": "RESERVED_ENIS",
    "isolatedVPC": "ISOLATED_VPC",
    "logLevel": "LOG_LEVEL",
    "metricsPort": "METRICS_PORT",
    "healthProbePort": "HEALTH_PROBE_PORT",
    "kubeClientQPS": "KUBE_CLIENT_QPS",
    "kubeClientBurst": "KUBE_CLIENT_BURST",
    # Karpenter v1.14's other operator settings (DISABLE_LEADER_ELECTION and LEADER_ELECTION_NAMESPACE are
    # options of `karpy controller` itself)
    "preferencePolicy": "PREFERENCE_POLICY",
    "minValuesPolicy": "MIN_VALUES_POLICY",
    "karpenterService": "KARPENTER_SERVICE",
    "leaderElectionName": "LEADER_ELECTION_NAME",
    "logOutputPaths": "LOG_OUTPUT_PATHS",
    "logErrorOutputPaths": "LOG_ERROR_OUTPUT_PATHS",
    "enableProfiling": "ENABLE_PROFILING",
    "disableControllerWarmup": "DISABLE_CONTROLLER_WARMUP",
    "disableClusterStateObservability": "DISABLE_CLUSTER_STATE_OBSERVABILITY",
    "memoryLimit": "MEMORY_LIMIT",
    "cpuRequests": "CPU_REQUESTS",
    "ignoreDRARequests": "IGNORE_DRA_REQUESTS",
    "clusterCABundle": "CLUSTER_CA_BUNDLE",
    "amiRefreshInterval": "AMI_REFRESH_INTERVAL",
    "subnetRefreshInterval": "SUBNET_REFRESH_INTERVAL",
    "eksControlPlane": "EKS_CONTROL_PLANE",
    "disableDryRun": "DISABLE_DRY_RUN",
    "enableZonalShift": "ENABLE_ZONAL_SHIFT",
}
"""camelCase setting -> Karpenter's environment variable."""
MAX_FILE_BYTES = 1 << 20
"""The largest settings file read (a settings file is a few hundred bytes)."""

AZURE_ENVIRONMENT: dict[str, str] = {
    "kubeletBootstrapToken": "KUBELET_BOOTSTRAP_TOKEN",
    "sshPublicKey": "SSH_PUBLIC_KEY",
    "linuxAdminUsername": "LINUX_ADMIN_USERNAME",
    "networkPlugin": "NETWORK_PLUGIN",
    "networkPluginMode": "NETWORK_PLUGIN_MODE",
    "networkPolicy": "NETWORK_POLICY",
    "networkDataplane": "NETWORK_DATAPLANE",
    "dnsServiceIP": "DNS_SERVICE_IP",
    "vnetSubnetID": "VNET_SUBNET_ID",
    "vnetGUID": "VNET_GUID",
    "nodeIdentities": "NODE_IDENTITIES",
    "kubeletIdentityClientID": "KUBELET_IDENTITY_CLIENT_ID",
    "nodeResourceGroup": "AZURE_NODE_RESOURCE_GROUP",
    "provisionMode": "PROVISION_MODE",
    "nodeBootstrappingServerURL": "NODEBOOTSTRAPPING_SERVER_URL",
    "aksMachinesPoolName": "AKS_MACHINES_POOL_NAME",
    "useSIG": "USE_SIG",
    "sigSubscriptionId": "SIG_SUBSCRIPTION_ID",
}
"""Karpenter's Azure provider's settings (karpenter-provider-azure's names); read like the others."""
FLAGS: dict[str, str] = {"nodeResourceGroup": "--node-resource-group"}
"""Flags whose name is not the environment variable's (Karpenter Azure's ``--node-resource-group``)."""


def environment() -> dict[str, str]:
    """Every setting read from flags and the environment: Karpenter's, then its Azure provider's."""
    return {**ENVIRONMENT, **AZURE_ENVIRONMENT}


def flag_name(key: str) -> str:
    """``batchIdleDuration`` -> ``--batch-idle-duration``."""
    return FLAGS.get(key) or "--" + environment()[key].lower().replace("_", "-")


def option_name(key: str) -> str:
    """``batchIdleDuration`` -> ``batch_idle_duration`` (the Python name of its click option)."""
    return environment()[key].lower()


def read_file(path: str | Path) -> dict[str, Any]:
    """The camelCase settings of a YAML settings file (``settings:`` may wrap them), read with the
    manifest loader's guards (:func:`karpy.api.manifest.parse_yaml`: anchors expanded at most
    :data:`karpy.api.strict.MAX_NODES` times, :data:`karpy.api.strict.MAX_DEPTH` levels, no ``.inf`` /
    ``.nan``, no value only YAML has, no integer too long to read) from at most :data:`MAX_FILE_BYTES`."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise errors.ValidationError.single(str(p), "(file)", "a readable settings file", str(exc)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise errors.ValidationError.single(str(p), "(file)", f"a settings file of at most {MAX_FILE_BYTES} bytes",
                                            "a larger file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.ValidationError.single(str(p), "(file)", "UTF-8 text", str(exc)) from None
    docs = manifest.parse_yaml(text, str(p))
    if len(docs) > 1:
        raise errors.ValidationError.single(str(p), "(file)", "one YAML document", f"{len(docs)} documents")
    data = docs[0] if docs else None
    if data is None:
        return {}
    if isinstance(data, Mapping) and set(data) == {"settings"} and isinstance(data["settings"], Mapping):
        data = data["settings"]
    if not isinstance(data, Mapping):
        raise errors.ValidationError.single(str(p), "(root)", "a mapping of settings", data)
    return {str(k): v for k, v in data.items()}


def load(flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
         file: str | Path | None = None) -> settings_mod.Settings:
    """Settings from ``flags`` (camelCase key -> value; ``None`` = not given), ``environ`` and ``file``.

    Precedence: flags > environment > file > defaults. See the module docstring for errors.
    """
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if file is not None:
        for key, value in read_file(file).items():
            merged[key] = value
            origin[key] = f"{Path(file).name}: {key}"
    for key, env in environment().items():
        raw = (environ or {}).get(env)
        if raw is not None and raw != "":
            merged[key] = raw
            origin[key] = env
    for key, value in (flags or {}).items():
        if value is None:
            continue
        merged[key] = value
        origin[key] = flag_name(key) if key in environment() else key
    try:
        return settings_mod.Settings.from_mapping(merged)
    except errors.ValidationError as exc:
        raise errors.ValidationError(
            errors.FieldError(e.obj, origin.get(e.path, e.path), e.expected, e.found) for e in exc.errors
        ) from None


def check_bind_address(address: str) -> None:
    """``--bind-address`` must be an IP address (``0.0.0.0``, ``::``, ``127.0.0.1``) or a host name;
    raises :class:`errors.ValidationError` naming the flag otherwise."""
    try:
        ipaddress.ip_address(address)
        return
    except ValueError:
        pass
    if not _HOST.fullmatch(address):
        raise errors.ValidationError.single("--bind-address", "(option)",
                                            "an IP address such as 0.0.0.0, :: or 127.0.0.1, or a host name", address)


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*")
