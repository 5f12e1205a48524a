"""Pods grouped by everything the scheduler looks at, with Karpenter's preference relaxation.

Pods of one Deployment are interchangeable for scheduling: same requests, requirements,
tolerations, topology and labels. :func:`group_pods` folds them into :class:`PodGroup` s so the
scheduler decides for a group at once. Groups are ordered as Karpenter orders pods: larger cpu
first, then larger memory.

A group starts strict: the first required node-affinity term, the heaviest preferred
node-affinity term, preferred pod (anti-)affinity and ScheduleAnyway spreads all treated as
required, PreferNoSchedule taints treated as NoSchedule. When pods of the group cannot be placed,
:meth:`PodGroup.relax` drops one preference in Karpenter's order and the scheduler tries again:

1. a required node-affinity term beyond the last (terms are ORed: try the next one),
2. a preferred pod-affinity term, 3. a preferred pod anti-affinity term,
4. the heaviest preferred node-affinity term (the next heaviest becomes active),
5. a ScheduleAnyway topology spread, 6. PreferNoSchedule taints become tolerated.

The last required node-affinity term is never relaxed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.scheduling import namespaces as ns_mod
from karpy.scheduling import requirements as reqs_mod
from karpy.scheduling import topology


def _normalize(r: Any) -> Any:
    key = wk.NORMALIZED_LABELS.get(r.key)
    if key is None:
        return r
    return type(r)(key=key, operator=r.operator, values=r.values, min_values=r.min_values)


def _selector_requirements(node_selector: dict[str, str]) -> reqs_mod.Requirements:
    return reqs_mod.Requirements.from_labels(
        {wk.NORMALIZED_LABELS.get(k, k): v for k, v in node_selector.items()})


@dataclass(eq=False)
class PodGroup:
    """Interchangeable pending pods and their current (possibly relaxed) constraints."""

    pods: list[pod_mod.Pod]
    sample: pod_mod.Pod
    requests: dict[str, int]
    namespace: str
    labels: dict[str, str]
    host_ports: tuple[tuple[str, str, int], ...]
    tolerations: tuple[Any, ...]
    node_selector: dict[str, str]
    required_terms: list[Any]
    preferred_node: list[Any]
    pod_affinity_required: list[topology.Term]
    pod_affinity_preferred: list[topology.Term]
    anti_affinity_required: list[topology.Term]
    anti_affinity_preferred: list[topology.Term]
    spreads: list[topology.Term]
    tolerate_prefer_no_schedule: bool = False
    placed_count: int = 0
    relaxed: list[str] = field(default_factory=list)
    _requirements: reqs_mod.Requirements | None = None
    memo: dict[str, Any] = field(default_factory=dict)
    """What one run derived for this group (the run's own business; a split starts empty)."""

    @property
    def size(self) -> int:
        return len(self.pods)

    def requirements(self) -> reqs_mod.Requirements:
        """The node requirements now in force (nodeSelector, active terms)."""
        if self._requirements is None:
            r = _selector_requirements(self.node_selector)
            if self.preferred_node:
                heaviest = self.preferred_node[0]
                r = r.intersect(reqs_mod.Requirements.from_node_selector_requirements(
                    _normalize(e) for e in heaviest.preference.match_expressions))
            if self.required_terms:
                r = r.intersect(reqs_mod.Requirements.from_node_selector_requirements(
                    _normalize(e) for e in self.required_terms[0].match_expressions))
            self._requirements = r
        return self._requirements

    def strict_requirements(self) -> reqs_mod.Requirements:
        """Requirements without preferences: what the pod truly needs (explanations, and the
        domains a topology spread counts: Karpenter's ``StrictRequirements``)."""
        hit = self.memo.get("strict")
        if hit is not None and hit[0] == len(self.required_terms):  # relax() only drops terms
            return hit[1]  # type: ignore[no-any-return]
        r = self._strict_requirements()
        self.memo["strict"] = (len(self.required_terms), r)
        return r

    def _strict_requirements(self) -> reqs_mod.Requirements:
        r = _selector_requirements(self.node_selector)
        if self.required_terms:
            r = r.intersect(reqs_mod.Requirements.from_node_selector_requirements(
                _normalize(e) for e in self.required_terms[0].match_expressions))
        return r

    def strict_requirements_per_term(self) -> tuple[reqs_mod.Requirements, ...]:
        """The strict requirements with each OR'd required node affinity term in turn (the first
        is :meth:`strict_requirements`); a pod may run where any of them holds."""
        base = _selector_requirements(self.node_selector)
        if not self.required_terms:
            return (base,)
        return tuple(base.intersect(reqs_mod.Requirements.from_node_selector_requirements(
            _normalize(e) for e in t.match_expressions)) for t in self.required_terms)

    def terms(self) -> list[topology.Term]:
        """Topology terms this group must satisfy now."""
        return (self.spreads + self.pod_affinity_required + self.pod_affinity_preferred
                + self.anti_affinity_required + self.anti_affinity_preferred)

    def split(self, count: int) -> PodGroup:
        """Detach the last ``count`` pods into a new group with the same constraints."""
        tail = self.pods[len(self.pods) - count:]
        del self.pods[len(self.pods) - count:]
        clone = PodGroup(pods=tail, **{k: getattr(self, k) for k in self.__dataclass_fields__
                                       if k not in ("pods", "placed_count", "memo")})
        clone.required_terms = list(self.required_terms)
        clone.preferred_node = list(self.preferred_node)
        clone.pod_affinity_preferred = list(self.pod_affinity_preferred)
        clone.anti_affinity_preferred = list(self.anti_affinity_preferred)
        clone.spreads = list(self.spreads)
        clone.relaxed = list(self.relaxed)
        clone._requirements = None
        return clone

    def relax(self) -> str | None:
        """Drop one preference in Karpenter's order; None when nothing is left to relax."""
        self._requirements = None
        if len(self.required_terms) > 1:
            self.required_terms.pop(0)
            return self._note("required node affinity term (trying the next one)")
        if self.pod_affinity_preferred:
            self.pod_affinity_preferred.pop(0)
            return self._note("preferred pod affinity term")
        if self.anti_affinity_preferred:
            self.anti_affinity_preferred.pop(0)
            return self._note("preferred pod anti-affinity term")
        if self.preferred_node:
            self.preferred_node.pop(0)
            return self._note("preferred node affinity term (heaviest)")
        for i, t in enumerate(self.spreads):
            if not t.required:
                self.spreads.pop(i)
                return self._note(f"ScheduleAnyway topology spread on {t.key}")
        if not self.tolerate_prefer_no_schedule:
            self.tolerate_prefer_no_schedule = True
            return self._note("PreferNoSchedule taints")
        return None

    def _note(self, what: str) -> str:
        self.relaxed.append(what)
        return what


class _Sig:
    """A signature with its hash computed once (kept between runs, it is looked up every run)."""

    __slots__ = ("hash", "key")

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Sig) and self.hash == other.hash and self.key == other.key)


def _signature(p: pod_mod.Pod) -> _Sig:
    """What makes pods interchangeable; the spec parts as they are when hashable (hashed once),
    else their text."""
    head = (p.namespace, tuple(sorted(p.labels.items())), tuple(sorted(p.requests.items())),
            tuple(sorted(p.node_selector.items())))
    parts = (p.node_affinity, p.pod_affinity, p.pod_anti_affinity, p.tolerations, p.topology_spread_constraints)
    try:
        return _Sig((*head, *parts, p.host_ports()))
    except TypeError:
        return _Sig((*head, *(_hashable(v) for v in parts), p.host_ports()))


def _hashable(value: Any) -> Any:
    if value is None or (type(value) is tuple and not value):  # most pods
        return value
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def make_group(pods: list[pod_mod.Pod], namespaces: ns_mod.NamespaceIndex | None = None) -> PodGroup:
    """``namespaces``: the cluster's Namespaces, for pod affinity terms with a ``namespaceSelector``."""
    p = pods[0]
    ns = p.namespace
    na = p.node_affinity
    required_terms = list(na.required) if na is not None else []
    preferred = sorted(na.preferred, key=lambda t: -t.weight) if na is not None else []
    aff = p.pod_affinity
    anti = p.pod_anti_affinity

    def terms(src: Any, *, anti_: bool, required: bool) -> list[topology.Term]:
        if src is None:
            return []
        if required:
            return [topology.term_from_affinity(t, ns, anti=anti_, required=True, namespaces=namespaces)
                    for t in src.required]
        ordered = sorted(src.preferred, key=lambda w: -w.weight)
        return [topology.term_from_affinity(w.term, ns, anti=anti_, required=False,
                                            namespaces=namespaces) for w in ordered]

    return PodGroup(
        pods=pods,
        sample=p,
        requests=dict(p.requests),
        namespace=ns,
        labels=dict(p.labels),
        host_ports=p.host_ports(),
        tolerations=tuple(p.tolerations),
        node_selector=dict(p.node_selector),
        required_terms=required_terms,
        preferred_node=preferred,
        pod_affinity_required=terms(aff, anti_=False, required=True),
        pod_affinity_preferred=terms(aff, anti_=False, required=False),
        anti_affinity_required=terms(anti, anti_=True, required=True),
        anti_affinity_preferred=terms(anti, anti_=True, required=False),
        spreads=_spreads(p, required_terms),
    )


def _spreads(p: pod_mod.Pod, required_terms: list[Any]) -> list[topology.Term]:
    if not p.topology_spread_constraints:
        return []
    base = _selector_requirements(dict(p.node_selector))
    node_reqs = tuple(base.intersect(reqs_mod.Requirements.from_node_selector_requirements(
        _normalize(e) for e in t.match_expressions)) for t in required_terms) or (base,)
    return [topology.term_from_spread(c, p.namespace, p.labels, node_reqs, tuple(p.tolerations))
            for c in p.topology_spread_constraints]


def group_pods(pods: Iterable[pod_mod.Pod], memo: dict[int, tuple[pod_mod.Pod, Any]] | None = None,
               namespaces: ns_mod.NamespaceIndex | None = None) -> list[PodGroup]:
    """Group interchangeable pods, largest first (cpu, then memory), stable otherwise.

    ``memo``: pod signatures of the previous call, by Pod object (kept by a caller between runs;
    Pod models are immutable); it is left holding this call's."""
    buckets: dict[_Sig, list[pod_mod.Pod]] = {}
    if memo is None:
        for p in pods:
            sig = _signature(p)
            bucket = buckets.get(sig)
            if bucket is None:
                bucket = buckets[sig] = []
            bucket.append(p)
    else:
        now: dict[int, tuple[pod_mod.Pod, Any]] = {}
        seen: dict[_Sig, _Sig] = {}
        for p in pods:
            hit = memo.get(id(p))
            if hit is None or hit[0] is not p:
                sig = _signature(p)
                hit = (p, seen.setdefault(sig, sig))  # pods of one group share one signature object
            now[id(p)] = hit
            bucket = buckets.get(hit[1])
            if bucket is None:
                bucket = buckets[hit[1]] = []
            bucket.append(p)
        memo.clear()
        memo.update(now)
    groups = [make_group(b, namespaces) for b in buckets.values()]
    groups.sort(key=lambda g: (-g.requests.get("cpu", 0), -g.requests.get("memory", 0)))
    return groups


def all_pods(groups: Sequence[PodGroup]) -> list[pod_mod.Pod]:
    return [p for g in groups for p in g.pods]
