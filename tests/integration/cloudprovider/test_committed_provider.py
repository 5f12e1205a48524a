"""The controller's commitment wrapper around any provider prices offerings and nodes as the bill does."""

from __future__ import annotations

import pytest

from karpy.api import labels
from karpy.cloudprovider import commitments, committed

from .test_simulated_cloud import OD, ZONE_A, claim, new_cloud, on_demand

TWO_MEDIUM = commitments.parse({"reservedInstances": [{"instanceType": "medium", "count": 2}]})


def medium_price(provider: committed.CommittedProvider) -> float:
    it = next(t for t in provider.get_instance_types(None) if t.name == "medium")
    return next(o.price for o in it.offerings if (o.zone, o.capacity_type) == (ZONE_A, OD))


def test_offerings_cost_nothing_more_while_an_ri_is_unused_then_their_list_price() -> None:
    cloud, vclock = new_cloud()
    provider = committed.CommittedProvider(cloud, TWO_MEDIUM, vclock)
    assert medium_price(provider) == pytest.approx(0.20 * committed.COVERED_FLOOR)
    pinned = on_demand((labels.INSTANCE_TYPE, "In", ["medium"]), (labels.ZONE, "In", [ZONE_A]))
    launched = [provider.create(claim(f"c-{i}", requirements=pinned)) for i in range(3)]
    assert medium_price(provider) == pytest.approx(0.20)
    billed = [provider.billed_price(c.status.provider_id) or 0.0 for c in launched]
    assert sorted(billed) == pytest.approx([0.0, 0.0, 0.20])
    provider.delete(launched[0])
    assert medium_price(provider) == pytest.approx(0.20)  # the freed RI covers the third instance at once
    assert [provider.billed_price(c.status.provider_id) for c in launched[1:]] == [0.0, 0.0]


def test_the_wrapper_reads_the_providers_instances_at_most_once_per_refresh() -> None:
    cloud, vclock = new_cloud()
    calls = 0
    real_list = cloud.list

    def counting_list() -> list[object]:
        nonlocal calls
        calls += 1
        return list(real_list())

    cloud.list = counting_list  # type: ignore[method-assign,assignment]
    provider = committed.CommittedProvider(cloud, TWO_MEDIUM, vclock, refresh_seconds=30)
    for _ in range(5):
        provider.get_instance_types(None)
    assert calls == 1
    vclock.advance(31)
    provider.get_instance_types(None)
    assert calls == 2
