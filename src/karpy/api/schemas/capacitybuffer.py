"""``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer: the CRD Karpenter v1.14 ships beside its own.

Namespaced, short name ``cb``, category ``autoscaling``; the spec's two CEL rules (a podTemplateRef
needs replicas or limits; podTemplateRef and scalableRef exclude each other) and its printer columns are
Karpenter's. karpy reads it with :class:`karpy.api.capacitybuffer.CapacityBuffer`.
"""

from __future__ import annotations

from karpy.api import capacitybuffer as model
from karpy.api.schemas import common, dsl

GROUP = model.GROUP
KIND = model.KIND
PLURAL = model.PLURAL
SINGULAR = "capacitybuffer"
SHORT_NAMES = ("cb",)
CATEGORIES = ("autoscaling",)
VERSIONS = ("v1beta1",)
STORAGE_VERSION = "v1beta1"
SCOPE = "Namespaced"


def _ref() -> dsl.Schema:
    return dsl.obj({"name": dsl.string(min_len=1, doc="name of the referent")}, required=["name"],
                   doc="a reference to an object in the same namespace")


def schema() -> dsl.Schema:
    spec = dsl.obj({
        "limits": dsl.resource_list("bounds the number of chunks by their total requests"),
        "percentage": dsl.int32(0, doc="buffer chunks as a percentage of the scalableRef's replicas"),
        "podTemplateRef": _ref(),
        "provisioningStrategy": dsl.string(default=model.ACTIVE_STRATEGY, doc="how the buffer is used"),
        "replicas": dsl.int32(0, doc="the desired number of buffer chunks"),
        "scalableRef": dsl.obj({
            "apiGroup": dsl.string(doc="the API group of the referent (empty: the core group)"),
            "kind": dsl.string(min_len=1, doc="the kind of the referent"),
            "name": dsl.string(min_len=1, doc="the name of the referent"),
        }, required=["kind", "name"], doc="a reference to an object with a scale subresource"),
    }, rules=[
        dsl.rule("!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
                 "If podTemplateRef is set, replicas or limits must also be set"),
        dsl.rule("!(has(self.podTemplateRef) && has(self.scalableRef))",
                 "You must define either PodTemplateRef or ScalableRef, but not both"),
    ], doc="spec defines the desired characteristics of the buffer")
    status = dsl.obj({
        "conditions": common.conditions(strict=True),
        "podTemplateGeneration": dsl.int64(doc="the observed generation of the PodTemplate"),
        "podTemplateRef": _ref(),
        "provisioningStrategy": dsl.string(doc="how the buffer is used"),
        "replicas": dsl.int32(doc="the number of buffer chunks"),
    }, doc="the current state of the buffer and its readiness for autoprovisioning")
    return dsl.obj({"apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
                    "spec": spec, "status": status}, required=["spec"],
                   doc="CapacityBuffer is the configuration that an autoscaler can use to provision buffer capacity")


def _column(name: str, type_: str, path: str, doc: str) -> dict[str, object]:
    return {"description": doc, "jsonPath": path, "name": name, "type": type_}


PRINTER_COLUMNS: tuple[dict[str, object], ...] = (
    _column("Strategy", "string", ".spec.provisioningStrategy", "The strategy to be used."),
    _column("PodTemplate", "string", ".status.podTemplateRef.name", "The name of the PodTemplate used."),
    _column("Replicas", "integer", ".status.replicas", "The actual number of buffer chunks."),
    _column("ConditionsType", "string", ".status.conditions[*].type", "List of all condition types."),
    _column("ConditionsStatus", "string", ".status.conditions[*].status", "List of all condition statuses."),
    _column("ConditionsReason", "string", ".status.conditions[*].reason", "List of all condition reasons."),
    _column("Age", "date", ".metadata.creationTimestamp", "The age of the CapacityBuffer."),
)
SUBRESOURCES: dict[str, dict[str, str]] = {"status": {}}
