"""The newest node image versions of AKS's community galleries (Azure Compute Gallery), cached.

Karpenter's Azure provider (without AKS's managed galleries) boots the newest version of each image
definition of the AKSNodeClass's family: it lists the community gallery image versions
(``communityGalleries/<gallery>/images/<definition>/versions`` through azure-mgmt-compute) and takes the
one published last. :class:`ImageVersions` does the same. What a caller may rely on:

* :meth:`ImageVersions.latest` returns the version string (``"202602.10.0"``) published last, leaving out
  versions marked ``excludeFromLatest`` and those past their end-of-life date; ``None`` when the gallery
  has none or cannot be read;
* the answer is kept :data:`IMAGE_TTL` seconds (three days, as Karpenter Azure) on the injected clock,
  per (gallery, definition); a failed lookup keeps the last answer (stale is better than none) and is
  retried after :data:`RETRY_SECONDS`;
* the callers (:mod:`.images`) fall back to a pinned ``imageVersion`` or :data:`images.DEFAULT_VERSION`
  when it returns ``None``; azure.core errors never escape (they are logged).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock
from karpy.cloudprovider.azure import clients

log = logging.getLogger("karpy.cloudprovider.azure")

IMAGE_TTL = 3 * 24 * 3600.0
"""How long a resolved latest version is used before the gallery is asked again (Karpenter Azure: 3 days)."""
RETRY_SECONDS = 300.0
"""After a failed lookup, the next one waits this long."""


@dataclass(frozen=True, slots=True)
class _Entry:
    version: str | None
    until: float


def _field(item: Mapping[str, Any], *path: str) -> Any:
    value: Any = item
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _timestamp(text: Any) -> float | None:
    if not text:
        return None
    if isinstance(text, datetime.datetime):
        return text.timestamp()
    try:
        return clock.parse_rfc3339(str(text))
    except ValueError:
        return None


def newest(items: Sequence[Mapping[str, Any]], now: float) -> str | None:
    """The name of the version published last among ``items`` (ARM's wire form), leaving out versions
    excluded from latest or past their end of life."""
    best: tuple[float, str] | None = None
    for item in items:
        name = str(item.get("name") or "")
        props = item.get("properties") or {}
        if not name or _field(props, "excludeFromLatest") is True:
            continue
        eol = _timestamp(_field(props, "endOfLifeDate"))
        if eol is not None and eol <= now:
            continue
        published = _timestamp(_field(props, "publishedDate")) or 0.0
        if best is None or (published, name) > best:
            best = (published, name)
    return best[1] if best is not None else None


class ImageVersions:
    """Latest community gallery image versions of one region (see the module docstring)."""

    def __init__(self, azure: clients.AzureClients, region: str, clk: clock.Clock, ttl: float = IMAGE_TTL) -> None:
        self.azure = azure
        self.region = region
        self.clock = clk
        self.ttl = ttl
        self._cache: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()

    def _list(self, gallery: str, definition: str) -> list[dict[str, Any]]:
        def fetch() -> list[dict[str, Any]]:
            pages = self.azure.compute.community_gallery_image_versions.list(self.region, gallery, definition)
            return [v if isinstance(v, dict) else v.as_dict() for v in pages]

        found: list[dict[str, Any]] = clients.call(f"listing image versions of {gallery}/{definition}", fetch)
        return found

    def latest(self, gallery: str, definition: str) -> str | None:
        """The newest usable version of ``definition`` in community gallery ``gallery`` (cached)."""
        key = (gallery, definition)
        now = self.clock.now()
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and now < entry.until:
                return entry.version
        try:
            items = self._list(gallery, definition)
        except clients.AzureAPIError as exc:
            stale = entry.version if entry is not None else None
            log.warning("could not list image versions of %s/%s (%s); using %s", gallery, definition, exc.message,
                        stale or "the pinned or default version")
            with self._lock:
                self._cache[key] = _Entry(stale, now + RETRY_SECONDS)
            return stale
        version = newest(items, now)
        with self._lock:
            self._cache[key] = _Entry(version, now + self.ttl)
        return version

    def forget(self) -> None:
        """Drop every cached answer (the next lookups ask the gallery)."""
        with self._lock:
            self._cache.clear()
