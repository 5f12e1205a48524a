"""What a NodeClaim without a Node is expected to be, for the scheduling core and NodePool limits.

* :func:`claim_labels`: the labels its node will have for sure (its labels plus the values its
  requirements decide);
* :func:`instance_type_options`: its ``node.kubernetes.io/instance-type In [...]`` values;
* :func:`cheapest_resources`: the allocatable (or capacity) of its cheapest known option, looked up
  in a :class:`TypeIndex` (its NodePool's instance types first, then any NodePool's); its requests
  when no option is known.

Pure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import quantity, selectors, stored
from karpy.cloudprovider import instancetype
from karpy.scheduling import requirements as reqs_mod

DECIDED_CACHE_SIZE = 4096
_DECIDED: stored.ByIdentity[dict[str, str]] = stored.ByIdentity(DECIDED_CACHE_SIZE)
"""The labels a requirements tuple decides, by the tuple's identity (the entry keeps it alive; it
is immutable): NodeClaims parsed from one stored requirements list share one tuple."""


def decided_labels(requirements: tuple[selectors.NodeSelectorRequirement, ...]) -> Mapping[str, str]:
    """The labels ``requirements`` decide (one value each); none when karpy cannot read them.
    Read-only: shared by every caller with the same tuple."""
    def decide() -> dict[str, str]:
        labels: dict[str, str] = {}
        # hand-written requirements karpy cannot read: keep the labels only
        with contextlib.suppress(ValueError):
            labels = reqs_mod.Requirements.from_node_selector_requirements(requirements).labels()
        return labels

    if type(requirements) is not tuple:  # a mutable sequence: its identity says nothing
        return decide()
    return _DECIDED.get(requirements, decide)


def claim_labels(claim: nodeclaim_mod.NodeClaim) -> dict[str, str]:
    """The labels a NodeClaim's node will have for sure: its labels plus decided requirements."""
    out = dict(decided_labels(claim.spec.requirements))
    out.update(claim.labels)
    return out


def instance_type_options(claim: nodeclaim_mod.NodeClaim) -> list[str]:
    """The ``node.kubernetes.io/instance-type In [...]`` values of a NodeClaim (may be empty)."""
    for r in claim.spec.requirements:
        if r.key == wk.INSTANCE_TYPE and r.operator == "In":
            return list(r.values)
    return []


class TypeIndex:
    """Instance types by name, per NodePool first, then across NodePools."""

    def __init__(self, by_pool: Mapping[str, Sequence[instancetype.InstanceType]] | None) -> None:
        self.by_pool = {pool: {t.name: t for t in types} for pool, types in (by_pool or {}).items()}
        self.any: dict[str, instancetype.InstanceType] = {}
        for index in self.by_pool.values():
            for name, t in index.items():
                self.any.setdefault(name, t)

    def get(self, pool: str | None, name: str) -> instancetype.InstanceType | None:
        found = self.by_pool.get(pool or "", {}).get(name)
        return found if found is not None else self.any.get(name)


def cheapest_resources(claim: nodeclaim_mod.NodeClaim, types: TypeIndex,
                        *, allocatable: bool) -> quantity.ResourceList:
    """Allocatable (or capacity) of the claim's cheapest known option; its requests when none is known."""
    best: instancetype.InstanceType | None = None
    best_price = float("inf")
    for name in instance_type_options(claim):
        it = types.get(claim.nodepool_name, name)
        if it is None:
            continue
        price = it.cheapest_price()
        price = float("inf") if price is None else price
        if best is None or price < best_price or (price == best_price and it.name < best.name):
            best, best_price = it, price
    if best is None:
        return dict(claim.spec.resources_requests)
    return dict(best.allocatable if allocatable else best.capacity)
