"""Static NodePools (``spec.replicas``): the NodeClaim a static NodePool launches, and which of its nodes go.

Karpenter v1.14 (``pkg/controllers/static``, ``disruption/staticdrift.go``) in karpy's words:

* :func:`template_claim`: a static NodePool's NodeClaim is made from its template alone, for no pod:
  the pool's requirements and labels, every instance type of the pool they admit with an available
  offering, cheapest first (Karpenter leaves the choice to the cloud provider's ``Create``, which
  launches the cheapest compatible offering: the same node). No DaemonSet overhead is counted.
* :func:`scale_up_count`: with ``running`` NodeClaims (not being deleted, not being disrupted) and
  ``pending`` ones being disrupted (drift: their replacement is on its way), nothing is launched while
  ``running + pending >= replicas``; else ``replicas - running`` within ``limits.nodes``, which counts
  every NodeClaim of the pool, deleting ones too (Karpenter's ``ReserveNodeCount``).
* :func:`scale_down_order`: ``running - replicas`` NodeClaims go, chosen as Karpenter's static
  deprovisioner chooses: NodeClaims not launched yet first, then empty nodes (only DaemonSet pods, none
  with an active ``karpenter.sh/do-not-disrupt``), then the rest with nodes holding do-not-disrupt pods
  last and otherwise the cheapest to disrupt first (rescheduling cost times the lifetime left).

Pure: no I/O, time passed in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype
from karpy.provisioning import results, templates

UNLIMITED = 1 << 62


def template_claim(pool: nodepool_mod.NodePool,
                   instance_types: Sequence[instancetype.InstanceType]) -> results.NewNodeClaim | None:
    """The NodeClaim ``pool`` launches for no pod, its instance types cheapest first; None when no
    instance type of the pool has an offering its requirements admit."""
    reqs = templates.nodepool_requirements(pool)
    table = templates.TypeTable([t for t in instance_types if templates._type_compatible(reqs, t)], [])
    info = table.info(reqs)
    ranked = sorted((float(info.price[i]), t.name, t) for i, t in enumerate(table.types) if info.mask[i])
    if not ranked:
        return None
    labels = dict(pool.template.labels)
    labels[wk.NODEPOOL] = pool.name
    return results.NewNodeClaim(
        nodepool=pool.name, requirements=reqs, instance_types=[t for _, _, t in ranked], pods=[], requests={},
        daemon_overhead={}, labels=labels, taints=tuple(pool.template.spec.taints),
        startup_taints=tuple(pool.template.spec.startup_taints), price=ranked[0][0])


@dataclass(frozen=True, slots=True)
class Counts:
    """A static NodePool's NodeClaims as Karpenter's NodePool state counts them."""

    running: int
    """Not being deleted, not held by a disruption command (launching ones included)."""
    pending: int
    """Held by a disruption command (a drift replacement is on its way): ``PendingDisruption``."""
    deleting: int


def held_by_disruption(taints: Sequence[Any]) -> bool:
    """A node with these taints is held by a disruption command (``karpenter.sh/disrupted``)."""
    return any(getattr(t, "key", None) == wk.TAINT_DISRUPTED for t in taints)


def count(claims: Sequence[nodeclaim_mod.NodeClaim], disrupting: Callable[[nodeclaim_mod.NodeClaim], bool],
          reserved: int = 0) -> Counts:
    """Count ``claims`` (one pool's); ``reserved``: created but not seen yet, counted as running."""
    deleting = sum(1 for c in claims if c.metadata.deletion_timestamp is not None)
    live = [c for c in claims if c.metadata.deletion_timestamp is None]
    pending = sum(1 for c in live if disrupting(c))
    return Counts(len(live) - pending + reserved, pending, deleting)


def scale_up_count(pool: nodepool_mod.NodePool, running: int, pending: int, deleting: int) -> int:
    """How many NodeClaims a static ``pool`` launches now (0 when it has enough or its node limit
    is reached)."""
    replicas = pool.replicas or 0
    if running + pending >= replicas:
        return 0
    limit = pool.node_limit
    room = UNLIMITED if limit is None else max(0, limit - running - pending - deleting)
    return max(0, min(replicas - running, room))


def scale_down_count(pool: nodepool_mod.NodePool, running: int) -> int:
    """How many of ``pool``'s running NodeClaims go (only running ones count: a NodeClaim being
    disrupted already has its replacement counted as running)."""
    return max(0, running - (pool.replicas or 0))


@dataclass(frozen=True, slots=True)
class Member:
    """One NodeClaim of a static NodePool as the scale-down sees it."""

    name: str
    launched: bool
    """It has a provider ID."""
    pods: tuple[pod_mod.Pod, ...] = ()
    """The pods on its node (DaemonSet pods included)."""
    lifetime_left: float = 1.0
    """The fraction of its ``expireAfter`` left (1 without expiry)."""


def _daemon(p: pod_mod.Pod) -> bool:
    return p.owner_kind == "DaemonSet"


def _eviction_cost(p: pod_mod.Pod) -> float:
    """Karpenter's ``EvictionCost``: 1, plus deletion cost / 2^27 and priority / 2^25, within [-10, 10]."""
    cost = 1.0
    raw = p.annotations.get("controller.kubernetes.io/pod-deletion-cost")
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += float(raw) / 2.0**27
    if p.priority:
        cost += p.priority / 2.0**25
    return max(-10.0, min(10.0, cost))


def scale_down_order(members: Sequence[Member], count: int, now: float) -> list[str]:
    """The ``count`` NodeClaims to delete, in Karpenter's order (see the module docstring)."""
    unlaunched = [m.name for m in members if not m.launched]
    chosen = unlaunched[:count]
    if len(chosen) >= count:
        return chosen
    launched = [m for m in members if m.launched]

    def protected(m: Member) -> bool:
        return any(p.protected(now) for p in m.pods)

    empty = [m for m in launched if all(_daemon(p) for p in m.pods) and not protected(m)]
    chosen += [m.name for m in empty[:count - len(chosen)]]
    if len(chosen) >= count:
        return chosen
    taken = set(chosen)
    rest = [m for m in launched if m.name not in taken]
    rest.sort(key=lambda m: (protected(m), sum(_eviction_cost(p) for p in m.pods) * m.lifetime_left, m.name))
    return chosen + [m.name for m in rest[:count - len(chosen)]]
