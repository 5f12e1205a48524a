"""VM prices from the Azure Retail Prices API, refreshed, with the packaged table as fallback.

:func:`fetch_retail_prices` reads ``GET {endpoint}/api/retail/prices`` (a public REST API, no
credentials) through azure-core's pipeline (retries, user agent), following ``NextPageLink``,
filtered to Virtual Machines consumption prices of one ARM region. It keeps Linux meters only
(``productName`` without ``Windows``), skips ``Low Priority`` meters, non-``Consumption`` types
(``DevTestConsumption``) and prices of 0, and files ``... Spot`` meters (``skuName`` / ``meterName``
``"D2 v4 Spot"``) as spot prices, the rest as on-demand; when a size has several meters the lowest
price wins. These are real spot prices; without them karpy estimates spot (see
:mod:`karpy.cloudprovider.azure.instancetypes`).

:class:`PriceBook` is what the provider asks: :meth:`PriceBook.on_demand` and :meth:`PriceBook.spot`
answer from the last successful fetch, else from the packaged table of
:mod:`karpy.cloudprovider.azure.instancetypes` (which has no spot prices). :meth:`PriceBook.refresh`
fetches again when :data:`REFRESH_SECONDS` have passed since the last attempt (time from the given
:class:`karpy.clock.Clock`); a failed fetch keeps the previous prices and is reported by
:attr:`PriceBook.last_error`, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from azure.core import PipelineClient
from azure.core import exceptions as azure_exceptions
from azure.core.pipeline.policies import RetryPolicy, UserAgentPolicy
from azure.core.rest import HttpRequest

from karpy import clock
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import clients, instancetypes

RETAIL_PRICES_ENDPOINT = "https://prices.azure.com"
API_VERSION = "2023-01-01-preview"
REFRESH_SECONDS = 12 * 3600.0
MAX_PAGES = 200


@dataclass(frozen=True)
class Prices:
    """On-demand and spot USD/hour per size name, as fetched for one region."""

    on_demand: Mapping[str, float] = field(default_factory=dict)
    spot: Mapping[str, float] = field(default_factory=dict)


def parse_items(items: list[Mapping[str, object]], on_demand: dict[str, float], spot: dict[str, float]) -> None:
    """File one page of ``Items`` into ``on_demand`` / ``spot`` (see the module docstring)."""
    for item in items:
        name = str(item.get("armSkuName") or "")
        product = str(item.get("productName") or "")
        meter = str(item.get("skuName") or item.get("meterName") or "")
        if not name or "Windows" in product or "Low Priority" in meter or item.get("type", "Consumption") != \
                "Consumption":
            continue
        price = item.get("retailPrice")
        if isinstance(price, bool) or not isinstance(price, (int, float)) or price <= 0:
            continue  # a free or malformed meter is no price
        target = spot if meter.endswith("Spot") else on_demand
        if name not in target or float(price) < target[name]:
            target[name] = float(price)


def fetch_retail_prices(region: str, *, endpoint: str = RETAIL_PRICES_ENDPOINT, retry_total: int = 3) -> Prices:
    """Every Linux VM price of ``region`` (raises :class:`clients.AzureAPIError` on failure)."""
    base = endpoint.rstrip("/")
    policies = [UserAgentPolicy(base_user_agent="karpy"), RetryPolicy(retry_total=retry_total)]
    on_demand: dict[str, float] = {}
    spot: dict[str, float] = {}
    query = (f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' "
             "and priceType eq 'Consumption'")
    client: PipelineClient[HttpRequest, Any] = PipelineClient(base_url=base, policies=policies)
    with client:
        request = HttpRequest("GET", f"{base}/api/retail/prices",
                              params={"api-version": API_VERSION, "$filter": query})
        for _ in range(MAX_PAGES):
            try:
                response = client.send_request(request)
                response.raise_for_status()
                page = json.loads(response.text())
            except (azure_exceptions.AzureError, ValueError) as exc:
                if isinstance(exc, azure_exceptions.AzureError):
                    raise clients.translate(exc, f"fetching Azure retail prices for {region}") from exc
                raise clients.AzureAPIError(f"fetching Azure retail prices for {region}: bad JSON ({exc})",
                                            retryable=True) from exc
            parse_items(list(page.get("Items") or ()), on_demand, spot)
            link = page.get("NextPageLink")
            if not link:
                break
            request = HttpRequest("GET", str(link))
    return Prices(on_demand=on_demand, spot=spot)


class PriceBook:
    """Prices of one region: the last fetch, else the packaged table (see the module docstring)."""

    def __init__(self, region: str, clk: clock.Clock,
                 fetch: Callable[[str], Prices] | None = None, *, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.region = region
        self._clock = clk
        self._fetch = fetch
        self._refresh_seconds = refresh_seconds
        self._packaged = instancetypes.on_demand_prices(region)
        self._live: Prices | None = None
        self._last_attempt: float | None = None
        self.last_error: errors.CloudProviderError | None = None
        self.version = 0
        """Changes whenever the prices change (callers may cache instance types keyed by it)."""

    def refresh(self, *, force: bool = False) -> bool:
        """Fetch when due (or ``force``); True when the prices changed."""
        if self._fetch is None:
            return False
        now = self._clock.now()
        if not force and self._last_attempt is not None and now - self._last_attempt < self._refresh_seconds:
            return False
        self._last_attempt = now
        try:
            prices = self._fetch(self.region)
        except errors.CloudProviderError as exc:
            self.last_error = exc
            return False
        self.last_error = None
        if not prices.on_demand:
            return False
        if self._live == prices:
            return False
        self._live = prices
        self.version += 1
        return True

    @property
    def live(self) -> bool:
        """True when prices come from a successful fetch rather than the packaged table."""
        return self._live is not None

    def on_demand(self, size: str) -> float | None:
        if self._live is not None and size in self._live.on_demand:
            return self._live.on_demand[size]
        return self._packaged.get(size)

    def spot(self, size: str) -> float | None:
        return self._live.spot.get(size) if self._live is not None else None

    def spot_prices(self) -> dict[str, float]:
        return dict(self._live.spot) if self._live is not None else {}
