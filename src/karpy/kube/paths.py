"""REST paths of Kubernetes kinds: ``/api/v1/namespaces/default/pods/web-1/status`` and friends.

:func:`resource_for` says which API version, plural and scope a kind has: the built-in kinds of
:data:`karpy.kube.interface.KINDS` with their real plurals, and any other kind as a namespaced
custom resource whose plural is guessed the way ``kubectl`` guesses it (lower-case kind, ``s``;
``es`` after s/x/z/ch/sh; ``ies`` after a consonant and ``y``). :func:`register` adds or corrects
a kind (a cluster-scoped CRD, an irregular plural). :func:`path` builds the URL path of a
collection, an object or one of its subresources (``status``, ``eviction``). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.kube import interface


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind's REST coordinates."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


_IRREGULAR = {"Endpoints": "endpoints", "PodSecurityPolicy": "podsecuritypolicies"}
_REGISTERED: dict[str, Resource] = {
    # karpy's own cluster-scoped CRDs that are not in interface.KINDS
    "KWOKNodeClass": Resource("KWOKNodeClass", "karpenter.kwok.sh/v1alpha1", "kwoknodeclasses", False),
    # the namespaced CRD Karpenter ships beside its own (karpy.controllers.capacitybuffer)
    "CapacityBuffer": Resource("CapacityBuffer", "autoscaling.x-k8s.io/v1beta1", "capacitybuffers", True),
}


def guess_plural(kind: str) -> str:
    """``kubectl``'s guess: NodePool -> nodepools, EC2NodeClass -> ec2nodeclasses, Policy -> policies."""
    if kind in _IRREGULAR:
        return _IRREGULAR[kind]
    low = kind.lower()
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return low + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return low[:-1] + "ies"
    return low + "s"


def register(kind: str, api_version: str, plural: str | None = None, *, namespaced: bool = True) -> Resource:
    """Declare (or redeclare) a kind the adapter and the emulator should know."""
    res = Resource(kind, api_version, plural or guess_plural(kind), namespaced)
    _REGISTERED[kind] = res
    return res


def resource_for(kind: str, api_version: str = "") -> Resource:
    """The REST coordinates of ``kind`` (``api_version`` only matters for an unknown kind)."""
    known = _REGISTERED.get(kind)
    if known is not None:
        return known
    info = interface.kind_info(kind)
    if info is not None:
        return Resource(kind, info.api_version, guess_plural(kind), info.namespaced)
    return Resource(kind, api_version, guess_plural(kind), True)


def known_resources() -> list[Resource]:
    """Every built-in and registered kind (the emulator serves these)."""
    out = {kind: resource_for(kind) for kind in interface.KINDS}
    out.update(_REGISTERED)
    return list(out.values())


def path(res: Resource, namespace: str = "", name: str = "", subresource: str = "") -> str:
    """The URL path of the collection (no ``name``), an object, or one of its subresources.

    A namespaced kind with ``namespace=""`` addresses the collection across all namespaces.
    """
    prefix = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
    parts = [prefix]
    if res.namespaced and namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(res.plural)
    if name:
        parts.append(name)
        if subresource:
            parts.append(subresource)
    return "/".join(parts)
