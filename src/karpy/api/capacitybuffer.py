"""The ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer, as Karpenter v1.14 reads it.

A CapacityBuffer asks the autoscaler to keep room for N copies ("chunks") of a pod shape, so real
pods start without waiting for a node. The shape comes from ``spec.podTemplateRef`` (a PodTemplate
in the buffer's namespace) or ``spec.scalableRef`` (a Deployment, StatefulSet or ReplicaSet of
group ``apps``); how many chunks from ``spec.replicas``, ``spec.percentage`` (of the workload's
replicas) and ``spec.limits`` (:func:`compute_replicas`). Karpenter's CRD rules are checked when the
object is read (:meth:`CapacityBuffer.from_manifest`): a podTemplateRef needs replicas or limits;
podTemplateRef and scalableRef exclude each other; replicas and percentage are >= 0.

The virtual pods of a ready buffer (:func:`virtual_pods`) are what the provisioner schedules beside
the real pending pods; they carry :data:`FAKE_POD_ANNOTATION` and the buffer's name and namespace,
and priority :data:`VIRTUAL_POD_PRIORITY`. They never exist in the cluster.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, fields, meta, quantity
from karpy.api import pod as pod_mod

KIND = "CapacityBuffer"
GROUP = "autoscaling.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta1"
PLURAL = "capacitybuffers"

ACTIVE_STRATEGY = "buffer.x-k8s.io/active-capacity"

READY_FOR_PROVISIONING = "ReadyForProvisioning"
PROVISIONING = "Provisioning"
LIMITED_BY_QUOTAS = "LimitedByQuotas"

REASON_RESOLVED = "Resolved"
REASON_SCALABLE_REF_NOT_FOUND = "ScalableRefNotFound"
REASON_POD_TEMPLATE_NOT_FOUND = "PodTemplateNotFound"
REASON_RESOLUTION_FAILED = "ResolutionFailed"
REASON_FITS_EXISTING = "FitsExistingCapacity"
REASON_REQUIRES_NEW = "RequiresNewCapacity"
REASON_NOT_READY = "NotReadyForProvisioning"
REASON_EMPTY = "BufferEmpty"

SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")
SCALABLE_GROUP = "apps"

FAKE_POD_ANNOTATION = "karpenter.sh/capacity-buffer-fake-pod"
BUFFER_NAME_ANNOTATION = "karpenter.sh/capacity-buffer-name"
BUFFER_NAMESPACE_ANNOTATION = "karpenter.sh/capacity-buffer-namespace"
VIRTUAL_POD_PRIORITY = -(2 ** 31)
"""Karpenter stamps math.MinInt32 on virtual pods (they are the least valuable pods)."""


@dataclass(frozen=True, slots=True)
class ScalableRef:
    kind: str
    name: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class CapacityBuffer:
    """One CapacityBuffer's spec and the conditions of its status."""

    metadata: meta.ObjectMeta
    provisioning_strategy: str = ACTIVE_STRATEGY
    pod_template_ref: str | None = None
    scalable_ref: ScalableRef | None = None
    replicas: int | None = None
    percentage: int | None = None
    limits: quantity.ResourceList = field(default_factory=dict)
    status_replicas: int | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    def condition_true(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True" for c in self.conditions)

    def ready_for_provisioning(self) -> bool:
        """Karpenter's isBufferReadyForProvisioning: ReadyForProvisioning True, status.replicas > 0."""
        return self.condition_true(READY_FOR_PROVISIONING) and (self.status_replicas or 0) > 0 and \
            (self.pod_template_ref is not None or self.scalable_ref is not None)

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> CapacityBuffer:
        """Read and validate one manifest; :class:`errors.ValidationError` names each bad field."""
        f = meta.reader(KIND, d)
        problems: list[errors.FieldError] = []
        metadata = meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True)
        spec = f.sub("spec")
        if not isinstance(d.get("spec"), Mapping):
            raise f.fail("spec", "a mapping (the buffer's spec)", d.get("spec"))
        strategy = _collect(problems, spec.str, "provisioningStrategy") or ACTIVE_STRATEGY
        template_ref: str | None = None
        if spec.has("podTemplateRef"):
            template_ref = _collect(problems, _ref_name, spec.sub("podTemplateRef"), spec, "podTemplateRef")
        scalable: ScalableRef | None = None
        if spec.has("scalableRef"):
            scalable = _collect(problems, _scalable, spec.sub("scalableRef"), spec)
        replicas = _collect(problems, _non_negative, spec, "replicas")
        percentage = _collect(problems, _non_negative, spec, "percentage")
        limits = _collect(problems, quantity.read_list, spec, "limits") or {}
        if spec.has("podTemplateRef") and spec.has("scalableRef"):
            problems.append(errors.FieldError(f.obj, "spec", "podTemplateRef or scalableRef, not both",
                                              "both set"))
        if spec.has("podTemplateRef") and not spec.has("replicas") and not spec.has("limits"):
            problems.append(errors.FieldError(f.obj, "spec.replicas",
                                              "replicas or limits set when podTemplateRef is set", None))
        status = f.sub("status")
        status_replicas = _collect(problems, status.int, "replicas")
        raw_conditions = status.raw("conditions") or []
        if not isinstance(raw_conditions, list) or not all(isinstance(c, Mapping) for c in raw_conditions):
            problems.append(errors.FieldError(f.obj, "status.conditions", "a list of conditions", raw_conditions))
            raw_conditions = []
        if problems:
            raise errors.ValidationError(problems)
        return cls(metadata=metadata, provisioning_strategy=strategy, pod_template_ref=template_ref,
                   scalable_ref=scalable, replicas=replicas, percentage=percentage, limits=limits,
                   status_replicas=status_replicas, conditions=tuple(raw_conditions))


def _collect(problems: list[errors.FieldError], fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except errors.ValidationError as exc:
        problems.extend(exc.errors)
        return None


def _ref_name(ref: fields.Fields, parent: fields.Fields, key: str) -> str:
    if not isinstance(ref.data, Mapping) or not isinstance(parent.raw(key), Mapping):
        raise parent.fail(key, "a mapping with a name", parent.raw(key))
    name = ref.str("name")
    if not name:
        raise ref.fail("name", "a non-empty name", ref.raw("name"))
    return name


def _scalable(ref: fields.Fields, parent: fields.Fields) -> ScalableRef:
    name = _ref_name(ref, parent, "scalableRef")
    kind = ref.str("kind")
    if not kind:
        raise ref.fail("kind", "a non-empty kind (" + ", ".join(SCALABLE_KINDS) + ")", ref.raw("kind"))
    return ScalableRef(kind=kind, name=name, api_group=ref.str("apiGroup") or "")


def _non_negative(spec: fields.Fields, key: str) -> int | None:
    value = spec.int(key)
    if value is not None and not 0 <= value <= 2 ** 31 - 1:
        raise spec.fail(key, "an integer >= 0", value)
    return value


# ---------------------------------------------------------------------------------------- replicas

def percentage_replicas(scalable_replicas: int, percentage: int) -> int:
    """ceil(replicas * percentage / 100), at least 1 when both are positive (Karpenter's
    calculatePercentageReplicas: 10 replicas at 20 % give 2, 3 at 10 % give 1)."""
    n = math.ceil(scalable_replicas * percentage / 100)
    if n < 1 and percentage > 0 and scalable_replicas > 0:
        return 1
    return n


def limit_replicas(limits: Mapping[str, int], requests: Mapping[str, int]) -> int | None:
    """How many chunks of ``requests`` fit in ``limits``: the minimum over the resources in both of
    floor(limit / request); None when no resource of the limits is requested."""
    counts = [limits[name] // req for name, req in requests.items() if req > 0 and name in limits]
    return min(*counts, 2 ** 31 - 1) if counts else None


def compute_replicas(buffer: CapacityBuffer, requests: Mapping[str, int],
                     scalable_replicas: int | None = None) -> int:
    """Karpenter's computeReplicas: the max of ``replicas`` and the percentage of the workload
    (only for a scalableRef with replicas > 0), bounded by the limits; the limits alone when
    neither is set; 0 when nothing is set."""
    candidates: list[int] = []
    if buffer.percentage is not None and scalable_replicas:
        candidates.append(percentage_replicas(scalable_replicas, buffer.percentage))
    if buffer.replicas is not None:
        candidates.append(buffer.replicas)
    desired = max(candidates, default=0)
    if buffer.limits:
        bound = limit_replicas(buffer.limits, requests)
        if bound is not None:
            return min(desired, bound) if candidates else bound
    return desired


# ------------------------------------------------------------------------------------ virtual pods

def sanitize_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template without what would make the scheduler look for objects that do not exist:
    ``nodeName``, PVC-backed and ephemeral volumes and their mounts (Karpenter's
    sanitizeVirtualPodSpec)."""
    spec = dict(template.get("spec") or {})
    spec.pop("nodeName", None)
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, Mapping)]
    dropped = {v.get("name") for v in volumes if v.get("persistentVolumeClaim") or v.get("ephemeral")}
    if dropped:
        spec["volumes"] = [v for v in volumes if v.get("name") not in dropped]
        for key in ("containers", "initContainers"):
            spec[key] = [{**c, "volumeMounts": [m for m in c.get("volumeMounts") or ()
                                                if m.get("name") not in dropped]}
                         for c in spec.get(key) or () if isinstance(c, Mapping)]
    return {"metadata": dict(template.get("metadata") or {}), "spec": spec}


def template_requests(buffer: CapacityBuffer, template: Mapping[str, Any]) -> quantity.ResourceList:
    """The effective requests of one chunk of ``template``."""
    return _template_pod(buffer, template, 0).requests


def _template_pod(buffer: CapacityBuffer, template: Mapping[str, Any], index: int) -> pod_mod.Pod:
    ns = buffer.metadata.namespace or meta.DEFAULT_NAMESPACE
    name = f"capacity-buffer-{buffer.metadata.name}-{index}"
    return pod_mod.Pod.from_template(sanitize_template(template), name=name, namespace=ns, owner=None)


def virtual_pods(buffer: CapacityBuffer, template: Mapping[str, Any], replicas: int) -> list[pod_mod.Pod]:
    """``replicas`` virtual pods of ``template`` named ``capacity-buffer-<buffer>-<i>`` (i from 1)."""
    if replicas <= 0:
        return []
    first = _template_pod(buffer, template, 1)
    ns = first.metadata.namespace
    annotations = {FAKE_POD_ANNOTATION: "true", BUFFER_NAME_ANNOTATION: buffer.metadata.name,
                   BUFFER_NAMESPACE_ANNOTATION: ns}
    out: list[pod_mod.Pod] = []
    for i in range(1, replicas + 1):
        md = dataclasses.replace(first.metadata, name=f"capacity-buffer-{buffer.metadata.name}-{i}",
                                 uid=f"{buffer.metadata.uid or buffer.key}-{i}", annotations=annotations)
        out.append(dataclasses.replace(first, metadata=md, priority=VIRTUAL_POD_PRIORITY))
    return out


def is_virtual(p: pod_mod.Pod) -> bool:
    return p.metadata.annotations.get(FAKE_POD_ANNOTATION) == "true"


def buffer_key_of(p: pod_mod.Pod) -> str:
    """``namespace/name`` of the buffer of a virtual pod; ``""`` for a real pod."""
    if not is_virtual(p):
        return ""
    a = p.metadata.annotations
    return f"{a.get(BUFFER_NAMESPACE_ANNOTATION, '')}/{a.get(BUFFER_NAME_ANNOTATION, '')}"


def virtual_keys(pods: Sequence[pod_mod.Pod]) -> frozenset[str]:
    return frozenset(p.key for p in pods if is_virtual(p))
