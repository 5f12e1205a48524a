"""The parts of a pod spec the scheduling core reads: tolerations, containers and their ports,
node affinity, pod (anti-)affinity terms, topology spread constraints, volumes and conditions.

Each is a frozen dataclass with ``parse(f: fields.Fields)`` reading the manifest form (with
path-aware errors) and ``to_dict()`` writing it back. :mod:`karpy.api.pod` assembles them into a
:class:`karpy.api.pod.Pod`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import fields, node, quantity, selectors

TOLERATION_OPERATORS = ("Equal", "Exists")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")


def _choice(f: fields.Fields, key: str, allowed: tuple[str, ...], default: str) -> str:
    value = f.str(key, default) or default
    if value not in allowed:
        raise f.fail(key, "one of " + ", ".join(allowed), value)
    return value


@dataclass(frozen=True, slots=True)
class Toleration:
    """``spec.tolerations[i]``. An empty ``effect`` tolerates every effect; an empty ``key`` with
    ``Exists`` tolerates every taint."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @staticmethod
    def parse(f: fields.Fields) -> Toleration:
        effect = f.str("effect", "") or ""
        if effect and effect not in node.EFFECTS:
            raise f.fail("effect", "one of " + ", ".join(node.EFFECTS) + " or empty", effect)
        return Toleration(
            key=f.str("key", "") or "",
            operator=_choice(f, "operator", TOLERATION_OPERATORS, "Equal"),
            value=f.str("value", "") or "",
            effect=effect,
            toleration_seconds=f.int("tolerationSeconds"),
        )

    def tolerates(self, taint: node.Taint) -> bool:
        """Kubernetes' ``ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True, slots=True)
class ContainerPort:
    """``ports[i]`` of a container; ``host_port`` 0 means no host port."""

    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""

    @staticmethod
    def parse(f: fields.Fields, *, host_network: bool) -> ContainerPort:
        container_port = f.int("containerPort", required=True) or 0
        host_port = f.int("hostPort", 0) or 0
        if host_network and not host_port:
            host_port = container_port
        return ContainerPort(
            container_port=container_port,
            host_port=host_port,
            protocol=f.str("protocol", "TCP") or "TCP",
            host_ip=f.str("hostIP", "") or "",
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"containerPort": self.container_port, "protocol": self.protocol}
        if self.host_port:
            out["hostPort"] = self.host_port
        if self.host_ip:
            out["hostIP"] = self.host_ip
        return out


@dataclass(frozen=True, slots=True)
class PodResources:
    """A pod's ``spec.resources`` (pod-level requests and limits, Kubernetes 1.34)."""

    requests: quantity.ResourceList = field(default_factory=dict)
    limits: quantity.ResourceList = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.requests.items())), tuple(sorted(self.limits.items()))))

    @staticmethod
    def parse(f: fields.Fields) -> PodResources:
        return PodResources(requests=quantity.read_list(f, "requests"), limits=quantity.read_list(f, "limits"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.requests:
            out["requests"] = quantity.format_list(self.requests)
        if self.limits:
            out["limits"] = quantity.format_list(self.limits)
        return out


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One ``spec.resourceClaims`` entry: a DRA claim by name, from a ResourceClaim or a template."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None

    @staticmethod
    def parse(f: fields.Fields) -> PodResourceClaim:
        return PodResourceClaim(name=f.req_str("name"), resource_claim_name=f.str("resourceClaimName"),
                                resource_claim_template_name=f.str("resourceClaimTemplateName"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.resource_claim_name is not None:
            out["resourceClaimName"] = self.resource_claim_name
        if self.resource_claim_template_name is not None:
            out["resourceClaimTemplateName"] = self.resource_claim_template_name
        return out


@dataclass(frozen=True, slots=True)
class Container:
    """A container or init container. ``restart_policy == "Always"`` on an init container makes it a
    native sidecar. ``requests`` already include limits defaulted into missing requests."""

    name: str
    image: str = ""
    requests: quantity.ResourceList = field(default_factory=dict)
    limits: quantity.ResourceList = field(default_factory=dict)
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str | None = None
    claims: tuple[str, ...] = ()
    """``resources.claims[].name``: the pod's DRA claims (``spec.resourceClaims``) this container uses."""

    @staticmethod
    def parse(f: fields.Fields, *, host_network: bool = False) -> Container:
        res = f.sub("resources")
        requests = quantity.read_list(res, "requests")
        limits = quantity.read_list(res, "limits")
        for k, v in limits.items():
            if k not in requests:
                requests[k] = v
        return Container(
            name=f.str("name", "") or "",
            image=f.str("image", "") or "",
            requests=requests,
            limits=limits,
            ports=tuple(ContainerPort.parse(p, host_network=host_network) for p in f.items("ports")),
            restart_policy=f.str("restartPolicy"),
            claims=tuple(c.req_str("name") for c in res.items("claims")),
        )

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.image:
            out["image"] = self.image
        resources: dict[str, Any] = {}
        if self.requests:
            resources["requests"] = quantity.format_list(self.requests)
        if self.limits:
            resources["limits"] = quantity.format_list(self.limits)
        if self.claims:
            resources["claims"] = [{"name": n} for n in self.claims]
        out["resources"] = resources
        if self.ports:
            out["ports"] = [p.to_dict() for p in self.ports]
        if self.restart_policy is not None:
            out["restartPolicy"] = self.restart_policy
        return out


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: selectors.NodeSelectorTerm

    @staticmethod
    def parse(f: fields.Fields) -> PreferredSchedulingTerm:
        return PreferredSchedulingTerm(
            weight=f.int("weight", required=True) or 0,
            preference=selectors.NodeSelectorTerm.parse(f.sub("preference")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"weight": self.weight, "preference": self.preference.to_dict()}


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """``required`` terms are ORed (empty = no requirement); ``preferred`` are weighted."""

    required: tuple[selectors.NodeSelectorTerm, ...] = ()
    preferred: tuple[PreferredSchedulingTerm, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> NodeAffinity:
        req = f.sub("requiredDuringSchedulingIgnoredDuringExecution")
        return NodeAffinity(
            required=tuple(selectors.NodeSelectorTerm.parse(t) for t in req.items("nodeSelectorTerms")),
            preferred=tuple(
                PreferredSchedulingTerm.parse(t)
                for t in f.items("preferredDuringSchedulingIgnoredDuringExecution")
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.required:
            out["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [t.to_dict() for t in self.required]
            }
        if self.preferred:
            out["preferredDuringSchedulingIgnoredDuringExecution"] = [p.to_dict() for p in self.preferred]
        return out


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One pod (anti-)affinity term.

    ``label_selector`` ``None`` matches no pods. With no ``namespaces`` and no
    ``namespace_selector`` the term applies to the pod's own namespace; an empty
    ``namespace_selector`` means every namespace.
    """

    topology_key: str
    label_selector: selectors.LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: selectors.LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> PodAffinityTerm:
        return PodAffinityTerm(
            topology_key=f.str("topologyKey", "") or "",
            label_selector=selectors.parse_optional(f, "labelSelector"),
            namespaces=tuple(f.str_list("namespaces")),
            namespace_selector=selectors.parse_optional(f, "namespaceSelector"),
            match_label_keys=tuple(f.str_list("matchLabelKeys")),
            mismatch_label_keys=tuple(f.str_list("mismatchLabelKeys")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topologyKey": self.topology_key}
        if self.label_selector is not None:
            out["labelSelector"] = self.label_selector.to_dict()
        if self.namespaces:
            out["namespaces"] = list(self.namespaces)
        if self.namespace_selector is not None:
            out["namespaceSelector"] = self.namespace_selector.to_dict()
        if self.match_label_keys:
            out["matchLabelKeys"] = list(self.match_label_keys)
        if self.mismatch_label_keys:
            out["mismatchLabelKeys"] = list(self.mismatch_label_keys)
        return out


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm

    @staticmethod
    def parse(f: fields.Fields) -> WeightedPodAffinityTerm:
        return WeightedPodAffinityTerm(
            weight=f.int("weight", required=True) or 0,
            term=PodAffinityTerm.parse(f.sub("podAffinityTerm")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"weight": self.weight, "podAffinityTerm": self.term.to_dict()}


def _affinity_terms(
    f: fields.Fields,
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    required = tuple(
        PodAffinityTerm.parse(t) for t in f.items("requiredDuringSchedulingIgnoredDuringExecution")
    )
    preferred = tuple(
        WeightedPodAffinityTerm.parse(t) for t in f.items("preferredDuringSchedulingIgnoredDuringExecution")
    )
    return required, preferred


def _affinity_dict(
    required: tuple[PodAffinityTerm, ...], preferred: tuple[WeightedPodAffinityTerm, ...]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = [t.to_dict() for t in required]
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [t.to_dict() for t in preferred]
    return out


@dataclass(frozen=True, slots=True)
class PodAffinity:
    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> PodAffinity:
        return PodAffinity(*_affinity_terms(f))

    def to_dict(self) -> dict[str, Any]:
        return _affinity_dict(self.required, self.preferred)


@dataclass(frozen=True, slots=True)
class PodAntiAffinity:
    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> PodAntiAffinity:
        return PodAntiAffinity(*_affinity_terms(f))

    def to_dict(self) -> dict[str, Any]:
        return _affinity_dict(self.required, self.preferred)


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """``spec.topologySpreadConstraints[i]``; ``label_selector`` ``None`` matches no pods."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str = "DoNotSchedule"
    label_selector: selectors.LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> TopologySpreadConstraint:
        return TopologySpreadConstraint(
            max_skew=f.int("maxSkew", required=True) or 0,
            topology_key=f.req_str("topologyKey"),
            when_unsatisfiable=_choice(f, "whenUnsatisfiable", WHEN_UNSATISFIABLE, "DoNotSchedule"),
            label_selector=selectors.parse_optional(f, "labelSelector"),
            min_domains=f.int("minDomains"),
            node_affinity_policy=_choice(f, "nodeAffinityPolicy", INCLUSION_POLICIES, "Honor"),
            node_taints_policy=_choice(f, "nodeTaintsPolicy", INCLUSION_POLICIES, "Ignore"),
            match_label_keys=tuple(f.str_list("matchLabelKeys")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "maxSkew": self.max_skew,
            "topologyKey": self.topology_key,
            "whenUnsatisfiable": self.when_unsatisfiable,
        }
        if self.label_selector is not None:
            out["labelSelector"] = self.label_selector.to_dict()
        if self.min_domains is not None:
            out["minDomains"] = self.min_domains
        if self.node_affinity_policy != "Honor":
            out["nodeAffinityPolicy"] = self.node_affinity_policy
        if self.node_taints_policy != "Ignore":
            out["nodeTaintsPolicy"] = self.node_taints_policy
        if self.match_label_keys:
            out["matchLabelKeys"] = list(self.match_label_keys)
        return out


@dataclass(frozen=True, slots=True)
class Volume:
    """A pod volume, reduced to what scheduling needs: its PVC (if any).

    An ``ephemeral`` volume's PVC is named ``<pod>-<volume>`` and uses ``storage_class_name``.
    Other volume types are kept only by name (written back as ``emptyDir``).
    """

    name: str
    pvc_claim_name: str | None = None
    ephemeral: bool = False
    storage_class_name: str | None = None

    @staticmethod
    def parse(f: fields.Fields) -> Volume:
        pvc = f.sub("persistentVolumeClaim")
        eph = f.raw("ephemeral")
        storage_class: str | None = None
        if eph is not None:
            storage_class = f.sub("ephemeral").sub("volumeClaimTemplate").sub("spec").str("storageClassName")
        return Volume(
            name=f.req_str("name"),
            pvc_claim_name=pvc.str("claimName") if f.has("persistentVolumeClaim") else None,
            ephemeral=eph is not None,
            storage_class_name=storage_class,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.pvc_claim_name is not None:
            out["persistentVolumeClaim"] = {"claimName": self.pvc_claim_name}
        elif self.ephemeral:
            spec: dict[str, Any] = {}
            if self.storage_class_name is not None:
                spec["storageClassName"] = self.storage_class_name
            out["ephemeral"] = {"volumeClaimTemplate": {"spec": spec}}
        else:
            out["emptyDir"] = {}
        return out


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: float | None = None

    @staticmethod
    def parse(f: fields.Fields) -> PodCondition:
        ltt = f.str("lastTransitionTime")
        when: float | None = None
        if ltt:
            try:
                when = clock.parse_rfc3339(ltt)
            except ValueError:
                raise f.fail("lastTransitionTime", "an RFC 3339 timestamp", ltt) from None
        return PodCondition(
            type=f.req_str("type"),
            status=f.str("status", "Unknown") or "Unknown",
            reason=f.str("reason", "") or "",
            message=f.str("message", "") or "",
            last_transition_time=when,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.last_transition_time is not None:
            out["lastTransitionTime"] = clock.rfc3339(self.last_transition_time)
        return out
