"""TypeTable.info, vectorised over types and offerings, answers as a type-by-type walk does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from karpy.api import labels as wk
from karpy.api import selectors
from karpy.cloudprovider import catalog, instancetype
from karpy.provisioning import templates
from karpy.scheduling import requirements as reqs_mod


def _walk(table: templates.TypeTable, requirements: reqs_mod.Requirements) -> templates.TypeInfo:
    """The answer type by type, offering by offering (what info computed before)."""
    mask, price, zones, cts = [], [], [], []
    zone_req, ct_req = requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE)
    for t in table.types:
        ok = all((t.labels.get(k) is None and r.admits_absence()) or
                 (t.labels.get(k) is not None and r.has(t.labels[k]))
                 for k, r in requirements.items() if k in table.label_keys and k not in (wk.ZONE, wk.CAPACITY_TYPE))
        offers = [o for o in t.offerings if ok and o.available and (zone_req is None or zone_req.has(o.zone))
                  and (ct_req is None or ct_req.has(o.capacity_type))]
        mask.append(ok and bool(offers))
        price.append(min((o.price for o in offers), default=np.inf))
        zones.append(frozenset(o.zone for o in offers))
        cts.append(frozenset(o.capacity_type for o in offers))
    return templates.TypeInfo(np.array(mask), np.array(price), zones, cts)


def _reqs(*terms: tuple[str, str, list[str]]) -> reqs_mod.Requirements:
    return reqs_mod.Requirements.from_node_selector_requirements(
        [selectors.NodeSelectorRequirement(key=k, operator=op, values=tuple(v)) for k, op, v in terms])


CASES = [
    (),
    ((wk.CAPACITY_TYPE, "In", ["spot"]),),
    ((wk.ZONE, "In", ["us-east-1a", "us-east-1c"]), ("karpenter.k8s.aws/instance-category", "In", ["c", "m", "r"])),
    (("karpenter.k8s.aws/instance-generation", "Gt", ["5"]), (wk.CAPACITY_TYPE, "NotIn", ["spot"])),
    (("karpenter.k8s.aws/instance-gpu-name", "DoesNotExist", []), (wk.ARCH, "In", ["arm64"])),
    (("karpenter.k8s.aws/instance-gpu-name", "Exists", []),),
    (("karpenter.k8s.aws/instance-family", "NotIn", ["m5", "c5"]), (wk.ZONE, "NotIn", ["us-east-1b"])),
    ((wk.INSTANCE_TYPE, "In", ["no-such-type"]),),
]


def _some_unavailable() -> list[instancetype.InstanceType]:
    """The AWS catalog with every third offering unavailable (as after insufficient capacity)."""
    out = []
    for t in catalog.load("aws"):
        offerings = tuple(dataclasses.replace(o, available=i % 3 != 0) for i, o in enumerate(t.offerings))
        out.append(dataclasses.replace(t, offerings=offerings))
    return out


@pytest.mark.parametrize("unavailable", [False, True])
@pytest.mark.parametrize("terms", CASES)
def test_type_info_matches_a_walk_over_every_type_and_offering(terms: tuple[tuple[str, str, list[str]], ...],
                                                              unavailable: bool) -> None:
    table = templates.TypeTable(_some_unavailable() if unavailable else catalog.load("aws"),
                                ["cpu", "memory"])
    reqs = _reqs(*terms)
    got, want = table.info(reqs), _walk(table, reqs)
    assert (got.mask == want.mask).all()
    assert np.array_equal(got.price, want.price)
    assert got.zones == want.zones
    assert got.capacity_types == want.capacity_types


def test_type_info_of_a_table_without_types_is_empty() -> None:
    info = templates.TypeTable([], ["cpu"]).info(_reqs((wk.CAPACITY_TYPE, "In", ["spot"])))
    assert len(info.mask) == 0 and info.zones == []


@pytest.mark.parametrize("terms", CASES)
def test_compatible_types_are_the_ones_a_type_by_type_check_admits(terms: tuple[tuple[str, str, list[str]], ...]
                                                                   ) -> None:
    types = _some_unavailable()
    reqs = _reqs(*terms)
    got = templates.compatible_types(reqs, types)
    assert [t.name for t in got] == [t.name for t in types if templates._type_compatible(reqs, t)]
    assert all(any(g is t for t in types) for g in got)


def test_a_type_table_holds_each_types_allocatable_and_capacity_per_dimension() -> None:
    types = catalog.load("aws")[:50]
    table = templates.TypeTable(types, ["cpu", "memory", "nvidia.com/gpu", templates.NODES])
    for i, t in enumerate(types):
        assert table.alloc[i].tolist() == [t.allocatable.get(d, 0) for d in ("cpu", "memory", "nvidia.com/gpu",
                                                                               templates.NODES)]
        assert table.capacity[i].tolist() == [t.capacity.get("cpu", 0), t.capacity.get("memory", 0),
                                              t.capacity.get("nvidia.com/gpu", 0), templates.ONE_NODE]
    assert templates.TypeTable([], ["cpu"]).alloc.shape == (0, 1)
