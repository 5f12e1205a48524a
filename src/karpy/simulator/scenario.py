"""The scenario document of ``karpy simulate`` and loading a scenario file.

A scenario file is a multi-document YAML text. Every ordinary Kubernetes / Karpenter document
(any version karpy reads, v1alpha5 Provisioners included) is applied at time 0: Nodes given there
are pre-existing nodes karpy does not own, Pods with ``spec.nodeName`` already run there. Exactly
one document is the scenario itself::

    apiVersion: karpy.io/v1alpha1
    kind: Scenario
    metadata: {name: my-scenario}
    spec:
      cloud: {provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b]}
      settings: {clusterName: demo, batchIdleDuration: 1s, batchMaxDuration: 10s}
      until: 15m                 # how long to simulate
      seed: 7                    # optional; --seed overrides
      launchLatency: 60s         # optional; instance launch to Node registration
      steps:
      - at: 3m
        scale: {kind: Deployment, namespace: default, name: app, replicas: 5}
      - at: 5m
        apply: [ {apiVersion: apps/v1, kind: Deployment, ...} ]
      - at: 6m
        delete: {kind: Deployment, namespace: default, name: app}
      - at: 7m
        interrupt: {node: ip-10-0-0-1.ec2.internal, kind: SpotInterruption}
      - at: 9m                   # or the first node (by name) with these labels
        interrupt: {nodeSelector: {karpenter.sh/capacity-type: spot}, kind: SpotInterruption}
      - at: 8m
        insufficientCapacity: {instanceType: m5.large, zone: us-east-1a, capacityType: spot, for: 10m}

What a caller may rely on: :func:`load` (and :func:`load_text`) validates *everything* - every
document, every step, the manifests a step applies, the instance types and zones a step names -
before returning, and reports every problem at once in one
:class:`karpy.api.errors.ValidationError` whose errors name the document (``document N
(Kind/name)``), the field path and what was expected and found. A :class:`Scenario` that loaded
can be simulated without input errors. Steps come out sorted by time (ties keep file order).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import settings as settings_mod
from karpy.api import capacityreservation, duration, errors, fields, manifest, strict
from karpy.cloudprovider import catalog as catalog_mod
from karpy.cloudprovider import commitments as commitments_mod
from karpy.cloudprovider.fake import reservations as fake_reservations
from karpy.disruption import wave_config as drift_waves
from karpy.simulator import faultspec, scenario_schema
from karpy.simulator import limits as limits_mod
from karpy.simulator import scenario_steps as steps_mod

API_VERSION = scenario_schema.API_VERSION
KIND = scenario_schema.KIND

PROVIDERS: Mapping[str, str] = {
    "aws": "aws", "azure": "azure", "kwok": "kwok", "fake": "benchmark", "benchmark": "benchmark",
}
"""``spec.cloud.provider`` -> the built-in instance-type catalog it simulates."""

DEFAULT_LAUNCH_LATENCY = 60.0


@dataclass(frozen=True, slots=True)
class Cloud:
    provider: str
    """As written: aws, azure, kwok, fake or benchmark."""
    region: str | None
    zones: tuple[str, ...]
    commitments: commitments_mod.Commitments = commitments_mod.NONE
    """``spec.cloud.commitments``: Reserved Instances, Savings Plans, a negotiated discount."""
    endpoint_url: str | None = None
    """``spec.cloud.endpointURL``: run the cloud's real provider against this endpoint (e.g. a moto server)."""
    kubernetes_version: str | None = None
    """``spec.kubernetesVersion`` (or ``spec.cloud.kubernetesVersion``): the cluster's version, for the real
    provider's image lookups."""
    nap_mode: bool = False
    """``napMode`` (azure only): AKS Node Auto-Provisioning's own NodePools and AKSNodeClasses exist."""
    capacity_reservations: tuple[capacityreservation.Reservation, ...] = ()
    """``capacityReservations`` (aws only): ODCRs and capacity blocks EC2NodeClasses may select; end times
    are seconds after the start (:func:`karpy.cloudprovider.fake.reservations.parse`)."""
    volume_limits: tuple[tuple[str, int], ...] = ()
    """``volumeLimits``: CSI driver (``*``: any driver) -> volumes one node attaches, for every instance type
    of the simulated cloud, replacing the catalog's count for that driver."""

    @property
    def catalog(self) -> str:
        return PROVIDERS[self.provider]


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    cloud: Cloud
    settings: settings_mod.Settings
    """``spec.settings`` read as karpy's operator settings."""
    cluster_name: str
    until: float
    seed: int | None
    launch_latency: float
    objects: tuple[dict[str, Any], ...]
    """Every document but the scenario, in file order, in v1 form."""
    steps: tuple[steps_mod.Step, ...]
    warnings: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The scenario document as written."""
    faults: faultspec.Faults = field(default_factory=faultspec.Faults)
    """``spec.faults``: what the run injects (:mod:`karpy.simulator.faultspec`)."""
    limits: limits_mod.Limits = limits_mod.DEFAULT
    """Pods and nodes this run may hold (:mod:`karpy.simulator.limits`); checked at load and while running."""

    def with_until(self, until: float) -> Scenario:
        return dataclasses.replace(self, until=until)

    def summary(self) -> dict[str, Any]:
        """Plain data describing the scenario, for outputs."""
        return {
            "name": self.name,
            "source": self.source,
            "cloud": {"provider": self.cloud.provider, "region": self.cloud.region,
                      "zones": list(self.cloud.zones)},
            "clusterName": self.cluster_name,
            "until": duration.format_duration(self.until),
            "seed": self.seed,
            "launchLatency": duration.format_duration(self.launch_latency),
            "steps": [{"at": duration.format_duration(s.at), "action": s.describe} for s in self.steps],
        }


# --------------------------------------------------------------------------------------- loading


def load(path: str | pathlib.Path, *, until: float | None = None, limits: limits_mod.Limits | None = None) -> Scenario:
    """Read and validate a scenario file (see the module docstring). ``until`` overrides
    ``spec.until``; ``limits`` (default :data:`karpy.simulator.limits.DEFAULT`) bounds the pods the
    scenario may ask for. Raises :class:`errors.ValidationError`, also for an unreadable file."""
    p = pathlib.Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.ValidationError.single(str(p), "(file)", "a readable UTF-8 YAML file",
                                            str(exc)) from None
    return load_text(text, source=str(p), until=until, limits=limits)


def _label(index: int, kind: str, name: str) -> str:
    return f"document {index} ({kind}/{name})"


def load_text(text: str, *, source: str = "<input>", until: float | None = None,
              limits: limits_mod.Limits | None = None) -> Scenario:
    """Parse and validate a scenario text; see :func:`load`."""
    raw_docs = manifest.parse_yaml(text, source, string_keys=False)  # spec.clusterAutoscaler.priorities
    problems: list[errors.FieldError] = []
    scenario_docs = [(i + 1, d) for i, d in enumerate(raw_docs) if scenario_schema.is_scenario(d)]
    if len(scenario_docs) != 1:
        found = "none" if not scenario_docs else \
            "documents " + ", ".join(str(i) for i, _ in scenario_docs)
        problems.append(errors.FieldError(
            source, "(documents)", f"exactly one document with apiVersion: {API_VERSION}, kind: {KIND}",
            found))
    for index, d in scenario_docs:
        problems.extend(strict.check_against(d, scenario_schema.ROOT, _label(index, KIND, _doc_name(d)),
                                             scenario_schema.MODELS))
        if d.get("apiVersion") != API_VERSION:
            problems.append(errors.FieldError(_label(index, KIND, _doc_name(d)), "apiVersion",
                                              API_VERSION, d.get("apiVersion")))

    # Every other document goes through the manifest loader, as read (not written out and read
    # again). Scenario documents are replaced by None so that document numbers stay those of the file.
    rest = [None if scenario_schema.is_scenario(d) else d for d in raw_docs]
    objects: list[dict[str, Any]] = []
    warnings: list[str] = []
    if any(d is not None for d in rest):
        try:
            loaded = manifest.load_parsed(rest)
            objects = [o.raw for o in loaded.objects]
            warnings.extend(loaded.warnings)
            warnings.extend(drift_waves.problems_of(objects))
        except errors.ValidationError as exc:
            problems.extend(exc.errors)

    scenario: Scenario | None = None
    if len(scenario_docs) == 1:
        index, doc = scenario_docs[0]
        try:
            scenario = _read_scenario(doc, _label(index, KIND, _doc_name(doc)), source, objects, until=until,
                                      problems=problems, warnings=warnings)
        except errors.ValidationError as exc:
            problems.extend(exc.errors)
    if problems or scenario is None:
        raise errors.ValidationError(problems)
    limits = limits or limits_mod.DEFAULT
    applied = [o for st in scenario.steps if isinstance(st.action, steps_mod.Apply) for o in st.action.objects]
    scales = [(a.kind, a.namespace, a.name, a.replicas) for a in (st.action for st in scenario.steps)
              if isinstance(a, steps_mod.Scale)
              and a.kind not in steps_mod.CLUSTER_SCOPED]  # a NodePool's replicas are nodes
    limits_mod.check(source, limits_mod.requested_pods([*scenario.objects, *applied], scales), limits)
    return dataclasses.replace(scenario, limits=limits)


def _doc_name(d: Mapping[str, Any]) -> str:
    md = d.get("metadata")
    name = md.get("name") if isinstance(md, Mapping) else None
    return str(name) if name else "(unnamed)"


def _collect(problems: list[errors.FieldError], fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``; a ValidationError adds its errors to ``problems`` and gives ``None``."""
    try:
        return fn(*args, **kwargs)
    except errors.ValidationError as exc:
        problems.extend(exc.errors)
        return None


def _read_scenario(doc: Mapping[str, Any], label: str, source: str, objects: list[dict[str, Any]], *,
                   until: float | None, problems: list[errors.FieldError], warnings: list[str]) -> Scenario:
    f = fields.Fields(doc, label)
    spec = f.sub("spec")
    cloud = _collect(problems, _read_cloud, spec.sub("cloud"))
    k8s_version = _collect(problems, spec.str, "kubernetesVersion")
    if cloud is not None and k8s_version:
        cloud = dataclasses.replace(cloud, kubernetes_version=str(k8s_version))
    settings = _read_settings(spec, problems)
    warnings.extend(f"{label}: spec.settings: {w}" for w in settings.unimplemented())
    if not settings.feature_gate("NodeOverlay"):
        warnings.extend(f"NodeOverlay {_doc_name(o)}: the NodeOverlay feature gate is off (Karpenter's default; "
                        "spec.settings.featureGates: NodeOverlay=true); the object has no effect"
                        for o in objects if o.get("kind") == "NodeOverlay")
    spec_until = _collect(problems, lambda: steps_mod.read_duration(spec, "until", required=until is None))
    total = until if until is not None else spec_until
    if total is not None and total <= 0:
        problems.append(errors.FieldError(label, "spec.until", "a positive duration", spec.raw("until")))
    seed = _collect(problems, spec.int, "seed")
    latency = _collect(problems, lambda: steps_mod.read_duration(spec, "launchLatency",
                                                                 default=DEFAULT_LAUNCH_LATENCY))
    faults = _collect(problems, faultspec.read, spec.raw("faults"), label)

    known = steps_mod.Known(objects)
    if known.static and not settings.feature_gate("StaticCapacity"):
        warnings.extend(f"NodePool {name}: spec.replicas has no effect while the StaticCapacity feature gate is "
                        "off (settings featureGates: StaticCapacity=true); as in Karpenter, its nodes are not "
                        "launched and pods get none from it" for name in sorted(known.static))
    steps: list[steps_mod.Step] = []
    types: set[str] | None = None
    if cloud is not None:
        try:
            types = {t.name for t in catalog_mod.load(cloud.catalog, zones=cloud.zones or None,
                                                      region=_catalog_region(cloud))}
        except errors.ValidationError as exc:
            problems.extend(dataclasses.replace(e, obj=label, path="spec.cloud." + e.path)
                            for e in exc.errors)
    for i, step_f in enumerate(spec.items("steps")):
        step = _collect(problems, steps_mod.read_step, step_f, i, known,
                        catalog=cloud.catalog if cloud is not None else None,
                        zones=cloud.zones if cloud is not None else (), types=types, source=source,
                        warnings=warnings)
        if step is not None:
            steps.append(step)
    if total is not None:
        for s in steps:
            if s.at > total:
                warnings.append(f"{label}: spec.steps[{s.index}] at {duration.format_duration(s.at)} is "
                                f"after the end of the simulation ({duration.format_duration(total)}); "
                                "it will not run")
    steps.sort(key=lambda s: (s.at, s.index))
    if cloud is None or total is None or latency is None:
        raise errors.ValidationError(())
    return Scenario(
        name=_doc_name(doc), source=source, cloud=cloud, settings=settings,
        cluster_name=settings.cluster_name, until=float(total), seed=seed, launch_latency=float(latency),
        objects=tuple(objects), steps=tuple(steps), warnings=tuple(warnings), raw=dict(doc),
        faults=faults if faults is not None else faultspec.Faults())


def _read_settings(spec: fields.Fields, problems: list[errors.FieldError]) -> settings_mod.Settings:
    f = spec.sub("settings")
    try:
        return settings_mod.Settings.from_mapping(f.data)
    except errors.ValidationError as exc:
        problems.extend(errors.FieldError(spec.obj, f"{f.path}.{e.path}", e.expected, e.found)
                        for e in exc.errors)
    return settings_mod.Settings()


def _catalog_region(cloud: Cloud) -> str | None:
    return cloud.region if cloud.catalog in ("aws", "azure") else None


def _read_cloud(f: fields.Fields) -> Cloud:
    provider = f.req_str("provider")
    if provider not in PROVIDERS:
        raise f.fail("provider", "one of " + ", ".join(PROVIDERS), provider)
    zones: tuple[str, ...] = tuple(f.str_list("zones"))
    region = f.str("region")
    if region is not None and PROVIDERS[provider] not in ("aws", "azure"):
        raise f.fail("region", f"no region for provider {provider} (its catalog has fixed zones)", region)
    commitments = commitments_mod.parse(f.raw("commitments"), f"{f.obj}: {f.at('commitments')}") \
        if f.has("commitments") else commitments_mod.NONE
    endpoint = f.str("endpointURL")
    if endpoint is not None:
        if PROVIDERS[provider] not in ("aws", "azure"):
            raise f.fail("endpointURL", "no endpoint for provider " + provider + " (aws and azure only)", endpoint)
        if not endpoint.startswith(("http://", "https://")):
            raise f.fail("endpointURL", "an http:// or https:// URL", endpoint)
    nap_mode = bool(f.bool("napMode"))
    if nap_mode and PROVIDERS[provider] != "azure":
        raise f.fail("napMode", "napMode only with provider azure (AKS Node Auto-Provisioning)", provider)
    reservations = fake_reservations.parse(list(f.items("capacityReservations")), 0.0)
    if reservations and PROVIDERS[provider] != "aws":
        raise f.fail("capacityReservations", "capacity reservations only with provider aws", provider)
    limits_raw = f.raw("volumeLimits", {})
    if not isinstance(limits_raw, Mapping):
        raise f.fail("volumeLimits", "a mapping of CSI driver name to a volume count", limits_raw)
    for driver, count in limits_raw.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise errors.ValidationError.single(f.obj, f"{f.at('volumeLimits')}.{driver}",
                                                "a whole number of volumes >= 0", count)
    return Cloud(provider=provider, region=region, zones=zones, commitments=commitments, endpoint_url=endpoint,
                 kubernetes_version=f.str("kubernetesVersion"), nap_mode=nap_mode,
                 capacity_reservations=reservations,
                 volume_limits=tuple(sorted((str(d), int(c)) for d, c in limits_raw.items())))
