"""Node selector requirements as a set algebra: what values each label key may take on a node.

This is the core of Karpenter's scheduling: a NodePool, a NodeClaim, an instance type and a pod
each constrain node labels, and a pod fits a node shape when the constraints on every shared key
still admit something. :class:`Requirements` maps keys to :class:`karpy.scheduling.requirement.Requirement`
(see that module for the semantics of one key, and where karpy is more exact than Karpenter).

What a caller may rely on: ``Requirements`` is immutable, hashable and compared by value, so it can
key caches; ``compatible`` / ``intersects`` return ``None`` when fine, otherwise a reason a user can
act on; intersection is commutative, associative and idempotent (the property tests check it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from karpy.api import labels
from karpy.scheduling import requirement


class NodeSelectorRequirementLike(Protocol):
    """Anything shaped like a Kubernetes NodeSelectorRequirement with Karpenter's ``minValues``."""

    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def values(self) -> Sequence[str]: ...
    @property
    def min_values(self) -> int | None: ...


class Requirements(Mapping[str, requirement.Requirement]):
    """An immutable mapping from label key to :class:`requirement.Requirement`; equal keys intersect.

    Hashable and compared by value (two sets built in any order are equal), so the scheduler can
    cache compatibility by requirement sets. :attr:`signature` is a stable, readable string form.
    """

    __slots__ = ("_hash", "_reqs", "_sig")

    _reqs: dict[str, requirement.Requirement]
    _hash: int | None
    _sig: str | None

    def __init__(self, requirements: Iterable[requirement.Requirement] = ()) -> None:
        reqs: dict[str, requirement.Requirement] = {}
        for r in requirements:
            existing = reqs.get(r.key)
            reqs[r.key] = r if existing is None else existing.intersection(r)
        self._reqs = reqs
        self._hash = None
        self._sig = None

    @classmethod
    def _wrap(cls, reqs: dict[str, requirement.Requirement]) -> Requirements:
        out = object.__new__(cls)
        out._reqs = reqs
        out._hash = None
        out._sig = None
        return out

    @classmethod
    def of(cls, *requirements: requirement.Requirement) -> Requirements:
        return cls(requirements)

    @classmethod
    def from_node_selector_requirements(cls, reqs: Iterable[NodeSelectorRequirementLike]) -> Requirements:
        """From NodeSelectorRequirements; raises ``ValueError`` on a bad operator or values."""
        return cls(requirement.Requirement.new(r.key, r.operator, r.values, r.min_values) for r in reqs)

    @classmethod
    def from_labels(cls, node_labels: Mapping[str, str]) -> Requirements:
        """Each label ``k=v`` becomes ``k In [v]`` (a node's labels, a pod's nodeSelector)."""
        reqs: dict[str, requirement.Requirement] = {}
        normalized = labels.NORMALIZED_LABELS
        make = requirement.make
        for k, v in node_labels.items():
            key = normalized.get(k, k)
            r = make(key, False, frozenset((v,)), None, None, None, False)
            existing = reqs.get(key)
            reqs[key] = r if existing is None else existing.intersection(r)
        return cls._wrap(reqs)

    # -- Mapping -------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> requirement.Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    # -- algebra -------------------------------------------------------------------------------

    def intersect(self, other: Requirements) -> Requirements:
        """Key-wise intersection over the union of keys."""
        if not other._reqs or other is self:
            return self
        if not self._reqs:
            return other
        reqs = dict(self._reqs)
        for key, r in other._reqs.items():
            existing = reqs.get(key)
            reqs[key] = r if existing is None else existing.intersection(r)
        return Requirements._wrap(reqs)

    __and__ = intersect

    def add(self, *requirements: requirement.Requirement) -> Requirements:
        """A copy with ``requirements`` intersected in."""
        if not requirements:
            return self
        reqs = dict(self._reqs)
        for r in requirements:
            existing = reqs.get(r.key)
            reqs[r.key] = r if existing is None else existing.intersection(r)
        return Requirements._wrap(reqs)

    def compatible(self, other: Requirements, allow_undefined: frozenset[str] = labels.WELL_KNOWN_LABELS,
                   *, pod_name: str = "pod", node_name: str = "NodePool") -> str | None:
        """Karpenter's Compatible: may a pod requiring ``other`` run on a node shaped by ``self``?

        ``self`` is the node side (NodePool, NodeClaim, instance type), ``other`` the pod side. A key
        the pod constrains must be defined by the node side unless it is in ``allow_undefined`` or
        the pod's requirement admits an absent label (``NotIn``, ``DoesNotExist``); then every shared
        key must :meth:`intersect <intersects>`. Returns ``None`` or the reasons, ``; ``-joined.
        """
        mine = self._reqs
        for key, r in other._reqs.items():
            if key not in mine and not r._absent and key not in allow_undefined:
                return self._compatible_reasons(other, allow_undefined, pod_name, node_name)
        return self.intersects(other, pod_name=pod_name, node_name=node_name)

    def intersects(self, other: Requirements, *, pod_name: str = "pod",
                   node_name: str = "NodePool") -> str | None:
        """``None`` when every key both define still admits a value or an absent label, else why not.

        Two negative requirements (``NotIn`` / ``DoesNotExist``) always intersect: both admit an
        absent label.
        """
        mine, theirs = self._reqs, other._reqs
        small, large = (mine, theirs) if len(mine) <= len(theirs) else (theirs, mine)
        for key, r in small.items():
            o = large.get(key)
            if o is not None and not r.overlaps(o):
                return "; ".join(self._intersect_reasons(other, pod_name, node_name))
        return None

    def _intersect_reasons(self, other: Requirements, pod_name: str, node_name: str) -> list[str]:
        reasons = []
        for key in sorted(self._reqs.keys() & other._reqs.keys()):
            node_side, pod_side = self._reqs[key], other._reqs[key]
            if not node_side.overlaps(pod_side):
                reasons.append(f"key {key}: {pod_name} needs {pod_side.describe(requirement.DESCRIBE_MAX)}, "
                               f"{node_name} allows {node_side.describe(requirement.DESCRIBE_MAX)}")
        return reasons

    def _compatible_reasons(self, other: Requirements, allow_undefined: frozenset[str], pod_name: str,
                            node_name: str) -> str:
        reasons = []
        for key in sorted(other._reqs):
            r = other._reqs[key]
            if key not in self._reqs and not r._absent and key not in allow_undefined:
                reasons.append(f'label "{key}" is not defined by the {node_name}'
                               f"{_typo_hint(key, allow_undefined, self._reqs.keys())}")
        reasons.extend(self._intersect_reasons(other, pod_name, node_name))
        return "; ".join(reasons)

    # -- node labels and minValues ---------------------------------------------------------------

    def labels(self) -> dict[str, str]:
        """The labels a node launched from these requirements is sure to get.

        Keys whose requirement admits exactly one value (``In [v]``), except restricted labels
        (``kubernetes.io/hostname``, ``karpenter.sh/registered``, restricted domains). Unlike
        Karpenter, which picks an arbitrary (even random) value for multi-valued keys and leaves
        well-known keys to the cloud provider, karpy only writes values that are already decided.
        """
        out: dict[str, str] = {}
        for key, r in self._reqs.items():
            if not r.complement and len(r.values) == 1 and not labels.is_restricted(key):
                (out[key],) = r.values
        return out

    def min_values_violations(self, instance_type_labels: Iterable[Mapping[str, str]]) -> list[str]:
        """Keys whose ``minValues`` the given instance types (their labels) do not meet, sorted.

        Karpenter: the instance types left for a NodeClaim must offer at least ``minValues``
        distinct admitted values of each such key.
        """
        flexible = [r for r in self._reqs.values() if r.min_values is not None]
        if not flexible:
            return []
        seen: dict[str, set[str]] = {r.key: set() for r in flexible}
        for it_labels in instance_type_labels:
            for r in flexible:
                v = it_labels.get(r.key)
                if v is not None and r.has(v):
                    seen[r.key].add(v)
        return sorted(r.key for r in flexible if len(seen[r.key]) < (r.min_values or 0))

    def has_min_values(self) -> bool:
        """True when some requirement carries ``minValues``."""
        return any(r.min_values is not None for r in self._reqs.values())

    def to_node_selector_requirements(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """Exact ``(key, operator, values)`` terms, sorted by key, for writing a NodeClaim spec."""
        return [t for key in sorted(self._reqs) for t in self._reqs[key].to_node_selector_requirements()]

    # -- identity ------------------------------------------------------------------------------

    @property
    def signature(self) -> str:
        """A stable text form (same across processes): sorted ``key describe [minValues n]``."""
        sig = self._sig
        if sig is None:
            parts = []
            for key in sorted(self._reqs):
                r = self._reqs[key]
                mv = f" minValues {r.min_values}" if r.min_values is not None else ""
                parts.append(f"{key} {r.describe()}{mv}")
            sig = self._sig = ", ".join(parts)
        return sig

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Requirements):
            return NotImplemented
        if self._hash is not None and other._hash is not None and self._hash != other._hash:
            return False
        return self._reqs == other._reqs

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(frozenset(self._reqs.values()))
        return h

    def __repr__(self) -> str:
        return f"Requirements({self.signature})"


def _name_part(key: str) -> str:
    return key.split("/", 1)[1] if "/" in key else key


def _typo_hint(key: str, well_known: Iterable[str], defined: Iterable[str]) -> str:
    """`` (typo of "topology.kubernetes.io/zone"?)`` when ``key`` looks like a known key."""
    name = _name_part(key)
    for candidates in (sorted(well_known), sorted(defined)):
        for candidate in candidates:
            if candidate != key and (_name_part(candidate) == name or key in candidate):
                return f' (typo of "{candidate}"?)'
    return ""


EMPTY = Requirements()
"""Requirements with no keys: constrains nothing."""
