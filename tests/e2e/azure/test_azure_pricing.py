"""Prices come from the Retail Prices API through azure-core's pipeline, refreshed, with the packaged fallback."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import instancetypes, pricing

from . import fake_arm

pytestmark = pytest.mark.e2e


def item(size: str, price: float, meter: str, product: str = "Virtual Machines Dv4 Series",
         region: str = "japaneast") -> dict[str, Any]:
    return {"armSkuName": size, "retailPrice": price, "skuName": meter, "productName": product,
            "armRegionName": region, "type": "Consumption", "unitOfMeasure": "1 Hour"}


PRICES = [
    item("Standard_D2_v4", 0.2, "D2 v4"),
    item("Standard_D2_v4", 0.05, "D2 v4 Spot"),
    item("Standard_D2_v4", 0.01, "D2 v4 Low Priority"),
    item("Standard_D2_v4", 0.3, "D2 v4", product="Virtual Machines Dv4 Series Windows"),
    item("Standard_D4_v4", 0.4, "D4 v4"),
    item("Standard_D4_v4", 0.39, "D4 v4"),
    item("Standard_D2_v4", 9.9, "D2 v4", region="eastus"),
]


def test_the_retail_prices_api_is_read_across_pages_linux_only_with_spot_apart() -> None:
    with fake_arm.FakeARM(prices=PRICES) as arm:
        prices = pricing.fetch_retail_prices("japaneast", endpoint=arm.endpoint)
        pages = [c for c in arm.requests if c.path == "/api/retail/prices"]
    assert dict(prices.on_demand) == {"Standard_D2_v4": 0.2, "Standard_D4_v4": 0.39}
    assert dict(prices.spot) == {"Standard_D2_v4": 0.05}
    assert len(pages) == 2


def test_the_price_book_falls_back_to_the_packaged_table_and_refreshes_every_twelve_hours() -> None:
    vclock = clock.VirtualClock()
    packaged = instancetypes.on_demand_prices("japaneast")["Standard_D2_v4"]
    with fake_arm.FakeARM(prices=PRICES) as arm:
        def fetch(region: str) -> pricing.Prices:
            return pricing.fetch_retail_prices(region, endpoint=arm.endpoint, retry_total=0)

        book = pricing.PriceBook("japaneast", vclock, fetch)
        assert book.on_demand("Standard_D2_v4") == packaged and book.spot("Standard_D2_v4") is None
        assert book.refresh() and book.live
        assert (book.on_demand("Standard_D2_v4"), book.spot("Standard_D2_v4")) == (0.2, 0.05)
        assert book.on_demand("Standard_E2s_v3") == instancetypes.on_demand_prices("japaneast")["Standard_E2s_v3"]
        arm.prices[0] = item("Standard_D2_v4", 0.25, "D2 v4")
        assert not book.refresh()  # not due yet
        vclock.advance(12 * 3600)
        assert book.refresh() and book.on_demand("Standard_D2_v4") == 0.25
    vclock.advance(12 * 3600)
    assert not book.refresh()  # the service is gone: the last prices stay
    assert isinstance(book.last_error, errors.CloudProviderError) and book.last_error.retryable
    assert book.on_demand("Standard_D2_v4") == 0.25


def test_live_prices_reach_the_instance_types_offerings() -> None:
    vclock = clock.VirtualClock()
    rec = instancetypes.record("japaneast", "Standard_D2_v4")
    assert rec is not None
    book = pricing.PriceBook("japaneast", vclock, lambda region: pricing.Prices({"Standard_D2_v4": 0.2},
                                                                                {"Standard_D2_v4": 0.05}))
    book.refresh()
    price = book.on_demand("Standard_D2_v4")
    assert price is not None
    t = instancetypes.build("Standard_D2_v4", {**rec, "price": price}, region="japaneast",
                            spot_prices=book.spot_prices())
    assert t is not None
    assert {(o.capacity_type, o.price) for o in t.offerings} == {("on-demand", 0.2), ("spot", 0.05)}


def _retail(size: str, meter: str, price: float, *, product: str = "Virtual Machines Dv4 Series",
            kind: str = "Consumption", region: str = "japaneast") -> dict[str, Any]:
    """One item as the Retail Prices API returns it (every field of the 2023-01-01-preview shape)."""
    return {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
            "armRegionName": region, "location": "JA East", "effectiveStartDate": "2025-05-01T00:00:00Z",
            "meterId": f"m-{meter}", "meterName": meter, "productId": "DZH318Z0BQ4L", "skuId": "DZH318Z0BQ4L/00F0",
            "productName": product, "skuName": meter, "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
            "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": kind, "isPrimaryMeterRegion": True,
            "armSkuName": size}


def test_live_spot_meters_are_real_spot_prices_and_replace_the_estimate_in_every_zone() -> None:
    from karpy import settings
    from karpy.api import labels
    from karpy.cloudprovider.azure import factory
    from karpy.kube import memory

    live = [_retail("Standard_D2_v4", "D2 v4", 0.115), _retail("Standard_D2_v4", "D2 v4 Spot", 0.0231),
            _retail("Standard_D2_v4", "D2 v4 Spot", 0.0, kind="Consumption"),
            _retail("Standard_D2_v4", "D2 v4 Spot", 0.011, kind="DevTestConsumption"),
            _retail("Standard_D2_v4", "D2 v4 Low Priority", 0.02),
            _retail("Standard_D2_v4", "D2 v4 Spot", 0.05, product="Virtual Machines Dv4 Series Windows")]
    vclock = clock.VirtualClock()
    with fake_arm.FakeARM(skus=[fake_arm.sku("Standard_D2_v4", "japaneast")], prices=live) as arm:
        prices = pricing.fetch_retail_prices("japaneast", endpoint=arm.endpoint)
        assert dict(prices.spot) == {"Standard_D2_v4": 0.0231}
        assert dict(prices.on_demand) == {"Standard_D2_v4": 0.115}
        cloud = factory.build(settings.Settings(cluster_name="aks"), vclock, memory.InMemoryCluster(vclock),
                              environ={}, region="japaneast", endpoint_url=arm.endpoint, polling_interval=0,
                              subscription_id=fake_arm.SUBSCRIPTION)
        [d2] = cloud.get_instance_types(None)
    spot = {o.zone: o.price for o in d2.offerings if o.capacity_type == labels.CAPACITY_TYPE_SPOT}
    assert spot == {f"japaneast-{z}": 0.0231 for z in "123"}
    assert {o.price for o in d2.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND} == {0.115}


def test_without_live_prices_spot_is_an_estimate_and_the_data_says_so() -> None:
    from karpy.cloudprovider import catalog
    from karpy.cloudprovider.azure import instancetypes as azure

    assert azure.data()["spot_prices"]["source"] == "estimate"
    [d2] = [t for t in azure.instance_types("japaneast") if t.name == "Standard_D2_v4"]
    on_demand = azure.on_demand_prices("japaneast")["Standard_D2_v4"]
    for o in d2.offerings:
        if o.capacity_type == "spot":
            assert o.price == catalog.spot_price("Standard_D2_v4", o.zone, on_demand)
