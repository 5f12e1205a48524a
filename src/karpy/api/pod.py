"""The Pod model the scheduling core reads, and its pieces (tolerations, affinity, spread, volumes).

``Pod.from_manifest`` accepts a bare manifest, the output of ``kubectl get -o yaml`` (``status``,
``managedFields`` and every field karpy does not schedule on are ignored) and the minimal forms
hand-written in scenario files. ``Pod.from_template`` builds a pod from a workload's
``spec.template``. ``Pod.to_manifest`` writes back what the API server would return, and
``from_manifest(p.to_manifest()) == p``.

As the API server does on admission, a container resource with a limit and no request gets the
limit as its request, and a ``hostNetwork`` pod's ports get ``hostPort = containerPort``.

:attr:`Pod.requests` is the pod's effective request as the kube-scheduler computes it (see its
docstring); it is computed once and cached, and like every mapping on these frozen models it must be
treated as read-only. A pod hashes by ``(namespace, name, uid)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import fields, labels, meta, node, quantity, selectors

TOLERATION_OPERATORS = ("Equal", "Exists")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

DEFAULT_SCHEDULER = "default-scheduler"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
CRITICAL_PRIORITY = 2_000_000_000
"""Priorities at or above this are system-critical (Kubernetes' ``SystemCriticalPriority``)."""
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
PODS_RESOURCE = "pods"


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
class Container:
    """A container or init container. ``restart_policy == "Always"`` on an init container makes it a
    native sidecar. ``requests`` already include limits defaulted into missing requests."""

    name: str
    image: str = ""
    requests: quantity.ResourceList = field(default_factory=dict)
    limits: quantity.ResourceList = field(default_factory=dict)
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str | None = None

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


def effective_requests(
    containers: tuple[Container, ...],
    init_containers: tuple[Container, ...],
    overhead: Mapping[str, int],
) -> quantity.ResourceList:
    """The kube-scheduler's pod request (per resource, in milli-units).

    ``max(sum(regular) + sum(sidecars), max_i(init_i + sidecars started before i)) + overhead``,
    plus ``pods: 1000`` (the pod itself). Sidecars are init containers with ``restartPolicy:
    Always``; they keep running, so they add to everything that starts after them.
    """
    total: dict[str, int] = {}
    for c in containers:
        for k, v in c.requests.items():
            total[k] = total.get(k, 0) + v
    if init_containers:
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in init_containers:
            if c.restart_policy == "Always":
                for k, v in c.requests.items():
                    total[k] = total.get(k, 0) + v
                    sidecars[k] = sidecars.get(k, 0) + v
                step: Mapping[str, int] = sidecars
            else:
                step = quantity.add(c.requests, sidecars)
            for k, v in step.items():
                if v > init_peak.get(k, 0):
                    init_peak[k] = v
        for k, v in init_peak.items():
            if v > total.get(k, 0):
                total[k] = v
    for k, v in overhead.items():
        total[k] = total.get(k, 0) + v
    total[PODS_RESOURCE] = total.get(PODS_RESOURCE, 0) + quantity.MILLI
    return total


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod. Build one with :meth:`from_manifest`, :meth:`from_template` or the constructor."""

    metadata: meta.ObjectMeta
    node_name: str | None = None
    scheduler_name: str = DEFAULT_SCHEDULER
    priority: int | None = None
    priority_class_name: str = ""
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: quantity.ResourceList = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    volumes: tuple[Volume, ...] = ()
    preemption_policy: str = "PreemptLowerPriority"
    phase: str = "Pending"
    conditions: tuple[PodCondition, ...] = ()
    restart_policy: str = "Always"
    host_network: bool = False
    termination_grace_period_seconds: int | None = None
    _requests: quantity.ResourceList | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        return hash((self.metadata.namespace, self.metadata.name, self.metadata.uid))

    # -- identity -----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.annotations

    # -- scheduling ---------------------------------------------------------------------------

    @property
    def requests(self) -> quantity.ResourceList:
        """The effective request (see :func:`effective_requests`); cached, read-only."""
        cached = self._requests
        if cached is None:
            cached = effective_requests(self.containers, self.init_containers, self.overhead)
            object.__setattr__(self, "_requests", cached)
        return cached

    def host_ports(self) -> tuple[tuple[str, str, int], ...]:
        """``(host_ip, protocol, port)`` of every port with a host port, containers and init
        containers; an empty host IP is reported as ``0.0.0.0`` (all addresses)."""
        out: list[tuple[str, str, int]] = []
        for c in (*self.init_containers, *self.containers):
            for p in c.ports:
                if p.host_port:
                    out.append((p.host_ip or "0.0.0.0", p.protocol, p.host_port))
        return tuple(out)

    @property
    def owner_kind(self) -> str | None:
        """Kind of the controller owner reference, or ``None``."""
        ref = self.metadata.controller
        return ref.kind if ref is not None else None

    @property
    def is_daemonset_pod(self) -> bool:
        """Owned by a DaemonSet, or a static pod (mirror annotation or owned by its Node)."""
        kind = self.owner_kind
        return kind in ("DaemonSet", "Node") or MIRROR_POD_ANNOTATION in self.metadata.annotations

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def is_terminating(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    def condition(self, type_: str) -> PodCondition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None

    @property
    def is_unschedulable(self) -> bool:
        """The ``PodScheduled`` condition is ``False`` with reason ``Unschedulable``."""
        c = self.condition("PodScheduled")
        return c is not None and c.status == "False" and c.reason == "Unschedulable"

    @property
    def is_critical(self) -> bool:
        return self.priority_class_name in CRITICAL_PRIORITY_CLASSES or (
            self.priority is not None and self.priority >= CRITICAL_PRIORITY
        )

    @property
    def do_not_disrupt(self) -> bool:
        """``karpenter.sh/do-not-disrupt: "true"`` (or the v1alpha5 ``do-not-evict``)."""
        a = self.metadata.annotations
        return a.get(labels.DO_NOT_DISRUPT) == "true" or a.get(labels.DO_NOT_EVICT_LEGACY) == "true"

    @property
    def pvc_names(self) -> tuple[str, ...]:
        """Names of the PVCs the pod uses (ephemeral volumes' claims are ``<pod>-<volume>``)."""
        out: list[str] = []
        for v in self.volumes:
            if v.pvc_claim_name:
                out.append(v.pvc_claim_name)
            elif v.ephemeral:
                out.append(f"{self.metadata.name}-{v.name}")
        return tuple(out)

    # -- parsing ------------------------------------------------------------------------------

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> Pod:
        f = meta.reader("Pod", d)
        metadata = meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True)
        return cls._parse(metadata, f.sub("spec"), f.sub("status"))

    @classmethod
    def from_template(
        cls,
        template: Mapping[str, Any],
        *,
        name: str,
        namespace: str,
        owner: meta.OwnerReference | None,
        where: fields.Fields | None = None,
    ) -> Pod:
        """A pod from a ``PodTemplateSpec`` (``{metadata, spec}``) named ``name``.

        ``where`` is the reader of the template inside its workload (so errors name e.g.
        ``DaemonSet default/agent`` and ``spec.template.spec...``); without it errors name
        ``PodTemplate <namespace>/<name>``.
        """
        f = where if where is not None else fields.Fields(template, f"PodTemplate {namespace}/{name}")
        md = f.sub("metadata")
        metadata = meta.ObjectMeta(
            name=name,
            namespace=namespace or meta.DEFAULT_NAMESPACE,
            labels=md.str_map("labels"),
            annotations=md.str_map("annotations"),
            owner_references=(owner,) if owner is not None else (),
        )
        return cls._parse(metadata, f.sub("spec"), None)

    @classmethod
    def _parse(cls, metadata: meta.ObjectMeta, spec: fields.Fields, status: fields.Fields | None) -> Pod:
        host_network = bool(spec.bool("hostNetwork", False))
        affinity = spec.sub("affinity")
        node_affinity = pod_affinity = anti = None
        if affinity.has("nodeAffinity"):
            node_affinity = NodeAffinity.parse(affinity.sub("nodeAffinity"))
        if affinity.has("podAffinity"):
            pod_affinity = PodAffinity.parse(affinity.sub("podAffinity"))
        if affinity.has("podAntiAffinity"):
            anti = PodAntiAffinity.parse(affinity.sub("podAntiAffinity"))
        phase = "Pending"
        conditions: tuple[PodCondition, ...] = ()
        if status is not None:
            phase = status.str("phase", "Pending") or "Pending"
            conditions = tuple(PodCondition.parse(c) for c in status.items("conditions"))
        return cls(
            metadata=metadata,
            node_name=spec.str("nodeName") or None,
            scheduler_name=spec.str("schedulerName", DEFAULT_SCHEDULER) or DEFAULT_SCHEDULER,
            priority=spec.int("priority"),
            priority_class_name=spec.str("priorityClassName", "") or "",
            containers=tuple(Container.parse(c, host_network=host_network) for c in spec.items("containers")),
            init_containers=tuple(
                Container.parse(c, host_network=host_network) for c in spec.items("initContainers")
            ),
            overhead=quantity.read_list(spec, "overhead"),
            node_selector=spec.str_map("nodeSelector"),
            node_affinity=node_affinity,
            pod_affinity=pod_affinity,
            pod_anti_affinity=anti,
            tolerations=tuple(Toleration.parse(t) for t in spec.items("tolerations")),
            topology_spread_constraints=tuple(
                TopologySpreadConstraint.parse(t) for t in spec.items("topologySpreadConstraints")
            ),
            volumes=tuple(Volume.parse(v) for v in spec.items("volumes")),
            preemption_policy=spec.str("preemptionPolicy", "PreemptLowerPriority") or "PreemptLowerPriority",
            phase=phase,
            conditions=conditions,
            restart_policy=spec.str("restartPolicy", "Always") or "Always",
            host_network=host_network,
            termination_grace_period_seconds=spec.int("terminationGracePeriodSeconds"),
        )

    # -- writing ------------------------------------------------------------------------------

    def spec_dict(self) -> dict[str, Any]:
        """The ``spec`` as the API server returns it (also usable as a template's spec)."""
        spec: dict[str, Any] = {}
        if self.node_name:
            spec["nodeName"] = self.node_name
        spec["schedulerName"] = self.scheduler_name
        if self.priority is not None:
            spec["priority"] = self.priority
        if self.priority_class_name:
            spec["priorityClassName"] = self.priority_class_name
        if self.init_containers:
            spec["initContainers"] = [c.to_dict() for c in self.init_containers]
        spec["containers"] = [c.to_dict() for c in self.containers]
        if self.overhead:
            spec["overhead"] = quantity.format_list(self.overhead)
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        affinity: dict[str, Any] = {}
        if self.node_affinity is not None:
            affinity["nodeAffinity"] = self.node_affinity.to_dict()
        if self.pod_affinity is not None:
            affinity["podAffinity"] = self.pod_affinity.to_dict()
        if self.pod_anti_affinity is not None:
            affinity["podAntiAffinity"] = self.pod_anti_affinity.to_dict()
        if affinity:
            spec["affinity"] = affinity
        if self.tolerations:
            spec["tolerations"] = [t.to_dict() for t in self.tolerations]
        if self.topology_spread_constraints:
            spec["topologySpreadConstraints"] = [t.to_dict() for t in self.topology_spread_constraints]
        if self.volumes:
            spec["volumes"] = [v.to_dict() for v in self.volumes]
        spec["preemptionPolicy"] = self.preemption_policy
        spec["restartPolicy"] = self.restart_policy
        if self.host_network:
            spec["hostNetwork"] = True
        if self.termination_grace_period_seconds is not None:
            spec["terminationGracePeriodSeconds"] = self.termination_grace_period_seconds
        return spec

    def to_manifest(self) -> dict[str, Any]:
        status: dict[str, Any] = {"phase": self.phase}
        if self.conditions:
            status["conditions"] = [c.to_dict() for c in self.conditions]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.metadata.to_dict(),
            "spec": self.spec_dict(),
            "status": status,
        }


def build(
    name: str,
    *,
    namespace: str = meta.DEFAULT_NAMESPACE,
    requests: Mapping[str, str | int | float] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    **spec: Any,
) -> Pod:
    """A builder for tests and the simulator: one container ``main`` with ``requests``.

    Extra keyword arguments are manifest ``spec`` fields (``nodeSelector=...``, ``tolerations=...``).
    Raises :class:`karpy.api.errors.ValidationError` like :meth:`Pod.from_manifest`.
    """
    container: dict[str, Any] = {"name": "main", "resources": {"requests": dict(requests or {})}}
    body: dict[str, Any] = {"containers": [container], **spec}
    if node_name:
        body["nodeName"] = node_name
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": body,
    }
    return Pod.from_manifest(manifest)

