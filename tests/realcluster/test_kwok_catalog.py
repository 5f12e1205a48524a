"""karpy's KWOK catalog is Karpenter's: the instance_types.json its KWOK provider ships (in the Go module
source build.sh downloads) lists the same names, capacities, offerings and prices."""

from __future__ import annotations

import json
import math
from typing import Any

from karpy.api import labels, quantity
from karpy.cloudprovider.kwok import instancetypes
from realcluster import karpenter


def _karpenter_catalog() -> dict[str, dict[str, Any]]:
    path = karpenter.require_module() / "kwok" / "cloudprovider" / "instance_types.json"
    return {t["name"]: t for t in json.loads(path.read_text())}


def _offering(o: dict[str, Any]) -> tuple[str, str, float, bool]:
    req = {r["key"]: r["values"] for r in o["Requirements"] if r["operator"] == "In"}
    assert len(req[labels.ZONE]) == 1 and len(req[labels.CAPACITY_TYPE]) == 1, o
    return req[labels.ZONE][0], req[labels.CAPACITY_TYPE][0], float(o["Price"]), bool(o["Available"])


def test_karpys_kwok_catalog_has_exactly_karpenters_instance_type_names() -> None:
    theirs = _karpenter_catalog()
    ours = {t.name for t in instancetypes.kwok()}
    assert ours == set(theirs), (sorted(ours - set(theirs)), sorted(set(theirs) - ours))


def test_every_kwok_instance_type_has_karpenters_capacity_arch_and_os() -> None:
    theirs = _karpenter_catalog()
    for t in instancetypes.kwok():
        them = theirs[t.name]
        assert {k: quantity.parse_milli(v) for k, v in them["resources"].items()} == dict(t.capacity), t.name
        assert t.labels[labels.ARCH] == them["architecture"], t.name
        assert [t.labels[labels.OS]] == them["operatingSystems"], t.name


def test_every_kwok_offering_has_karpenters_zone_capacity_type_price_and_availability() -> None:
    theirs = _karpenter_catalog()
    for t in instancetypes.kwok():
        expected = sorted(_offering(o) for o in theirs[t.name]["offerings"])
        ours = sorted((o.zone, o.capacity_type, o.price, o.available) for o in t.offerings)
        assert [o[:2] + o[3:] for o in ours] == [o[:2] + o[3:] for o in expected], t.name
        for mine, their in zip(ours, expected, strict=True):
            assert math.isclose(mine[2], their[2], rel_tol=1e-12), (t.name, mine, their)
