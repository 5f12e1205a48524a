"""``karpenter.sh/v1`` NodeClaim: one requested node, from launch to termination.

A NodeClaim is what Karpenter (and karpy) creates to ask the cloud provider for one instance; its
status tracks the instance through the ``Launched``, ``Registered`` and ``Initialized`` conditions.
:class:`NodeClassRef`, :class:`Condition` and the template spec fields are shared with
:mod:`karpy.api.nodepool`.

A caller may rely on: models are frozen; :meth:`NodeClaim.from_manifest` reads the v1 form (older
forms go through :mod:`karpy.api.conversion` first) and raises
:class:`karpy.api.errors.ValidationError` naming object, path, expected and found;
:meth:`NodeClaim.to_manifest` writes the v1 form as the API server returns it, and
``from_manifest(to_manifest(x)) == x``. ``expire_after`` / ``termination_grace_period`` are seconds,
``None`` meaning Never / unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import duration, fields, labels, meta, node, parse_cache, quantity, selectors, stored

API_VERSION = "karpenter.sh/v1"
KIND = "NodeClaim"

DEFAULT_EXPIRE_AFTER = 720 * 3600.0
"""Karpenter v1's default ``expireAfter``: 720h (30 days)."""

# Condition types of a v1 NodeClaim (Karpenter's names).
LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
CONSOLIDATABLE = "Consolidatable"
DRIFTED = "Drifted"
TERMINATING = "Terminating"
CONSISTENT_STATE_FOUND = "ConsistentStateFound"
DISRUPTION_REASON = "DisruptionReason"
CONDITION_TYPES = (
    LAUNCHED, REGISTERED, INITIALIZED, READY, CONSOLIDATABLE, DRIFTED, TERMINATING,
    CONSISTENT_STATE_FOUND, DISRUPTION_REASON,
)
"""Condition types karpy sets; ``Ready`` is true when Launched, Registered and Initialized are."""

DEFAULT_NODECLASS_GROUP = labels.AWS_GROUP
DEFAULT_NODECLASS_KIND = "EC2NodeClass"


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    """``nodeClassRef``: ``{group, kind, name}`` of the provider NodeClass."""

    group: str
    kind: str
    name: str

    @staticmethod
    def parse(f: fields.Fields) -> NodeClassRef:
        return NodeClassRef(group=f.req_str("group"), kind=f.req_str("kind"), name=f.req_str("name"))

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "kind": self.kind, "name": self.name}

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}/{self.name}"


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition: ``status`` is ``"True"``, ``"False"`` or ``"Unknown"``."""

    type: str
    status: str = "True"
    reason: str = ""
    message: str = ""
    last_transition_time: float | None = None
    observed_generation: int = 0

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    @staticmethod
    def parse(f: fields.Fields) -> Condition:
        status = f.str("status", "Unknown") or "Unknown"
        if status not in ("True", "False", "Unknown"):
            raise f.fail("status", "True, False or Unknown", status)
        ltt = f.raw("lastTransitionTime")
        when: float | None = None
        if ltt is not None:
            if isinstance(ltt, str):
                try:
                    when = clock.parse_rfc3339(ltt)
                except ValueError:
                    raise f.fail("lastTransitionTime", "an RFC 3339 timestamp", ltt) from None
            elif isinstance(ltt, int | float) and not isinstance(ltt, bool):
                when = float(ltt)
            elif hasattr(ltt, "timestamp"):
                when = float(ltt.timestamp())
            else:
                raise f.fail("lastTransitionTime", "an RFC 3339 timestamp", ltt)
        return Condition(
            type=f.req_str("type"),
            status=status,
            reason=f.str("reason", "") or "",
            message=f.str("message", "") or "",
            last_transition_time=when,
            observed_generation=f.int("observedGeneration", 0) or 0,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        # always written, as metav1.Condition serializes it: NodePool and NodeClass CRDs require it
        out["message"] = self.message
        if self.last_transition_time is not None:
            out["lastTransitionTime"] = clock.rfc3339(self.last_transition_time)
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        return out


def parse_conditions(f: fields.Fields) -> tuple[Condition, ...]:
    return tuple(Condition.parse(c) for c in f.items("conditions"))


def parse_taints(f: fields.Fields, key: str) -> tuple[node.Taint, ...]:
    return tuple(node.Taint.parse(t) for t in f.items(key))


def parse_requirements(f: fields.Fields) -> tuple[selectors.NodeSelectorRequirement, ...]:
    return tuple(selectors.NodeSelectorRequirement.parse(r) for r in f.items("requirements"))


_EXPIRE_AFTER: dict[str, float | None] = {}
"""``expireAfter`` texts already read (a cluster has a few: its NodePools')."""
EXPIRE_AFTER_SIZE = 1024


def read_expire_after(f: fields.Fields) -> float | None:
    raw = f.data.get("expireAfter")
    if type(raw) is str:
        if raw in _EXPIRE_AFTER:
            return _EXPIRE_AFTER[raw]
        # only texts that read are remembered: a bad one raises every time
        value = duration.read(f, "expireAfter", default=DEFAULT_EXPIRE_AFTER, never=True)
        return parse_cache.remember(_EXPIRE_AFTER, EXPIRE_AFTER_SIZE, raw, value)
    return duration.read(f, "expireAfter", default=DEFAULT_EXPIRE_AFTER, never=True)


def read_termination_grace_period(f: fields.Fields) -> float | None:
    return duration.read(f, "terminationGracePeriod", default=None, never=False)


@dataclass(frozen=True, slots=True)
class NodeClaimSpec:
    """``spec`` of a NodeClaim."""

    requirements: tuple[selectors.NodeSelectorRequirement, ...] = ()
    resources_requests: quantity.ResourceList = field(default_factory=dict)
    taints: tuple[node.Taint, ...] = ()
    startup_taints: tuple[node.Taint, ...] = ()
    node_class_ref: NodeClassRef | None = None
    expire_after: float | None = DEFAULT_EXPIRE_AFTER
    termination_grace_period: float | None = None

    @staticmethod
    def parse(f: fields.Fields) -> NodeClaimSpec:
        ref = NodeClassRef.parse(f.sub("nodeClassRef")) if f.has("nodeClassRef") else None
        return NodeClaimSpec(
            requirements=parse_requirements(f),
            resources_requests=quantity.read_list(f.sub("resources"), "requests"),
            taints=parse_taints(f, "taints"),
            startup_taints=parse_taints(f, "startupTaints"),
            node_class_ref=ref,
            expire_after=read_expire_after(f),
            termination_grace_period=read_termination_grace_period(f),
        )

    @staticmethod
    def parse_stored(f: fields.Fields) -> NodeClaimSpec:
        """:meth:`parse` of a stored spec (never changed in place): the parts it shares with other
        stored NodeClaims (requirements, taints, requests) are parsed once (:mod:`karpy.api.stored`)."""
        ref = NodeClassRef.parse(f.sub("nodeClassRef")) if f.has("nodeClassRef") else None
        return NodeClaimSpec(
            requirements=stored.items(f, "requirements", selectors.NodeSelectorRequirement.parse),
            resources_requests=stored.resource_list(f.sub("resources"), "requests"),
            taints=stored.items(f, "taints", node.Taint.parse),
            startup_taints=stored.items(f, "startupTaints", node.Taint.parse),
            node_class_ref=ref,
            expire_after=read_expire_after(f),
            termination_grace_period=read_termination_grace_period(f),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.taints:
            out["taints"] = [t.to_dict() for t in self.taints]
        if self.startup_taints:
            out["startupTaints"] = [t.to_dict() for t in self.startup_taints]
        out["requirements"] = [r.to_dict() for r in self.requirements]
        if self.resources_requests:
            out["resources"] = {"requests": quantity.format_list(self.resources_requests)}
        if self.node_class_ref is not None:
            out["nodeClassRef"] = self.node_class_ref.to_dict()
        if self.termination_grace_period is not None:
            out["terminationGracePeriod"] = duration.format_duration(self.termination_grace_period)
        out["expireAfter"] = duration.format_duration(self.expire_after)
        return out


@dataclass(frozen=True, slots=True)
class NodeClaimStatus:
    """``status`` of a NodeClaim; resource lists in milli-units."""

    provider_id: str = ""
    image_id: str = ""
    node_name: str = ""
    capacity: quantity.ResourceList = field(default_factory=dict)
    allocatable: quantity.ResourceList = field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    last_pod_event_time: float | None = None

    @staticmethod
    def parse(f: fields.Fields, *, shared: bool = False) -> NodeClaimStatus:
        """Read ``status``; ``shared``: a stored status (never changed in place), whose resource
        lists and conditions are parsed once per mapping (:mod:`karpy.api.stored`)."""
        lpe = f.raw("lastPodEventTime")
        last: float | None = None
        if isinstance(lpe, str):
            try:
                last = clock.parse_rfc3339(lpe)
            except ValueError:
                raise f.fail("lastPodEventTime", "an RFC 3339 timestamp", lpe) from None
        elif isinstance(lpe, int | float) and not isinstance(lpe, bool):
            last = float(lpe)
        elif lpe is not None:
            raise f.fail("lastPodEventTime", "an RFC 3339 timestamp", lpe)
        return NodeClaimStatus(
            provider_id=f.str("providerID", "") or "",
            image_id=f.str("imageID", "") or "",
            node_name=f.str("nodeName", "") or "",
            capacity=stored.resource_list(f, "capacity") if shared else quantity.read_list(f, "capacity"),
            allocatable=stored.resource_list(f, "allocatable") if shared else quantity.read_list(f, "allocatable"),
            conditions=stored.items(f, "conditions", Condition.parse) if shared else parse_conditions(f),
            last_pod_event_time=last,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.node_name:
            out["nodeName"] = self.node_name
        if self.provider_id:
            out["providerID"] = self.provider_id
        if self.image_id:
            out["imageID"] = self.image_id
        if self.capacity:
            out["capacity"] = quantity.format_list(self.capacity)
        if self.allocatable:
            out["allocatable"] = quantity.format_list(self.allocatable)
        if self.conditions:
            out["conditions"] = [c.to_dict() for c in self.conditions]
        if self.last_pod_event_time is not None:
            out["lastPodEventTime"] = clock.rfc3339(self.last_pod_event_time)
        return out


@dataclass(frozen=True, slots=True)
class NodeClaim:
    """A ``karpenter.sh/v1`` NodeClaim."""

    metadata: meta.ObjectMeta
    spec: NodeClaimSpec = field(default_factory=NodeClaimSpec)
    status: NodeClaimStatus = field(default_factory=NodeClaimStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels

    @property
    def nodepool_name(self) -> str | None:
        """The owning NodePool, from the ``karpenter.sh/nodepool`` label."""
        return self.metadata.labels.get(labels.NODEPOOL)

    def condition(self, type_: str) -> Condition | None:
        for c in self.status.conditions:
            if c.type == type_:
                return c
        return None

    def is_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return c is not None and c.is_true

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> NodeClaim:
        f = meta.reader(KIND, d)
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=False),
            spec=NodeClaimSpec.parse(f.sub("spec")),
            status=NodeClaimStatus.parse(f.sub("status")),
        )

    @classmethod
    def from_stored(cls, d: Mapping[str, Any]) -> NodeClaim:
        """:meth:`from_manifest` of a stored object (never changed in place; the model may share
        its mappings, read-only): equal to it, with the parts stored NodeClaims share parsed once."""
        f = meta.reader(KIND, d)
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=False, shared=True),
            spec=NodeClaimSpec.parse_stored(f.sub("spec")),
            status=NodeClaimStatus.parse(f.sub("status"), shared=True),
        )

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": self.metadata.to_dict(),
            "spec": self.spec.to_dict(),
        }
        status = self.status.to_dict()
        if status:
            out["status"] = status
        return out


