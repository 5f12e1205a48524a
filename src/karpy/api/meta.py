"""Object metadata shared by every Kubernetes object karpy reads: ``ObjectMeta`` and owner references.

``ObjectMeta.parse`` reads the ``metadata`` mapping of a manifest as ``kubectl get -o yaml`` prints
it or as a scenario file writes it by hand; fields karpy does not use (``managedFields``,
``selfLink``...) are ignored. ``to_dict`` writes back what the API server would return, omitting
empty fields. Timestamps are floats, seconds since the Unix epoch (see :mod:`karpy.clock`).

A caller may rely on: ``labels`` and ``annotations`` are plain ``dict[str, str]`` that must be
treated as read-only (the dataclasses are frozen, the mappings are not copied on access for speed);
``namespace`` is ``"default"`` for a namespaced object written without one and ``""`` for
cluster-scoped objects; :func:`object_name` never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import errors, fields, parse_cache, stored

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """``metadata.ownerReferences[i]``: who owns (and, with ``controller``, manages) an object."""

    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False
    block_owner_deletion: bool = False

    @staticmethod
    def parse(f: fields.Fields) -> OwnerReference:
        return OwnerReference(
            api_version=f.str("apiVersion", "") or "",
            kind=f.req_str("kind"),
            name=f.req_str("name"),
            uid=f.str("uid", "") or "",
            controller=bool(f.bool("controller", False)),
            block_owner_deletion=bool(f.bool("blockOwnerDeletion", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.controller:
            out["controller"] = True
        if self.block_owner_deletion:
            out["blockOwnerDeletion"] = True
        return out


_TIMES: dict[str, float] = {}
"""RFC 3339 texts already read: objects created or changed in the same second share their text."""
TIMES_SIZE = 16384


def _timestamp(f: fields.Fields, key: str) -> float | None:
    value = f.raw(key)
    if value is None:
        return None
    if type(value) is str:
        when = _TIMES.get(value)
        if when is None:
            when = parse_cache.remember(_TIMES, TIMES_SIZE, value, _read_timestamp(f, key, value))
        return when
    return _read_timestamp(f, key, value)


def _read_timestamp(f: fields.Fields, key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise f.fail(key, "an RFC 3339 timestamp", value)
    if isinstance(value, int | float):
        if not -1e11 < value < 1e11:  # also refuses inf, nan and integers too large for a float
            raise f.fail(key, "an RFC 3339 timestamp (or seconds since 1970 before the year 5000)", value)
        return float(value)
    if hasattr(value, "timestamp"):  # YAML loaders may already give a datetime
        try:
            return float(value.timestamp())
        except (TypeError, ValueError, OverflowError) as exc:
            raise f.fail(key, "an RFC 3339 timestamp", value) from exc
    if not isinstance(value, str):
        raise f.fail(key, "an RFC 3339 timestamp", value)
    try:
        return clock.parse_rfc3339(value)
    except ValueError:
        raise f.fail(key, "an RFC 3339 timestamp such as 2026-01-01T00:00:00Z", value) from None


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """The ``metadata`` of an object. Only ``name`` is required."""

    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None

    @classmethod
    def parse(cls, f: fields.Fields, *, namespaced: bool, shared: bool = False) -> ObjectMeta:
        """Read the ``metadata`` mapping ``f``.

        ``name`` is required unless ``generateName`` is given, in which case the prefix is the
        name. A namespaced object without a namespace lands in ``default`` (as ``kubectl apply``
        does); a cluster-scoped object's namespace is always ``""``. ``shared``: nobody changes
        ``f``'s mappings in place (a stored object of the cluster), so labels and annotations that
        hold only strings are kept as they are instead of copied, and owner references parsed
        from the very same list are reused.
        """
        name = f.str("name")
        if not name:
            name = f.str("generateName")
            if not name:
                raise f.fail("name", "a name (or generateName)", f.raw("name"))
        namespace = ""
        if namespaced:
            namespace = f.str("namespace") or DEFAULT_NAMESPACE
        owners = _owners(f, shared)
        return cls(
            name=name,
            namespace=namespace,
            uid=f.str("uid") or "",
            labels=_str_map(f, "labels", shared),
            annotations=_str_map(f, "annotations", shared),
            finalizers=tuple(f.str_list("finalizers")),
            owner_references=owners,
            resource_version=f.str("resourceVersion") or "",
            generation=f.int("generation", 0) or 0,
            creation_timestamp=_timestamp(f, "creationTimestamp"),
            deletion_timestamp=_timestamp(f, "deletionTimestamp"),
        )

    def with_resource_version(self, resource_version: str) -> ObjectMeta:
        """This metadata with another ``resourceVersion`` (``dataclasses.replace`` without its
        generic overhead: a status write changes nothing else)."""
        return ObjectMeta(self.name, self.namespace, self.uid, self.labels, self.annotations, self.finalizers,
                          self.owner_references, resource_version, self.generation, self.creation_timestamp,
                          self.deletion_timestamp)

    @property
    def key(self) -> str:
        """``namespace/name`` for namespaced objects, ``name`` otherwise."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def controller(self) -> OwnerReference | None:
        """The owner reference with ``controller: true``, if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.finalizers:
            out["finalizers"] = list(self.finalizers)
        if self.owner_references:
            out["ownerReferences"] = [o.to_dict() for o in self.owner_references]
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        if self.generation:
            out["generation"] = self.generation
        if self.creation_timestamp is not None:
            out["creationTimestamp"] = clock.rfc3339(self.creation_timestamp)
        if self.deletion_timestamp is not None:
            out["deletionTimestamp"] = clock.rfc3339(self.deletion_timestamp)
        return out


_OWNERS: stored.ByIdentity[tuple[OwnerReference, ...]] = stored.ByIdentity(4096)
"""Parsed ``ownerReferences`` of shared (stored) metadata by the identity of the list, which the
entry keeps alive: pods of one workload hold one stored list."""


def _owners(f: fields.Fields, shared: bool) -> tuple[OwnerReference, ...]:
    raw = f.data.get("ownerReferences")
    if not shared or type(raw) is not list or not raw:
        return tuple(OwnerReference.parse(o) for o in f.items("ownerReferences"))
    return _OWNERS.get(raw, lambda: tuple(OwnerReference.parse(o) for o in f.items("ownerReferences")))


_STRING_MAPS: stored.ByIdentity[bool] = stored.ByIdentity(8192)
"""Whether a stored mapping holds only strings, by identity (the entry keeps the mapping alive):
replicas of one workload share their labels in the store."""


def _str_map(f: fields.Fields, key: str, shared: bool) -> Mapping[str, str]:
    """``f.str_map(key)``, or with ``shared`` the mapping itself when it holds only strings."""
    if shared:
        value = f.data.get(key)
        if type(value) is dict and _STRING_MAPS.get(
                value, lambda: all(type(k) is str and type(v) is str for k, v in value.items())):
            return value
    return f.str_map(key)


def created_at(obj: Mapping[str, Any]) -> float | None:
    """A raw object's ``metadata.creationTimestamp`` in seconds since the epoch; None when absent or
    not RFC 3339."""
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return None
    try:
        return clock.parse_rfc3339(str(created))
    except ValueError:
        return None


def object_name(kind: str, d: Mapping[str, Any]) -> str:
    """``"Pod default/web-1"`` or ``"NodePool default"`` for error messages. Never raises."""
    try:
        kind = kind or str(d.get("kind") or "object")
        md = d.get("metadata")
        if not isinstance(md, Mapping):
            return f"{kind} (unnamed)"
        name = md.get("name") or md.get("generateName")
        if not isinstance(name, str | int | float) or isinstance(name, bool) or name == "":
            name = "(unnamed)"
        ns = md.get("namespace")
        if isinstance(ns, str) and ns:
            return f"{kind} {ns}/{name}"
        return f"{kind} {name}"
    except Exception:  # garbage input must still give a usable message
        return f"{kind or 'object'} (unnamed)"


def reader(kind: str, d: Mapping[str, Any]) -> fields.Fields:
    """A :class:`fields.Fields` over a whole manifest, named for error messages.

    Raises :class:`errors.ValidationError` when ``d`` is not a mapping.
    """
    if type(d) is not dict and not isinstance(d, Mapping):
        raise errors.ValidationError.single(kind or "object", "(root)", "a mapping", d)
    return fields.Fields(d, lambda: object_name(kind, d))  # named only when a message needs it
