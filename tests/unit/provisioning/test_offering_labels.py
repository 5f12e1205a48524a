"""Labels an offering decides (``Offering.labels``, Karpenter's offering requirements): the scheduler puts a pod
that requires one of their values only on types and zones whose offerings may take it, and a pod that does
not care anywhere."""

from __future__ import annotations

import dataclasses

from karpy.api import labels as wk
from karpy.cloudprovider import instancetype
from karpy.provisioning import templates
from karpy.scheduling import requirements as reqs_mod

from . import builders as b

ULTRA = wk.AZURE_SKU_STORAGE_ULTRA_SSD


def _with_ultra(t: instancetype.InstanceType, zones_with: set[str]) -> instancetype.InstanceType:
    return t.with_offerings(tuple(dataclasses.replace(
        o, labels=((ULTRA, ("false", "true") if o.zone in zones_with else ("false",)),)) for o in t.offerings))


def _catalog() -> list[instancetype.InstanceType]:
    small, medium, large = b.small_catalog()
    return [_with_ultra(small, set()), _with_ultra(medium, {b.ZONES[1]}), large]  # large decides nothing


def test_a_pod_that_requires_an_offering_label_gets_a_type_and_zone_whose_offerings_may_take_it() -> None:
    pod = b.make_pod("db", nodeSelector={ULTRA: "true"})
    res = b.solve([pod], types=_catalog())
    claim = b.claim_of(res, pod)
    assert claim is not None
    assert {t.name for t in claim.instance_types} == {"medium"}  # small has none; large does not define it
    info = templates.TypeTable(_catalog(), ["cpu"]).info(reqs_mod.Requirements.from_labels({ULTRA: "true"}))
    assert list(info.mask) == [False, True, False] and info.zones[1] == {b.ZONES[1]}  # the zone that has it


def test_a_pod_that_does_not_care_may_go_anywhere_and_the_cheapest_wins() -> None:
    pod = b.make_pod("web")
    claim = b.claim_of(b.solve([pod], types=_catalog()), pod)
    assert claim is not None and "small" in {t.name for t in claim.instance_types}


def test_a_pod_that_requires_a_value_no_offering_takes_is_not_scheduled() -> None:
    pod = b.make_pod("db", nodeSelector={ULTRA: "maybe"})
    res = b.solve([pod], types=_catalog())
    assert b.claim_of(res, pod) is None and pod.key in res.errors


def test_offering_admits_checks_values_and_absence() -> None:
    o = instancetype.Offering("z", "on-demand", 1.0, labels=((ULTRA, ("false", "true")),))
    true = reqs_mod.Requirements.from_labels({ULTRA: "true"})
    assert instancetype.offering_admits(o, true.get)
    assert not instancetype.offering_admits(instancetype.Offering("z", "on-demand", 1.0), true.get, [ULTRA])
