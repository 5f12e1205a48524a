"""Taints and the Node object, as the scheduling core sees them.

:class:`Taint` is shared with NodePool/NodeClaim templates. :class:`Node` keeps only what scheduling
and disruption need: metadata (labels), ``spec.providerID``, ``spec.taints``,
``spec.unschedulable``, ``status.capacity``, ``status.allocatable`` (milli-units, see
:mod:`karpy.api.quantity`) and the condition statuses by type. ``Node.to_manifest`` writes the
object back the way the API server returns it, so the simulator can store the nodes it creates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import fields, meta, quantity, stored

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    """``{key, value, effect, timeAdded}``; ``effect`` is one of :data:`EFFECTS`."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"
    time_added: float | None = None

    @staticmethod
    def parse(f: fields.Fields) -> Taint:
        effect = f.str("effect", "NoSchedule") or "NoSchedule"
        if effect not in EFFECTS:
            raise f.fail("effect", "one of " + ", ".join(EFFECTS), effect)
        time_added: float | None = None
        raw = f.raw("timeAdded")
        if raw is not None:
            if isinstance(raw, str):
                try:
                    time_added = clock.parse_rfc3339(raw)
                except ValueError:
                    raise f.fail("timeAdded", "an RFC 3339 timestamp", raw) from None
            elif isinstance(raw, int | float) and not isinstance(raw, bool):
                time_added = float(raw)
            else:
                raise f.fail("timeAdded", "an RFC 3339 timestamp", raw)
        return Taint(
            key=f.req_str("key"), value=f.str("value", "") or "", effect=effect, time_added=time_added
        )

    def matches(self, other: Taint) -> bool:
        """Same key and effect (Kubernetes' notion of "the same taint"; the value is not compared)."""
        return self.key == other.key and self.effect == other.effect

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key}
        if self.value:
            out["value"] = self.value
        out["effect"] = self.effect
        if self.time_added is not None:
            out["timeAdded"] = clock.rfc3339(self.time_added)
        return out

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Node:
    """A Kubernetes Node. ``conditions`` maps condition type to status (``"True"``, ``"False"``...)."""

    metadata: meta.ObjectMeta
    provider_id: str = ""
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    capacity: quantity.ResourceList = field(default_factory=dict)
    allocatable: quantity.ResourceList = field(default_factory=dict)
    conditions: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.annotations

    @property
    def ready(self) -> bool:
        """The ``Ready`` condition is ``True``."""
        return self.conditions.get("Ready") == "True"

    @property
    def deleting(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> Node:
        return cls._parse(d, shared=False)

    @classmethod
    def from_stored(cls, d: Mapping[str, Any], before: tuple[Mapping[str, Any], Node] | None = None,
                    metadata: meta.ObjectMeta | None = None) -> Node:
        """:meth:`from_manifest` of a stored object (never changed in place; the model may share
        its mappings, read-only): equal to it, with the parts stored Nodes share (taints, capacity,
        allocatable) parsed once (:mod:`karpy.api.stored`).

        ``before``: the stored version ``d`` replaced and its model; the fields of a ``spec`` or
        ``status`` that is still the very same dict are taken from that model. ``metadata``: ``d``'s
        metadata already read (the caller saw that only its resourceVersion changed)."""
        return cls._parse(d, shared=True, before=before, metadata=metadata)

    @classmethod
    def _parse(cls, d: Mapping[str, Any], *, shared: bool, before: tuple[Mapping[str, Any], Node] | None = None,
               metadata: meta.ObjectMeta | None = None) -> Node:
        f = meta.reader("Node", d)
        old, prior = before if before is not None else (None, None)
        raw_spec, raw_status = d.get("spec"), d.get("status")
        if prior is not None and old is not None and raw_spec is not None and raw_spec is old.get("spec"):
            provider_id, taints, unschedulable = prior.provider_id, prior.taints, prior.unschedulable
        else:
            spec = f.sub("spec")
            provider_id = spec.str("providerID", "") or ""
            taints = stored.items(spec, "taints", Taint.parse) if shared else \
                tuple(Taint.parse(t) for t in spec.items("taints"))
            unschedulable = bool(spec.bool("unschedulable", False))
        if prior is not None and old is not None and raw_status is not None and raw_status is old.get("status"):
            capacity, allocatable, conditions = prior.capacity, prior.allocatable, prior.conditions
        else:
            status = f.sub("status")
            conditions = {}
            for c in status.items("conditions"):
                conditions[c.req_str("type")] = c.str("status", "Unknown") or "Unknown"
            if shared:
                capacity = stored.resource_list(status, "capacity")
                allocatable = stored.resource_list(status, "allocatable")
            else:
                capacity = quantity.read_list(status, "capacity")
                allocatable = quantity.read_list(status, "allocatable")
        return cls(
            metadata=metadata if metadata is not None else meta.ObjectMeta.parse(
                f.sub("metadata"), namespaced=False, shared=shared),
            provider_id=provider_id,
            taints=taints,
            unschedulable=unschedulable,
            capacity=capacity,
            allocatable=allocatable,
            conditions=conditions,
        )

    def to_manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.provider_id:
            spec["providerID"] = self.provider_id
        if self.taints:
            spec["taints"] = [t.to_dict() for t in self.taints]
        if self.unschedulable:
            spec["unschedulable"] = True
        status: dict[str, Any] = {}
        if self.capacity:
            status["capacity"] = quantity.format_list(self.capacity)
        if self.allocatable:
            status["allocatable"] = quantity.format_list(self.allocatable)
        if self.conditions:
            status["conditions"] = [{"type": t, "status": s} for t, s in self.conditions.items()]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": self.metadata.to_dict(),
            "spec": spec,
            "status": status,
        }
