"""``karpenter.sh/v1`` NodePool: the template, disruption rules and limits for a group of nodes.

A NodePool says which nodes karpy may launch (``template``: labels, taints, requirements,
``nodeClassRef``, ``expireAfter``), when it may remove them (``disruption``: consolidation policy,
``consolidateAfter``, budgets) and how much it may launch in total (``limits``).

A caller may rely on: models are frozen; :meth:`NodePool.from_manifest` reads the v1 form and
applies v1's defaults (``consolidationPolicy: WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s``
when ``disruption`` is absent, one budget of ``10%``, ``expireAfter: 720h``); older forms go through
:mod:`karpy.api.conversion` first. Errors are :class:`karpy.api.errors.ValidationError` naming
object, path, expected and found; rule checks live in :mod:`karpy.api.validation`.
``to_manifest`` writes the v1 form back (``from_manifest(to_manifest(x)) == x``). :meth:`NodePool.hash`
is the value of the ``karpenter.sh/nodepool-hash`` annotation: it covers the static drift fields
(template labels, annotations, taints, startup taints, nodeClassRef, expireAfter,
terminationGracePeriod) and not the requirements, which drift dynamically.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import duration, fields, meta, node, nodeclaim, nodeclass, quantity, selectors

API_VERSION = "karpenter.sh/v1"
KIND = "NodePool"

WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
BALANCED = "Balanced"
CONSOLIDATION_POLICIES = (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED)
"""The policies karpy implements: Karpenter v1.14's CRD enum (``Balanced``: consolidate an underutilized
node only when the saving outweighs the disruption, :mod:`karpy.disruption.balanced`)."""
ADMITTED_POLICIES = CONSOLIDATION_POLICIES
"""What the CRD's enum admits (Karpenter v1.14's)."""
NODES_LIMIT = "nodes"
"""The only limit a static NodePool (``spec.replicas`` set) may have (Karpenter's CEL rule)."""
REASON_EMPTY = "Empty"
REASON_DRIFTED = "Drifted"
REASON_UNDERUTILIZED = "Underutilized"
DISRUPTION_REASONS = (REASON_EMPTY, REASON_DRIFTED, REASON_UNDERUTILIZED)
DEFAULT_BUDGET_NODES = "10%"
HASH_VERSION = "karpy-v1"
"""karpy's own ``karpenter.sh/nodepool-hash-version``. karpy's hash is not Karpenter's (``v3``), so it
must not claim Karpenter's version: a claim stamped by Karpenter (or by another karpy hash version) is
re-stamped on sight instead of being taken for drifted, which is what Karpenter does after an upgrade
changes its hash function (and what Karpenter does with a claim karpy stamped)."""
KUBELET_COMPAT_ANNOTATION = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
"""Where Karpenter v1 keeps a v1beta1 NodePool's ``kubelet`` (JSON); it wins over the NodeClass's."""


@dataclass(frozen=True, slots=True)
class Budget:
    """A disruption budget: at most ``nodes`` (``"3"`` or ``"10%"``) disrupted at once, while active.

    ``schedule`` (cron, or ``@daily`` etc., UTC) and ``duration`` (seconds) go together; without them
    the budget is always active. Empty ``reasons`` means every reason.
    """

    nodes: str = DEFAULT_BUDGET_NODES
    schedule: str | None = None
    duration: float | None = None
    reasons: tuple[str, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> Budget:
        raw = f.raw("duration")
        dur: float | None = None
        if raw is not None:
            text = str(raw).strip()
            if isinstance(raw, bool) or not duration.is_budget_duration(text):
                raise f.fail("duration", duration.EXPECTED_BUDGET, raw)
            dur = duration.parse_duration(text)
        return Budget(
            nodes=f.str("nodes", DEFAULT_BUDGET_NODES) or DEFAULT_BUDGET_NODES,
            schedule=f.str("schedule"),
            duration=dur,
            reasons=tuple(f.str_list("reasons")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": self.nodes}
        if self.schedule is not None:
            out["schedule"] = self.schedule
        if self.duration is not None:
            out["duration"] = duration.format_duration(self.duration)
        if self.reasons:
            out["reasons"] = list(self.reasons)
        return out

    def applies_to(self, reason: str) -> bool:
        return not self.reasons or reason in self.reasons


@dataclass(frozen=True, slots=True)
class Disruption:
    """``spec.disruption``; ``consolidate_after`` in seconds, ``None`` meaning Never."""

    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: float | None = 0.0
    budgets: tuple[Budget, ...] = (Budget(),)

    @staticmethod
    def parse(f: fields.Fields) -> Disruption:
        if not f.data:
            return Disruption()
        if f.raw("consolidateAfter") is None:
            raise f.fail(
                "consolidateAfter",
                "a duration such as 0s, 30s or Never (required in a karpenter.sh/v1 disruption block)",
                None,
            )
        budgets = tuple(Budget.parse(b) for b in f.items("budgets")) if f.has("budgets") else (Budget(),)
        return Disruption(
            consolidation_policy=f.str("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED)
            or WHEN_EMPTY_OR_UNDERUTILIZED,
            consolidate_after=duration.read(f, "consolidateAfter", never=True),
            budgets=budgets,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "budgets": [b.to_dict() for b in self.budgets],
            "consolidateAfter": duration.format_duration(self.consolidate_after),
            "consolidationPolicy": self.consolidation_policy,
        }


@dataclass(frozen=True, slots=True)
class NodeClaimTemplateSpec:
    """``spec.template.spec``: what every NodeClaim of the pool gets."""

    requirements: tuple[selectors.NodeSelectorRequirement, ...] = ()
    taints: tuple[node.Taint, ...] = ()
    startup_taints: tuple[node.Taint, ...] = ()
    expire_after: float | None = nodeclaim.DEFAULT_EXPIRE_AFTER
    termination_grace_period: float | None = None
    node_class_ref: nodeclaim.NodeClassRef | None = None

    @staticmethod
    def parse(f: fields.Fields) -> NodeClaimTemplateSpec:
        ref = nodeclaim.NodeClassRef.parse(f.sub("nodeClassRef")) if f.has("nodeClassRef") else None
        return NodeClaimTemplateSpec(
            requirements=nodeclaim.parse_requirements(f),
            taints=nodeclaim.parse_taints(f, "taints"),
            startup_taints=nodeclaim.parse_taints(f, "startupTaints"),
            expire_after=nodeclaim.read_expire_after(f),
            termination_grace_period=nodeclaim.read_termination_grace_period(f),
            node_class_ref=ref,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"expireAfter": duration.format_duration(self.expire_after)}
        if self.node_class_ref is not None:
            out["nodeClassRef"] = self.node_class_ref.to_dict()
        out["requirements"] = [r.to_dict() for r in self.requirements]
        if self.startup_taints:
            out["startupTaints"] = [t.to_dict() for t in self.startup_taints]
        if self.taints:
            out["taints"] = [t.to_dict() for t in self.taints]
        if self.termination_grace_period is not None:
            out["terminationGracePeriod"] = duration.format_duration(self.termination_grace_period)
        return out


@dataclass(frozen=True, slots=True)
class NodeClaimTemplate:
    """``spec.template``: node labels/annotations plus the NodeClaim spec."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    spec: NodeClaimTemplateSpec = field(default_factory=NodeClaimTemplateSpec)

    @staticmethod
    def parse(f: fields.Fields) -> NodeClaimTemplate:
        md = f.sub("metadata")
        return NodeClaimTemplate(labels=md.str_map("labels"), annotations=md.str_map("annotations"),
                                 spec=NodeClaimTemplateSpec.parse(f.sub("spec")))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        md: dict[str, Any] = {}
        if self.annotations:
            md["annotations"] = dict(self.annotations)
        if self.labels:
            md["labels"] = dict(self.labels)
        if md:
            out["metadata"] = md
        out["spec"] = self.spec.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class NodePoolStatus:
    """``status``: resources in use by the pool's nodes (milli-units) and conditions."""

    resources: quantity.ResourceList = field(default_factory=dict)
    conditions: tuple[nodeclaim.Condition, ...] = ()
    node_class_observed_generation: int = 0
    nodes: int = 0
    """``status.nodes``: the pool's NodeClaims, as :mod:`karpy.controllers.nodepool_counter` counts them."""

    @staticmethod
    def parse(f: fields.Fields) -> NodePoolStatus:
        return NodePoolStatus(
            resources=quantity.read_list(f, "resources"),
            conditions=nodeclaim.parse_conditions(f),
            node_class_observed_generation=f.int("nodeClassObservedGeneration", 0) or 0,
            nodes=f.int("nodes", 0) or 0,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.conditions:
            out["conditions"] = [c.to_dict() for c in self.conditions]
        if self.node_class_observed_generation:
            out["nodeClassObservedGeneration"] = self.node_class_observed_generation
        if self.nodes:
            out["nodes"] = self.nodes
        if self.resources:
            out["resources"] = quantity.format_list(self.resources)
        return out


@dataclass(frozen=True, slots=True)
class NodePool:
    """A ``karpenter.sh/v1`` NodePool."""

    metadata: meta.ObjectMeta
    template: NodeClaimTemplate = field(default_factory=NodeClaimTemplate)
    disruption: Disruption = field(default_factory=Disruption)
    limits: quantity.ResourceList = field(default_factory=dict)
    weight: int | None = None
    status: NodePoolStatus = field(default_factory=NodePoolStatus)
    replicas: int | None = None
    """``spec.replicas``: a static NodePool keeps this many nodes whatever the pods (``StaticCapacity``
    gate); ``None`` for a dynamic one."""

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def is_static(self) -> bool:
        """Karpenter's ``IsStatic``: ``spec.replicas`` is set (whatever the feature gate says)."""
        return self.replicas is not None

    @property
    def node_limit(self) -> int | None:
        """``spec.limits.nodes`` as a count of nodes, ``None`` when unlimited."""
        milli = self.limits.get(NODES_LIMIT)
        return None if milli is None else milli // 1000

    @property
    def node_class_ref(self) -> nodeclaim.NodeClassRef | None:
        return self.template.spec.node_class_ref

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> NodePool:
        f = meta.reader(KIND, d)
        spec = f.sub("spec")
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=False),
            template=NodeClaimTemplate.parse(spec.sub("template")),
            disruption=Disruption.parse(spec.sub("disruption")),
            limits=quantity.read_list(spec, "limits"),
            weight=spec.int("weight"),
            status=NodePoolStatus.parse(f.sub("status")),
            replicas=spec.int("replicas"),
        )

    def to_manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"disruption": self.disruption.to_dict()}
        if self.limits:
            spec["limits"] = quantity.format_list(self.limits)
        if self.replicas is not None:
            spec["replicas"] = self.replicas
        spec["template"] = self.template.to_dict()
        if self.weight is not None:
            spec["weight"] = self.weight
        out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND,
                               "metadata": self.metadata.to_dict(), "spec": spec}
        status = self.status.to_dict()
        if status:
            out["status"] = status
        return out

    def static_transition_problem(self, old: NodePool) -> str | None:
        """Karpenter's CEL rule on an update from ``old``: a NodePool does not switch between static
        (``spec.replicas`` set) and dynamic; the message when it would, else None."""
        if self.is_static == old.is_static:
            return None
        return ("Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                "provisioning modes")

    def hash(self) -> str:
        """The ``karpenter.sh/nodepool-hash`` value: static drift fields of the template only.

        Taints are compared as sets (order does not matter), requirements and the pool's
        disruption settings are not included.
        """
        tmpl = self.template
        spec = tmpl.spec
        value = {
            "labels": dict(tmpl.labels),
            "annotations": dict(tmpl.annotations),
            "taints": sorted(json.dumps(t.to_dict(), sort_keys=True) for t in spec.taints),
            "startupTaints": sorted(json.dumps(t.to_dict(), sort_keys=True) for t in spec.startup_taints),
            "nodeClassRef": spec.node_class_ref.to_dict() if spec.node_class_ref else None,
            "expireAfter": duration.format_duration(spec.expire_after),
            "terminationGracePeriod": (
                duration.format_duration(spec.termination_grace_period)
                if spec.termination_grace_period is not None else None
            ),
        }
        return nodeclass.stable_hash(value)

    def compat_kubelet(self) -> nodeclass.KubeletConfiguration | None:
        """The v1beta1 ``kubelet`` kept in :data:`KUBELET_COMPAT_ANNOTATION`, if any.

        Karpenter v1.0 uses it in preference to the NodeClass's ``kubelet`` when launching nodes.
        Raises :class:`karpy.api.errors.ValidationError` when the annotation is not a JSON object.
        """
        text = self.metadata.annotations.get(KUBELET_COMPAT_ANNOTATION)
        if text is None:
            return None
        obj = f"{KIND} {self.name}"
        path = f"metadata.annotations.{KUBELET_COMPAT_ANNOTATION}"
        try:
            data = json.loads(text)
        except ValueError:
            data = text
        if not isinstance(data, dict):
            raise fields.Fields(None, obj).fail(path, "a JSON object of kubelet settings", text)
        return nodeclass.KubeletConfiguration.parse(fields.Fields(data, obj, path))
