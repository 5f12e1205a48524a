"""Capacity-reservation slots counted down within one scheduling run.

A ``reserved`` offering (:mod:`karpy.cloudprovider.reservations`) says how many more instances its
reservation takes (``reservation_capacity``) and costs almost nothing, so every new NodeClaim that may
use it looks nearly free. Without counting, two NodeClaims of one run could both be priced into the
last slot of a reservation, and the second launch would find it full. :func:`count_down` walks the
run's new NodeClaims in creation order, as Karpenter's scheduler reserves offerings claim by claim:

* a claim whose cheapest compatible offering (its zones and capacity types, on its cheapest instance
  type) is a reserved one with slots left takes one slot of that reservation;
* a claim that could only have used reservations already taken by earlier claims is priced and ordered
  without them: its instance types re-sorted by their cheapest other offering, its price that one, and,
  when none of its reserved offerings has a slot left, its requirements get
  ``karpenter.sh/capacity-type NotIn [reserved]`` so the launch does not try the full reservation (a claim
  that may only be reserved is left as it is: its launch will find the reservation full).

Claims without reserved offerings pass through unchanged (the same objects). Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from karpy.api import labels as wk
from karpy.cloudprovider import instancetype
from karpy.provisioning import results
from karpy.scheduling import requirement
from karpy.scheduling import requirements as reqs_mod

RESERVED = wk.CAPACITY_TYPE_RESERVED


def _fits(o: instancetype.Offering, reqs: reqs_mod.Requirements) -> bool:
    if not o.available:
        return False
    zone = reqs.get(wk.ZONE)
    ct = reqs.get(wk.CAPACITY_TYPE)
    return ((zone is None or zone.has(o.zone)) and (ct is None or ct.has(o.capacity_type))
            and (not o.labels or instancetype.offering_admits(o, reqs.get)))


def _best(t: instancetype.InstanceType, reqs: reqs_mod.Requirements,
          left: Mapping[str, int]) -> instancetype.Offering | None:
    """The cheapest offering of ``t`` the claim may use, reserved ones only while their reservation has a slot."""
    best: instancetype.Offering | None = None
    for o in t.offerings:
        if not _fits(o, reqs):
            continue
        if o.capacity_type == RESERVED and left.get(o.reservation_id, 0) <= 0:
            continue
        if best is None or o.price < best.price:
            best = o
    return best


def slots(claims: Sequence[results.NewNodeClaim]) -> dict[str, int]:
    """Slots each reservation the claims' offerings name has at the start of the run."""
    out: dict[str, int] = {}
    types: dict[int, instancetype.InstanceType] = {}  # claims share type objects: each type once
    for c in claims:  # (zip and map run in C: a big run has thousands of claims of up to 60 types each)
        types.update(zip(map(id, c.instance_types), c.instance_types, strict=True))
    for t in types.values():
        for o in t.offerings:
            if o.capacity_type == RESERVED and o.reservation_id:
                out[o.reservation_id] = min(out.get(o.reservation_id, o.reservation_capacity),
                                            o.reservation_capacity)
    return out


def count_down(claims: Sequence[results.NewNodeClaim]) -> list[results.NewNodeClaim]:
    """The claims, reservation slots counted down in order (module docstring)."""
    left = slots(claims)
    if not left:
        return list(claims)
    out: list[results.NewNodeClaim] = []
    for c in claims:
        reserved_here = {o.reservation_id for t in c.instance_types for o in t.offerings
                         if o.capacity_type == RESERVED and o.reservation_id and _fits(o, c.requirements)}
        if not reserved_here:
            out.append(c)
            continue
        ranked = sorted(((b.price if (b := _best(t, c.requirements, left)) is not None else math.inf, i, t)
                         for i, t in enumerate(c.instance_types)), key=lambda x: (x[0], x[1]))
        first = _best(ranked[0][2], c.requirements, left)
        if first is not None and first.capacity_type == RESERVED:
            left[first.reservation_id] -= 1
            out.append(c)
            continue
        types = [t for price, _, t in ranked if price < math.inf] or list(c.instance_types)
        reqs = c.requirements
        ct = reqs.get(wk.CAPACITY_TYPE)
        others = ct is None or any(ct.has(v) for v in (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND))
        if others and all(left.get(r, 0) <= 0 for r in reserved_here):
            reqs = reqs.add(requirement.Requirement.new(wk.CAPACITY_TYPE, "NotIn", [RESERVED]))
        reqs = reqs.add(requirement.Requirement.new(wk.INSTANCE_TYPE, "In", [t.name for t in types]))
        out.append(dataclasses.replace(c, requirements=reqs, instance_types=types,
                                       price=ranked[0][0] if ranked[0][0] < math.inf else c.price))
    return out
