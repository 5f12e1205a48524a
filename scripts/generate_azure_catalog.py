"""Generate karpy's Azure VM SKU data (src/karpy/cloudprovider/azure/data/skus.json).

Inputs: a selection of the Azure Resource SKUs API (``{"skus": [{"region", "name", "family",
"size", "zones", "capabilities": {name: text}}]}``) and the Azure Retail Prices (on-demand Linux
USD/hour, ``{"prices": {region: {meter: price}}}``).

Price keys are matched to SKU names exactly (``Standard_D2s_v3``), falling back to a
case-insensitive match with surrounding blanks removed (the price list has keys such as
``"Standard_NM16ads_MA35D  "``). Keys without the ``Standard_`` / ``Basic_`` prefix (``Dsv3_Type3``,
``Msv2MedMem Type1``, ...) are dedicated-host meters, not VM sizes, and are never matched. A SKU
without a price in its region is skipped and counted in ``skipped``.

Each kept SKU keeps the capabilities karpy's Azure catalog needs, typed, one SKU per line; the
output depends only on the inputs. Usage:

    python scripts/generate_azure_catalog.py [--skus PATH] [--prices PATH] [--output PATH] [--check]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Mapping
from typing import Any

DEFAULT_SKUS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data/azure-vm-skus.json"
DEFAULT_PRICES = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data/azure-on-demand-prices.json"
DEFAULT_OUTPUT = (
    pathlib.Path(__file__).resolve().parent.parent / "src" / "karpy" / "cloudprovider" / "azure" / "data"
    / "skus.json"
)
FORMAT_VERSION = 1


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


def build(skus_path: pathlib.Path = DEFAULT_SKUS,
          prices_path: pathlib.Path = DEFAULT_PRICES) -> dict[str, Any]:
    """The catalog document: ``{"format", "source", "skipped", "regions": {region: {sku: record}}}``."""
    sku_doc = json.loads(skus_path.read_text(encoding="utf-8"))
    price_doc = json.loads(prices_path.read_text(encoding="utf-8"))
    prices: Mapping[str, Mapping[str, float]] = price_doc["prices"]
    indexes = {region: price_index(p) for region, p in prices.items()}
    regions: dict[str, dict[str, Any]] = {}
    no_price: list[str] = []
    for sku in sku_doc["skus"]:
        region, name = str(sku["region"]), str(sku["name"])
        region_prices = prices.get(region, {})
        price = lookup_price(name, region_prices, indexes.get(region, {}))
        if price is None:
            no_price.append(f"{region}/{name}")
            continue
        regions.setdefault(region, {})[name] = _record(sku, price)
    return {
        "format": FORMAT_VERSION,
        "source": {
            "skus": str(sku_doc.get("source", "")),
            "prices": str(price_doc.get("source", "")),
            "prices_generated_at": str(price_doc.get("generated_at", "")),
        },
        "skipped": {"no_price": sorted(no_price)},
        "regions": {r: dict(sorted(s.items())) for r, s in sorted(regions.items())},
    }


def render(doc: Mapping[str, Any]) -> str:
    """The file text: header keys first, then one SKU per line, grouped by region."""
    def dump(v: Any) -> str:
        return json.dumps(v, sort_keys=True, separators=(",", ":"))

    lines = ["{"]
    for k in sorted(k for k in doc if k != "regions"):
        lines.append(f"{json.dumps(k)}: {dump(doc[k])},")
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
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the output file is not up to date")
    args = parser.parse_args(argv)
    doc = build(args.skus, args.prices)
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
    print(f"wrote {kept} SKUs in {len(doc['regions'])} regions to {args.output} "
          f"(skipped {len(doc['skipped']['no_price'])} without a price in their region)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
