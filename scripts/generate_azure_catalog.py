"""Generate karpy's Azure VM SKU data (src/karpy/cloudprovider/azure/data/skus.json).

Inputs: the hardware facts of 1,574 Azure VM sizes with their sources (``azure-vm-sizes.json``:
``{"sizes": [{"name", "family", "vCPUs", "memoryGiB", "arch", "gpus", "gpuModel", "premiumIO",
"acceleratedNetworking", "maxNICs", "tempDiskGiB", "ephemeralOSDiskSupported", "sources"}]}``), a
selection of the Azure Resource SKUs API (``{"skus": [{"region", "name", "family", "size", "zones",
"capabilities": {name: text}}]}``) whose capabilities win where both know a size, and the Azure
Retail Prices (on-demand Linux USD/hour, ``{"prices": {region: {meter: price}}}``).

The output holds each size's hardware once (``sizes``) and, per region of the price file, the sizes
with a price there (``regions: {region: {name: {"price", ["zones"]}}}``; ``zones`` only where the
Resource SKUs API said which zones the size is offered in; ``ultra_ssd_zones`` / ``ultra_ssd_regional`` where
its ``UltraSSDAvailable`` capability is true, see ``assumptions``). Every fact comes from a source, in this
order: the Resource SKUs selection; the field reports (``../shared/seeds``: a node's
``karpenter.azure.com/sku-*`` labels, e.g. ``sku-encryptionathost-capable=true`` of Standard_E16as_v5,
and ``karpenter.sh/capacity-type=spot`` proving spot capability), named in the size's ``reported``; a
documented Azure rule (Arm64 sizes are Generation 2 only; Azure Spot excludes the B series and
``_Promo`` sizes), named in ``derived``; else the fact is ``null`` and listed in ``unknown`` (Hyper-V
generations, encryption at host, spot capability, cache disk bytes). What karpy assumes for an
unknown fact is written in the output's ``assumptions`` (and docs/azure.md). Spot prices are not in
the inputs: ``spot_prices`` says how karpy estimates them.

Price keys are matched to SKU names exactly (``Standard_D2s_v3``), falling back to a
case-insensitive match with surrounding blanks removed (the price list has keys such as
``"Standard_NM16ads_MA35D  "``). Keys without the ``Standard_`` / ``Basic_`` prefix (``Dsv3_Type3``,
``Msv2MedMem Type1``, ...) are dedicated-host meters, not VM sizes, and are never matched. A SKU
without a price in its region is skipped and counted in ``skipped``.

Each kept SKU keeps the capabilities karpy's Azure catalog needs, typed, one SKU per line; the
output depends only on the inputs. Usage:

    python scripts/generate_azure_catalog.py [--skus PATH] [--prices PATH] [--sizes PATH] [--seeds DIR]
                                             [--output PATH] [--check]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
from collections.abc import Mapping
from typing import Any

DEFAULT_SKUS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data/azure-vm-skus.json"
DEFAULT_SIZES = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data/azure-vm-sizes.json"
DEFAULT_PRICES = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data/azure-on-demand-prices.json"
DEFAULT_SEEDS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "seeds"
DEFAULT_OUTPUT = (
    pathlib.Path(__file__).resolve().parent.parent / "src" / "karpy" / "cloudprovider" / "azure" / "data"
    / "skus.json"
)
FORMAT_VERSION = 4
NO_SPOT_PREFIXES = ("Standard_B",)
"""Azure Spot does not offer the B (burstable) series (nor ``_Promo`` sizes)."""
PARTIAL_GPU_FAMILIES = ("StandardNVadsV710v5Family",)
"""Families whose smaller sizes hold part of one GPU (the sizes file gives no count for them)."""
PARTIAL_GPU_RULE = ("a partial GPU (NVads V710 v5: 1/6, 1/3, 1/2 of a V710) is one GPU device to the VM, as the "
                    "Resource SKUs API counts the partial NVads A10 v5 sizes (GPUs 1)")
UNKNOWABLE = ("cached_disk_bytes", "encryption_at_host", "hyperv", "low_priority")
"""Facts the sizes file does not carry: ``null`` unless another source has them."""
ASSUMPTIONS = {
    "cached_disk_bytes": "unknown: no cache-disk placement of an ephemeral OS disk (the temp disk only)",
    "encryption_at_host": "unknown: the karpenter.azure.com/sku-encryptionathost-capable label is left out",
    "hyperv": "unknown: V1 and V2 (sku-hyperv-generation 2, the Gen2 image), as most x64 sizes",
    "low_priority": "unknown: spot offered (a live cluster reads LowPriorityCapable from the Resource SKUs API)",
    "zones": "a size without Resource SKUs zones is offered in zones 1-3 of a region with availability zones",
    "ultra_ssd": "the Resource SKUs selection's UltraSSDAvailable capability (it carries no zoneDetails) is taken "
                 "to hold in every zone it lists for the size (ultra_ssd_zones), or for a regional VM where it "
                 "lists none (ultra_ssd_regional); a size it does not cover has no Ultra SSD",
}
"""What karpy's catalog does with a ``null`` fact (written into the output)."""
SPOT_PRICES = {
    "source": "estimate",
    "rule": "on-demand price x a deterministic fraction in [0.3, 0.7) per (size, zone) "
            "(karpy.cloudprovider.catalog.spot_price); the inputs hold no spot prices",
    "live": "the Azure Retail Prices API's Spot meters replace the estimate (karpy.cloudprovider.azure.pricing)",
}
_SEED_LABEL = re.compile(r'"?([A-Za-z0-9.\-]+/[A-Za-z0-9.\-]+)"?\s*[:=]\s*"?([^",\s}]*)"?')


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _number(value: Any) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        return 0.0


def _int(value: Any) -> int:
    return int(_number(value))


def price_index(region_prices: Mapping[str, float]) -> dict[str, float]:
    """Lower-cased, stripped VM-size price keys -> price (dedicated-host meters left out)."""
    out: dict[str, float] = {}
    for key, price in region_prices.items():
        clean = key.strip()
        if not clean.lower().startswith(("standard_", "basic_")):
            continue
        out.setdefault(clean.lower(), float(price))
    return out


def lookup_price(name: str, region_prices: Mapping[str, float], index: Mapping[str, float]) -> float | None:
    if name in region_prices:
        return float(region_prices[name])
    return index.get(name.strip().lower())


def _record(sku: Mapping[str, Any], price: float) -> dict[str, Any]:
    caps: Mapping[str, Any] = sku.get("capabilities") or {}
    out: dict[str, Any] = {
        "family": sku.get("family", ""),
        "size": sku.get("size", ""),
        "zones": sorted(str(z) for z in sku.get("zones") or []),
        "vcpu": _int(caps.get("vCPUs", 0)),
        "mem_gib": _number(caps.get("MemoryGB", 0)),
        "arch": str(caps.get("CpuArchitectureType", "x64")),
        "hyperv": sorted(g.strip() for g in str(caps.get("HyperVGenerations", "")).split(",") if g.strip()),
        "premium_io": _truthy(caps.get("PremiumIO")),
        "accelerated_networking": _truthy(caps.get("AcceleratedNetworkingEnabled")),
        "encryption_at_host": _truthy(caps.get("EncryptionAtHostSupported")),
        "ephemeral_os": _truthy(caps.get("EphemeralOSDiskSupported")),
        "low_priority": _truthy(caps.get("LowPriorityCapable")),
        "max_resource_volume_mb": _int(caps.get("MaxResourceVolumeMB", 0)),
        "cached_disk_bytes": _int(caps.get("CachedDiskBytes", 0)),
        "gpus": _int(caps.get("GPUs", 0)),
        "price": price,
    }
    if caps.get("vCPUsAvailable") and _int(caps["vCPUsAvailable"]) != out["vcpu"]:
        out["vcpu_available"] = _int(caps["vCPUsAvailable"])
    return out


def _size_record(size: Mapping[str, Any]) -> dict[str, Any]:
    """A hardware record from the sizes file, shaped as :func:`_record` shapes a Resource SKU.

    Facts the sizes file does not carry are ``null`` and listed in ``unknown``, unless a documented
    rule gives them (``derived``): Arm64 sizes support only Hyper-V Generation 2; the B series and
    ``_Promo`` sizes are not offered as Spot; a partial V710 GPU is one GPU (:data:`PARTIAL_GPU_RULE`). Any
    other ``null`` GPU count stays ``null``; the catalog leaves such sizes out.
    """
    name = str(size["name"])
    gpus = size.get("gpus")
    arch = str(size.get("arch") or "unknown")
    derived: dict[str, str] = {}
    hyperv: list[str] | None = None
    if arch == "Arm64":
        hyperv = ["V2"]
        derived["hyperv"] = "Arm64 sizes support Generation 2 only"
    if gpus is None and str(size.get("family") or "") in PARTIAL_GPU_FAMILIES:
        gpus = 1
        derived["gpus"] = PARTIAL_GPU_RULE
    low_priority: bool | None = None
    if name.startswith(NO_SPOT_PREFIXES) or name.endswith("_Promo"):
        low_priority = False
        derived["low_priority"] = "Azure Spot does not offer the B series and _Promo sizes"
    out: dict[str, Any] = {
        "family": str(size.get("family") or ""),
        "size": name.split("_", 1)[1] if "_" in name else name,
        "vcpu": int(size.get("vCPUs") or 0),
        "mem_gib": float(size.get("memoryGiB") or 0),
        "arch": arch,
        "hyperv": hyperv,
        "premium_io": bool(size.get("premiumIO")),
        "accelerated_networking": bool(size.get("acceleratedNetworking")),
        "encryption_at_host": None,
        "ephemeral_os": bool(size.get("ephemeralOSDiskSupported")),
        "low_priority": low_priority,
        "max_resource_volume_mb": int(float(size.get("tempDiskGiB") or 0) * 1024),
        "cached_disk_bytes": None,
        "gpus": None if gpus is None else int(gpus),
        "max_nics": int(size.get("maxNICs") or 0),
        "sources": list(size.get("sources") or []),
    }
    if derived:
        out["derived"] = derived
    _mark_unknown(out)
    if size.get("gpuModel"):
        out["gpu_model"] = str(size["gpuModel"])
    if size.get("activeVCPUs"):
        out["vcpu_available"] = int(size["activeVCPUs"])
    return out


def _mark_unknown(rec: dict[str, Any]) -> None:
    """List the record's ``null`` facts in ``unknown`` (drop the key when none is left)."""
    unknown = [k for k in UNKNOWABLE if rec.get(k) is None]
    if unknown:
        rec["unknown"] = unknown
    else:
        rec.pop("unknown", None)


def seed_facts(seeds_dir: pathlib.Path | None) -> dict[str, dict[str, tuple[Any, str]]]:
    """Size -> fact -> (value, which report): what the field reports' AKS nodes showed in their labels.

    A node's label block naming ``karpenter.azure.com/sku-name`` tells: ``sku-encryptionathost-capable``
    (encryption at host), ``sku-storage-premium-capable``, ``sku-networking-accelerated``, and
    ``karpenter.sh/capacity-type=spot`` (the size is spot-capable). Only what a label says is taken:
    a missing label proves nothing.
    """
    out: dict[str, dict[str, tuple[Any, str]]] = {}
    if seeds_dir is None or not seeds_dir.is_dir():
        return out
    for path in sorted(seeds_dir.glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"karpenter\.azure\.com/sku-name", text):
            start, end = text.rfind("{", 0, m.start()), text.find("}", m.end())
            if start < 0 or end < 0:
                continue
            node = dict(_SEED_LABEL.findall(text[start:end]))
            name = node.get("karpenter.azure.com/sku-name", "")
            if not name.startswith(("Standard_", "Basic_")):
                continue
            facts = out.setdefault(name, {})
            for label, key in (("karpenter.azure.com/sku-encryptionathost-capable", "encryption_at_host"),
                               ("karpenter.azure.com/sku-storage-premium-capable", "premium_io"),
                               ("karpenter.azure.com/sku-networking-accelerated", "accelerated_networking")):
                if node.get(label) in ("true", "false"):
                    facts[key] = (node[label] == "true", path.name)
            if node.get("karpenter.sh/capacity-type") == "spot":
                facts["low_priority"] = (True, path.name)
    return out


def _apply_seeds(sizes: dict[str, dict[str, Any]], facts: Mapping[str, Mapping[str, tuple[Any, str]]]) -> None:
    """Fill facts the other sources left ``null`` (or only derived) with what a field report showed."""
    for name, known in sorted(facts.items()):
        rec = sizes.get(name)
        if rec is None:
            continue
        for key, (value, report) in sorted(known.items()):
            if rec.get(key) is None:
                rec[key] = value
                rec.setdefault("reported", {})[key] = f"field report {report}"
        _mark_unknown(rec)


def build(skus_path: pathlib.Path = DEFAULT_SKUS,
          prices_path: pathlib.Path = DEFAULT_PRICES,
          sizes_path: pathlib.Path | None = DEFAULT_SIZES,
          seeds_dir: pathlib.Path | None = DEFAULT_SEEDS) -> dict[str, Any]:
    """The catalog document: ``{"format", "source", "skipped", "sizes": {name: hardware},
    "regions": {region: {name: {"price", ["zones"], ["ultra_ssd_zones" | "ultra_ssd_regional"]}}}}``.

    Sizes come from the sizes file (when given) and the Resource SKUs selection; every region of
    the price file lists the sizes priced there. SKU-file entries without a price in their region
    are named in ``skipped.no_price``; sizes without a price in a region are counted per region in
    ``skipped.unpriced_sizes``.
    """
    sku_doc = json.loads(skus_path.read_text(encoding="utf-8"))
    price_doc = json.loads(prices_path.read_text(encoding="utf-8"))
    size_doc: Mapping[str, Any] = (json.loads(sizes_path.read_text(encoding="utf-8"))
                                   if sizes_path is not None else {"sizes": []})
    prices: Mapping[str, Mapping[str, float]] = price_doc["prices"]
    indexes = {region: price_index(p) for region, p in prices.items()}
    sizes: dict[str, dict[str, Any]] = {str(s["name"]): _size_record(s) for s in size_doc["sizes"]}
    zones: dict[tuple[str, str], list[str]] = {}
    ultra: dict[tuple[str, str], list[str]] = {}
    no_price: list[str] = []
    for sku in sku_doc["skus"]:
        region, name = str(sku["region"]), str(sku["name"])
        rec = _record(sku, 0.0)
        rec.pop("price")
        rec["sources"] = sorted(set(sizes.get(name, {}).get("sources", [])) | {"resource-skus-file"})
        if name in sizes:
            for key in ("max_nics", "gpu_model"):
                if key in sizes[name]:
                    rec[key] = sizes[name][key]
        _mark_unknown(rec)
        sizes[name] = rec
        zones[(region, name)] = rec.pop("zones")
        if _truthy((sku.get("capabilities") or {}).get("UltraSSDAvailable")):
            ultra[(region, name)] = zones[(region, name)]
        if lookup_price(name, prices.get(region, {}), indexes.get(region, {})) is None:
            no_price.append(f"{region}/{name}")
    _apply_seeds(sizes, seed_facts(seeds_dir))
    regions: dict[str, dict[str, Any]] = {}
    unpriced: dict[str, int] = {}
    for region, region_prices in sorted(prices.items()):
        out: dict[str, Any] = {}
        for name in sorted(sizes):
            price = lookup_price(name, region_prices, indexes[region])
            if price is None:
                unpriced[region] = unpriced.get(region, 0) + 1
                continue
            entry: dict[str, Any] = {"price": price}
            if (region, name) in zones:
                entry["zones"] = zones[(region, name)]
            if (region, name) in ultra:
                if ultra[(region, name)]:
                    entry["ultra_ssd_zones"] = ultra[(region, name)]
                else:
                    entry["ultra_ssd_regional"] = True
            out[name] = entry
        regions[region] = out
    return {
        "format": FORMAT_VERSION,
        "source": {
            "sizes": str(size_doc.get("source", "")),
            "sizes_generated": str(size_doc.get("generated", "")),
            "skus": str(sku_doc.get("source", "")),
            "prices": str(price_doc.get("source", "")),
            "prices_generated_at": str(price_doc.get("generated_at", "")),
            "field_reports": sorted(p.name for p in seeds_dir.glob("*.txt")) if seeds_dir is not None
            and seeds_dir.is_dir() else [],
        },
        "skipped": {"no_price": sorted(no_price), "unpriced_sizes": unpriced},
        "assumptions": ASSUMPTIONS,
        "spot_prices": SPOT_PRICES,
        "sizes": dict(sorted(sizes.items())),
        "regions": regions,
    }


def render(doc: Mapping[str, Any]) -> str:
    """The file text: header keys first, then one SKU per line, grouped by region."""
    def dump(v: Any) -> str:
        return json.dumps(v, sort_keys=True, separators=(",", ":"))

    lines = ["{"]
    for k in sorted(k for k in doc if k not in ("regions", "sizes")):
        lines.append(f"{json.dumps(k)}: {dump(doc[k])},")
    lines.append('"sizes": {')
    lines.append(",\n".join(f"{json.dumps(name)}: {dump(rec)}" for name, rec in sorted(doc["sizes"].items())))
    lines.append("},")
    lines.append('"regions": {')
    region_blocks = []
    for region, skus in sorted(doc["regions"].items()):
        body = ",\n".join(f"{json.dumps(name)}: {dump(rec)}" for name, rec in sorted(skus.items()))
        region_blocks.append(f"{json.dumps(region)}: {{\n{body}\n}}")
    lines.append(",\n".join(region_blocks))
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--skus", type=pathlib.Path, default=DEFAULT_SKUS)
    parser.add_argument("--prices", type=pathlib.Path, default=DEFAULT_PRICES)
    parser.add_argument("--sizes", type=pathlib.Path, default=DEFAULT_SIZES)
    parser.add_argument("--seeds", type=pathlib.Path, default=DEFAULT_SEEDS)
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the output file is not up to date")
    args = parser.parse_args(argv)
    doc = build(args.skus, args.prices, args.sizes, args.seeds)
    text = render(doc)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; run {pathlib.Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    kept = sum(len(s) for s in doc["regions"].values())
    print(f"wrote {len(doc['sizes'])} sizes, {kept} priced (size, region) pairs in {len(doc['regions'])} "
          f"regions to {args.output} (SKU-file entries without a price: {len(doc['skipped']['no_price'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
