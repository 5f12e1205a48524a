"""Generate karpy's AWS instance-type data (src/karpy/cloudprovider/aws/data/instance-types.json).

Inputs: moto's bundled copy of EC2 ``DescribeInstanceTypes`` and ``DescribeInstanceTypeOfferings``
(availability-zone) for the region, and an on-demand price list (``{"prices": {region: {type:
usd_per_hour}}}``). Only types that have an on-demand price in the region and are offered in at
least one of its zones are kept. Each type keeps the raw specs karpy's AWS catalog derives labels,
capacity and overhead from (see ``karpy.cloudprovider.aws.instancetypes``), one type per line.

The output depends only on the inputs (sorted keys, no timestamps of its own), so running the
script again on the same inputs rewrites the identical file. Usage:

    python scripts/generate_aws_catalog.py [--prices PATH] [--region R] [--output PATH] [--check]
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import sys
from collections.abc import Mapping
from typing import Any

DEFAULT_PRICES = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data/aws-on-demand-prices.json"
DEFAULT_REGION = "us-east-1"
DEFAULT_OUTPUT = (
    pathlib.Path(__file__).resolve().parent.parent / "src" / "karpy" / "cloudprovider" / "aws" / "data"
    / "instance-types.json"
)
FORMAT_VERSION = 1


def moto_resources() -> pathlib.Path:
    """The directory of moto's bundled EC2 data."""
    import moto.ec2

    return pathlib.Path(moto.ec2.__file__).resolve().parent / "resources"


def _load_json(path: pathlib.Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _first_existing(*paths: pathlib.Path) -> pathlib.Path:
    for p in paths:
        if p.exists():
            return p
    raise FileNotFoundError(f"none of {[str(p) for p in paths]} exists")


Inputs = tuple[dict[str, Any], dict[str, list[str]], dict[str, Any]]


def load_inputs(prices_path: pathlib.Path, region: str, resources: pathlib.Path | None = None) -> Inputs:
    """(instance type infos by name, zones by type, price file) from moto and the price file."""
    res = resources or moto_resources()
    infos = _load_json(_first_existing(res / "instance_types.json.gz", res / "instance_types.json"))
    offerings_dir = res / "instance_type_offerings" / "availability-zone"
    offerings = _load_json(
        _first_existing(offerings_dir / f"{region}.json.gz", offerings_dir / f"{region}.json"))
    zones: dict[str, set[str]] = {}
    for entry in offerings:
        zones.setdefault(entry["InstanceType"], set()).add(entry["Location"])
    prices = _load_json(prices_path)
    return infos, {k: sorted(v) for k, v in zones.items()}, prices


def _specs(info: Mapping[str, Any], zones: list[str], price: float) -> dict[str, Any]:
    """The compact record of one instance type (omitting empty fields)."""
    proc = info.get("ProcessorInfo") or {}
    net = info.get("NetworkInfo") or {}
    cards = net.get("NetworkCards") or []
    default_card = net.get("DefaultNetworkCardIndex") or 0
    enis = net.get("MaximumNetworkInterfaces", 0)
    for card in cards:
        if card.get("NetworkCardIndex", 0) == default_card:
            enis = card.get("MaximumNetworkInterfaces", enis)
    bandwidth_gbps = sum(float(c.get("BaselineBandwidthInGbps") or 0) for c in cards)
    out: dict[str, Any] = {
        "vcpu": info["VCpuInfo"]["DefaultVCpus"],
        "mem": info["MemoryInfo"]["SizeInMiB"],
        "arch": list(proc.get("SupportedArchitectures") or []),
        "hv": info.get("Hypervisor") or "",
        "enis": enis,
        "ipv4": net.get("Ipv4AddressesPerInterface", 0),
        "eit": bool(net.get("EncryptionInTransitSupported", False)),
        "zones": zones,
        "price": price,
    }
    if info.get("BareMetal"):
        out["metal"] = True
    if proc.get("Manufacturer"):
        out["cpu"] = proc["Manufacturer"]
    if proc.get("SustainedClockSpeedInGhz"):
        out["clock"] = round(float(proc["SustainedClockSpeedInGhz"]) * 1000)
    if bandwidth_gbps > 0:
        out["net"] = round(bandwidth_gbps * 1000)
    ebs = info.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and ebs.get("EbsOptimizedInfo"):
        out["ebs"] = ebs["EbsOptimizedInfo"]["MaximumBandwidthInMbps"]
    storage = info.get("InstanceStorageInfo")
    if storage and storage.get("NvmeSupport") != "unsupported" and storage.get("TotalSizeInGB"):
        out["nvme"] = storage["TotalSizeInGB"]
    if storage and storage.get("TotalSizeInGB"):
        out["store"] = storage["TotalSizeInGB"]  # instance-store GB, NVMe or not (RAID0 ephemeral storage)
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        out["gpus"] = [
            [g["Name"], g["Manufacturer"], g["Count"], (g.get("MemoryInfo") or {}).get("SizeInMiB", 0)]
            for g in gpus
        ]
    accs = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if accs:
        out["acc"] = [[a["Name"], a["Manufacturer"], a["Count"]] for a in accs]
    neurons = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if neurons:
        out["neuron"] = [[n["Name"], n["Count"], (n.get("CoreInfo") or {}).get("Count", 0)] for n in neurons]
    efa = (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    if efa:
        out["efa"] = efa
    usage = info.get("SupportedUsageClasses") or []
    if "spot" not in usage:
        out["nospot"] = True
    return out


def build(prices_path: pathlib.Path = DEFAULT_PRICES, region: str = DEFAULT_REGION,
          resources: pathlib.Path | None = None) -> dict[str, Any]:
    """The catalog document for ``region``: ``{"format", "region", "source", "skipped", "types"}``."""
    infos, zones, price_doc = load_inputs(prices_path, region, resources)
    region_prices: Mapping[str, float] = price_doc["prices"][region]
    types: dict[str, Any] = {}
    no_price: list[str] = []
    no_zone: list[str] = []
    for name in sorted(infos):
        if name not in region_prices:
            no_price.append(name)
            continue
        if not zones.get(name):
            no_zone.append(name)
            continue
        types[name] = _specs(infos[name], zones[name], float(region_prices[name]))
    return {
        "format": FORMAT_VERSION,
        "region": region,
        "source": {
            "specs": "moto EC2 DescribeInstanceTypes / DescribeInstanceTypeOfferings data",
            "prices": str(price_doc.get("source", "")),
            "prices_generated_at": str(price_doc.get("generated_at", "")),
        },
        "skipped": {
            "no_price": len(no_price),
            "no_zone": len(no_zone),
            "priced_but_unknown": sorted(set(region_prices) - set(infos)),
        },
        "types": types,
    }


def render(doc: Mapping[str, Any]) -> str:
    """The file text: header keys first, then one instance type per line."""
    head = {k: v for k, v in doc.items() if k != "types"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"{json.dumps(k)}: {json.dumps(head[k], sort_keys=True, separators=(',', ':'))},")
    lines.append('"types": {')
    entries = [
        f"{json.dumps(name)}: {json.dumps(spec, sort_keys=True, separators=(',', ':'))}"
        for name, spec in sorted(doc["types"].items())
    ]
    lines.append(",\n".join(entries))
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prices", type=pathlib.Path, default=DEFAULT_PRICES)
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the output file is not up to date")
    args = parser.parse_args(argv)
    doc = build(args.prices, args.region)
    text = render(doc)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; run {pathlib.Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    skipped = doc["skipped"]
    print(f"wrote {len(doc['types'])} instance types to {args.output} "
          f"(skipped {skipped['no_price']} without a {args.region} price, {skipped['no_zone']} not offered "
          f"in any zone; {len(skipped['priced_but_unknown'])} priced types unknown to moto)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
