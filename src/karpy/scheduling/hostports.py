"""Host port usage on one node: which (ip, protocol, port) triples the node's pods hold.

Kubernetes lets two pods share a node only if their host ports do not collide. Two entries collide
when protocol and port are equal and the IPs are equal or either is unspecified (``0.0.0.0`` or
``::``: a pod without ``hostIP`` binds every address). :func:`host_port` normalises an entry the way
the API defaults it: empty IP -> ``0.0.0.0``, empty protocol -> ``TCP``, IPs in canonical form
(``::ffff:10.0.0.1`` is ``10.0.0.1``).

:class:`HostPortUsage` is mutable (the scheduler adds pods as it packs them); use :meth:`copy` to
branch a simulation. Entries with port 0 are not host ports and are ignored.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from typing import NamedTuple

UNSPECIFIED_V4 = "0.0.0.0"
UNSPECIFIED_V6 = "::"
_UNSPECIFIED = frozenset({UNSPECIFIED_V4, UNSPECIFIED_V6})


class HostPort(NamedTuple):
    """One host port a pod binds, in normalised form (see :func:`host_port`)."""

    ip: str
    protocol: str
    port: int

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


@functools.lru_cache(maxsize=1024)
def _canonical_ip(ip: str) -> str:
    if not ip:
        return UNSPECIFIED_V4
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        raise ValueError(f"hostIP must be an IP address, got {ip!r}") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def host_port(ip: str | None, protocol: str | None, port: int) -> HostPort:
    """A normalised :class:`HostPort`; raises ``ValueError`` for a bad IP or port."""
    if not 0 <= port <= 65535:
        raise ValueError(f"hostPort must be between 0 and 65535, got {port}")
    return HostPort(_canonical_ip(ip or ""), protocol or "TCP", port)


def collides(a: HostPort, b: HostPort) -> bool:
    """True when ``a`` and ``b`` cannot be bound on the same node (both normalised)."""
    return (a.port == b.port and a.protocol == b.protocol
            and (a.ip == b.ip or a.ip in _UNSPECIFIED or b.ip in _UNSPECIFIED))


class HostPortUsage:
    """The host ports held on one node, by pod key (e.g. ``namespace/name``)."""

    __slots__ = ("_by_pod", "_index")

    def __init__(self) -> None:
        self._by_pod: dict[str, tuple[HostPort, ...]] = {}
        self._index: dict[tuple[str, int], list[tuple[str, str]]] = {}
        """(protocol, port) -> [(ip, pod key)]."""

    def conflicts(self, ports: Iterable[HostPort], pod_key: str | None = None) -> HostPort | None:
        """The held entry that one of ``ports`` collides with, or ``None`` when all fit.

        Entries held by ``pod_key`` itself are ignored (re-checking a pod already on the node).
        """
        index = self._index
        if not index:
            return None
        for p in ports:
            entries = index.get((p.protocol, p.port))
            if not entries or p.port == 0:
                continue
            unspecified = p.ip in _UNSPECIFIED
            for ip, owner in entries:
                if owner != pod_key and (unspecified or ip == p.ip or ip in _UNSPECIFIED):
                    return HostPort(ip, p.protocol, p.port)
        return None

    def add(self, pod_key: str, ports: Iterable[HostPort]) -> None:
        """Record ``ports`` as held by ``pod_key`` (replacing what it held before)."""
        held = tuple(p for p in ports if p.port != 0)
        if pod_key in self._by_pod:
            self.remove(pod_key)
        if not held:
            return
        self._by_pod[pod_key] = held
        for p in held:
            self._index.setdefault((p.protocol, p.port), []).append((p.ip, pod_key))

    def remove(self, pod_key: str) -> None:
        """Release every port ``pod_key`` holds (no-op for an unknown pod)."""
        held = self._by_pod.pop(pod_key, ())
        for p in held:
            slot = (p.protocol, p.port)
            remaining = [e for e in self._index[slot] if e[1] != pod_key]
            if remaining:
                self._index[slot] = remaining
            else:
                del self._index[slot]

    def copy(self) -> HostPortUsage:
        """An independent copy."""
        out = HostPortUsage()
        out._by_pod = dict(self._by_pod)
        out._index = {k: list(v) for k, v in self._index.items()}
        return out

    def ports_of(self, pod_key: str) -> tuple[HostPort, ...]:
        return self._by_pod.get(pod_key, ())

    def pods(self) -> frozenset[str]:
        return frozenset(self._by_pod)

    def __len__(self) -> int:
        """How many pods hold host ports."""
        return len(self._by_pod)

    def __repr__(self) -> str:
        held = ", ".join(f"{k}: {' '.join(map(str, v))}" for k, v in sorted(self._by_pod.items()))
        return f"HostPortUsage({held})"
