"""The Pod model the scheduling core reads, and its pieces (tolerations, affinity, spread, volumes).

``Pod.from_manifest`` accepts a bare manifest, the output of ``kubectl get -o yaml`` (``status``,
``managedFields`` and every field karpy does not schedule on are ignored) and the minimal forms
hand-written in scenario files. ``Pod.from_template`` builds a pod from a workload's
``spec.template``. ``Pod.to_manifest`` writes back what the API server would return, and
``from_manifest(p.to_manifest()) == p``.

As the API server does on admission, a container resource with a limit and no request gets the
limit as its request, and a ``hostNetwork`` pod's ports get ``hostPort = containerPort``.

:attr:`Pod.requests` is the pod's effective request as the kube-scheduler computes it
(:mod:`karpy.api.podrequests`); it is computed once and cached, and like every mapping on these frozen models it must be
treated as read-only. A pod hashes by ``(namespace, name, uid)``.
Pods of equal specs share one parse (:mod:`karpy.api.pod_cache`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import fields, labels, meta, pod_cache, podrequests, podspec, quantity

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

DEFAULT_SCHEDULER = "default-scheduler"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
CRITICAL_PRIORITY = 2_000_000_000
"""Priorities at or above this are system-critical (Kubernetes' ``SystemCriticalPriority``)."""
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


read_status = pod_cache.read_status
"""Re-exported: :func:`karpy.api.pod_cache.read_status`."""
read_start_time = pod_cache.read_start_time
"""Re-exported: :func:`karpy.api.pod_cache.read_start_time`."""


_STATUS_FIELDS = frozenset({"metadata", "node_name", "phase", "conditions", "start_time"})
"""What :meth:`Pod.evolve` changes without ``dataclasses.replace`` (it passes every other field on)."""


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod. Build one with :meth:`from_manifest`, :meth:`from_template` or the constructor."""

    metadata: meta.ObjectMeta
    node_name: str | None = None
    scheduler_name: str = DEFAULT_SCHEDULER
    priority: int | None = None
    priority_class_name: str = ""
    containers: tuple[podspec.Container, ...] = ()
    init_containers: tuple[podspec.Container, ...] = ()
    overhead: quantity.ResourceList = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: podspec.NodeAffinity | None = None
    pod_affinity: podspec.PodAffinity | None = None
    pod_anti_affinity: podspec.PodAntiAffinity | None = None
    tolerations: tuple[podspec.Toleration, ...] = ()
    topology_spread_constraints: tuple[podspec.TopologySpreadConstraint, ...] = ()
    volumes: tuple[podspec.Volume, ...] = ()
    preemption_policy: str = "PreemptLowerPriority"
    phase: str = "Pending"
    conditions: tuple[podspec.PodCondition, ...] = ()
    restart_policy: str = "Always"
    host_network: bool = False
    termination_grace_period_seconds: int | None = None
    resources: podspec.PodResources | None = None
    """Pod-level requests and limits (``spec.resources``)."""
    resource_claims: tuple[podspec.PodResourceClaim, ...] = ()
    """``spec.resourceClaims``: Dynamic Resource Allocation claims (:mod:`karpy.provisioning.dra`)."""
    start_time: float | None = None
    """``status.startTime``: when the kubelet accepted the pod (epoch seconds)."""
    _requests: quantity.ResourceList | None = field(default=None, init=False, repr=False, compare=False)
    _host_ports: tuple[tuple[str, str, int], ...] | None = field(default=None, init=False, repr=False,
                                                                 compare=False)

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
        """The effective request (:func:`karpy.api.podrequests.effective_requests`); cached, read-only."""
        cached = self._requests
        if cached is None:
            cached = podrequests.effective_requests(self.containers, self.init_containers, self.overhead,
                                                    self.resources)
            object.__setattr__(self, "_requests", cached)
        return cached

    def host_ports(self) -> tuple[tuple[str, str, int], ...]:
        """``(host_ip, protocol, port)`` of every port with a host port, containers and init
        containers; an empty host IP is reported as ``0.0.0.0`` (all addresses). Cached."""
        cached = self._host_ports
        if cached is None:
            out: list[tuple[str, str, int]] = []
            for c in (*self.init_containers, *self.containers):
                for p in c.ports:
                    if p.host_port:
                        out.append((p.host_ip or "0.0.0.0", p.protocol, p.host_port))
            cached = tuple(out)
            object.__setattr__(self, "_host_ports", cached)
        return cached

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

    def condition(self, type_: str) -> podspec.PodCondition | None:
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
        """``karpenter.sh/do-not-disrupt: "true"`` (or the v1alpha5 ``do-not-evict``): protected for good."""
        a = self.metadata.annotations
        return a.get(labels.DO_NOT_DISRUPT) == "true" or a.get(labels.DO_NOT_EVICT_LEGACY) == "true"

    def protected(self, now: float) -> bool:
        """Whether the pod blocks voluntary disruption of its node at ``now``.

        ``"true"`` protects for good; a duration (``"5m"``, ``"2h30m"``: Karpenter's grace-period
        form) protects from the pod's start (``status.startTime``, as Karpenter's
        ``IsDoNotDisruptActive``) until the duration has passed; a pod not started yet is protected.
        Any other value protects nothing.
        """
        if self.do_not_disrupt:
            return True
        value = self.metadata.annotations.get(labels.DO_NOT_DISRUPT)
        if not value:
            return False
        from karpy.api import duration

        try:
            seconds = duration.parse_duration(value)
        except duration.DurationError:
            return False
        if seconds is None:  # "Never" as a duration: never expires
            return True
        start = self.start_time
        return start is None or now < start + seconds

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
        spec = f.sub("spec")
        cached = pod_cache.cached_spec(pod_cache.spec_key(spec.data))
        if cached is None:
            return cls._parse(metadata, spec, f.sub("status"))
        phase, conditions = read_status(f.sub("status"))
        return cls(metadata=metadata, node_name=spec.str("nodeName") or None, phase=phase,
                   conditions=conditions, **cached)

    @classmethod
    def from_stored(cls, d: Mapping[str, Any]) -> Pod:
        """:meth:`from_manifest` of a manifest that nobody changes in place: a stored object of the
        cluster as ``list``, watches and writes return it (:mod:`karpy.kube.interface`).

        Equal to ``from_manifest(d)``; faster and smaller: a spec whose entries (all but
        ``nodeName``) are the very objects of a spec parsed before (pods of one workload share them
        in the store) reuses that parse without encoding it, and the model's labels and annotations
        are ``d``'s own mappings when they hold only strings.
        """
        spec = d.get("spec") if type(d) is dict or isinstance(d, Mapping) else None
        if type(spec) is not dict:
            return cls.from_manifest(d)
        f = meta.reader("Pod", d)
        metadata = meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True, shared=True)
        phase, conditions = read_status(f.sub("status"), shared=True)
        start_time = read_start_time(f.sub("status"))
        node_name = f.sub("spec").str("nodeName") or None

        def parse(key: pod_cache.StoredKey, values: tuple[Any, ...]) -> pod_cache.StoredSpec:
            first = cls.from_manifest(d)
            return values, {name: getattr(first, name) for name in pod_cache.SPEC_FIELDS}, first.requests

        hit = pod_cache.stored_spec_of(spec, parse)
        pod = cls(metadata=metadata, node_name=node_name, phase=phase, conditions=conditions, start_time=start_time,
                  **hit[1])
        object.__setattr__(pod, "_requests", hit[2])  # the same spec: one shared request mapping
        return pod

    def evolve(self, **changes: Any) -> Pod:
        """``dataclasses.replace(self, **changes)`` that keeps the cached request and host ports when
        ``changes`` leave the spec alone (``node_name``, metadata and status are not the spec)."""
        if changes.keys() <= _STATUS_FIELDS:  # a status write or a binding: no generic replace
            new = Pod(changes.get("metadata", self.metadata), changes.get("node_name", self.node_name),
                      self.scheduler_name, self.priority, self.priority_class_name, self.containers,
                      self.init_containers, self.overhead, self.node_selector, self.node_affinity,
                      self.pod_affinity, self.pod_anti_affinity, self.tolerations,
                      self.topology_spread_constraints, self.volumes, self.preemption_policy,
                      changes.get("phase", self.phase), changes.get("conditions", self.conditions),
                      self.restart_policy, self.host_network, self.termination_grace_period_seconds,
                      self.resources, self.resource_claims, changes.get("start_time", self.start_time))
        else:
            new = dataclasses.replace(self, **changes)
        if not changes.keys() & pod_cache.SPEC_FIELD_SET:
            object.__setattr__(new, "_requests", self._requests)
            object.__setattr__(new, "_host_ports", self._host_ports)
        return new

    def refreshed(self, d: Mapping[str, Any], *, stored: bool = False) -> Pod:
        """The pod of manifest ``d`` whose ``spec`` is the one this pod was parsed from.

        Only metadata and status are read again (a status update, a new label): the spec's
        models are reused. ``d["spec"]`` must hold the same content as the parsed spec.
        ``stored``: ``d`` is never changed in place (as :meth:`from_stored`).
        """
        f = meta.reader("Pod", d)
        metadata = meta.ObjectMeta.parse(f.sub("metadata"), namespaced=True, shared=stored)
        phase, conditions = read_status(f.sub("status"), shared=stored)
        return self.evolve(metadata=metadata, phase=phase, conditions=conditions,
                           start_time=read_start_time(f.sub("status")))

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
            node_affinity = podspec.NodeAffinity.parse(affinity.sub("nodeAffinity"))
        if affinity.has("podAffinity"):
            pod_affinity = podspec.PodAffinity.parse(affinity.sub("podAffinity"))
        if affinity.has("podAntiAffinity"):
            anti = podspec.PodAntiAffinity.parse(affinity.sub("podAntiAffinity"))
        phase = "Pending"
        conditions: tuple[podspec.PodCondition, ...] = ()
        start_time = None
        if status is not None:
            phase, conditions = read_status(status)
            start_time = read_start_time(status)
        node_name = spec.str("nodeName") or None
        parsed: dict[str, Any] = dict(
            scheduler_name=spec.str("schedulerName", DEFAULT_SCHEDULER) or DEFAULT_SCHEDULER,
            priority=spec.int("priority"),
            priority_class_name=spec.str("priorityClassName", "") or "",
            containers=tuple(podspec.Container.parse(c, host_network=host_network) for c in spec.items("containers")),
            init_containers=tuple(
                podspec.Container.parse(c, host_network=host_network) for c in spec.items("initContainers")
            ),
            overhead=quantity.read_list(spec, "overhead"),
            node_selector=spec.str_map("nodeSelector"),
            node_affinity=node_affinity,
            pod_affinity=pod_affinity,
            pod_anti_affinity=anti,
            tolerations=tuple(podspec.Toleration.parse(t) for t in spec.items("tolerations")),
            topology_spread_constraints=tuple(
                podspec.TopologySpreadConstraint.parse(t) for t in spec.items("topologySpreadConstraints")
            ),
            volumes=tuple(podspec.Volume.parse(v) for v in spec.items("volumes")),
            preemption_policy=spec.str("preemptionPolicy", "PreemptLowerPriority") or "PreemptLowerPriority",
            restart_policy=spec.str("restartPolicy", "Always") or "Always",
            host_network=host_network,
            termination_grace_period_seconds=spec.int("terminationGracePeriodSeconds"),
            resources=podspec.PodResources.parse(spec.sub("resources")) if spec.has("resources") else None,
            resource_claims=tuple(podspec.PodResourceClaim.parse(c) for c in spec.items("resourceClaims")),
        )
        pod_cache.remember_spec(pod_cache.spec_key(spec.data), parsed)
        return cls(metadata=metadata, node_name=node_name, phase=phase, conditions=conditions, start_time=start_time,
                   **parsed)

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
        if self.resources is not None:
            spec["resources"] = self.resources.to_dict()
        if self.resource_claims:
            spec["resourceClaims"] = [c.to_dict() for c in self.resource_claims]
        return spec

    def to_manifest(self) -> dict[str, Any]:
        status: dict[str, Any] = {"phase": self.phase}
        if self.start_time is not None:
            status["startTime"] = clock.rfc3339(self.start_time)
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

