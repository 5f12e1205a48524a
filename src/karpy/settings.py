"""karpy's operator settings: what Karpenter takes as flags / environment variables.

:class:`Settings` is a frozen dataclass with karpy's defaults (Karpenter's where Karpenter has
the setting): ``batch_idle_duration`` 1 s and ``batch_max_duration`` 10 s (the provisioner's
batching window), ``registration_ttl`` 15 min and ``launch_ttl`` 5 min (NodeClaim liveness),
``ice_cache_ttl`` 3 min (how long an offering that ran out of capacity is treated as unavailable),
``spot_to_spot_consolidation`` off with ``spot_to_spot_min_flexibility`` 15 (Karpenter's rule: a spot
node is only replaced by spot when at least 15 cheaper spot types remain), ``consolidation_min_saving``
0.01 (a fraction: no disruption for a saving under 1 % of the disrupted nodes' price) and
``consolidation_validation_delay`` 15 s. Durations are float seconds.

:meth:`Settings.from_mapping` reads a settings mapping with camelCase keys, as a scenario file or
a Helm-values-like document gives it (``clusterName``, ``batchIdleDuration: 1s``...). Durations
are Go duration strings (``"1s"``, ``"500ms"``, ``"15m"``) or numbers of seconds. Unknown keys
and bad values raise :class:`karpy.api.errors.ValidationError` naming the field, what was
expected and what was found; every problem is reported at once.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import duration, errors
from karpy.cloudprovider import commitments as commitments_mod

OBJECT = "Settings"
MAX_KEYS = 1000
"""More keys than this in one settings mapping is an error before any is read."""
MAX_ERRORS = 20
"""Unknown keys reported at most (each with a suggestion)."""
MAX_STRING = 16_384
"""The longest string setting (an SSH key or a bootstrap token fits)."""

DEFAULT_FEATURE_GATES: tuple[tuple[str, bool], ...] = (
    ("NodeRepair", False), ("ReservedCapacity", True), ("SpotToSpotConsolidation", False),
    ("NodeOverlay", False), ("StaticCapacity", False), ("CapacityBuffer", False))
"""Karpenter v1.14's feature gates and their defaults (``FEATURE_GATES``; ReservedCapacity on since 1.6)."""
UNIMPLEMENTED_GATES: dict[str, str] = {}
"""Gates whose feature karpy does not implement: warned about when turned on (none in Karpenter v1.14)."""
PREFERENCE_POLICIES = ("Respect", "Ignore")
MIN_VALUES_POLICIES = ("Strict", "BestEffort")


@dataclass(frozen=True, slots=True)
class Settings:
    """Operator-wide settings; see the module docstring for the defaults."""

    cluster_name: str = "karpy"
    batch_idle_duration: float = 1.0
    batch_max_duration: float = 10.0
    registration_ttl: float = 900.0
    launch_ttl: float = 300.0
    ice_cache_ttl: float = 180.0
    spot_to_spot_consolidation: bool = False
    spot_to_spot_min_flexibility: int = 15
    consolidation_min_saving: float = 0.01
    consolidation_validation_delay: float = 15.0
    # Karpenter's operator settings (Helm ``settings.*``, environment ``CLUSTER_NAME`` ...), same defaults.
    cluster_endpoint: str = ""
    interruption_queue: str = ""
    feature_gates: tuple[tuple[str, bool], ...] = DEFAULT_FEATURE_GATES
    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    isolated_vpc: bool = False
    log_level: str = "info"
    metrics_port: int = 8080
    health_probe_port: int = 8081
    kube_client_qps: int = 200
    kube_client_burst: int = 300
    preference_policy: str = "Respect"
    """``Ignore``: the provisioner drops preferred node and pod (anti-)affinities and ScheduleAnyway spreads."""
    min_values_policy: str = "Strict"
    """``BestEffort``: pods minValues leaves unschedulable are retried with minValues relaxed (the NodeClaim
    is annotated ``karpenter.sh/nodeclaim-min-values-relaxed: "true"``)."""
    karpenter_service: str = ""
    leader_election_name: str = "karpenter-leader-election"
    leader_election_namespace: str = ""
    log_output_paths: str = "stdout"
    log_error_output_paths: str = "stderr"
    enable_profiling: bool = False
    disable_controller_warmup: bool = True
    disable_leader_election: bool = False
    disable_cluster_state_observability: bool = False
    memory_limit: int = -1
    cpu_requests: int = 1000
    ignore_dra_requests: bool = True
    cluster_ca_bundle: str = ""
    ami_refresh_interval: float = 60.0
    subnet_refresh_interval: float = 60.0
    eks_control_plane: bool = False
    disable_dry_run: bool = False
    enable_zonal_shift: bool = False
    commitments: commitments_mod.Commitments = commitments_mod.NONE
    """Reserved Instances, Savings Plans and a negotiated discount (:mod:`karpy.cloudprovider.commitments`):
    the controller prices offerings and nodes at what they would cost under them."""
    # Karpenter's Azure provider (``--cloud-provider azure``): how new VMs join the AKS cluster. Same names
    # and defaults as karpenter-provider-azure; only the Azure provider reads them (and says which it needs).
    kubelet_bootstrap_token: str = dataclasses.field(default="", repr=False)
    ssh_public_key: str = ""
    linux_admin_username: str = "azureuser"
    network_plugin: str = "azure"
    network_plugin_mode: str = "overlay"
    network_policy: str = ""
    network_dataplane: str = "cilium"
    dns_service_ip: str = ""
    vnet_subnet_id: str = ""
    vnet_guid: str = ""
    node_identities: str = ""
    """Comma-separated user-assigned identity resource ids attached to every VM."""
    kubelet_identity_client_id: str = ""
    node_resource_group: str = ""
    provision_mode: str = "aksscriptless"
    """How a VM joins the cluster: ``aksscriptless`` (karpy writes the custom data), ``bootstrappingclient``
    (AKS's node bootstrapping API writes it) or ``aksmachineapi`` (AKS machines; needs ``use_sig``)."""
    node_bootstrapping_server_url: str = ""
    aks_machines_pool_name: str = ""
    use_sig: bool = False
    sig_subscription_id: str = ""

    def __post_init__(self) -> None:
        # One switch: spotToSpotConsolidation and the SpotToSpotConsolidation feature gate (Karpenter's
        # name for it) are the same setting; either one turns it on, and both then say so.
        gates = dict(self.feature_gates)
        if self.spot_to_spot_consolidation or gates.get("SpotToSpotConsolidation"):
            gates["SpotToSpotConsolidation"] = True
            object.__setattr__(self, "spot_to_spot_consolidation", True)
            object.__setattr__(self, "feature_gates", tuple(gates.items()))

    def feature_gate(self, name: str) -> bool:
        """Whether feature gate ``name`` is on (unknown gates are off)."""
        return dict(self.feature_gates).get(name, False)

    def unimplemented(self) -> list[str]:
        """One warning per setting or feature gate given a value whose behaviour karpy does not implement
        (``docs/unimplemented.md``); each names the setting and says "karpy does not implement this yet"."""
        from karpy.api import unimplemented as unimpl

        out: list[str] = []
        default = Settings()
        for key, (attr, _) in _FIELDS.items():
            why = _UNIMPLEMENTED.get(key)
            if why is not None and getattr(self, attr) != getattr(default, attr):
                out.append(f"setting {key} ({env_name(key)}) = {getattr(self, attr)!r}: {unimpl.MESSAGE} ({why})")
        for gate, why in UNIMPLEMENTED_GATES.items():
            if self.feature_gate(gate):
                out.append(f"feature gate {gate}=true: {unimpl.MESSAGE} ({why})")
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Settings:
        """Settings from camelCase keys; absent keys keep their defaults."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise errors.ValidationError.single(OBJECT, "(root)", "a mapping of settings", data)
        problems: list[errors.FieldError] = []
        values: dict[str, Any] = {}
        if len(data) > MAX_KEYS:
            raise errors.ValidationError.single(OBJECT, "(root)", f"at most {MAX_KEYS} settings",
                                                f"{len(data)} keys")
        for key, raw in data.items():
            spec = _FIELDS.get(str(key)) or _ENV_STYLE.get(str(key))
            if spec is None:
                if len(problems) >= MAX_ERRORS:
                    continue
                close = difflib.get_close_matches(str(key)[:64], list(_FIELDS), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                problems.append(errors.FieldError(
                    OBJECT, str(key), "one of " + ", ".join(sorted(_FIELDS)) + hint, raw))
                continue
            attr, kind = spec
            try:
                values[attr] = _convert(kind, raw)
            except ValueError as exc:
                problems.append(errors.FieldError(OBJECT, str(key), str(exc), raw))
        if not problems:
            merged = dataclasses.replace(cls(), **values)
            problems.extend(_check(merged))
        if problems:
            raise errors.ValidationError(problems)
        return dataclasses.replace(cls(), **values)

    def to_mapping(self) -> dict[str, Any]:
        """The camelCase form (durations as Go strings); ``from_mapping(to_mapping())`` round-trips."""
        out: dict[str, Any] = {}
        for key, (attr, kind) in _FIELDS.items():
            value = getattr(self, attr)
            if kind == _DURATION:
                value = duration.format_duration(value)
            elif kind == _GATES:
                value = ",".join(f"{k}={str(v).lower()}" for k, v in value)
            elif kind == _COMMITMENTS:
                value = value.to_dict()
            out[key] = value
        return out


_DURATION = "duration"
_STRING = "string"
_BOOL = "bool"
_FLOAT = "float"
_INT = "int"
_OPTIONAL_STRING = "optional-string"
_GATES = "feature-gates"
_LOG_LEVEL = "log-level"
_COMMITMENTS = "commitments"
_PREFERENCE = "preference-policy"
_MIN_VALUES = "min-values-policy"
_SIGNED_INT = "signed-int"

_FIELDS: dict[str, tuple[str, str]] = {
    "clusterName": ("cluster_name", _STRING),
    "batchIdleDuration": ("batch_idle_duration", _DURATION),
    "batchMaxDuration": ("batch_max_duration", _DURATION),
    "registrationTTL": ("registration_ttl", _DURATION),
    "launchTTL": ("launch_ttl", _DURATION),
    "iceCacheTTL": ("ice_cache_ttl", _DURATION),
    "spotToSpotConsolidation": ("spot_to_spot_consolidation", _BOOL),
    "spotToSpotMinFlexibility": ("spot_to_spot_min_flexibility", _INT),
    "consolidationMinSaving": ("consolidation_min_saving", _FLOAT),
    "consolidationValidationDelay": ("consolidation_validation_delay", _DURATION),
    "clusterEndpoint": ("cluster_endpoint", _OPTIONAL_STRING),
    "interruptionQueue": ("interruption_queue", _OPTIONAL_STRING),
    "featureGates": ("feature_gates", _GATES),
    "vmMemoryOverheadPercent": ("vm_memory_overhead_percent", _FLOAT),
    "reservedENIs": ("reserved_enis", _INT),
    "isolatedVPC": ("isolated_vpc", _BOOL),
    "logLevel": ("log_level", _LOG_LEVEL),
    "metricsPort": ("metrics_port", _INT),
    "healthProbePort": ("health_probe_port", _INT),
    "kubeClientQPS": ("kube_client_qps", _INT),
    "kubeClientBurst": ("kube_client_burst", _INT),
    "preferencePolicy": ("preference_policy", _PREFERENCE),
    "minValuesPolicy": ("min_values_policy", _MIN_VALUES),
    "karpenterService": ("karpenter_service", _OPTIONAL_STRING),
    "leaderElectionName": ("leader_election_name", _STRING),
    "leaderElectionNamespace": ("leader_election_namespace", _OPTIONAL_STRING),
    "logOutputPaths": ("log_output_paths", _OPTIONAL_STRING),
    "logErrorOutputPaths": ("log_error_output_paths", _OPTIONAL_STRING),
    "enableProfiling": ("enable_profiling", _BOOL),
    "disableControllerWarmup": ("disable_controller_warmup", _BOOL),
    "disableLeaderElection": ("disable_leader_election", _BOOL),
    "disableClusterStateObservability": ("disable_cluster_state_observability", _BOOL),
    "memoryLimit": ("memory_limit", _SIGNED_INT),
    "cpuRequests": ("cpu_requests", _INT),
    "ignoreDRARequests": ("ignore_dra_requests", _BOOL),
    "clusterCABundle": ("cluster_ca_bundle", _OPTIONAL_STRING),
    "amiRefreshInterval": ("ami_refresh_interval", _DURATION),
    "subnetRefreshInterval": ("subnet_refresh_interval", _DURATION),
    "eksControlPlane": ("eks_control_plane", _BOOL),
    "disableDryRun": ("disable_dry_run", _BOOL),
    "enableZonalShift": ("enable_zonal_shift", _BOOL),
    "commitments": ("commitments", _COMMITMENTS),
    "kubeletBootstrapToken": ("kubelet_bootstrap_token", _OPTIONAL_STRING),
    "sshPublicKey": ("ssh_public_key", _OPTIONAL_STRING),
    "linuxAdminUsername": ("linux_admin_username", _OPTIONAL_STRING),
    "networkPlugin": ("network_plugin", _OPTIONAL_STRING),
    "networkPluginMode": ("network_plugin_mode", _OPTIONAL_STRING),
    "networkPolicy": ("network_policy", _OPTIONAL_STRING),
    "networkDataplane": ("network_dataplane", _OPTIONAL_STRING),
    "dnsServiceIP": ("dns_service_ip", _OPTIONAL_STRING),
    "vnetSubnetID": ("vnet_subnet_id", _OPTIONAL_STRING),
    "vnetGUID": ("vnet_guid", _OPTIONAL_STRING),
    "nodeIdentities": ("node_identities", _OPTIONAL_STRING),
    "kubeletIdentityClientID": ("kubelet_identity_client_id", _OPTIONAL_STRING),
    "nodeResourceGroup": ("node_resource_group", _OPTIONAL_STRING),
    "provisionMode": ("provision_mode", _OPTIONAL_STRING),
    "nodeBootstrappingServerURL": ("node_bootstrapping_server_url", _OPTIONAL_STRING),
    "aksMachinesPoolName": ("aks_machines_pool_name", _OPTIONAL_STRING),
    "useSIG": ("use_sig", _BOOL),
    "sigSubscriptionId": ("sig_subscription_id", _OPTIONAL_STRING),
}


_ENV_NAMES = {"clusterCABundle": "CLUSTER_CA_BUNDLE", "ignoreDRARequests": "IGNORE_DRA_REQUESTS"}
"""Karpenter's environment names the camelCase-to-upper-snake rule does not give."""

_UNIMPLEMENTED: dict[str, str] = {
    "karpenterService": "karpy serves no webhooks",
    "logOutputPaths": "karpy logs to standard output",
    "logErrorOutputPaths": "karpy logs errors to standard output",
    "enableProfiling": "no pprof endpoints",
    "disableControllerWarmup": "controller warm-up is a controller-runtime feature",
    "memoryLimit": "the Go garbage collector's soft limit",
    "cpuRequests": "Go's GOMAXPROCS",
    "ignoreDRARequests": "karpy allocates no DRA devices: pods with resource claims stay pending either way",
    "eksControlPlane": "EKS control-plane specific behaviour",
    "enableZonalShift": "ARC zonal shifts are not read",
    "amiRefreshInterval": "AMIs are re-resolved on karpy's own schedule",
    "subnetRefreshInterval": "subnets are re-resolved on karpy's own schedule",
}
"""Settings karpy reads (so a Karpenter configuration loads) whose non-default value changes nothing yet."""


def env_name(key: str) -> str:
    """Karpenter's environment-variable name of a camelCase setting: ``reservedENIs`` -> ``RESERVED_ENIS``."""
    if key in _ENV_NAMES:
        return _ENV_NAMES[key]
    return "".join("_" + c if c.isupper() and i and not key[i - 1].isupper() else c
                   for i, c in enumerate(key)).upper()


_ENV_STYLE = {env_name(k): spec for k, spec in _FIELDS.items()}
"""Settings mappings (a scenario's ``spec.settings``) may also use Karpenter's environment names."""

LOG_LEVELS = ("debug", "info", "warn", "error")


def _convert(kind: str, raw: Any) -> Any:
    """The typed value of one setting; ``ValueError`` says what was expected."""
    if kind == _DURATION:
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ValueError("a duration such as 1s, 500ms or 15m")
        try:
            value = duration.parse_duration(raw)
        except duration.DurationError:
            raise ValueError("a duration such as 1s, 500ms or 15m") from None
        if value is None:
            raise ValueError("a duration such as 1s, 500ms or 15m (Never is not allowed here)")
        return value
    if kind in (_STRING, _OPTIONAL_STRING) and isinstance(raw, str) and \
            (len(raw) > MAX_STRING or any(ord(c) < 32 or ord(c) == 127 for c in raw.strip())):
        raise ValueError(f"a string of at most {MAX_STRING} characters without control characters")
    if kind == _STRING:
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError("a non-empty string")
        return raw.strip()
    if kind == _OPTIONAL_STRING:
        if not isinstance(raw, str):
            raise ValueError("a string")
        return raw.strip()
    if kind == _LOG_LEVEL:
        if not isinstance(raw, str) or raw.strip().lower() not in LOG_LEVELS:
            raise ValueError("one of " + ", ".join(LOG_LEVELS))
        return raw.strip().lower()
    if kind == _GATES:
        return _parse_gates(raw)
    if kind in (_PREFERENCE, _MIN_VALUES):
        allowed = PREFERENCE_POLICIES if kind == _PREFERENCE else MIN_VALUES_POLICIES
        if not isinstance(raw, str) or raw.strip() not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return raw.strip()
    if kind == _SIGNED_INT:
        if isinstance(raw, bool) or not (isinstance(raw, int) or (isinstance(raw, str)
                                                                    and raw.strip().lstrip("-").isdigit())):
            raise ValueError("an integer")
        return int(raw)
    if kind == _COMMITMENTS:
        try:
            return commitments_mod.parse(raw)
        except errors.ValidationError as exc:
            raise ValueError("; ".join(f"{e.path}: {e.expected} (found {errors.describe(e.found)})"
                                       for e in exc.errors)) from None
    if kind == _BOOL:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise ValueError("true or false")
    if kind == _INT:  # ASCII digits only (fullwidth digits are not a port), and not so long int() refuses them
        if isinstance(raw, str) and _DIGITS.fullmatch(raw.strip()):
            raw = int(raw.strip())
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError("a non-negative integer")
        return raw
    if isinstance(raw, bool) or not isinstance(raw, int | float | str) or (isinstance(raw, str) and len(raw) > 64):
        raise ValueError("a number")
    try:
        number = float(raw)
    except (ValueError, OverflowError):
        raise ValueError("a number") from None
    if not math.isfinite(number):
        raise ValueError("a finite number (not .inf or .nan)")
    if number < 0:
        raise ValueError("a non-negative number")
    return number


def _parse_gates(raw: Any) -> tuple[tuple[str, bool], ...]:
    """Feature gates as Karpenter takes them: ``"NodeRepair=true,SpotToSpotConsolidation=false"`` or a
    mapping of gate to boolean; gates not named keep their defaults. Unknown gates are an error."""
    defaults = dict(DEFAULT_FEATURE_GATES)
    items: list[tuple[str, Any]]
    if isinstance(raw, Mapping):
        items = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, str):
        items = []
        for part in raw.split(","):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError("gates as Name=true|false separated by commas")
            items.append((name.strip(), value.strip()))
    else:
        raise ValueError("gates as Name=true|false separated by commas, or a mapping")
    for name, value in items:
        if name not in defaults:
            raise ValueError("known feature gates: " + ", ".join(sorted(defaults)) + f" (not {name})")
        if isinstance(value, bool):
            defaults[name] = value
        elif isinstance(value, str) and value.lower() in ("true", "false"):
            defaults[name] = value.lower() == "true"
        else:
            raise ValueError(f"true or false for feature gate {name}")
    return tuple(defaults.items())


_DIGITS = re.compile(r"[0-9]{1,18}")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""EKS's rule for cluster names (AKS's is narrower); the name goes into tags, labels and resource names."""
_INT_RANGES = {"spotToSpotMinFlexibility": (0, 1000), "reservedENIs": (0, 100), "kubeClientQPS": (1, 100_000),
               "kubeClientBurst": (1, 100_000)}
_DURATION_RANGES = {"batchIdleDuration": (1e-3, 3600.0), "batchMaxDuration": (1e-3, 86_400.0),
                    "registrationTTL": (1.0, 86_400.0), "launchTTL": (1.0, 86_400.0),
                    "iceCacheTTL": (1.0, 86_400.0), "consolidationValidationDelay": (0.0, 3600.0)}
"""Seconds each duration setting may take (a 1ns TTL would delete every NodeClaim at once)."""


def _ranges(s: Settings) -> list[errors.FieldError]:
    """A range for every number setting (see :data:`_INT_RANGES`, :data:`_DURATION_RANGES`)."""
    out: list[errors.FieldError] = []
    for key, (low, high) in _INT_RANGES.items():
        value = getattr(s, _FIELDS[key][0])
        if not low <= value <= high:
            out.append(errors.FieldError(OBJECT, key, f"an integer from {low} to {high}", value))
    for key, (lo, hi) in _DURATION_RANGES.items():
        seconds = getattr(s, _FIELDS[key][0])
        if not lo <= seconds <= hi:
            out.append(errors.FieldError(OBJECT, key, f"a duration from {duration.format_duration(lo)} to "
                                         f"{duration.format_duration(hi)}", duration.format_duration(seconds)))
    if not 0 <= s.consolidation_min_saving <= 1:
        out.append(errors.FieldError(OBJECT, "consolidationMinSaving", "a fraction from 0 to 1",
                                     s.consolidation_min_saving))
    if not _CLUSTER_NAME.fullmatch(s.cluster_name):
        out.append(errors.FieldError(OBJECT, "clusterName", "1 to 100 letters, digits, '-', '_' or '.', starting "
                                     "with a letter or digit", s.cluster_name))
    if s.metrics_port == s.health_probe_port:
        out.append(errors.FieldError(OBJECT, "healthProbePort", f"a port other than metricsPort ({s.metrics_port})",
                                     s.health_probe_port))
    return out


def _check(s: Settings) -> list[errors.FieldError]:
    """Rules across fields (after every value parsed)."""
    out: list[errors.FieldError] = _ranges(s)
    if s.batch_idle_duration <= 0:
        out.append(errors.FieldError(OBJECT, "batchIdleDuration", "a duration above 0s",
                                     duration.format_duration(s.batch_idle_duration)))
    if s.batch_max_duration < s.batch_idle_duration:
        out.append(errors.FieldError(
            OBJECT, "batchMaxDuration",
            f"a duration of at least batchIdleDuration ({duration.format_duration(s.batch_idle_duration)})",
            duration.format_duration(s.batch_max_duration)))
    for key in ("metricsPort", "healthProbePort"):
        port = getattr(s, _FIELDS[key][0])
        if not 0 < port < 65536:
            out.append(errors.FieldError(OBJECT, key, "a port number from 1 to 65535", port))
    if s.kube_client_qps <= 0 or s.kube_client_burst <= 0:
        out.append(errors.FieldError(OBJECT, "kubeClientQPS", "kubeClientQPS and kubeClientBurst above 0",
                                     f"{s.kube_client_qps}/{s.kube_client_burst}"))
    if not 0 <= s.vm_memory_overhead_percent < 1:
        out.append(errors.FieldError(OBJECT, "vmMemoryOverheadPercent", "a fraction from 0 to below 1",
                                     s.vm_memory_overhead_percent))
    for key in ("registrationTTL", "launchTTL"):
        attr = _FIELDS[key][0]
        if getattr(s, attr) <= 0:
            out.append(errors.FieldError(OBJECT, key, "a duration above 0s",
                                         duration.format_duration(getattr(s, attr))))
    return out
