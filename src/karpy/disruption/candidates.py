"""Which nodes the disruption controller may consider, and why the others are not.

Pure functions over typed objects (:class:`karpy.api.node.Node`, ``NodeClaim``, ``NodePool``,
``Pod``) plus :class:`Pdb`, a PodDisruptionBudget reduced to what the decision needs. Following
Karpenter v1 (``concepts/disruption``), a node is a candidate when:

* it is karpy's: it has a NodeClaim and a ``karpenter.sh/nodepool`` label naming a NodePool that
  exists;
* it is initialized (``karpenter.sh/initialized=true``) and not being deleted (neither the Node
  nor its NodeClaim);
* neither the node nor any of its pods carries ``karpenter.sh/do-not-disrupt: "true"``;
* every pod the drain would evict can be evicted (Karpenter's ``pdb.Limits.CanEvictPods`` over
  ``IsEvictable`` pods: DaemonSet pods included; terminal, terminating and static pods and pods
  tolerating the disrupted taint left out): no PodDisruptionBudget selecting it has
  ``status.disruptionsAllowed`` 0 (as kube-controller-manager keeps it; an unready pod under
  ``unhealthyPodEvictionPolicy: AlwaysAllow`` does not count), and no more than one budget selects it
  (the Eviction API refuses such a pod with a 500, so its node could never be drained).

:func:`why_not` returns ``None`` for a candidate, else a human message (for ``Unconsolidatable``
events). :func:`is_empty` says whether a node only runs DaemonSet / static pods and finished pods.
:func:`consolidation_disabled` says, in Karpenter's words, when a candidate's NodePool keeps
consolidation from considering it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpy.api import duration, labels, node, nodeclaim, nodepool, pod, selectors


@dataclass(frozen=True, slots=True)
class Pdb:
    """A PodDisruptionBudget: its namespace, name, pod selector and ``status.disruptionsAllowed``."""

    namespace: str
    name: str
    selector: selectors.LabelSelector
    disruptions_allowed: int
    always_evict_unhealthy: bool = False
    """``spec.unhealthyPodEvictionPolicy: AlwaysAllow``: unready pods may go whatever the budget."""

    def selects(self, p: pod.Pod) -> bool:
        return p.namespace == self.namespace and self.selector.matches(p.labels)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Budgets(tuple[Pdb, ...]):
    """The budgets of one pass, indexed by namespace on first use (a verdict reads only its pods'
    namespaces)."""

    _by_ns: dict[str, tuple[Pdb, ...]]

    def selecting(self, p: pod.Pod) -> tuple[Pdb, ...]:
        """The budgets selecting ``p`` (pods of one template share the answer)."""
        cache: dict[tuple[str, frozenset[tuple[str, str]]], tuple[Pdb, ...]] = self.__dict__.setdefault("_sel", {})
        key = (p.namespace, frozenset(p.labels.items()))
        found = cache.get(key)
        if found is None:
            found = cache[key] = tuple(b for b in self.in_namespace(p.namespace) if b.selector.matches(p.labels))
        return found

    def in_namespace(self, namespace: str) -> tuple[Pdb, ...]:
        index: dict[str, tuple[Pdb, ...]] | None = self.__dict__.get("_by_ns")
        if index is None:
            grouped: dict[str, list[Pdb]] = {}
            for b in self:
                grouped.setdefault(b.namespace, []).append(b)
            index = self.__dict__["_by_ns"] = {ns: tuple(bs) for ns, bs in grouped.items()}
        return index.get(namespace, ())


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node that may be disrupted, with its NodeClaim, NodePool and pods."""

    node: node.Node
    nodeclaim: nodeclaim.NodeClaim
    nodepool: nodepool.NodePool
    pods: tuple[pod.Pod, ...]

    @property
    def name(self) -> str:
        return self.node.name


def is_reschedulable(p: pod.Pod) -> bool:
    """A pod that would have to move elsewhere: not a DaemonSet/static pod, not finished or leaving."""
    return not (p.is_daemonset_pod or p.is_terminal or p.is_terminating)


def is_empty(pods: Iterable[pod.Pod]) -> bool:
    """No pods except DaemonSet/static pods and finished (or terminating) pods."""
    return not any(is_reschedulable(p) for p in pods)


def is_initialized(n: node.Node) -> bool:
    return n.labels.get(labels.INITIALIZED) == "true"


def node_do_not_disrupt(n: node.Node) -> bool:
    return n.annotations.get(labels.DO_NOT_DISRUPT) == "true"


def is_evictable(p: pod.Pod) -> bool:
    """A pod the drain would evict (Karpenter's ``IsEvictable``): not terminal or terminating, not a
    static pod, not tolerating the ``karpenter.sh/disrupted:NoSchedule`` taint."""
    if p.is_terminal or p.is_terminating or p.owner_kind == "Node" or \
            pod.MIRROR_POD_ANNOTATION in p.metadata.annotations:
        return False
    return not any(t.tolerates(DISRUPTED_TAINT) for t in p.tolerations)


DISRUPTED_TAINT = node.Taint(key=labels.TAINT_DISRUPTED, effect="NoSchedule")


def _unready(p: pod.Pod) -> bool:
    c = p.condition("Ready")
    return c is not None and c.status == "False"


def protection_ends(pods: Iterable[pod.Pod], now: float) -> float | None:
    """The earliest time after ``now`` at which a ``karpenter.sh/do-not-disrupt`` duration of one
    of ``pods`` runs out (counted from the pod's start, :meth:`karpy.api.pod.Pod.protected`); None
    when none will (no duration, ``"true"``, not started yet, or already passed)."""
    out: float | None = None
    for p in pods:
        value = p.metadata.annotations.get(labels.DO_NOT_DISRUPT)
        if not value or value == "true" or p.start_time is None or p.is_terminal:
            continue
        try:
            seconds = duration.parse_duration(value)
        except duration.DurationError:
            continue
        if seconds is not None and p.start_time + seconds > now:
            end = p.start_time + seconds
            out = end if out is None else min(out, end)
    return out


def blocking_pdb(p: pod.Pod, pdbs: Sequence[Pdb]) -> Pdb | None:
    """The first budget selecting ``p`` that allows no disruption now, else ``None``."""
    for budget in pdbs:
        if budget.disruptions_allowed <= 0 and budget.selects(p):  # the cheap test first
            if budget.always_evict_unhealthy and _unready(p):
                continue
            return budget
    return None


def eviction_blocked(p: pod.Pod, pdbs: Sequence[Pdb]) -> str | None:
    """Why the Eviction API will not let ``p`` go now (a blocking budget, or more than one budget), else
    ``None``."""
    selecting = pdbs.selecting(p) if isinstance(pdbs, Budgets) else \
        [b for b in pdbs if b.namespace == p.namespace and b.selector.matches(p.labels)]
    if len(selecting) > 1:
        return (f'pod "{p.key}" is selected by more than one PodDisruptionBudget '
                f'({", ".join(b.key for b in selecting)}), which the Eviction API refuses')
    budget = blocking_pdb(p, selecting)
    if budget is not None:
        return f'pdb "{budget.namespace}/{budget.name}" prevents pod evictions'
    return None


def why_not(
    n: node.Node,
    claim: nodeclaim.NodeClaim | None,
    pool: nodepool.NodePool | None,
    pods: Sequence[pod.Pod],
    pdbs: Sequence[Pdb] = (),
    now: float | None = None,
    *,
    eventual: bool = False,
) -> str | None:
    """``None`` when ``n`` is a disruption candidate, else why not (a human message).

    ``now`` lets a ``karpenter.sh/do-not-disrupt`` duration expire; without it only ``"true"``
    protects. ``eventual``: for an eventual disruption (drift), a NodeClaim with a
    ``terminationGracePeriod`` is a candidate whatever its pods (do-not-disrupt, blocking PDBs):
    the grace period bounds the drain (Karpenter ``NewCandidate``, ``EventualDisruptionClass``)."""
    pool_name = n.labels.get(labels.NODEPOOL)
    if claim is None or not pool_name:
        return "node is not managed by karpy"
    if pool is None:
        return f'nodepool "{pool_name}" not found'
    if not is_initialized(n):
        return "node is not initialized"
    if n.deleting or claim.metadata.deletion_timestamp is not None:
        return "node is deleting or marked for deletion"
    if node_do_not_disrupt(n):
        return f'disruption is blocked through the "{labels.DO_NOT_DISRUPT}" annotation'
    if eventual and claim.spec.termination_grace_period is not None:
        return None
    for p in pods:
        if p.is_terminal or p.is_terminating:
            continue
        if p.do_not_disrupt if now is None else p.protected(now):
            return f'pod "{p.key}" has "{labels.DO_NOT_DISRUPT}" annotation'
    if pdbs:
        for p in pods:
            if not is_evictable(p):
                continue
            why = eviction_blocked(p, pdbs)
            if why is not None:
                return why
    return None


def candidate(
    n: node.Node,
    claim: nodeclaim.NodeClaim | None,
    pool: nodepool.NodePool | None,
    pods: Sequence[pod.Pod],
    pdbs: Sequence[Pdb] = (),
    now: float | None = None,
    *,
    eventual: bool = False,
) -> Candidate | str:
    """A :class:`Candidate`, or the reason ``n`` is not one (``eventual``: see :func:`why_not`)."""
    reason = why_not(n, claim, pool, pods, pdbs, now, eventual=eventual)
    if reason is not None:
        return reason
    assert claim is not None and pool is not None
    return Candidate(node=n, nodeclaim=claim, nodepool=pool, pods=tuple(pods))


def consolidation_disabled(c: Candidate) -> str | None:
    """Karpenter's ``Unconsolidatable`` message when ``c``'s NodePool keeps consolidation from
    considering it, else ``None`` (v1.14 ``consolidation.ShouldDisrupt``): ``consolidateAfter:
    Never`` disables it for every node; ``WhenEmpty`` for every node that is not empty (empty ones
    are emptiness' business)."""
    d = c.nodepool.disruption
    name = c.nodepool.metadata.name
    if c.nodepool.is_static:
        return None  # consolidation skips static NodePools without a word (Karpenter's ShouldDisrupt)
    if d.consolidate_after is None:
        return f'NodePool "{name}" has consolidation disabled'
    if d.consolidation_policy == nodepool.WHEN_EMPTY and not is_empty(c.pods):
        return f'NodePool "{name}" has consolidation policy WhenEmpty, but node is not empty'
    return None


def order_drifted(cands: Sequence[Candidate]) -> list[Candidate]:
    """Karpenter v1.14's drift order: the NodeClaim that drifted first goes first (its ``Drifted``
    condition's ``lastTransitionTime``, ``drift.go`` ``ComputeCommands``); ties by name."""
    def key(c: Candidate) -> tuple[float, str]:
        cond = c.nodeclaim.condition(nodeclaim.DRIFTED)
        when = cond.last_transition_time if cond is not None else None
        return (when if when is not None else math.inf, c.name)
    return sorted(cands, key=key)
