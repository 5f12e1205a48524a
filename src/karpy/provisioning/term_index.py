"""Which running pod signatures each topology term counts, kept between scheduling runs.

A run reads, for every pod signature on the existing nodes (:class:`nodetable.NodeTable`'s
``signatures``: namespace, sorted labels, the id of the anti-affinity terms the pods own), the run's
topology terms it counts for (the term's selector matches its labels) or owns, as
``(position in the run's terms, match, owner)`` in the terms' order. Matching every signature
against every term each run costs signatures x terms selector matches (hundreds of Deployments:
hundreds of signatures, each run, and each disruption simulation); a term's matches are a pure
function of the term and the signature, so :class:`TermIndex` keeps, per term, the signature ids it
matches, extended only with the signatures added since it last looked. A run then reads its terms'
lists. Signature ids only grow (the table starts afresh, and this index with it, when they bloat).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.scheduling import topology

IntArray = npt.NDArray[np.int64]

Relevance = tuple[tuple[int, bool, bool], ...]
"""(position in the run's terms, match, owner), in the terms' order."""
MAX_TERMS = 4096
"""Terms whose matches are kept (all are dropped past it: terms of workloads long gone)."""


class TermIndex:
    """Per topology term, the signature ids it matches (see the module docstring)."""

    def __init__(self) -> None:
        self._matched: dict[topology.Term, tuple[int, list[int]]] = {}
        """Term -> (signatures checked so far, the ids of those it matches, ascending)."""
        self._labels: list[dict[str, str]] = []
        """Per signature id: its labels as a dict (what a selector reads)."""
        self._owning: list[int] = []
        """Ids of the signatures whose pods own anti-affinity terms, ascending."""
        self._checked = 0
        """Signatures looked at for :attr:`_owning` (and :attr:`_labels`)."""

    def relevance(self, terms: Sequence[topology.Term], signatures: Sequence[Any],
                  owned_sets: Sequence[tuple[topology.Term, ...]]) -> dict[int, Relevance]:
        """Per signature id of ``signatures`` (values of the table's registry: namespace, sorted
        labels, id in ``owned_sets``) whose pods count for or own one of ``terms`` (distinct): its
        :data:`Relevance`. Signatures relevant to none are left out."""
        total = len(signatures)
        for sid in range(self._checked, total):
            _, items, oid = signatures[sid]
            self._labels.append(dict(items))
            if oid:
                self._owning.append(sid)
        self._checked = total
        labels_ = self._labels
        found: dict[int, list[tuple[int, bool, bool]]] = {}
        for i, term in enumerate(terms):
            checked, sids = self._matched.get(term, (0, []))
            if checked < total:
                if len(self._matched) >= MAX_TERMS:
                    self._matched.clear()
                sids = sids + [sid for sid in range(checked, total)
                               if term.matches(signatures[sid][0], labels_[sid])]
                self._matched[term] = (total, sids)
            for sid in sids:
                hit = found.get(sid)
                if hit is None:
                    found[sid] = [(i, True, False)]
                else:
                    hit.append((i, True, False))
        if self._owning:
            position = {t: i for i, t in enumerate(terms)}
            for sid in self._owning:
                mine = {position[t] for t in owned_sets[signatures[sid][2]] if t in position}
                if mine:
                    matched = {i for i, _, _ in found.get(sid, ())}
                    found[sid] = [(i, i in matched, i in mine) for i in sorted(matched | mine)]
        return {sid: tuple(v) for sid, v in found.items()}


def batches(said: dict[int, Relevance], rows: dict[int, dict[int, int]]) -> list[tuple[Relevance, IntArray, IntArray]]:
    """The rows of ``rows`` (signature id -> {row: pods of it on the row}) per distinct relevance of
    ``said`` (:meth:`TermIndex.relevance`): (relevance, rows, pods on each), so that a run counts
    every signature sharing the terms it counts for in one go. A row repeats when several of its
    signatures share a relevance; signatures ``said`` leaves out are left out; in ``rows``' order of
    first signature."""
    out: dict[Relevance, tuple[list[int], list[int]]] = {}
    for sid, where in rows.items():
        hit = said.get(sid)
        if hit:
            batch = out.get(hit)
            if batch is None:
                batch = out[hit] = ([], [])
            batch[0].extend(where)
            batch[1].extend(where.values())
    return [(hit, np.array(at, dtype=np.int64), np.array(counts, dtype=np.int64)) for hit, (at, counts) in out.items()]
