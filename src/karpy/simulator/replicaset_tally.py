"""Running counts of each ReplicaSet's pods, kept by the simulated ReplicaSet controller's Pod watch.

:class:`Tallies` holds, per ReplicaSet ``(namespace, name)`` and per owner uid (``""`` for an owner
reference without one), how many of its pods are active, ready, and active and matching the
ReplicaSet's selector - what its ``status`` reports - so a reconcile costs the same however many
pods the ReplicaSet owns. ``count`` / ``uncount`` follow each watch event of a pod; ``totals``
gives the counts for a ReplicaSet's uid, counting its pods again only when its selector changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Key = tuple[str, str]
PodCheck = Callable[[Mapping[str, Any]], bool]


class _Tally:
    __slots__ = ("by_uid", "selector")

    def __init__(self) -> None:
        self.by_uid: dict[str, list[int]] = {}
        """Owner uid -> [active, ready, active and matching the selector]."""
        self.selector: Any = None
        """The selector the third count was taken with (``None``: not known yet)."""


class Tallies:
    """See the module docstring; ``is_active`` / ``is_ready`` / ``controller_ref`` are the
    controller's own pod predicates (passed in so both always agree)."""

    def __init__(self, is_active: PodCheck, is_ready: PodCheck,
                 controller_ref: Callable[[Mapping[str, Any]], Mapping[str, Any] | None]) -> None:
        self._is_active = is_active
        self._is_ready = is_ready
        self._controller_ref = controller_ref
        self._tallies: dict[Key, _Tally] = {}
        self._counted: dict[Key, tuple[Key, str, list[int]]] = {}
        """Pod -> (its ReplicaSet, owner uid, what it adds to that tally)."""

    def _get(self, rs_key: Key) -> _Tally:
        tally = self._tallies.get(rs_key)
        if tally is None:
            tally = self._tallies[rs_key] = _Tally()
        return tally

    def count(self, rs_key: Key, pod_key: Key, pod: Mapping[str, Any], uid: str) -> None:
        """Pod ``pod_key`` (controlled by ``rs_key`` with owner ``uid``) now is ``pod``."""
        self.uncount(pod_key)
        tally = self._get(rs_key)
        active = self._is_active(pod)
        labeled = active and tally.selector is not None and \
            tally.selector.matches(pod.get("metadata", {}).get("labels") or {})
        adds = [int(active), int(active and self._is_ready(pod)), int(labeled)]
        totals = tally.by_uid.setdefault(uid, [0, 0, 0])
        for i, v in enumerate(adds):
            totals[i] += v
        self._counted[pod_key] = (rs_key, uid, adds)

    def uncount(self, pod_key: Key) -> None:
        """Pod ``pod_key`` no longer counts (gone, or counted again next)."""
        counted = self._counted.pop(pod_key, None)
        if counted is None:
            return
        totals = self._get(counted[0]).by_uid[counted[1]]
        for i, v in enumerate(counted[2]):
            totals[i] -= v

    def totals(self, rs_key: Key, uid: str, selector: Any,
               pods: Mapping[str, Mapping[str, Any]]) -> tuple[int, int, int]:
        """``(active, ready, fully labeled)`` for owner ``uid``; ``pods`` (name -> pod) are the
        ReplicaSet's indexed pods, counted again when ``selector`` is not the one last used."""
        tally = self._get(rs_key)
        if tally.selector != selector:
            tally.selector = selector
            tally.by_uid = {}
            for name, pod in pods.items():
                self._counted.pop((rs_key[0], name), None)
                ref = self._controller_ref(pod) or {}
                self.count(rs_key, (rs_key[0], name), pod, str(ref.get("uid") or ""))
        out = [0, 0, 0]
        for owner_uid in {uid, ""}:
            for i, v in enumerate(tally.by_uid.get(owner_uid, (0, 0, 0))):
                out[i] += v
        return out[0], out[1], out[2]
