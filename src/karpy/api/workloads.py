"""Workloads the scheduling core reads: DaemonSet, Deployment, ReplicaSet and PodDisruptionBudget.

DaemonSets matter for node sizing (every new node must fit their pods), Deployments and ReplicaSets
for the simulator (it creates their pods) and for a PDB's expected pod count, and PDBs for
disruption. Each workload carries ``template_pod``: the :class:`karpy.api.pod.Pod` its template
describes (named ``<workload>-template``, owned by the workload), so callers need not re-parse
the template. ``Deployment.template`` / ``ReplicaSet.template`` keep the raw template mapping for
writing pods back.

:meth:`PodDisruptionBudget.allowed_disruptions` is the Kubernetes disruption controller's
arithmetic; percentages round **up** for both ``minAvailable`` and ``maxUnavailable``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from karpy.api import fields, meta, pod, selectors

UNHEALTHY_POD_EVICTION_POLICIES = ("IfHealthyBudget", "AlwaysAllow")
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")


def _template_pod(
    f: fields.Fields, metadata: meta.ObjectMeta, kind: str, api_version: str
) -> tuple[Mapping[str, Any], pod.Pod]:
    spec = f.sub("spec")
    tf = spec.sub("template")
    owner = meta.OwnerReference(
        api_version=api_version,
        kind=kind,
        name=metadata.name,
        uid=metadata.uid,
        controller=True,
        block_owner_deletion=True,
    )
    template_pod = pod.Pod.from_template(
        tf.data, name=f"{metadata.name}-template", namespace=metadata.namespace, owner=owner, where=tf
    )
    return tf.data, template_pod


def _same_template(known: _Replicated | None, f: fields.Fields, metadata: meta.ObjectMeta, kind: str,
                   api_version: str) -> tuple[Mapping[str, Any], pod.Pod] | None:
    """``f``'s template and ``known``'s template pod, when :func:`_template_pod` would make an equal
    pod: the same template for the same owner; else None."""
    if known is None or kind != known.KIND:
        return None
    owners = known.template_pod.metadata.owner_references
    if len(owners) != 1 or (owners[0].name, owners[0].uid, owners[0].api_version) != \
            (metadata.name, metadata.uid, api_version) or known.metadata.namespace != metadata.namespace:
        return None
    template = f.sub("spec").sub("template").data
    return (template, known.template_pod) if _identical(template, known.template) else None


def _identical(a: Any, b: Any) -> bool:
    """Equal, and of the same types throughout (``1`` and ``1.0`` are equal but may parse apart)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(_identical(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _selector(f: fields.Fields) -> selectors.LabelSelector:
    """A workload's ``spec.selector`` (required by apps/v1; an absent one selects the template's labels)."""
    spec = f.sub("spec")
    if spec.raw("selector") is None:
        return selectors.LabelSelector(match_labels=spec.sub("template").sub("metadata").str_map("labels"))
    return selectors.LabelSelector.parse(spec.sub("selector"))


@dataclass(frozen=True, slots=True)
class DaemonSet:
    metadata: meta.ObjectMeta
    selector: selectors.LabelSelector
    template_pod: pod.Pod

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> DaemonSet:
        f = meta.reader("DaemonSet", d)
        metadata = meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True)
        _, template_pod = _template_pod(f, metadata, "DaemonSet", f.str("apiVersion", "apps/v1") or "apps/v1")
        return cls(metadata=metadata, selector=_selector(f), template_pod=template_pod)


@dataclass(frozen=True, slots=True)
class _Replicated:
    """The shape shared by Deployments and ReplicaSets; ``replicas`` defaults to 1 as in Kubernetes."""

    metadata: meta.ObjectMeta
    replicas: int
    selector: selectors.LabelSelector
    template: Mapping[str, Any]
    template_pod: pod.Pod

    KIND: ClassVar[str] = ""

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any], *, known: _Replicated | None = None) -> Self:
        """``known``: an earlier model of the same object; when its template pod was made from an
        equal template for the same owner (name, namespace, uid, apiVersion), it is kept rather than
        parsed again (a scale changes ``spec.replicas`` only)."""
        f = meta.reader(cls.KIND, d)
        metadata = meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True)
        api_version = f.str("apiVersion", "apps/v1") or "apps/v1"
        reused = _same_template(known, f, metadata, cls.KIND, api_version)
        if reused is not None:
            template, template_pod = reused
        else:
            template, template_pod = _template_pod(f, metadata, cls.KIND, api_version)
        replicas = f.sub("spec").int("replicas", 1)
        return cls(
            metadata=metadata,
            replicas=1 if replicas is None else replicas,
            selector=_selector(f),
            template=template,
            template_pod=template_pod,
        )

    def to_manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": self.KIND,
            "metadata": self.metadata.to_dict(),
            "spec": {
                "replicas": self.replicas,
                "selector": self.selector.to_dict(),
                "template": dict(self.template),
            },
        }


@dataclass(frozen=True, slots=True)
class Deployment(_Replicated):
    """An apps/v1 Deployment."""

    KIND: ClassVar[str] = "Deployment"


@dataclass(frozen=True, slots=True)
class ReplicaSet(_Replicated):
    """An apps/v1 ReplicaSet: the same shape as a :class:`Deployment`."""

    KIND: ClassVar[str] = "ReplicaSet"


def _int_or_percent(f: fields.Fields, key: str) -> int | str | None:
    value = f.raw(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        m = _PERCENT.match(value)
        if m is not None:
            return f"{int(m.group(1))}%"
    raise f.fail(key, "a non-negative integer or a percentage such as '50%'", value)


def scaled_value(value: int | str, total: int) -> int:
    """An int-or-percent resolved against ``total``; percentages round up (Kubernetes' PDB rule)."""
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    return -(-percent * total // 100)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget.

    ``selector`` ``None`` (absent) selects no pods; an empty selector selects every pod in the
    namespace. ``min_available`` / ``max_unavailable`` are ints or percent strings (``"50%"``).
    """

    metadata: meta.ObjectMeta
    selector: selectors.LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    def selects(self, p: pod.Pod) -> bool:
        """The PDB covers pod ``p`` (same namespace and the selector matches)."""
        return (
            self.selector is not None
            and p.metadata.namespace == self.metadata.namespace
            and self.selector.matches(p.metadata.labels)
        )

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> PodDisruptionBudget:
        f = meta.reader("PodDisruptionBudget", d)
        spec = f.sub("spec")
        policy = spec.str("unhealthyPodEvictionPolicy", "IfHealthyBudget") or "IfHealthyBudget"
        if policy not in UNHEALTHY_POD_EVICTION_POLICIES:
            raise spec.fail(
                "unhealthyPodEvictionPolicy", "one of " + ", ".join(UNHEALTHY_POD_EVICTION_POLICIES), policy
            )
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True),
            selector=selectors.parse_optional(spec, "selector"),
            min_available=_int_or_percent(spec, "minAvailable"),
            max_unavailable=_int_or_percent(spec, "maxUnavailable"),
            unhealthy_pod_eviction_policy=policy,
        )

    def desired_healthy(self, expected: int) -> int:
        """How many pods must stay healthy when ``expected`` pods are expected."""
        if self.max_unavailable is not None:
            return max(0, expected - scaled_value(self.max_unavailable, expected))
        if self.min_available is not None:
            return scaled_value(self.min_available, expected)
        return 0

    def allowed_disruptions(self, healthy: int, expected: int) -> int:
        """``status.disruptionsAllowed`` as the disruption controller computes it.

        ``healthy`` is the number of healthy (ready) pods the PDB selects; ``expected`` is the
        number it expects: the owning controllers' desired replicas (for percentages and
        ``maxUnavailable``) or the number of selected pods (integer ``minAvailable``). Nothing may
        be disrupted when ``expected`` is 0, when neither field is set, or when ``healthy`` is at
        or below the desired number.
        """
        if expected <= 0 or (self.min_available is None and self.max_unavailable is None):
            return 0
        return max(0, healthy - self.desired_healthy(expected))

    def to_manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.selector is not None:
            spec["selector"] = self.selector.to_dict()
        if self.min_available is not None:
            spec["minAvailable"] = self.min_available
        if self.max_unavailable is not None:
            spec["maxUnavailable"] = self.max_unavailable
        spec["unhealthyPodEvictionPolicy"] = self.unhealthy_pod_eviction_policy
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": self.metadata.to_dict(),
            "spec": spec,
        }
