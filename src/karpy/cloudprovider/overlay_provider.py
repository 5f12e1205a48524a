"""Any cloud provider with NodeOverlays applied: Karpenter v1.14's overlay decorator of the cloud provider.

With the ``NodeOverlay`` feature gate on, :func:`karpy.operator.register_all` hands every controller an
:class:`OverlaidProvider` around the cloud; the ``nodeoverlay`` controller (:mod:`karpy.controllers.nodeoverlay`)
evaluates the overlays against the undecorated cloud and gives the result to :meth:`OverlaidProvider.use`.
Every call goes to the cloud; three answers change:

* :meth:`OverlaidProvider.get_instance_types` of a NodePool returns its types with the overlays' prices and
  capacity (:meth:`karpy.cloudprovider.overlay.Store.apply`), so the provisioner's cheapest choice and
  consolidation's savings use them. A NodePool the overlays were not evaluated for yet is evaluated first
  (``refresh``); one that still is not raises a retryable error naming it (Karpenter's
  ``UnevaluatedNodePoolError``: the NodePool is skipped this pass). ``None`` (every type) is unchanged.
  Unchanged input types give the very same output objects, so the scheduler's tables stay cached.
* :meth:`OverlaidProvider.create` launches as Karpenter's AWS provider does when a price overlay applies to
  the claim's types (CreateFleet's ``prioritized`` strategies, priority = the overlaid price): the claim's
  instance types are tried one at a time, cheapest overlaid price first, until one launches (an
  insufficient-capacity error moves on to the next; the last one, naming every offering tried, is raised).
  The launched NodeClaim carries ``karpenter.sh/price-overlay-applied`` / ``karpenter.sh/capacity-overlay-applied``
  when overlays changed its types, and the capacity an overlay adds to its type in ``status.capacity`` and
  ``status.allocatable`` (what the device plugin configured for it will advertise). The cloud is asked
  without the requests of resources overlays add (it does not know its types have them).
* ``None`` NodePool, ``get``, ``list``, ``delete`` and the rest: the cloud's.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from karpy.api import labels, nodeclaim, nodeoverlay, nodepool, selectors
from karpy.cloudprovider import errors, instancetype, interface, overlay

UNEVALUATED_REASON = "UnevaluatedNodePool"


class OverlaidProvider:
    """A :class:`interface.CloudProvider` with NodeOverlays applied; see the module docstring."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.name = provider.name
        self.store = overlay.Store()
        self.refresh: Callable[[], None] | None = None
        """Evaluates the overlays now (set by the nodeoverlay controller) when a NodePool was not evaluated."""
        self._memo: dict[str, dict[int, tuple[instancetype.InstanceType, instancetype.InstanceType]]] = {}
        self._memo_store: overlay.Store | None = None
        self._last: dict[str, dict[str, instancetype.InstanceType]] = {}

    def use(self, store: overlay.Store) -> None:
        """Apply ``store`` from now on."""
        self.store = store

    # ---------------------------------------------------------------------------- instance types

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        types: builtins.list[instancetype.InstanceType] = self.provider.get_instance_types(pool)
        if pool is None:
            return types
        if pool.name not in self.store.evaluated and self.refresh is not None:
            self.refresh()
        store = self.store
        if pool.name not in store.evaluated:
            raise errors.CloudProviderError(f"applying nodeoverlays: NodePool {pool.name} has not been evaluated "
                                            "for NodeOverlays yet", reason=UNEVALUATED_REASON, retryable=True)
        if self._memo_store is not store:
            self._memo, self._memo_store = {}, store
        old = self._memo.get(pool.name, {})
        memo: dict[int, tuple[instancetype.InstanceType, instancetype.InstanceType]] = {}
        out: builtins.list[instancetype.InstanceType] = []
        for t in types:
            hit = old.get(id(t))
            adjusted = hit[1] if hit is not None and hit[0] is t else store.apply(pool.name, (t,))[0]
            memo[id(t)] = (t, adjusted)
            out.append(adjusted)
        self._memo[pool.name] = memo
        self._last[pool.name] = {t.name: t for t in out}
        return out

    # ---------------------------------------------------------------------------------- launching

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        pool = claim.metadata.labels.get(labels.NODEPOOL, "")
        names = _instance_type_values(claim)
        store = self.store
        priced = [n for n in names if store.price_overlaid(pool, n)]
        cloud_claim = _without_overlay_resources(claim, {r for n in names for r in store.capacity_overlay(pool, n)})
        if not priced or pool not in self._last:
            return self._annotated(dataclasses.replace(self.provider.create(cloud_claim), spec=claim.spec), claim, pool)
        known = self._last[pool]
        order = sorted((n for n in names if n in known),
                       key=lambda n: (_cheapest(known[n], claim), n))
        tried: builtins.list[errors.OfferingKey] = []
        last: errors.InsufficientCapacityError | None = None
        for name in order:
            try:
                launched = self.provider.create(_narrowed(cloud_claim, name))
            except errors.InsufficientCapacityError as exc:
                tried.extend(exc.offerings)
                last = exc
                continue
            return self._annotated(dataclasses.replace(launched, spec=claim.spec), claim, pool)
        if last is None:
            return self._annotated(dataclasses.replace(self.provider.create(cloud_claim), spec=claim.spec), claim, pool)
        raise errors.InsufficientCapacityError(tried)

    def _annotated(self, launched: nodeclaim.NodeClaim, claim: nodeclaim.NodeClaim, pool: str) -> nodeclaim.NodeClaim:
        names = _instance_type_values(claim)
        notes: dict[str, str] = {}
        if any(self.store.price_overlaid(pool, n) for n in names):
            notes[nodeoverlay.PRICE_OVERLAY_APPLIED] = "true"
        if any(self.store.capacity_overlay(pool, n) for n in names):
            notes[nodeoverlay.CAPACITY_OVERLAY_APPLIED] = "true"
        added = self.store.capacity_overlay(pool, launched.metadata.labels.get(labels.INSTANCE_TYPE, ""))
        if not notes and not added:
            return launched
        status = launched.status
        if added:
            status = dataclasses.replace(status, capacity={**status.capacity, **added},
                                         allocatable={**status.allocatable, **added})
        meta = dataclasses.replace(launched.metadata, annotations={**launched.metadata.annotations, **notes})
        return dataclasses.replace(launched, metadata=meta, status=status)

    # ------------------------------------------------------------------------------ the rest as is

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self.provider.delete(claim)

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return self.provider.get(provider_id)  # type: ignore[no-any-return]

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        return self.provider.list()  # type: ignore[no-any-return]

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        return self.provider.is_drifted(claim)  # type: ignore[no-any-return]

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        return self.provider.repair_policies()  # type: ignore[no-any-return]

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return self.provider.resolve_node_class(node_class)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:  # interruption queue, billing, cost, hooks of the wrapped provider
        return getattr(self.provider, name)


def _instance_type_values(claim: nodeclaim.NodeClaim) -> tuple[str, ...]:
    for r in claim.spec.requirements:
        if r.key == labels.INSTANCE_TYPE and r.operator == "In":
            return r.values
    return ()


def _allowed(claim: nodeclaim.NodeClaim, key: str) -> frozenset[str] | None:
    for r in claim.spec.requirements:
        if r.key == key and r.operator == "In":
            return frozenset(r.values)
    return None


def _cheapest(t: instancetype.InstanceType, claim: nodeclaim.NodeClaim) -> float:
    """The lowest overlaid price of ``t``'s available offerings the claim allows (infinite when none)."""
    price = t.cheapest_price(_allowed(claim, labels.ZONE), _allowed(claim, labels.CAPACITY_TYPE))
    return price if price is not None else float("inf")


def _without_overlay_resources(claim: nodeclaim.NodeClaim, added: set[str]) -> nodeclaim.NodeClaim:
    """``claim`` without the requests of resources overlays add (the cloud does not know its types have them;
    Karpenter's providers launch from the overlaid types)."""
    requests = claim.spec.resources_requests
    if not added or not any(r in requests for r in added):
        return claim
    kept = {r: v for r, v in requests.items() if r not in added}
    return dataclasses.replace(claim, spec=dataclasses.replace(claim.spec, resources_requests=kept))


def _narrowed(claim: nodeclaim.NodeClaim, name: str) -> nodeclaim.NodeClaim:
    reqs = tuple(selectors.NodeSelectorRequirement(r.key, r.operator, (name,), None)
                 if r.key == labels.INSTANCE_TYPE and r.operator == "In" else r for r in claim.spec.requirements)
    return dataclasses.replace(claim, spec=dataclasses.replace(claim.spec, requirements=reqs))
