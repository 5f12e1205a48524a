"""The ``karpenter.azure.com/sku-storage-ultra-ssd`` label, as Karpenter's Azure provider resolves it.

* :func:`requested`: a NodeClaim's requirements allow ``true`` and not ``false`` (an unsaid or ambiguous
  requirement is ``false``: ``resolveUltraSSDRequested``);
* :func:`available`: whether a size's Resource SKU record has Ultra SSD in a zone (``ultra_ssd_zones``, the
  zone's number) or, for a regional VM (zone ``""``), on the SKU itself (``ultra_ssd_regional``);
* :func:`label`: the value every node gets (``"true"`` only when its VM has Ultra SSD enabled).

Pure (no Azure SDK): the simulated cloud uses it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import labels, selectors
from karpy.cloudprovider.fake import capacity

KEY = labels.AZURE_SKU_STORAGE_ULTRA_SSD


def requested(requirements: Sequence[selectors.NodeSelectorRequirement]) -> bool:
    reqs = [r for r in requirements if r.key == KEY]
    if not reqs:
        return False
    return (all(capacity.requirement_holds(r, "true") for r in reqs)
            and not all(capacity.requirement_holds(r, "false") for r in reqs))


def available(record: Mapping[str, Any], zone: str) -> bool:
    if not zone:
        return bool(record.get("ultra_ssd_regional"))
    return zone.rsplit("-", 1)[-1] in (record.get("ultra_ssd_zones") or ())


def label(enabled: bool) -> str:
    return "true" if enabled else "false"
