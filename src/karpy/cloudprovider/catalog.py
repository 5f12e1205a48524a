"""Instance-type catalogs by name, their JSON form, and the ``karpy catalog`` listing.

:func:`load` returns one of the built-in catalogs as a list of
:class:`~karpy.cloudprovider.instancetype.InstanceType`, sorted by name:

* ``benchmark`` - the shapes Karpenter's scheduling benchmark uses
  (:mod:`karpy.cloudprovider.fake.instancetypes`);
* ``kwok`` - Karpenter's KWOK provider's generic types (:mod:`karpy.cloudprovider.kwok.instancetypes`);
* ``aws`` - current EC2 types in us-east-1 with Karpenter's AWS capacity and overhead formulas
  (:mod:`karpy.cloudprovider.aws.instancetypes`);
* ``azure`` - a selection of Azure VM SKUs with AKS Node Auto-Provisioning's formulas
  (:mod:`karpy.cloudprovider.azure.instancetypes`).

``zones`` keeps only the offerings in those zones (types left without offerings are dropped; a zone the
catalog does not offer in that region is an error naming the region's zones);
``region`` picks the region of the cloud catalogs; ``kubelet`` overrides kubelet settings the way
an EC2NodeClass / AKSNodeClass ``spec.kubelet`` does (see
:class:`karpy.cloudprovider.kubelet_overrides.KubeletConfig`). Results are
cached per arguments; every call returns a fresh list of shared, immutable instance types.

:func:`to_json` / :func:`from_json` convert a catalog to and from plain data: a list of
``{"name", "labels", "capacity", "allocatable", "offerings": [{"zone", "capacityType", "price",
"available"}], "volumeLimits"}`` (``volumeLimits``, optional: CSI driver -> volumes one node
attaches) with capacity and allocatable as Kubernetes quantity strings the way a Node
reports them. Scenarios and tests bring their own catalogs in this form.

:func:`run_command` is the body of ``karpy catalog``: a table like Karpenter's instance-types
reference page (via ``rich``) or the JSON form.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from karpy.api import errors, fields, labels, quantity
from karpy.cloudprovider import instancetype, kubelet_overrides, spot

NAMES = ("aws", "azure", "benchmark", "kwok")
"""The built-in catalogs :func:`load` knows."""

OUTPUTS = ("table", "json")

_CAPACITY_TYPES = frozenset({
    labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_RESERVED,
})

# What the clouds' formulas share lives below them and below this catalog (which loads them by name):
# kubelet overrides in :mod:`karpy.cloudprovider.kubelet_overrides`, the spot stand-in in
# :mod:`karpy.cloudprovider.spot`, ``restrict_zones`` in :mod:`karpy.cloudprovider.instancetype`.
# The names stay here for callers that know them here.
KubeletConfig = kubelet_overrides.KubeletConfig
kubelet_config = kubelet_overrides.kubelet_config
eviction_amount = kubelet_overrides.eviction_amount
SPOT_FRACTION_MIN = spot.SPOT_FRACTION_MIN
SPOT_FRACTION_MAX = spot.SPOT_FRACTION_MAX
spot_fraction = spot.spot_fraction
spot_price = spot.spot_price
restrict_zones = instancetype.restrict_zones


# --------------------------------------------------------------------------------------------------
# Registry


def load(name: str, *, zones: Sequence[str] | None = None, region: str | None = None,
         kubelet: Mapping[str, Any] | None = None, root_disk: int | None = None,
         ami_family: str | None = None, instance_store_policy: str | None = None,
         efa_only: tuple[int, int] | None = None, reserved_enis: int = 0) -> list[instancetype.InstanceType]:
    """The built-in catalog ``name`` (one of :data:`NAMES`), sorted by instance type name.

    ``root_disk``: the node's root (OS) disk, milli-units of bytes, as its NodeClass sets it (an
    EC2NodeClass's root volume, an AKSNodeClass's ``osDiskSizeGB``): the types' ephemeral-storage
    capacity (``None``: the catalog's default, 20Gi on AWS, 128 GB on Azure; ignored by the
    benchmark and kwok catalogs). ``ami_family`` / ``instance_store_policy``: an EC2NodeClass's, for the
    AWS catalog (Windows types, RAID0 ephemeral storage; see ``aws.instancetypes.build``); ``efa_only``: the
    EFA-only interfaces of an EC2NodeClass's ``networkInterfaces`` (EFA count, max pods; same function);
    ``reserved_enis``: the ``RESERVED_ENIS`` setting (AWS max pods).
    Raises :class:`karpy.api.errors.ValidationError` for an unknown
    name, region or bad kubelet overrides.
    """
    if name not in NAMES:
        raise errors.ValidationError.single("catalog", "name", f"one of {', '.join(NAMES)}", name)
    config = kubelet_config(kubelet)
    zone_key = tuple(sorted(set(zones))) if zones else None
    if zone_key is not None:  # a zone of another region (or a typo) would leave a catalog without it
        known, in_region = _zones(name, region)
        for i, zone in enumerate(zones or ()):
            if zone not in known:
                where = f" of region {in_region}" if in_region else ""
                names = ", ".join(sorted(z or '"" (regional)' for z in known))
                raise errors.ValidationError.single("catalog", f"zones[{i}]", f"a zone{where}: {names}", zone)
    return list(_load(name, zone_key, region, config, root_disk, ami_family, instance_store_policy, efa_only,
                      reserved_enis))


@functools.lru_cache(maxsize=32)
def _zones(name: str, region: str | None) -> tuple[frozenset[str], str]:
    """The zones catalog ``name`` offers in ``region`` (its default region when ``None``) and that region
    (``""`` for a catalog without one)."""
    types = _load(name, None, region, kubelet_config(None))
    found = region or next((t.labels[labels.REGION] for t in types if labels.REGION in t.labels), "")
    return frozenset(z for t in types for z in t.zones), found


@functools.lru_cache(maxsize=64)
def _load(name: str, zones: tuple[str, ...] | None, region: str | None,
          kubelet: KubeletConfig, root_disk: int | None = None, ami_family: str | None = None,
          instance_store_policy: str | None = None,
          efa_only: tuple[int, int] | None = None, reserved_enis: int = 0) -> tuple[instancetype.InstanceType, ...]:
    types: Sequence[instancetype.InstanceType]
    if name == "benchmark":
        from karpy.cloudprovider.fake import instancetypes as fake_types

        _no_region(name, region)
        types = fake_types.benchmark()
    elif name == "kwok":
        from karpy.cloudprovider.kwok import instancetypes as kwok_types

        _no_region(name, region)
        types = kwok_types.kwok()
    elif name == "aws":
        from karpy.cloudprovider.aws import instancetypes as aws_types

        types = aws_types.instance_types(region=region or aws_types.DEFAULT_REGION, kubelet=kubelet,
                                         root_volume=root_disk, family=ami_family,
                                         instance_store_policy=instance_store_policy, efa_only=efa_only,
                                         reserved_enis=reserved_enis)
    else:
        from karpy.cloudprovider.azure import instancetypes as azure_types

        gb = None if root_disk is None else root_disk // (10**9 * quantity.MILLI)
        types = azure_types.instance_types(region=region or azure_types.DEFAULT_REGION, kubelet=kubelet, os_disk_gb=gb)
    if zones is not None:
        types = restrict_zones(types, zones)
    return tuple(sorted(types, key=lambda t: t.name))


def _no_region(name: str, region: str | None) -> None:
    if region is not None:
        raise errors.ValidationError.single("catalog", "region", f"no region for the {name} catalog", region)


# --------------------------------------------------------------------------------------------------
# JSON form


def to_json(types: Iterable[instancetype.InstanceType]) -> list[dict[str, Any]]:
    """Plain data for ``types`` (see the module docstring); ``json.dumps`` can write it as is."""
    return [
        {
            "name": t.name,
            "labels": dict(sorted(t.labels.items())),
            "capacity": quantity.format_list(t.capacity),
            "allocatable": quantity.format_list(t.allocatable),
            "offerings": [
                {"zone": o.zone, "capacityType": o.capacity_type, "price": o.price, "available": o.available}
                for o in t.offerings
            ],
            **({"volumeLimits": dict(sorted(t.volume_limits.items()))} if t.volume_limits else {}),
        }
        for t in types
    ]


def from_json(data: Any, *, obj: str = "catalog") -> list[instancetype.InstanceType]:
    """Instance types from :func:`to_json`'s form, sorted by name.

    ``allocatable`` is optional; when given, ``capacity - allocatable`` becomes the type's
    kube-reserved overhead so the allocatable round-trips exactly. ``available`` defaults to true,
    ``labels`` gets ``node.kubernetes.io/instance-type`` when missing. Raises
    :class:`karpy.api.errors.ValidationError` naming the entry and field.
    """
    if not isinstance(data, list):
        raise errors.ValidationError.single(obj, "(root)", "a list of instance types", data)
    out: list[instancetype.InstanceType] = []
    seen: set[str] = set()
    for i, entry in enumerate(data):
        f = fields.Fields(entry, obj, f"[{i}]")
        name = f.req_str("name")
        if name in seen:
            raise f.fail("name", "a name not used by an earlier instance type", name)
        seen.add(name)
        type_labels = f.str_map("labels")
        type_labels.setdefault(labels.INSTANCE_TYPE, name)
        capacity = _quantities(f, "capacity")
        reserved: dict[str, int] = {}
        if f.has("allocatable"):
            allocatable = _quantities(f, "allocatable")
            for res, amount in allocatable.items():
                if res not in capacity:
                    raise errors.ValidationError.single(
                        obj, f"{f.at('allocatable')}.{res}", "a resource that is also in capacity", amount)
                if amount > capacity[res]:
                    raise errors.ValidationError.single(
                        obj, f"{f.at('allocatable')}.{res}", "at most the capacity",
                        quantity.format_quantity(res, amount))
                if capacity[res] - amount:
                    reserved[res] = capacity[res] - amount
        offerings = tuple(_offering(o) for o in f.items("offerings"))
        if not offerings:
            raise f.fail("offerings", "at least one offering", f.raw("offerings"))
        out.append(instancetype.InstanceType(
            name=name, labels=type_labels, capacity=capacity,
            overhead=instancetype.Overhead(kube_reserved=reserved), offerings=offerings,
            volume_limits=_volume_limits(f),
        ))
    return sorted(out, key=lambda t: t.name)


def _volume_limits(f: fields.Fields) -> dict[str, int]:
    """``volumeLimits``: CSI driver name (or ``*``: any other driver) -> volumes one node attaches."""
    raw = f.raw("volumeLimits", {})
    if not isinstance(raw, Mapping):
        raise f.fail("volumeLimits", "a mapping of CSI driver name to a volume count", raw)
    out: dict[str, int] = {}
    for driver, count in raw.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise errors.ValidationError.single(f.obj, f"{f.at('volumeLimits')}.{driver}",
                                                "a whole number of volumes >= 0", count)
        out[str(driver)] = count
    return out


def _quantities(f: fields.Fields, key: str) -> dict[str, int]:
    raw = f.raw(key, {})
    if not isinstance(raw, Mapping):
        raise f.fail(key, "a mapping of resource quantities", raw)
    out: dict[str, int] = {}
    for res, value in raw.items():
        try:
            amount = quantity.parse_milli(value)
        except quantity.QuantityError:
            raise errors.ValidationError.single(
                f.obj, f"{f.at(key)}.{res}", "a quantity such as '2' or '8Gi'", value) from None
        if amount < 0:
            raise errors.ValidationError.single(f.obj, f"{f.at(key)}.{res}", "a non-negative quantity", value)
        out[str(res)] = amount
    return out


def _offering(f: fields.Fields) -> instancetype.Offering:
    zone = f.str("zone")
    if zone is None:
        raise f.fail("zone", "a zone name", None)
    capacity_type = f.req_str("capacityType")
    if capacity_type not in _CAPACITY_TYPES:
        raise f.fail("capacityType", f"one of {', '.join(sorted(_CAPACITY_TYPES))}", capacity_type)
    price = f.raw("price")
    if isinstance(price, bool) or not isinstance(price, int | float) or price < 0 or math.isnan(price):
        raise f.fail("price", "a non-negative number (dollars per hour)", price)
    available = f.bool("available", True)
    return instancetype.Offering(zone, capacity_type, float(price), bool(available))


def read_file(path: str | pathlib.Path) -> list[instancetype.InstanceType]:
    """Instance types from a JSON file in :func:`to_json`'s form."""
    p = pathlib.Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        found = f"{exc.msg} at line {exc.lineno}"
        raise errors.ValidationError.single(str(p), "(root)", "JSON", found) from None
    return from_json(data, obj=str(p))


# --------------------------------------------------------------------------------------------------
# Listing (karpy catalog)


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the catalog table."""

    name: str
    vcpu: str
    memory: str
    pods: str
    allocatable_cpu: str
    allocatable_memory: str
    on_demand: str
    spot: str
    zones: str


TABLE_COLUMNS = ("NAME", "VCPU", "MEMORY", "PODS", "ALLOC CPU", "ALLOC MEMORY", "ON-DEMAND $/H", "SPOT $/H",
                 "ZONES")


def row(t: instancetype.InstanceType) -> Row:
    """The table row of ``t``: capacity, allocatable, the cheapest available price per capacity type."""
    alloc = t.allocatable
    on_demand = t.cheapest_price(capacity_types=frozenset({labels.CAPACITY_TYPE_ON_DEMAND}))
    spot = t.cheapest_price(capacity_types=frozenset({labels.CAPACITY_TYPE_SPOT}))
    return Row(
        name=t.name,
        vcpu=_number(t.capacity.get("cpu", 0) / quantity.MILLI),
        memory=_gib(t.capacity.get("memory", 0)),
        pods=_number(t.capacity.get("pods", 0) / quantity.MILLI),
        allocatable_cpu=quantity.format_quantity("cpu", alloc.get("cpu", 0)),
        allocatable_memory=_mib(alloc.get("memory", 0)),
        on_demand="-" if on_demand is None else f"{on_demand:.4f}",
        spot="-" if spot is None else f"{spot:.4f}",
        zones=zones_summary(sorted(t.zones)),
    )


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def _gib(milli: int) -> str:
    gib = milli / quantity.MILLI / 2**30
    return f"{gib:g}Gi" if gib == int(gib) else f"{gib:.2f}Gi"


def _mib(milli: int) -> str:
    """Memory in whole MiB, rounded down, as Karpenter's reference page shows allocatable memory."""
    return f"{milli // quantity.MILLI // 2**20}Mi"


def zones_summary(zones: Sequence[str]) -> str:
    """``us-east-1{a,b,c}`` for zones sharing a prefix, ``-`` for a regional (empty) zone."""
    names = [z if z else "-" for z in zones]
    if len(names) <= 1:
        return names[0] if names else ""
    prefix = names[0]
    for z in names[1:]:
        while not z.startswith(prefix):
            prefix = prefix[:-1]
    if not prefix or any(len(z) == len(prefix) for z in names):
        return ",".join(names)
    return prefix + "{" + ",".join(z[len(prefix):] for z in names) + "}"


def render_table(types: Sequence[instancetype.InstanceType], file: IO[str], *, title: str | None = None,
                 width: int | None = None) -> None:
    """Write the catalog as a ``rich`` table; ``width`` defaults to the terminal's, or 200 columns."""
    from rich.console import Console
    from rich.table import Table

    isatty = getattr(file, "isatty", None)
    console = Console(file=file, width=width or (None if isatty is not None and isatty() else 200),
                      highlight=False, soft_wrap=False)
    table = Table(title=title, show_lines=False, header_style="bold")
    for i, column in enumerate(TABLE_COLUMNS):
        numeric = 0 < i < len(TABLE_COLUMNS) - 1
        table.add_column(column, justify="right" if numeric else "left", no_wrap=True)
    for t in types:
        r = row(t)
        table.add_row(r.name, r.vcpu, r.memory, r.pods, r.allocatable_cpu, r.allocatable_memory, r.on_demand,
                      r.spot, r.zones)
    console.print(table)
    console.print(f"{len(types)} instance types")


def render_json(types: Sequence[instancetype.InstanceType]) -> str:
    return json.dumps(to_json(types), indent=2) + "\n"


def run_command(name: str, *, output: str = "table", zones: Sequence[str] = (), region: str | None = None,
                file: IO[str]) -> None:
    """``karpy catalog NAME``: load the catalog and write it to ``file`` as a table or JSON."""
    if output not in OUTPUTS:
        raise errors.ValidationError.single("catalog", "output", "table or json", output)
    types = load(name, zones=list(zones) or None, region=region)
    if output == "json":
        file.write(render_json(types))
        return
    where = f" ({region})" if region else ""
    render_table(types, file, title=f"karpy {name} catalog{where}")
