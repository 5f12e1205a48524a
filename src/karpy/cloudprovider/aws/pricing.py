"""EC2 prices for one region: on-demand from the Pricing API, spot from the spot price history.

What a caller may rely on:

* :meth:`Prices.on_demand` is the hourly USD price of a Linux, shared-tenancy, no-preinstalled-software
  instance type from the Pricing API's ``GetProducts`` (``ServiceCode=AmazonEC2``, filtered by
  ``regionCode``), refreshed every :data:`ON_DEMAND_REFRESH` seconds of the clock (Karpenter: 12 h).
* :meth:`Prices.spot` is the latest ``DescribeSpotPriceHistory`` price of a type in a zone (Linux/UNIX
  products), refreshed every :data:`SPOT_REFRESH` seconds.
* Fallbacks, only when the API gave nothing for a type: the price table packaged with karpy
  (``data/instance-types.json``, us-east-1 list prices) for on-demand, and on-demand x the
  deterministic spot fraction (:func:`karpy.cloudprovider.spot.spot_price`) for spot. A failed
  refresh keeps the previous prices and is logged (the next call tries again after the interval).
* ``isolated_vpc`` (the ``ISOLATED_VPC`` setting), and GovCloud regions, as in Karpenter: the Pricing
  API (which has no VPC endpoint) is never called; on-demand prices are the packaged table. Spot
  prices still come from EC2's ``DescribeSpotPriceHistory`` (EC2 has a VPC endpoint).
* Thread-safe: one refresh runs at a time; readers never see a half-built table.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
from collections.abc import Iterable
from typing import Any

from karpy import clock as clock_mod
from karpy.cloudprovider import errors, spot
from karpy.cloudprovider.aws import instancetypes, session

log = logging.getLogger("karpy.cloudprovider.aws.pricing")

ON_DEMAND_REFRESH = 12 * 3600.0
SPOT_REFRESH = 3600.0
SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")


def parse_products(price_list: Iterable[str | dict[str, Any]]) -> dict[str, float]:
    """``{instance type: USD/h}`` from GetProducts ``PriceList`` entries (JSON strings)."""
    out: dict[str, float] = {}
    for entry in price_list:
        doc = json.loads(entry) if isinstance(entry, str) else entry
        attrs = (doc.get("product") or {}).get("attributes") or {}
        name = attrs.get("instanceType")
        if not name:
            continue
        for term in ((doc.get("terms") or {}).get("OnDemand") or {}).values():
            for dim in (term.get("priceDimensions") or {}).values():
                usd = (dim.get("pricePerUnit") or {}).get("USD")
                try:
                    price = float(str(usd))
                except (TypeError, ValueError):
                    continue
                if price > 0:
                    out[str(name)] = price
    return out


class Prices:
    """See the module docstring."""

    def __init__(self, sess: session.Session, clock: clock_mod.Clock, *, isolated_vpc: bool = False) -> None:
        self.session = sess
        self.isolated_vpc = isolated_vpc
        """``ISOLATED_VPC``: the Pricing API (no VPC endpoint) is never called; the packaged table is used."""
        self.clock = clock
        self.region = sess.region
        self._lock = threading.Lock()
        self._on_demand: dict[str, float] = {}
        self._spot: dict[tuple[str, str], float] = {}
        self._od_next = float("-inf")
        self._spot_next = float("-inf")
        self.on_demand_source = "none"
        self.spot_source = "none"

    def on_demand(self, instance_type: str) -> float | None:
        self._refresh()
        price = self._on_demand.get(instance_type)
        if price is not None:
            return price
        spec = instancetypes.data()["types"].get(instance_type)
        return float(spec["price"]) if spec is not None else None

    def spot(self, instance_type: str, zone: str) -> float | None:
        self._refresh()
        price = self._spot.get((instance_type, zone))
        if price is not None:
            return price
        od = self.on_demand(instance_type)
        return spot.spot_price(instance_type, zone, od) if od is not None else None

    def _refresh(self) -> None:
        now = self.clock.now()
        if now < self._od_next and now < self._spot_next:
            return
        with self._lock:
            if now >= self._od_next:
                self._od_next = now + ON_DEMAND_REFRESH
                self._refresh_on_demand()
            if now >= self._spot_next:
                self._spot_next = now + SPOT_REFRESH
                try:
                    spot = self._fetch_spot(now)
                except errors.CloudProviderError as exc:
                    log.warning("spot price history failed, keeping %d known prices: %s", len(self._spot), exc)
                else:
                    if spot:
                        self._spot = spot
                        self.spot_source = "spot-price-history"

    def _refresh_on_demand(self) -> None:
        if self.isolated_vpc or self.region.startswith("us-gov"):  # as Karpenter: no Pricing API there
            if self.on_demand_source == "none":
                log.info("on-demand prices come from karpy's packaged table (%s): the Pricing API is not called",
                         "ISOLATED_VPC" if self.isolated_vpc else "GovCloud has no Pricing API")
                self.on_demand_source = "packaged"
            self._od_next = float("inf")
            return
        try:
            prices = self._fetch_on_demand()
        except errors.CloudProviderError as exc:
            log.warning("on-demand prices from the Pricing API failed, keeping %d known prices "
                        "(fallback: karpy's packaged table): %s", len(self._on_demand), exc)
        else:
            if prices:
                self._on_demand = prices
                self.on_demand_source = "pricing-api"

    def _fetch_on_demand(self) -> dict[str, float]:
        filters = [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
            ("regionCode", self.region), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
            ("preInstalledSw", "NA"), ("capacitystatus", "Used"))]
        out: dict[str, float] = {}
        for page in session.paginate(self.session.pricing, "get_products", ServiceCode="AmazonEC2",
                                     Filters=filters):
            out.update(parse_products(page.get("PriceList") or ()))
        return out

    def _fetch_spot(self, now: float) -> dict[tuple[str, str], float]:
        start = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
        latest: dict[tuple[str, str], tuple[str, float]] = {}
        for page in session.paginate(self.session.ec2, "describe_spot_price_history",
                                     ProductDescriptions=list(SPOT_PRODUCTS), StartTime=start):
            for p in page.get("SpotPriceHistory") or ():
                try:
                    price = float(p["SpotPrice"])
                except (KeyError, TypeError, ValueError):
                    continue
                key = (str(p.get("InstanceType")), str(p.get("AvailabilityZone")))
                stamp = str(p.get("Timestamp") or "")
                cur = latest.get(key)
                if cur is None or stamp > cur[0]:
                    latest[key] = (stamp, price)
        return {k: v[1] for k, v in latest.items()}
