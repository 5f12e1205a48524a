"""VM sizes from the Azure Resource SKUs API, filtered as AKS Node Auto-Provisioning filters them.

:func:`discover` lists ``Microsoft.Compute/skus`` for one region through azure-mgmt-compute
(``resource_skus.list(filter="location eq '<region>'")``) and returns, per VM size usable there, the
record :func:`karpy.cloudprovider.azure.instancetypes.build` turns into an instance type. What a
caller may rely on:

* only ``virtualMachines`` SKUs listed for the region are kept;
* a SKU with a ``Location`` restriction for the region (``NotAvailableForSubscription``) is left out,
  as the Azure provider's ``HasLocationRestriction`` does;
* zones with a ``Zone`` restriction are removed from the SKU's zones (a zonal SKU whose every zone is
  restricted is left out); ``zones`` is the sorted list of the remaining ARM zone numbers;
* capabilities are typed the way the packaged catalog's generator types them (vCPUs, MemoryGB,
  architecture, Hyper-V generations, premium IO, accelerated networking, encryption at host,
  ephemeral OS disk, LowPriorityCapable, resource and cache disk sizes, GPUs); ``ultra_ssd_zones`` are the
  zones whose ``zoneDetails`` say ``UltraSSDAvailable``, ``ultra_ssd_regional`` the SKU's own
  ``UltraSSDAvailable`` (a regional VM); ``trusted_launch_disabled`` the ``TrustedLaunchDisabled`` capability;
* sizes AKS cannot run stay in the result: :func:`instancetypes.unsupported_reason` drops them when
  instance types are built, so :func:`skipped` can say why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from karpy.cloudprovider.azure import clients

VIRTUAL_MACHINES = "virtualMachines"


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _number(value: Any) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        return 0.0


def _capabilities(sku: Mapping[str, Any]) -> dict[str, str]:
    return {str(c.get("name")): str(c.get("value")) for c in sku.get("capabilities") or ()}


def _restricted(sku: Mapping[str, Any], region: str) -> tuple[bool, set[str]]:
    """(whole location restricted, restricted zones) for ``region``."""
    location = False
    zones: set[str] = set()
    for r in sku.get("restrictions") or ():
        info = r.get("restrictionInfo") or {}
        where = {str(x).lower() for x in (info.get("locations") or r.get("values") or ())}
        if region.lower() not in where:
            continue
        if r.get("type") == "Location":
            location = True
        elif r.get("type") == "Zone":
            zones.update(str(z) for z in info.get("zones") or ())
    return location, zones


def to_record(sku: Mapping[str, Any], region: str) -> dict[str, Any] | None:
    """The catalog record of one Resource SKU (a dict in ARM's wire form), or ``None`` when it is
    not a VM size offered to this subscription in ``region``."""
    if sku.get("resourceType") != VIRTUAL_MACHINES:
        return None
    if region.lower() not in {str(x).lower() for x in sku.get("locations") or ()}:
        return None
    location_blocked, blocked_zones = _restricted(sku, region)
    if location_blocked:
        return None
    zones: set[str] = set()
    for info in sku.get("locationInfo") or ():
        if str(info.get("location", "")).lower() == region.lower():
            zones.update(str(z) for z in info.get("zones") or ())
    if zones and not zones - blocked_zones:
        return None
    caps = _capabilities(sku)
    rec: dict[str, Any] = {
        "family": str(sku.get("family") or ""),
        "size": str(sku.get("size") or ""),
        "zones": sorted(zones - blocked_zones),
        "vcpu": int(_number(caps.get("vCPUs", 0))),
        "mem_gib": _number(caps.get("MemoryGB", 0)),
        "arch": caps.get("CpuArchitectureType", "x64"),
        "hyperv": sorted(g.strip() for g in caps.get("HyperVGenerations", "").split(",") if g.strip()),
        "premium_io": _truthy(caps.get("PremiumIO")),
        "accelerated_networking": _truthy(caps.get("AcceleratedNetworkingEnabled")),
        "encryption_at_host": _truthy(caps.get("EncryptionAtHostSupported")),
        "ephemeral_os": _truthy(caps.get("EphemeralOSDiskSupported")),
        "low_priority": _truthy(caps.get("LowPriorityCapable")),
        "max_resource_volume_mb": int(_number(caps.get("MaxResourceVolumeMB", 0))),
        "cached_disk_bytes": int(_number(caps.get("CachedDiskBytes", 0))),
        "gpus": int(_number(caps.get("GPUs", 0))),
        "max_nics": int(_number(caps.get("MaxNetworkInterfaces", 0))),
    }
    ultra_zones: set[str] = set()
    for info in sku.get("locationInfo") or ():
        if str(info.get("location", "")).lower() != region.lower():
            continue
        for detail in info.get("zoneDetails") or ():
            if _truthy(_capabilities(detail).get("UltraSSDAvailable")):
                ultra_zones.update(str(z) for z in detail.get("name") or ())
    rec["ultra_ssd_zones"] = sorted(ultra_zones & set(rec["zones"]))
    rec["ultra_ssd_regional"] = _truthy(caps.get("UltraSSDAvailable"))
    rec["trusted_launch_disabled"] = _truthy(caps.get("TrustedLaunchDisabled"))
    if caps.get("vCPUsAvailable") and int(_number(caps["vCPUsAvailable"])) != rec["vcpu"]:
        rec["vcpu_available"] = int(_number(caps["vCPUsAvailable"]))
    return rec


def records(skus: Iterable[Mapping[str, Any]], region: str) -> dict[str, dict[str, Any]]:
    """Size name -> record for every SKU :func:`to_record` keeps, sorted by name."""
    out: dict[str, dict[str, Any]] = {}
    for sku in skus:
        rec = to_record(sku, region)
        if rec is not None:
            out[str(sku.get("name"))] = rec
    return dict(sorted(out.items()))


def _as_dict(model: Any) -> Mapping[str, Any]:
    if isinstance(model, Mapping):
        return model
    as_dict = getattr(model, "as_dict", None)
    if as_dict is None:
        raise TypeError(f"unexpected Resource SKU type {type(model).__name__}")
    out: Mapping[str, Any] = as_dict()
    return out


def discover(azure: clients.AzureClients, region: str) -> dict[str, dict[str, Any]]:
    """The VM size records of ``region`` from the Resource SKUs API (see the module docstring)."""
    def fetch() -> list[Mapping[str, Any]]:
        return [_as_dict(s) for s in azure.compute.resource_skus.list(filter=f"location eq '{region}'")]

    listed = clients.call(f"listing resource SKUs in {region}", fetch)
    return records(listed, region)
