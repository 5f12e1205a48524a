"""The live instance-type catalog of any region: DescribeInstanceTypes + DescribeInstanceTypeOfferings.

:class:`LiveCatalog` asks EC2 which instance types exist in the session's region and in which zones
each is offered, converts every ``InstanceTypeInfo`` into the spec record the formulas of
:mod:`karpy.cloudprovider.aws.instancetypes` take (vCPUs, MiB, architectures, ENIs, IPv4 per ENI,
GPUs, accelerators, EFA, network and EBS bandwidth, local NVMe...), and builds
:class:`~karpy.cloudprovider.instancetype.InstanceType` s with Karpenter's labels, capacity and
overhead. Offerings: on-demand in each zone, and spot where the type supports spot, priced by
:class:`karpy.cloudprovider.aws.pricing.Prices`; a type without any on-demand price is left out.

What a caller may rely on: the EC2 data is cached and refreshed every :data:`REFRESH_SECONDS` of
the clock (a failed refresh keeps the previous data, and raises only when there is none yet);
:meth:`LiveCatalog.instance_types` returns a fresh list sorted by name, for the kubelet settings,
zones, root volume size, AMI family (Windows types) and instance-store policy (RAID0) asked, with
offerings in ``unavailable`` marked ``available=False``; ``reserved_enis`` (the ``RESERVED_ENIS``
setting) lowers the ENI-limited max pods of every type.
Thread-safe.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Collection, Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels
from karpy.cloudprovider import errors, instancetype, kubelet_overrides
from karpy.cloudprovider.aws import instancetypes, pricing, session
from karpy.cloudprovider.fake import capacity

log = logging.getLogger("karpy.cloudprovider.aws.typecatalog")

REFRESH_SECONDS = 3600.0


def spec_of(info: Mapping[str, Any]) -> dict[str, Any]:
    """The compact spec record of one ``InstanceTypeInfo`` (see :mod:`instancetypes`)."""
    proc = info.get("ProcessorInfo") or {}
    net = info.get("NetworkInfo") or {}
    cards = net.get("NetworkCards") or []
    default_card = net.get("DefaultNetworkCardIndex") or 0
    enis = int(net.get("MaximumNetworkInterfaces") or 0)
    for card in cards:
        if (card.get("NetworkCardIndex") or 0) == default_card and card.get("MaximumNetworkInterfaces"):
            enis = int(card["MaximumNetworkInterfaces"])
    spec: dict[str, Any] = {
        "vcpu": int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
        "mem": int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
        "arch": list(proc.get("SupportedArchitectures") or []),
        "hv": info.get("Hypervisor") or "",
        "enis": enis,
        "ipv4": int(net.get("Ipv4AddressesPerInterface") or 0),
        "eit": bool(net.get("EncryptionInTransitSupported", False)),
    }
    if proc.get("Manufacturer"):
        spec["cpu"] = proc["Manufacturer"]
    if proc.get("SustainedClockSpeedInGhz"):
        spec["clock"] = round(float(proc["SustainedClockSpeedInGhz"]) * 1000)
    bandwidth = sum(float(c.get("BaselineBandwidthInGbps") or 0) for c in cards)
    if bandwidth > 0:
        spec["net"] = round(bandwidth * 1000)
    ebs = info.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and ebs.get("EbsOptimizedInfo"):
        spec["ebs"] = ebs["EbsOptimizedInfo"].get("MaximumBandwidthInMbps", 0)
    storage = info.get("InstanceStorageInfo") or {}
    if storage.get("NvmeSupport") not in (None, "unsupported") and storage.get("TotalSizeInGB"):
        spec["nvme"] = storage["TotalSizeInGB"]
    if storage.get("TotalSizeInGB"):
        spec["store"] = storage["TotalSizeInGB"]
    if "nvme" in spec:  # the EBS CSI driver's shared Nitro slots count each disk (ebs_limits)
        spec["nvme_disks"] = sum(int(d.get("Count") or 0) for d in storage.get("Disks") or ())
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        spec["gpus"] = [[g.get("Name", ""), g.get("Manufacturer", ""), g.get("Count", 0),
                         (g.get("MemoryInfo") or {}).get("SizeInMiB", 0)] for g in gpus]
    accs = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if accs:
        spec["acc"] = [[a.get("Name", ""), a.get("Manufacturer", ""), a.get("Count", 0)] for a in accs]
    neurons = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if neurons:
        spec["neuron"] = [[n.get("Name", ""), n.get("Count", 0), (n.get("CoreInfo") or {}).get("Count", 0)]
                          for n in neurons]
    efa = (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    if efa:
        spec["efa"] = efa
    if "spot" not in (info.get("SupportedUsageClasses") or ["spot"]):
        spec["nospot"] = True
    return spec


class LiveCatalog:
    """See the module docstring."""

    def __init__(self, sess: session.Session, clock: clock_mod.Clock, prices: pricing.Prices, *,
                 vm_memory_overhead_percent: float = instancetypes.VM_MEMORY_OVERHEAD_PERCENT,
                 reserved_enis: int = 0) -> None:
        self.session = sess
        self.clock = clock
        self.prices = prices
        self.vm_memory_overhead_percent = vm_memory_overhead_percent
        self.reserved_enis = reserved_enis
        """``RESERVED_ENIS``: ENIs left out of every type's ENI-limited max pods."""
        self._lock = threading.Lock()
        self._specs: dict[str, dict[str, Any]] = {}
        self._zones: dict[str, tuple[str, ...]] = {}
        self._next = float("-inf")
        self._generation = 0
        self._built: dict[tuple[Any, ...], tuple[instancetype.InstanceType, ...]] = {}
        self._defined: dict[int, frozenset[str]] = {}

    def refresh(self, *, force: bool = False) -> None:
        now = self.clock.now()
        if not force and now < self._next:
            return
        with self._lock:
            if not force and now < self._next:
                return
            try:
                specs: dict[str, dict[str, Any]] = {}
                for page in session.paginate(self.session.ec2, "describe_instance_types"):
                    for info in page.get("InstanceTypes") or ():
                        specs[str(info["InstanceType"])] = spec_of(info)
                zones: dict[str, set[str]] = {}
                for page in session.paginate(self.session.ec2, "describe_instance_type_offerings",
                                             LocationType="availability-zone"):
                    for o in page.get("InstanceTypeOfferings") or ():
                        zones.setdefault(str(o["InstanceType"]), set()).add(str(o["Location"]))
            except errors.CloudProviderError as exc:
                if not self._specs:
                    raise
                log.warning("refreshing instance types failed, keeping %d known types: %s", len(self._specs), exc)
                self._next = now + 60.0
                return
            self._specs = specs
            self._zones = {k: tuple(sorted(v)) for k, v in zones.items()}
            self._generation += 1
            self._built.clear()
            self._next = now + REFRESH_SECONDS

    def instance_types(self, *, kubelet: kubelet_overrides.KubeletConfig | None = None,
                       zones: Collection[str] | None = None,
                       ephemeral_storage: int | None = None,
                       family: str | None = None, instance_store_policy: str | None = None,
                       efa_only: tuple[int, int] | None = None,
                       unavailable: Collection[errors.OfferingKey] = (),
                       names: Collection[str] | None = None) -> list[instancetype.InstanceType]:
        """``names``: only these types (the rest of the arguments as the module docstring says)."""
        self.refresh()
        kc = kubelet or kubelet_overrides.KubeletConfig()
        zone_key = tuple(sorted(zones)) if zones is not None else None
        key = (self._generation, kc, zone_key, ephemeral_storage, family, instance_store_policy, efa_only,
               self.prices.on_demand_source,
               self.prices.spot_source)
        built = self._built.get(key)
        if built is None:
            built = self._build(kc, zone_key, ephemeral_storage, family, instance_store_policy, efa_only)
            with self._lock:
                if len(self._built) > 64:
                    self._built.clear()
                self._built[key] = built
        if names is not None:
            wanted = frozenset(names)
            built = tuple(t for t in built if t.name in wanted)
        if not unavailable:
            return list(built)
        gone = frozenset(unavailable)
        out = []
        for it in built:
            if any((it.name, o.zone, o.capacity_type) in gone for o in it.offerings):
                it = it.with_offerings(tuple(
                    dataclasses.replace(o, available=False) if (it.name, o.zone, o.capacity_type) in gone else o
                    for o in it.offerings))
            out.append(it)
        return out

    def _build(self, kc: kubelet_overrides.KubeletConfig, zones: tuple[str, ...] | None,
               ephemeral_storage: int | None, family: str | None = None,
               instance_store_policy: str | None = None,
               efa_only: tuple[int, int] | None = None) -> tuple[instancetype.InstanceType, ...]:
        wanted = set(zones) if zones is not None else None
        out: list[instancetype.InstanceType] = []
        for name in sorted(self._specs):
            spec = self._specs[name]
            type_zones = [z for z in self._zones.get(name, ()) if wanted is None or z in wanted]
            if not type_zones:
                continue
            od = self.prices.on_demand(name)
            if od is None:
                continue
            it = instancetypes.build(name, {**spec, "zones": type_zones, "price": od}, region=self.session.region,
                                     kubelet=kc, vm_memory_overhead_percent=self.vm_memory_overhead_percent,
                                     ephemeral_storage=ephemeral_storage, family=family,
                                     instance_store_policy=instance_store_policy, efa_only=efa_only,
                                     reserved_enis=self.reserved_enis)
            if it is None:
                continue
            offerings: list[instancetype.Offering] = []
            for zone in type_zones:
                offerings.append(instancetype.Offering(zone, labels.CAPACITY_TYPE_ON_DEMAND, od))
                if not spec.get("nospot"):
                    spot = self.prices.spot(name, zone)
                    if spot is not None:
                        offerings.append(instancetype.Offering(zone, labels.CAPACITY_TYPE_SPOT, spot))
            out.append(it.with_offerings(tuple(offerings)))
        return tuple(out)

    def defined_keys(self) -> frozenset[str]:
        """Every label key some instance type of the region defines (requirements on others are not the
        cloud's to check)."""
        self.refresh()
        with self._lock:
            cached = self._defined.get(self._generation)
        if cached is None:
            cached = capacity.defined_keys(self.instance_types())
            with self._lock:
                self._defined = {self._generation: cached}
        return cached

    def get(self, name: str) -> dict[str, Any] | None:
        """The spec record of one type (``None`` when EC2 does not list it)."""
        self.refresh()
        return self._specs.get(name)
