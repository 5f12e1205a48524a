"""Nodes nominated for pending pods: Karpenter's ``Cluster.NominateNodeForPod`` / ``IsNodeNominated``.

When a provisioning run plans a pending pod onto an existing node or an in-flight NodeClaim, the
provisioner nominates that node (or claim) here; the nomination lasts :func:`window` seconds
(Karpenter's ``max(2 * batchMaxDuration, 10s)``) and a later nomination extends it. The disruption
controller does not disrupt a nominated node (Karpenter's "node is nominated for a pending pod"),
so it reads this record instead of re-solving the pending pods on every pass.

A caller may rely on: :meth:`Nominations.nominated` is true from :meth:`Nominations.nominate`
until the window ends; :meth:`Nominations.names` lists every name nominated at a given time,
sorted; :meth:`Nominations.forget` drops a name (its node or claim is gone). Times are the
controllers' clock (virtual in the simulator).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

MIN_WINDOW = 10.0
"""Seconds: Karpenter's floor for the nomination window."""


def window(batch_max_duration: float) -> float:
    """How long a nomination lasts: ``max(2 * batchMaxDuration, 10s)``."""
    return max(2.0 * batch_max_duration, MIN_WINDOW)


class Nominations:
    """Node (or in-flight NodeClaim) name -> the time its nomination ends."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._planned: dict[str, str] = {}
        """Pod key -> the node or NodeClaim the last provisioning run planned it onto."""

    def nominate(self, names: Iterable[str], now: float, seconds: float) -> None:
        """Nominate ``names`` until ``now + seconds`` (extending, never shortening, a nomination)."""
        until = now + seconds
        for name in names:
            if self._until.get(name, float("-inf")) < until:
                self._until[name] = until

    def plan(self, targets: Mapping[str, str]) -> None:
        """Record pod key -> planned node or NodeClaim name (a later plan of a pod replaces it)."""
        self._planned.update(targets)

    def nominated(self, name: str, now: float) -> bool:
        """Within a nomination window (planned targets are not looked at: see :meth:`names`)."""
        return self._until.get(name, float("-inf")) > now

    def names(self, now: float, pending: Callable[[str], bool] | None = None) -> set[str]:
        """Every name nominated at ``now``, plus, with ``pending`` (pod key -> still pending?), the
        planned targets of the pods still pending; expired windows and plans of pods no longer
        pending are dropped."""
        expired = [n for n, until in self._until.items() if until <= now]
        for n in expired:
            del self._until[n]
        out = set(self._until)
        if pending is not None:
            done = []
            for key, target in self._planned.items():
                if pending(key):
                    out.add(target)
                else:
                    done.append(key)
            for key in done:
                del self._planned[key]
        return out

    def forget(self, name: str) -> None:
        self._until.pop(name, None)
