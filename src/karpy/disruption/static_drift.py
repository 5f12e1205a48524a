"""Drift of a static NodePool's nodes: each drifted node is replaced one for one from the template.

Karpenter v1.14's ``StaticDrift`` method (``disruption/staticdrift.go``), which runs before the ordinary
drift method and takes the drifted candidates of static NodePools (``spec.replicas``) away from it:

* per NodePool, nothing while its ``Drifted`` budget allows no disruption, nor while a scale-down is
  still under way (running plus disrupting NodeClaims above ``replicas``);
* at most ``min(budget, drifted candidates)`` nodes, and no more than ``limits.nodes`` leaves room for
  beside every NodeClaim of the pool (running, disrupting, deleting): the replacement is launched before
  the drifted node goes, so it needs a node of the limit;
* each chosen node becomes its own command: *replace* it with one NodeClaim made from the pool's
  template (:func:`karpy.provisioning.static.template_claim`, the cheapest type the template admits),
  whatever its pods need. Candidates are taken in the order they drifted.

Pure: the caller passes the snapshot, the budgets and the pools' NodeClaim counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from karpy.disruption import candidates as candidates_mod
from karpy.disruption import consolidation
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import static


def split(cands: Sequence[candidates_mod.Candidate]
          ) -> tuple[list[candidates_mod.Candidate], list[candidates_mod.Candidate]]:
    """``(static NodePools' candidates, the others)``, each in the given order."""
    return [c for c in cands if c.nodepool.is_static], [c for c in cands if not c.nodepool.is_static]


def commands(snap: snapshot_mod.ClusterSnapshot, drifted: Sequence[candidates_mod.Candidate],
             allowed: Mapping[str, int], counts: Mapping[str, static.Counts]
             ) -> tuple[list[consolidation.Command], set[str]]:
    """The replace commands for the drifted static candidates, and the NodePools a budget blocked."""
    by_pool: dict[str, list[candidates_mod.Candidate]] = {}
    for c in candidates_mod.order_drifted(drifted):
        by_pool.setdefault(c.nodepool.name, []).append(c)
    out: list[consolidation.Command] = []
    blocked: set[str] = set()
    for name, group in sorted(by_pool.items()):
        pool = group[0].nodepool
        budget = allowed.get(name, 0)
        if budget <= 0:
            blocked.add(name)
            continue
        n = counts.get(name, static.Counts(0, 0, 0))
        if n.running + n.pending > (pool.replicas or 0):
            continue  # a scale-down is under way: drift waits for it
        wanted = min(budget, len(group))
        limit = pool.node_limit
        room = wanted if limit is None else max(0, limit - n.running - n.pending - n.deleting)
        take = min(wanted, room)
        if take <= 0:
            continue
        claim = static.template_claim(pool, snap.instance_types.get(name, ()))
        if claim is None:
            continue
        for c in group[:take]:
            before = snap.price_of(c.name) or 0.0
            out.append(consolidation.Command(
                consolidation.REASON_DRIFTED, consolidation.REPLACE, [c], [claim], before - claim.price,
                f"Replace drifted static node {c.name} with one {claim.instance_types[0].name} "
                f"from NodePool {name}'s template"))
    return out, blocked
