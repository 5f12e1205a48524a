"""Topology: spread constraints, pod affinity and anti-affinity, counted per domain.

A :class:`Term` is one constraint in a hashable form. Its ``kind`` is ``spread``, ``affinity`` or
``anti-affinity``; ``key`` is the topology key; ``selector`` and ``namespaces`` say which pods it
counts. The scheduler keeps one :class:`TermState` per distinct term with

- ``counts``: pods matching the selector per domain value (non-hostname keys) and per bin
  (``kubernetes.io/hostname``, where every node or new NodeClaim is its own domain);
- ``owners``: for anti-affinity, pods that *own* the term per domain, which is what the inverse
  rule needs: a pod matching the selector may not join a domain where an owner runs.

:func:`allowed_domains` and :func:`hostname_allowed` answer "where may one more pod of a group
go" for one term; the scheduler intersects the answers of every term a group owns or is subject
to. Semantics follow Kubernetes' scheduler and Karpenter's topology groups:

- spread: a domain ``d`` is allowed when ``count[d] + 1 - min(count) <= maxSkew``; ``min`` runs
  over the eligible domains (with ``nodeAffinityPolicy: Honor``, those the pod's node requirements
  admit) and is 0 when fewer than ``minDomains`` domains are eligible. For hostname spread a new
  node can always be created, so the minimum is 0.
- affinity: domains with at least one matching pod; when no pod matches anywhere and the pod
  matches its own selector, any domain (the first pod bootstraps the group).
- anti-affinity: domains with no matching pod; inverse: domains with no owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import podspec, selectors
from karpy.scheduling import namespaces as ns_mod
from karpy.scheduling import requirements as reqs_mod
from karpy.scheduling import taints as taints_mod

SPREAD = "spread"
AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """Which nodes' pods a topology spread counts, and which domains it spreads over.

    Kubernetes' ``nodeAffinityPolicy: Honor`` (the default) counts only nodes that match the
    pod's ``nodeSelector`` and one of its required node affinity terms; ``nodeTaintsPolicy:
    Honor`` only nodes whose taints the pod tolerates (Karpenter ``TopologyNodeFilter``).
    """

    requirements: tuple[reqs_mod.Requirements, ...] = ()
    """OR'd: the node must be compatible with one (empty: every node passes)."""
    tolerations: tuple[podspec.Toleration, ...] | None = None
    """None: taints are ignored."""

    def passes(self, node_reqs: reqs_mod.Requirements, taints: Iterable[Any], *, claim: bool) -> bool:
        """Does a node (``claim``: a new NodeClaim, whose undefined well-known labels may still
        match) with these requirements and taints count?"""
        if self.requirements:
            allow = wk.WELL_KNOWN_LABELS if claim else frozenset()
            if all(node_reqs.compatible(r, allow) is not None for r in self.requirements):
                return False
        if self.tolerations is not None:
            return taints_mod.first_untolerated(self.tolerations, list(taints), ("NoSchedule", "NoExecute")) is None
        return True


@dataclass(frozen=True, slots=True)
class Term:
    """One topology constraint, hashable, shared by every pod that carries it."""

    kind: str
    key: str
    selector: selectors.LabelSelector | None
    namespaces: frozenset[str] | None
    """Namespaces whose pods count; None means every namespace."""
    max_skew: int = 1
    min_domains: int | None = None
    honor_node_affinity: bool = True
    honor_node_taints: bool = False
    required: bool = True
    """False for preferred affinity terms and ScheduleAnyway spreads (relaxable)."""
    node_filter: NodeFilter | None = None
    """Spreads: which nodes' pods count (None: every node)."""
    _hash: int = field(init=False, repr=False, compare=False, default=0)
    hostname: bool = field(init=False, repr=False, compare=False, default=False)
    """Whether the key is the hostname (set from ``key``: read in the placement's inner loops, where
    a property's call cost adds up over hundreds of groups)."""

    def __post_init__(self) -> None:
        # terms key the run's dicts and are looked up once per placement: hash once
        object.__setattr__(self, "_hash", hash((self.kind, self.key, self.selector, self.namespaces, self.max_skew,
                                                self.min_domains, self.honor_node_affinity,
                                                self.honor_node_taints, self.required, self.node_filter)))
        object.__setattr__(self, "hostname", self.key == wk.HOSTNAME)

    def __hash__(self) -> int:
        return self._hash

    def matches(self, namespace: str, pod_labels: Mapping[str, str]) -> bool:
        """Does a pod in ``namespace`` with ``pod_labels`` count for this term?"""
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        if self.selector is None:
            return False
        return self.selector.matches(pod_labels)

    def describe(self) -> str:
        sel = str(self.selector) if self.selector is not None else "<none>"
        if self.kind == SPREAD:
            md = f", minDomains {self.min_domains}" if self.min_domains is not None else ""
            return f"topology spread on {self.key} (maxSkew {self.max_skew}{md}, selector {sel})"
        return f"pod {self.kind} on {self.key} (selector {sel})"


@dataclass(slots=True)
class TermState:
    """Counts of one term during one scheduling run."""

    term: Term
    counts: dict[str, int] = field(default_factory=dict)
    owners: dict[str, int] = field(default_factory=dict)
    bin_counts: IntArray = field(default_factory=lambda: np.zeros(64, dtype=np.int64))
    bin_owners: IntArray = field(default_factory=lambda: np.zeros(64, dtype=np.int64))

    def grow(self, size: int) -> None:
        if size > len(self.bin_counts):
            new = max(size, 2 * len(self.bin_counts))
            self.bin_counts = np.concatenate([self.bin_counts, np.zeros(new - len(self.bin_counts), np.int64)])
            self.bin_owners = np.concatenate([self.bin_owners, np.zeros(new - len(self.bin_owners), np.int64)])

    def record(self, domain: str | None, bin_index: int, count: int, *, owner: bool, match: bool) -> None:
        """Add ``count`` pods placed on bin ``bin_index`` whose domain for this key is ``domain``."""
        if self.term.hostname:
            self.grow(bin_index + 1)
            if match:
                self.bin_counts[bin_index] += count
            if owner:
                self.bin_owners[bin_index] += count
            return
        if domain is None:
            return
        if match:
            self.counts[domain] = self.counts.get(domain, 0) + count
        if owner:
            self.owners[domain] = self.owners.get(domain, 0) + count

    def total(self) -> int:
        if self.term.hostname:
            return int(self.bin_counts.sum())
        return sum(self.counts.values())


def allowed_domains(state: TermState, eligible: Iterable[str], *, self_match: bool) -> set[str]:
    """Domains (non-hostname key) where one more pod that owns ``state.term`` may go."""
    term = state.term
    domains = list(eligible)
    counts = state.counts
    if term.kind == SPREAD:
        if not domains:
            return set()
        values = [counts.get(d, 0) for d in domains]
        low = min(values)
        if term.min_domains is not None and len(domains) < term.min_domains:
            low = 0
        return {d for d, c in zip(domains, values, strict=True) if c + 1 - low <= term.max_skew}
    if term.kind == AFFINITY:
        present = {d for d in domains if counts.get(d, 0) > 0}
        if present:
            return present
        if self_match and state.total() == 0:
            return set(domains)
        return set()
    # anti-affinity owned by this pod: no matching pod in the domain
    return {d for d in domains if counts.get(d, 0) == 0}


def inverse_blocked(state: TermState) -> set[str]:
    """Domains an anti-affinity term's owners occupy (pods matching its selector must avoid them)."""
    return {d for d, c in state.owners.items() if c > 0}


def spread_water_fill(state: TermState, eligible: list[str], n: int,
                      prefer: Mapping[str, int] | None = None) -> dict[str, int]:
    """How many of ``n`` self-matching pods go to each domain under a spread term.

    Each pod goes to a domain with the fewest matching pods (always within maxSkew); ties go to
    the domain with more ``prefer`` (free existing capacity), then by name for determinism.
    """
    counts = {d: state.counts.get(d, 0) for d in eligible}
    out: dict[str, int] = {}
    if not eligible:
        return out
    prefer = prefer or {}
    order = sorted(eligible, key=lambda d: (-prefer.get(d, 0), d))
    rank = {d: i for i, d in enumerate(order)}
    import heapq

    heap = [(counts[d], rank[d], d) for d in eligible]
    heapq.heapify(heap)
    for _ in range(n):
        c, r, d = heapq.heappop(heap)
        out[d] = out.get(d, 0) + 1
        heapq.heappush(heap, (c + 1, r, d))
    return out


UNLIMITED = np.int64(1 << 40)
"""A per-bin pod cap that does not limit."""


def hostname_affinity_cap(state: TermState, size: int, match: bool, lo: int = 0) -> IntArray:
    """Per bin of ``lo:size``, for the owner of a required hostname pod affinity: no limit on bins that
    hold a pod the term selects, none elsewhere; while no bin holds one, a pod the term itself
    selects may start anywhere (then the others follow it)."""
    state.grow(size)
    if match and not state.bin_counts.any():
        return np.full(size - lo, UNLIMITED, dtype=np.int64)
    return np.where(state.bin_counts[lo:size] > 0, UNLIMITED, 0).astype(np.int64)


def hostname_caps(state: TermState, size: int, *, owner: bool, match: bool, lo: int = 0) -> IntArray | None:
    """Per-bin cap on how many more pods of a group may go, for one hostname term (bins ``lo:size``).

    ``owner``: the group carries the term; ``match``: the group's pods match the term's selector.
    Returns None when the term does not limit the group (or needs the per-pod path: affinity).
    A bin's cap depends on that bin's counts only.
    """
    state.grow(size)
    term = state.term
    counts = state.bin_counts[lo:size]
    big = np.int64(1 << 40)
    if owner and term.kind == SPREAD:
        cap = term.max_skew - counts if match else np.where(counts + 1 <= term.max_skew, big, 0)
        return np.maximum(cap, 0)
    if owner and term.kind == ANTI_AFFINITY:
        if match:
            return np.where(counts == 0, 1, 0).astype(np.int64)
        return np.where(counts == 0, big, 0).astype(np.int64)
    if not owner and term.kind == ANTI_AFFINITY and match:
        # inverse rule: pods matching someone's anti-affinity avoid the bins that someone is on
        return np.where(state.bin_owners[lo:size] == 0, big, 0).astype(np.int64)
    return None


LabelProbes = list[tuple[str, frozenset[str] | None]]
"""Label keys with the values looked for (None: any value)."""


def label_probes(terms: Iterable[Term]) -> LabelProbes | None:
    """One label each term's selector requires (its key, and the values it allows: None for any),
    merged by key: a pod whose labels have none of them is selected by no term. None when a term
    may select pods without any given label (an empty selector, or only ``NotIn`` / ``DoesNotExist``)."""
    by_key: dict[str, frozenset[str] | None] = {}
    for t in terms:
        if t.selector is None:  # selects no pod
            continue
        found = _required_label(t.selector)
        if found is None:
            return None
        key, allowed = found
        if key in by_key:
            was = by_key[key]
            allowed = None if was is None or allowed is None else was | allowed
        by_key[key] = allowed
    return list(by_key.items())


def _required_label(sel: selectors.LabelSelector) -> tuple[str, frozenset[str] | None] | None:
    for k, v in sel.match_labels.items():
        return k, frozenset({v})
    for e in sel.match_expressions:
        if e.operator == "In":
            return e.key, frozenset(e.values)
    for e in sel.match_expressions:
        if e.operator == "Exists":
            return e.key, None
    return None


def term_from_spread(c: podspec.TopologySpreadConstraint, namespace: str,
                     labels: Mapping[str, str] | None = None,
                     node_requirements: tuple[reqs_mod.Requirements, ...] = (),
                     tolerations: tuple[podspec.Toleration, ...] = ()) -> Term:
    """A :class:`Term` from a pod's TopologySpreadConstraint (``karpy.api.pod``).

    ``labels``: the pod's, for ``matchLabelKeys`` (each key the pod has adds ``key In [value]``
    to the selector, as kube-scheduler and Karpenter do); ``node_requirements`` (its nodeSelector
    with each OR'd required node affinity term) and ``tolerations`` make the :class:`NodeFilter`
    of ``nodeAffinityPolicy`` / ``nodeTaintsPolicy: Honor``."""
    selector = c.label_selector
    keys = [k for k in c.match_label_keys if labels is not None and k in labels]
    if selector is not None and keys:
        assert labels is not None
        extra = tuple(selectors.LabelSelectorRequirement(k, "In", (labels[k],)) for k in keys)
        selector = selectors.LabelSelector(selector.match_labels, selector.match_expressions + extra)
    honor_affinity = getattr(c, "node_affinity_policy", "Honor") != "Ignore"
    honor_taints = getattr(c, "node_taints_policy", "Ignore") == "Honor"
    reqs = tuple(r for r in node_requirements if len(r)) if honor_affinity else ()
    if len(reqs) < len(node_requirements):
        reqs = ()  # a term without requirements admits every node
    node_filter = NodeFilter(reqs, tuple(tolerations) if honor_taints else None) \
        if reqs or honor_taints else None
    return Term(
        kind=SPREAD,
        key=c.topology_key,
        selector=selector,
        namespaces=frozenset({namespace}),
        max_skew=int(c.max_skew),
        min_domains=c.min_domains,
        honor_node_affinity=honor_affinity,
        honor_node_taints=honor_taints,
        required=getattr(c, "when_unsatisfiable", "DoNotSchedule") == "DoNotSchedule",
        node_filter=node_filter,
    )


def term_from_affinity(t: podspec.PodAffinityTerm, namespace: str, *, anti: bool, required: bool,
                       namespaces: ns_mod.NamespaceIndex | None = None) -> Term:
    """A :class:`Term` from a PodAffinityTerm (``karpy.api.pod``); ``namespaces`` resolves a
    non-empty ``namespaceSelector`` (:func:`karpy.scheduling.namespaces.scope`)."""
    return Term(
        kind=ANTI_AFFINITY if anti else AFFINITY,
        key=t.topology_key,
        selector=t.label_selector,
        namespaces=ns_mod.scope(namespace, t.namespaces, t.namespace_selector, namespaces),
        required=required,
    )
