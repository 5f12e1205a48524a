"""Which namespaces a pod (anti-)affinity term counts pods in: its ``namespaces`` and ``namespaceSelector``.

Kubernetes (``k8s.io/kubernetes`` ``pkg/scheduler/framework`` ``AffinityTerm``) and Karpenter
(``pkg/controllers/provisioning/scheduling/topology.go``, ``buildNamespaceList``) agree:

- no ``namespaces`` and no ``namespaceSelector``: the pod's own namespace;
- ``namespaceSelector: {}`` (empty): every namespace;
- otherwise the union of the listed ``namespaces`` and the namespaces whose labels the selector
  matches (a ``namespaceSelector`` of ``null`` selects none).

:class:`NamespaceIndex` holds the namespaces' labels at the time of a scheduling run (the callers
keep it from a watch on Namespace objects); :func:`scope` resolves one term.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpy.api import selectors


@dataclass(frozen=True, slots=True)
class NamespaceIndex:
    """The cluster's Namespace objects (name, labels), immutable and hashable."""

    entries: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    _labels: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False, hash=False)
    _selected: dict[selectors.LabelSelector, frozenset[str]] = field(default_factory=dict, compare=False,
                                                                     repr=False, hash=False)

    def __post_init__(self) -> None:
        self._labels.update((name, dict(labels)) for name, labels in self.entries)

    @staticmethod
    def of(namespaces: Iterable[tuple[str, Mapping[str, str]]]) -> NamespaceIndex:
        """An index of ``(name, labels)`` pairs (in any order)."""
        return NamespaceIndex(tuple(sorted((str(n), tuple(sorted((str(k), str(v)) for k, v in labels.items())))
                                           for n, labels in namespaces)))

    @staticmethod
    def of_objects(objects: Iterable[Mapping[str, object]]) -> NamespaceIndex:
        """An index of Namespace API objects (plain dicts)."""
        pairs: list[tuple[str, Mapping[str, str]]] = []
        for obj in objects:
            md = obj.get("metadata")
            if not isinstance(md, Mapping) or not md.get("name"):
                continue
            labels = md.get("labels")
            pairs.append((str(md["name"]), labels if isinstance(labels, Mapping) else {}))
        return NamespaceIndex.of(pairs)

    def names(self) -> frozenset[str]:
        return frozenset(self._labels)

    def labels(self, namespace: str) -> Mapping[str, str]:
        """The labels of ``namespace`` (none when it is not known)."""
        return self._labels.get(namespace, {})

    def select(self, selector: selectors.LabelSelector) -> frozenset[str]:
        """The known namespaces whose labels ``selector`` matches."""
        hit = self._selected.get(selector)
        if hit is None:
            hit = frozenset(n for n, labels in self._labels.items() if selector.matches(labels))
            self._selected[selector] = hit
        return hit


EMPTY = NamespaceIndex()


def scope(own: str, namespaces: Iterable[str], selector: selectors.LabelSelector | None,
          index: NamespaceIndex | None) -> frozenset[str] | None:
    """The namespaces a term of a pod in ``own`` counts pods in; ``None`` means every namespace."""
    listed = frozenset(namespaces)
    if selector is None:
        return listed if listed else frozenset({own})
    if selector.is_empty:
        return None
    return listed | (index or EMPTY).select(selector)
