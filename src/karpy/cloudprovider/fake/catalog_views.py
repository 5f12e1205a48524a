"""The simulated cloud's instance types: its catalog per NodeClass kubelet setting, and views of it.

:class:`CatalogViews` loads a built-in catalog (:func:`karpy.cloudprovider.catalog.load`) or keeps a
caller's list, once per distinct kubelet configuration (a NodeClass's ``spec.kubelet``, an
AKSNodeClass's ``maxPods``; its root disk: an EC2NodeClass's root volume, an AKSNodeClass's
``osDiskSizeGB``, the ephemeral-storage capacity: they change allocatable; an EC2NodeClass's AMI family,
``instanceStorePolicy`` and EFA-only ``networkInterfaces``: :func:`aws_profile`; an AKSNodeClass's
encryption at host, trusted launch, LocalDNS and artifact streaming, which leave out the sizes it cannot
launch: :func:`karpy.cloudprovider.azure.instancetypes.for_nodeclass`, and its ``gpu.mode: None``, which
adds the AMD GPU sizes: :func:`karpy.cloudprovider.azure.instancetypes.amd_types`), and answers:

* :meth:`CatalogViews.types` / :meth:`CatalogViews.index`: the instance types (list, by name);
* :meth:`CatalogViews.view`: the types with the given offerings switched to ``available=False``
  (cached per kubelet configuration and set of unavailable offerings; a caller must not change it);
* :meth:`CatalogViews.defined_keys`: the label keys the provider defines;
* :meth:`CatalogViews.on_demand_prices`: each type's cheapest on-demand price;
* :meth:`CatalogViews.candidates`: :func:`karpy.cloudprovider.fake.capacity.candidates` over the
  catalog, memoised per kubelet configuration, requirements and requests (the catalog of a kubelet
  configuration never changes; capacity is not looked at there). The list is shared: do not change it.

:class:`NodeClassReadiness` is the simulated cloud's NodeClass resolution: EC2NodeClass and
AKSNodeClass are Ready (their status kept) unless a test made one not Ready; other kinds are not. An
AKSNodeClass gets ``status.localDNSState`` as the Azure provider resolves it
(:func:`karpy.cloudprovider.azure.images.local_dns_state`; the simulated cloud knows no Kubernetes
version, so ``Preferred`` resolves to ``Disabled`` unless it was ``Enabled`` already) and is
not Ready with ``fipsMode: FIPS``, as with the Azure provider (no FIPS images in the community galleries).

Pure; nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import labels, nodeclass, quantity, selectors
from karpy.cloudprovider import catalog as catalog_mod
from karpy.cloudprovider import errors, instancetype, interface
from karpy.cloudprovider.aws import instancetypes as aws_types
from karpy.cloudprovider.azure import images as azure_images
from karpy.cloudprovider.azure import instancetypes as azure_types
from karpy.cloudprovider.azure import ultra_ssd
from karpy.cloudprovider.fake import capacity

NodeClass = capacity.NodeClass
MAX_VIEWS = 256
DEFAULT_OS_DISK_GB = 128
"""An AKSNodeClass's default ``osDiskSizeGB`` (the Azure catalog's default ephemeral-storage)."""
MAX_CANDIDATE_LISTS = 512


def kubelet_overrides(nc: NodeClass | None) -> dict[str, Any] | None:
    """The allocatable-changing settings of ``nc`` (``None`` when it has none)."""
    if nc is None:
        return None
    out: dict[str, Any] = nc.kubelet.to_dict() if nc.kubelet is not None else {}
    if isinstance(nc, nodeclass.AKSNodeClass) and nc.max_pods is not None:
        out["maxPods"] = nc.max_pods
    return out or None


def root_disk(nc: NodeClass | None) -> int | None:
    """The node's root disk as ``nc`` sets it, milli-units of bytes (``None``: the default).

    An EC2NodeClass's root volume (the ``rootVolume: true`` mapping, else the last one: Karpenter's
    ephemeral-storage rule, ``pkg/providers/instancetype/types.go``), an AKSNodeClass's
    ``osDiskSizeGB`` (GB, as the AKS provider reads it)."""
    if isinstance(nc, nodeclass.EC2NodeClass):
        return nodeclass.root_volume_size(nc)
    if isinstance(nc, nodeclass.AKSNodeClass) and nc.os_disk_size_gb and nc.os_disk_size_gb != DEFAULT_OS_DISK_GB:
        return nc.os_disk_size_gb * 10**9 * quantity.MILLI
    return None


def aws_profile(nc: NodeClass | None) -> tuple[str | None, str | None, tuple[int, int] | None] | None:
    """An EC2NodeClass's AMI family, ``instanceStorePolicy`` and EFA-only ``networkInterfaces`` when they change
    its instance types (Windows: OS, pods, root volume; Bottlerocket: pods per core; RAID0: ephemeral storage;
    EFA-only interfaces: ``vpc.amazonaws.com/efa`` and max pods), else ``None``."""
    if not isinstance(nc, nodeclass.EC2NodeClass):
        return None
    family = nc.resolved_ami_family
    if family not in ("Bottlerocket", "Windows2019", "Windows2022", "Windows2025"):
        family = None
    efa = aws_types.efa_only_interfaces(nc.network_interfaces)
    if family is None and nc.instance_store_policy is None and efa is None:
        return None
    return family, nc.instance_store_policy, efa


def kubelet_key(nc: NodeClass | None) -> Any:
    """A hashable key per distinct catalog configuration: the kubelet settings and the root disk
    (``None``: the catalog's defaults), the AWS profile (AMI family, instance store policy), and what of
    an AKSNodeClass narrows its sizes."""
    overrides = kubelet_overrides(nc)
    disk = root_disk(nc)
    kubelet = None if overrides is None else catalog_mod.kubelet_config(overrides)
    key: Any = kubelet if disk is None else (kubelet, disk)
    profile = aws_profile(nc)
    if profile is not None:
        key = (kubelet, disk, profile)
    if isinstance(nc, nodeclass.AKSNodeClass):
        narrowing = azure_types.nodeclass_filter(nc)
        if any(narrowing):
            return (key, narrowing)
    return key


class CatalogViews:
    """See the module docstring."""

    def __init__(self, catalog: str | Sequence[instancetype.InstanceType], zones: Sequence[str] | None,
                 region: str | None, reserved_enis: int = 0,
                 volume_limits: Mapping[str, int] | None = None) -> None:
        """``catalog``: a built-in catalog name or a list; ``zones`` keeps only offerings there;
        ``region`` is passed to a built-in AWS or Azure catalog, ``reserved_enis`` (``RESERVED_ENIS``) to AWS's;
        ``volume_limits`` replaces every type's CSI attach count for those drivers."""
        self.reserved_enis = reserved_enis
        self.volume_limits = dict(volume_limits or {})
        self.catalog: str | tuple[instancetype.InstanceType, ...] = \
            catalog if isinstance(catalog, str) else tuple(catalog)
        self.zones = tuple(zones) if zones else None
        self.region = region if catalog in ("aws", "azure") else None
        self._types: dict[Any, list[instancetype.InstanceType]] = {}
        self._views: dict[tuple[Any, frozenset[errors.OfferingKey]], list[instancetype.InstanceType]] = {}
        self._defined: frozenset[str] | None = None
        self._indexes: dict[Any, dict[str, instancetype.InstanceType]] = {}
        self._candidates: dict[tuple[Any, ...], list[capacity.Candidate]] = {}

    def types(self, nc: NodeClass | None) -> list[instancetype.InstanceType]:
        key = kubelet_key(nc)
        types = self._types.get(key)
        if types is None:
            if isinstance(self.catalog, str):
                profile = aws_profile(nc) or (None, None, None)
                types = catalog_mod.load(self.catalog, zones=self.zones, region=self.region,
                                         kubelet=kubelet_overrides(nc), root_disk=root_disk(nc),
                                         ami_family=profile[0], instance_store_policy=profile[1],
                                         efa_only=profile[2], reserved_enis=self.reserved_enis)
                if isinstance(nc, nodeclass.AKSNodeClass) and self.catalog == "azure":
                    types = azure_types.for_nodeclass(types, nc)
                    if azure_types.amd_gpus_allowed(nc):
                        amd = azure_types.amd_types(self.region or azure_types.DEFAULT_REGION,
                                                    catalog_mod.kubelet_config(kubelet_overrides(nc)),
                                                    nc.os_disk_size_gb or DEFAULT_OS_DISK_GB)
                        amd = instancetype.restrict_zones(amd, self.zones) if self.zones else amd
                        types = sorted([*types, *azure_types.for_nodeclass(amd, nc)], key=lambda t: t.name)
            elif self.zones is not None:
                types = instancetype.restrict_zones(self.catalog, self.zones)
            else:
                types = list(self.catalog)
            if self.volume_limits:
                types = [dataclasses.replace(t, volume_limits={**t.volume_limits, **self.volume_limits})
                         for t in types]
            self._types[key] = types
        return types

    def index(self, nc: NodeClass | None) -> dict[str, instancetype.InstanceType]:
        key = kubelet_key(nc)
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = {t.name: t for t in self.types(nc)}
        return index

    def defined_keys(self) -> frozenset[str]:
        if self._defined is None:
            self._defined = capacity.defined_keys(self.types(None))
        return self._defined

    def on_demand_prices(self) -> dict[str, float]:
        return {it.name: min((o.price for o in it.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND),
                             default=0.0) for it in self.types(None)}

    def candidates(self, nc: NodeClass | None, reqs: Sequence[selectors.NodeSelectorRequirement],
                   requests: Mapping[str, int], region: str) -> list[capacity.Candidate]:
        """The catalog's offerings for a NodeClaim of ``nc`` with ``reqs`` and ``requests``, cheapest
        first (see :func:`capacity.candidates`; memoised, shared: do not change the list)."""
        kubelet = kubelet_key(nc)
        key = (kubelet, tuple(reqs), tuple(sorted(requests.items())), region)
        cached = self._candidates.get(key)
        if cached is not None:
            return cached
        types: Sequence[instancetype.InstanceType] = self.types(nc)
        for req in reqs:  # the usual case: the scheduler lists the options
            if req.key == labels.INSTANCE_TYPE and req.operator == "In":
                index = self.index(nc)
                types = [index[n] for n in sorted(set(req.values)) if n in index]
        out = capacity.candidates(types, reqs, requests, region, self.defined_keys())
        if len(self._candidates) >= MAX_CANDIDATE_LISTS:
            self._candidates.clear()
        self._candidates[key] = out
        return out

    @staticmethod
    def ultra_ssd(cands: list[capacity.Candidate], reqs: Sequence[selectors.NodeSelectorRequirement],
                  provider_format: str, region: str) -> tuple[list[capacity.Candidate], dict[str, str]]:
        """On an Azure cloud: only the offerings whose packaged Resource SKU facts have Ultra SSD there when the
        NodeClaim requires ``sku-storage-ultra-ssd=true`` (:mod:`karpy.cloudprovider.azure.ultra_ssd`), and the
        label every node gets; elsewhere ``cands`` and no label."""
        if provider_format != "azure":
            return cands, {}
        wanted = ultra_ssd.requested(reqs)
        if wanted:
            cands = [c for c in cands if ultra_ssd.available(azure_types.record(region, c.instance_type.name) or {},
                                                             c.offering.zone)]
        return cands, {ultra_ssd.KEY: ultra_ssd.label(wanted)}

    def view(self, nc: NodeClass | None, unavailable: frozenset[errors.OfferingKey]) -> list[instancetype.InstanceType]:
        """:meth:`types` with the ``unavailable`` offerings marked so (shared: do not change it)."""
        key = kubelet_key(nc)
        cached = self._views.get((key, unavailable))
        if cached is not None:
            return cached
        by_type: dict[str, set[tuple[str, str]]] = {}
        for it_name, zone, ct in unavailable:
            by_type.setdefault(it_name, set()).add((zone, ct))
        view: list[instancetype.InstanceType] = []
        for it in self.types(nc):
            gone = by_type.get(it.name)
            if gone is None:
                view.append(it)
                continue
            view.append(it.with_offerings(tuple(
                dataclasses.replace(o, available=False) if (o.zone, o.capacity_type) in gone else o
                for o in it.offerings)))
        if len(self._views) > MAX_VIEWS:
            self._views.clear()
        self._views[(key, unavailable)] = view
        return view


class NodeClassReadiness:
    """See the module docstring."""

    def __init__(self, kubernetes_version: str = "") -> None:
        self._unready: dict[tuple[str, str], tuple[str, str]] = {}
        self.kubernetes_version = kubernetes_version

    def resolve(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        """The ``status`` ``node_class`` should have, with its ``Ready`` condition."""
        kind = str(node_class.get("kind") or "")
        status = dict(node_class.get("status") or {})
        if kind not in ("EC2NodeClass", "AKSNodeClass"):
            status["conditions"] = [interface.ready_condition(
                False, "UnsupportedNodeClass", f"the simulated cloud does not serve {kind or 'this kind'}")]
            return status
        others = [c for c in status.get("conditions") or () if c.get("type") != "Ready"]
        name = str((node_class.get("metadata") or {}).get("name") or "")
        broken = self._unready.get((kind, name))
        if kind == "AKSNodeClass":
            spec = node_class.get("spec") or {}
            previous = status.get("localDNSState")
            status["localDNSState"] = azure_images.local_dns_state(
                spec, str(previous) if previous else None, self.kubernetes_version)
            if broken is None and spec.get("fipsMode") == "FIPS":
                broken = ("ImagesNotReady", "fipsMode FIPS: AKS publishes FIPS images only in its shared image "
                          "gallery, and karpy launches from the community galleries")
        ready = interface.ready_condition(True, "Ready") if broken is None else \
            interface.ready_condition(False, broken[0], broken[1])
        status["conditions"] = [*others, ready]
        return status

    def set_ready(self, kind: str, name: str, ready: bool, reason: str, message: str) -> None:
        if ready:
            self._unready.pop((kind, name), None)
        else:
            self._unready[(kind, name)] = (reason, message)
