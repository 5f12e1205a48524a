"""The steps of a scenario (``spec.steps``): what happens at a time of the run - a scale, manifests applied,
an object deleted, a node interrupted, an offering out of capacity - and reading one step strictly.

:func:`read_step` validates a step against what the scenario created before it (:class:`Known`), the
manifests a step applies through the manifest loader, the instance types and zones it names against the
cloud's catalog; every error names the scenario document, the step's path, what was expected and found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from karpy.api import duration, errors, fields, labels, manifest, strict
from karpy.cloudprovider import interface as cloud_interface
from karpy.disruption import wave_config as drift_waves
from karpy.simulator import scenario_schema

SCALABLE_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "NodePool")
"""Kinds a ``scale`` step sets ``spec.replicas`` of (a NodePool: a static one, ``kubectl scale nodepool``)."""
CLUSTER_SCOPED = frozenset({"NodePool"})
CAPACITY_TYPES = (labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_RESERVED)
ACTIONS = ("scale", "apply", "delete", "interrupt", "insufficientCapacity")


@dataclass(frozen=True, slots=True)
class Scale:
    kind: str
    namespace: str
    name: str
    replicas: int


@dataclass(frozen=True, slots=True)
class Apply:
    objects: tuple[dict[str, Any], ...]
    """The manifests in their newest (v1) form, as the API server would store them."""


@dataclass(frozen=True, slots=True)
class Delete:
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Interrupt:
    node: str
    """A node name, or ``""`` to take the first node (by name) matching ``node_selector``."""
    kind: str
    node_selector: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class InsufficientCapacity:
    instance_type: str
    zone: str
    capacity_type: str
    duration: float
    """Seconds the offering stays out of capacity."""


Action = Scale | Apply | Delete | Interrupt | InsufficientCapacity


@dataclass(frozen=True, slots=True)
class Step:
    at: float
    """Seconds after the start of the simulation."""
    action: Action
    index: int
    """Position in ``spec.steps`` (0-based), for messages."""

    @property
    def describe(self) -> str:
        a = self.action
        if isinstance(a, Scale):
            return f"scale {a.kind} {(a.namespace + '/') if a.namespace else ''}{a.name} to {a.replicas}"
        if isinstance(a, Apply):
            return "apply " + ", ".join(f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
                                        for o in a.objects)
        if isinstance(a, Delete):
            return f"delete {a.kind} {(a.namespace + '/') if a.namespace else ''}{a.name}"
        if isinstance(a, Interrupt):
            target = a.node or "first node with " + ",".join(f"{k}={v}" for k, v in a.node_selector)
            return f"interrupt {target} ({a.kind})"
        return (f"insufficient capacity for {a.instance_type} {a.capacity_type} in {a.zone} "
                f"for {duration.format_duration(a.duration)}")


class Known:
    """Objects that exist at a step's time because the scenario created them (for scale/delete)."""

    def __init__(self, objects: Sequence[Mapping[str, Any]]) -> None:
        self.keys: set[tuple[str, str, str]] = set()
        self.static: set[str] = set()
        """NodePools created with ``spec.replicas`` (a scale step may set it)."""
        self.add(objects)

    def add(self, objects: Sequence[Mapping[str, Any]]) -> None:
        for o in objects:
            md = o.get("metadata") or {}
            self.keys.add((str(o.get("kind")), str(md.get("namespace") or "default"), str(md.get("name"))))
            if o.get("kind") == "NodePool":
                spec = o.get("spec")
                if isinstance(spec, Mapping) and spec.get("replicas") is not None:
                    self.static.add(str(md.get("name")))
                else:
                    self.static.discard(str(md.get("name")))


def read_step(f: fields.Fields, index: int, known: Known, *, catalog: str | None, zones: tuple[str, ...],
              types: set[str] | None, source: str, warnings: list[str]) -> Step:
    """Step ``index`` of ``spec.steps``; ``types``: the instance types of ``catalog`` (``None``: unknown, not
    checked), ``zones``: the scenario's zones (empty: any). Raises :class:`errors.ValidationError`."""
    at = read_duration(f, "at", required=True)
    assert at is not None
    present = [a for a in ACTIONS if f.has(a)]
    if len(present) != 1:
        raise errors.ValidationError.single(
            f.obj, f.path, "exactly one of " + ", ".join(ACTIONS) + " besides at",
            ", ".join(present) if present else sorted(str(k) for k in f.data if k != "at") or None)
    what = present[0]
    if what == "scale":
        s = f.sub("scale")
        kind = s.req_str("kind")
        if kind not in SCALABLE_KINDS:
            raise s.fail("kind", " or ".join(SCALABLE_KINDS), kind)
        ns = "" if kind in CLUSTER_SCOPED else s.str("namespace", "default") or "default"
        name = s.req_str("name")
        replicas = s.int("replicas", required=True)
        assert replicas is not None
        if not 0 <= replicas <= strict.MAX_INT32:
            raise s.fail("replicas", f"an integer from 0 to {strict.MAX_INT32} (Kubernetes' int32)", replicas)
        if kind in CLUSTER_SCOPED:
            if (kind, "default", name) not in known.keys:
                raise s.fail("name", f"a {kind} that the scenario creates before this step", name)
            if name not in known.static:
                raise s.fail("name", "a static NodePool (one with spec.replicas): Cannot transition NodePool "
                                     "between static (replicas set) and dynamic (replicas unset) provisioning modes",
                             name)
        elif (kind, ns, name) not in known.keys:
            raise s.fail("name", f"a {kind} in namespace {ns} that the scenario creates before this step",
                         name)
        return Step(at, Scale(kind, ns, name, replicas), index)
    if what == "apply":
        docs = f.list("apply")
        if not docs:
            raise f.fail("apply", "a non-empty list of manifests", f.raw("apply"))
        text = "\n".join("---\n" + dump_yaml(d) for d in docs)
        try:
            loaded = manifest.load_documents(text, source=source)
        except errors.ValidationError as exc:
            raise errors.ValidationError([_apply_error(f, e) for e in exc.errors]) from None
        objs = tuple(o.raw for o in loaded.objects)
        if any(scenario_schema.is_scenario(o) for o in objs):
            raise f.fail("apply", "Kubernetes or Karpenter manifests (not a Scenario)", scenario_schema.KIND)
        warnings.extend(f"{f.obj}: {f.at('apply')}: {w}" for w in [*loaded.warnings, *drift_waves.problems_of(objs)])
        known.add(objs)
        return Step(at, Apply(objs), index)
    if what == "delete":
        s = f.sub("delete")
        kind = s.req_str("kind")
        name = s.req_str("name")
        ns = s.str("namespace", "") or ""
        return Step(at, Delete(kind, ns, name), index)
    if what == "interrupt":
        s = f.sub("interrupt")
        node = s.str("node", "") or ""
        selector = s.str_map("nodeSelector")
        if bool(node) == bool(selector):
            raise s.fail("node", "either node (a node name) or nodeSelector (labels), not both",
                         node or None)
        kind = s.str("kind", "SpotInterruption") or "SpotInterruption"
        if kind not in cloud_interface.INTERRUPTION_KINDS:
            raise s.fail("kind", "one of " + ", ".join(cloud_interface.INTERRUPTION_KINDS), kind)
        return Step(at, Interrupt(node, kind, tuple(sorted(selector.items()))), index)
    s = f.sub("insufficientCapacity")
    it = s.req_str("instanceType")
    zone = s.req_str("zone")
    ct = s.str("capacityType", labels.CAPACITY_TYPE_ON_DEMAND) or labels.CAPACITY_TYPE_ON_DEMAND
    if ct not in CAPACITY_TYPES:
        raise s.fail("capacityType", "one of " + ", ".join(CAPACITY_TYPES), ct)
    for_ = read_duration(s, "for", required=True)
    assert for_ is not None
    if types is not None and it not in types:
        raise s.fail("instanceType", f"an instance type of the {catalog or ''} catalog", it)
    if zones and zone not in zones:
        raise s.fail("zone", "one of spec.cloud.zones (" + ", ".join(zones) + ")", zone)
    return Step(at, InsufficientCapacity(it, zone, ct, for_), index)


def _apply_error(f: fields.Fields, e: errors.FieldError) -> errors.FieldError:
    """Re-home an error of an applied manifest under the scenario document and the step's path."""
    # e.obj is "<source> document N ..." or "document N (Kind/name)"; N counts the apply list.
    where = e.obj
    marker = "document "
    item = where[where.find(marker) + len(marker):] if marker in where else where
    number, _, rest = item.partition(" ")
    try:
        pos = int(number) - 1
    except ValueError:
        return errors.FieldError(f.obj, f"{f.at('apply')}: {e.path}", e.expected, e.found)
    rest = f" {rest.strip()}" if rest.strip() else ""
    return errors.FieldError(f.obj, f"{f.at('apply')}[{pos}]{rest}: {e.path}", e.expected, e.found)


def read_duration(f: fields.Fields, key: str, *, required: bool = False,
                  default: float | None = None) -> float | None:
    """``key`` of ``f`` read as a Kubernetes duration in seconds (``default`` when absent and not required)."""
    raw = f.raw(key)
    if raw is None:
        if required:
            raise f.fail(key, duration.EXPECTED, None)
        return default
    try:
        value = duration.parse_duration(raw)
    except duration.DurationError:
        raise f.fail(key, duration.EXPECTED, raw) from None
    if value is None:
        raise f.fail(key, duration.EXPECTED, raw)
    return value


_SAFE_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(d: Any) -> str:
    """``d`` as a YAML document, keys in their order (the text the manifest loader reads back)."""
    return str(yaml.dump(d, Dumper=_SAFE_DUMPER, sort_keys=False))
