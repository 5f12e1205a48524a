"""What if these nodes went away? A scheduling simulation over a :class:`ClusterSnapshot`.

:func:`simulate_removal` takes candidates (or plain node names) out of the cluster and asks the
scheduling core (:class:`karpy.provisioning.scheduler.Scheduler`) where their reschedulable pods
would go: onto the free capacity of the remaining nodes and in-flight NodeClaims, else onto new
NodeClaims from the NodePools. Nodes being deleted are left out as bins too.

Pending pods and the pods of nodes already being deleted are scheduled in the same run, because
they compete for the same free capacity; but only the new NodeClaims that hold at least one of the
removed nodes' pods count as what the removal needs (a NodeClaim holding only other pods is the
provisioner's business, it would be launched anyway), and only the removed nodes' pods that fit
nowhere make ``all_placed`` false. NodePool limits are computed with the removed nodes' capacity
given back.

``cost_before`` is the summed price of the removed nodes (unknown prices count as 0 and are
listed in ``unknown_prices``); ``cost_after`` is the summed price of the needed NodeClaims'
cheapest options. Pure; one scheduler run per call.

:func:`carried_out` asks whether a plan of new NodeClaims is what the pods would really do: with the
plan's nodes up, the removed nodes' pods go where a scheduler puts them, not where the plan did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.api import capacitybuffer
from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import policies, results, scheduler


@dataclass(frozen=True)
class SimulationResult:
    """What removing ``removed`` would take."""

    removed: tuple[str, ...]
    pods: tuple[pod_mod.Pod, ...]
    """The removed nodes' reschedulable pods."""
    all_placed: bool
    unplaced: Mapping[str, str]
    """Pod key -> why it would fit nowhere (only the removed nodes' pods)."""
    new_claims: tuple[results.NewNodeClaim, ...]
    """The NodeClaims that hold the removed nodes' pods, cheapest option first in each."""
    placements: Mapping[str, tuple[pod_mod.Pod, ...]]
    """Existing node (or in-flight NodeClaim) name -> removed nodes' pods that would go there."""
    cost_before: float
    cost_after: float
    unknown_prices: tuple[str, ...] = field(default=())
    """Removed nodes whose price is unknown."""

    @property
    def savings(self) -> float:
        """US dollars per hour saved (negative when the new NodeClaims cost more)."""
        return self.cost_before - self.cost_after


def _names(nodes: Iterable[candidates_mod.Candidate | str]) -> list[str]:
    out: list[str] = []
    for n in nodes:
        name = n if isinstance(n, str) else n.name
        if name not in out:
            out.append(name)
    return out


def simulate_removal(
    snap: snapshot_mod.ClusterSnapshot,
    candidates: Sequence[candidates_mod.Candidate | str],
    *,
    instance_types: Mapping[str, Sequence[instancetype.InstanceType]] | None = None,
    with_nodepools: bool = True,
    extra_nodes: Sequence[results.ExistingNode] = (),
    held: frozenset[str] = frozenset(),
) -> SimulationResult:
    """Schedule the candidates' reschedulable pods on the rest of the cluster plus new NodeClaims.

    ``instance_types`` overrides the snapshot's per-NodePool instance types; ``with_nodepools``
    False allows no new NodeClaim at all (a pure fit check); ``extra_nodes`` are more bins (planned
    NodeClaims as in-flight nodes, for re-checking a plan); ``held``: keys of the candidates' pods
    that no eviction will move now (do-not-disrupt, a blocking PDB), left out as Karpenter's
    ``SimulateScheduling`` leaves out pods not currently reschedulable.
    """
    removed = _names(candidates)
    gone = set(removed) | set(snap.deleting_nodes())
    pods = [p for p in snap.pods_to_reschedule(removed) if p.key not in held]
    own = {p.key for p in pods}
    # the pods of deleting and marked nodes go first: they take the capacity already coming for them
    # (a started command's replacements), so the candidates' own pods show what they need themselves
    moving = [p for p in snap.pods_to_reschedule(snap.deleting_nodes()) if p.key not in own]
    others = [p for p in snap.pending_pods if p.key not in own]
    existing = [*snap.existing_nodes(gone), *extra_nodes]
    if snap.ignore_preferences:
        pods = [policies.without_preferences(p) for p in pods]
        moving = [policies.without_preferences(p) for p in moving]
        others = [policies.without_preferences(p) for p in others]
    res = scheduler.Scheduler(
        snap.nodepools if with_nodepools else (),
        instance_types if instance_types is not None else snap.instance_types,
        existing,
        snap.daemonsets,
        snap.usage_without(removed),
        cache=snap.scheduling_cache,
        namespaces=snap.namespaces,
    ).solve([*moving, *pods, *others])
    return _summarize(snap, removed, pods, own, res)


def _summarize(snap: snapshot_mod.ClusterSnapshot, removed: list[str], pods: list[pod_mod.Pod],
               own: set[str], res: results.Results) -> SimulationResult:
    unplaced = {k: v for k, v in res.errors.items() if k in own}
    placed_keys: set[str] = set()
    placements: dict[str, tuple[pod_mod.Pod, ...]] = {}
    for name, node_pods in res.existing.items():
        mine = tuple(p for p in node_pods if p.key in own)
        if mine:
            placements[name] = mine
            placed_keys.update(p.key for p in mine)
    # a CapacityBuffer's virtual pods that no longer fit need capacity too: the removal pays for it
    claims = tuple(c for c in res.new_claims if any(p.key in own or capacitybuffer.is_virtual(p) for p in c.pods))
    for c in claims:
        placed_keys.update(p.key for p in c.pods if p.key in own)
    for p in pods:
        if p.key not in placed_keys and p.key not in unplaced:
            unplaced[p.key] = "the scheduling simulation placed it nowhere"
    before = 0.0
    unknown: list[str] = []
    for name in removed:
        price = snap.price_of(name)
        if price is None:
            unknown.append(name)
        else:
            before += price
    return SimulationResult(
        removed=tuple(removed), pods=tuple(pods), all_placed=not unplaced, unplaced=unplaced,
        new_claims=claims, placements=placements, cost_before=before,
        cost_after=sum(c.price for c in claims), unknown_prices=tuple(unknown))


def carried_out(snap: snapshot_mod.ClusterSnapshot, candidates: Sequence[candidates_mod.Candidate],
                plan: Sequence[results.NewNodeClaim]) -> bool:
    """Whether the scheduling core, placing the candidates' pods (with the pending ones and those of
    deleting nodes, as :func:`simulate_removal` does) on the rest of the cluster plus ``plan``'s
    NodeClaims as in-flight nodes of their cheapest offering, places every pod and puts at least one
    on each planned node: what happens once the replacements are up and the pods are evicted (the
    kube-scheduler places them, first fit; the plan's own assignment is not kept). A plan it does
    not carry out leaves pods pending (a new launch) or a planned node empty or short, and its saving
    is not made."""
    bins = []
    for i, claim in enumerate(plan):
        t = claim.instance_types[0]
        zone, ct = claim.requirements.get(wk.ZONE), claim.requirements.get(wk.CAPACITY_TYPE)
        offers = [o for o in t.offerings if o.available and (zone is None or zone.has(o.zone))
                  and (ct is None or ct.has(o.capacity_type))]
        if not offers:
            return False
        offer = min(offers, key=lambda o: (o.price, o.zone, o.capacity_type))
        name = f"{claim.nodepool}-planned-{i}"
        bins.append(results.ExistingNode(
            name=name, labels={**t.labels, **claim.labels, wk.NODEPOOL: claim.nodepool, wk.ZONE: offer.zone,
                               wk.CAPACITY_TYPE: offer.capacity_type, wk.HOSTNAME: name},
            taints=tuple(claim.taints), allocatable=dict(t.allocatable), nodepool=claim.nodepool, in_flight=True))
    res = simulate_removal(snap, candidates, with_nodepools=False, extra_nodes=bins)
    return res.all_placed and all(b.name in res.placements for b in bins)
